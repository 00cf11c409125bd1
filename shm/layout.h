// The arbiter region: one file per physical GPU, mapped by every gshare
// process that uses that GPU and (read-only) by gshare-top.
//
// Vocabulary
//   region    the file /dev/shm/gshare-<GPU-UUID> (GSHARE_DIR moves it).
//   slot      one row of the process table; a process owns one slot per GPU.
//   owner     the process that claimed a slot. It proves it is alive by
//             holding a POSIX byte-range lock on byte `slot index` of the
//             region file (see shm/liveness.h): the kernel drops the lock when
//             the process dies, whatever PID namespace anyone is in.
//   reserved  bytes counted against the quota and the GPU's capacity:
//             committed allocations + reservations in flight + the driver's
//             context memory. Reserve first, then allocate (DESIGN.md).
//   capacity  C, the GPU's physical memory, written once by the creator.
//
// Rules
//   * Every field below `lock` is written only while holding `lock`, inside
//     a seqlock write section (seq odd while writing), except the fields
//     marked "owner, no lock", which only the slot's owner writes.
//   * Readers that cannot lock (gshare-top maps the file read-only) copy under
//     the seqlock and retry; values they read are still bounds-checked.
//   * Nothing here is a pointer: the region is mapped at different addresses.
//   * A change of any field's meaning or offset bumps kLayoutVersion. A region
//     of another version is never touched (shm/region.cpp says what happens).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gshare::shm {

inline constexpr uint64_t kRegionMagic = 0x4753484152454731ULL;  // "GSHAREG1"
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kMaxSlots = 256;
inline constexpr size_t kUuidChars = 48;     // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL
inline constexpr size_t kCommandChars = 80;  // truncated command line, NUL-terminated

enum SlotState : uint32_t {
  kSlotFree = 0,
  kSlotLive = 1,  // owned; the owner's liveness lock decides if it still is
};

// One process on one GPU. 256 bytes: the owner-written counters sit on their
// own cache line so that launches never share a line with locked fields.
struct alignas(64) Slot {
  // --- identity: written at claim, under the lock ---
  uint32_t state;            // SlotState
  uint32_t generation;       // bumped at every claim, so readers see reuse
  int32_t pid;               // in the owner's PID namespace (display only)
  uint32_t uid;              // owner's real uid
  uint64_t start_time_ticks; // /proc/self/stat field 22: pid reuse guard for display
  uint64_t attach_unix_ns;   // when the owner attached
  char command[kCommandChars];

  // --- memory: written under the lock ---
  uint64_t quota_bytes;      // this process's limit on this GPU
  uint64_t reserved_bytes;   // allocated + context + in flight; counts against quota and C
  uint64_t allocated_bytes;  // committed device allocations (ledger + pool growth)
  uint64_t context_bytes;    // the driver's per-context memory, estimated (allocator/context_memory.h)
  uint64_t peak_reserved_bytes;
  uint64_t allocation_count; // live allocations in the ledger
  uint64_t denied_count;     // allocations refused (quota or capacity)
  uint64_t padding0[2];

  // --- owner, no lock ---
  alignas(64) std::atomic<uint64_t> launches;  // kernels + graphs launched, not counting capture
  std::atomic<uint64_t> syncs;                  // host synchronisations seen
  uint64_t padding1[6];
};
static_assert(sizeof(Slot) == 256, "Slot layout changed: bump kLayoutVersion");

struct alignas(64) RegionHeader {
  // --- identity: written by the creator before the file is published ---
  uint64_t magic;            // kRegionMagic
  uint32_t layout_version;   // kLayoutVersion
  uint32_t header_bytes;     // sizeof(RegionHeader)
  uint64_t region_bytes;     // sizeof(Region): the file's size
  uint32_t slot_count;       // kMaxSlots
  uint32_t slot_bytes;       // sizeof(Slot)
  char gpu_uuid[kUuidChars];
  uint64_t capacity_bytes;   // C
  uint64_t created_unix_ns;

  // --- the lock: a robust, process-shared pthread mutex ---
  alignas(64) pthread_mutex_t lock;

  // --- GPU-wide state: written under the lock ---
  alignas(64) std::atomic<uint32_t> seq;  // seqlock for lock-free readers: odd while writing
  uint32_t padding0;
  uint64_t reserved_bytes;   // Σ live slots' reserved_bytes; repair recomputes it
  uint64_t repairs;          // times a holder died mid-update and the state was repaired
  uint64_t reclaimed_slots;  // dead owners cleaned up
  uint64_t padding1[4];
};
static_assert(sizeof(RegionHeader) == 256, "RegionHeader layout changed: bump kLayoutVersion");

struct Region {
  RegionHeader header;
  Slot slots[kMaxSlots];
};

// The liveness lock of slot i is byte kLivenessByteBase + i of the file.
// Any offset works for fcntl locks; using the slot area keeps them in-file.
inline constexpr off_t kLivenessByteBase = 0;

}  // namespace gshare::shm
