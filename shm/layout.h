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
//             context memory. Reserve first, then allocate (docs/DESIGN.md, §5.2).
//   capacity  C, the GPU's physical memory, written once by the creator.
//   token     the right to launch on this GPU (scheduler/token.h). One job
//             (slot) holds it; `gate` tells the owner on every launch whether
//             it may go ahead without asking.
//   clocks    *_unix_ns fields are CLOCK_REALTIME (for display); *_mono_ns
//             fields are CLOCK_MONOTONIC, which every process on the host
//             shares and which never jumps: the scheduler's clock.
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
//     A new field taken from padding, zero meaning "nothing yet", changes
//     neither, and neither does a new gate bit, which code that does not
//     know it reads as "not plainly open" (the slow path, which tests bits):
//     no bump for those.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gshare::shm {

inline constexpr uint64_t kRegionMagic = 0x4753484152454731ULL;  // "GSHAREG1"
inline constexpr uint32_t kLayoutVersion = 11;
inline constexpr uint32_t kMaxSlots = 256;
inline constexpr size_t kUuidChars = 48;     // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL
inline constexpr size_t kCommandChars = 80;  // truncated command line, NUL-terminated
// Lanes (rules/lanes.h): groups of jobs that take turns with one
// ephemeral space. Under pack each lane has its own launch token; under the
// other policies every job uses token 0. As many lanes as slots: only
// memory decides whether jobs share a lane, never their number (with 16,
// 49 of 64 small jobs that fit side by side shared one).
inline constexpr uint32_t kMaxLanes = kMaxSlots;
inline constexpr uint32_t kNoLane = UINT32_MAX;

enum SlotState : uint32_t {
  kSlotFree = 0,
  kSlotLive = 1,  // owned; the owner's liveness lock decides if it still is
};

// What a job is doing with the launch token.
enum JobState : uint32_t {
  kJobIdle = 0,     // not launching (never launched, or idle for GSHARE_IDLE_MS)
  kJobWaiting = 1,  // some thread waits for the token
  kJobRunning = 2,  // holds the token
};

// Bits of Slot::gate. The launch fast path goes ahead only when the gate is
// exactly kGateOpen; any other value sends the launch to the slow path.
enum GateBits : uint32_t {
  kGateClosed = 0,   // not the holder: wait for the token
  kGateOpen = 1,     // the holder
  kGateYield = 2,    // the slice is over: hand over at the next iteration boundary
  kGateBounded = 4,  // priority: keep in-flight work to about one kernel
  // A switch made this job the holder and it has not launched since: its
  // first launch records the switch's cost (scheduler/token.h, "switch").
  kGateFirstLaunch = 8,
};

// How a holder hands the token over (GSHARE_HANDOVER).
enum HandoverMode : uint32_t {
  kHandoverOverlap = 0,  // the next job starts while the holder's tail runs
  kHandoverStrict = 1,   // the holder drains its queued work first
};

// Which of a job's turns it may share (GSHARE_SHARED_TURNS, scheduler/token.h).
enum SharesTurns : uint32_t {
  kSharesNone = 0,       // none: off, or a library that predates shared turns
  kSharesHostBound = 1,  // while it is host-bound
  kSharesInPairs = 2,    // while host-bound, and else with one other job
  kSharesWhereGaps = 3,  // while host-bound, and with one other job while its
                         // kernels leave the GPU gaps (Slot::leaves_gaps); a
                         // library that predates it reads it as 1 (on)
};

// How a job's iterations were found (scheduler/iterations.h).
enum IterationSource : uint32_t {
  kIterationsUnknown = 0,
  kIterationsFromSyncs = 1,     // a repeating pattern of host synchronisations
  kIterationsFromLaunches = 2,  // a repeating pattern of launched functions
};

// Where a job stands with memory admission (allocator/admission.h).
enum AdmissionState : uint32_t {
  kAdmitted = 0,
  kWaitingForAdmission = 1,  // the safety condition would fail: waits for others to shrink or leave
  kWaitingForMemory = 2,     // the condition holds, but the bytes are still held by others (a turn)
  kWaitingForLane = 3,       // another job of its lane holds the lane's ephemeral space (mid-iteration)
};

// The last 10 s of token time, in one-second buckets: bucket s % 10 holds
// the microseconds held during monotonic second s (stamped, so stale buckets
// read as zero). gshare-top's "share of GPU time".
inline constexpr int kShareSeconds = 10;

// One process on one GPU. 768 bytes: the owner-written counters and the gate
// sit on their own cache line, so launches never share a line with fields
// that other processes write under the lock; the switch figures, written
// once per switch, have the last line.
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

  // --- memory classes, lanes and admission: written under the lock ---
  // P = context_bytes + persistent_bytes; the rest of reserved_bytes is
  // ephemeral (allocator/classifier.h).
  uint64_t persistent_bytes;   // live allocations classified persistent
  uint64_t ephemeral_bytes;    // E: peak ephemeral bytes per iteration, learned
  uint64_t iteration_peak_bytes;  // peak of reserved - P since the last boundary
  uint32_t class_iterations;   // iteration boundaries classified: provisional while < 2
  uint32_t lane;               // kNoLane before the job is placed
  uint32_t admission;          // AdmissionState
  uint32_t release_requests;   // bumped by a job that needs this job's cached memory back
  uint64_t admission_since_mono_ns;  // start of the current admission wait; 0: none
  uint64_t admission_bytes;    // the allocation that waits
  uint64_t admission_short_bytes;    // by how much it does not fit
  uint64_t admission_waits;    // waits so far (admission and memory)
  uint64_t released_bytes;     // bytes this job gave back on request, in total
  uint32_t release_acks;       // release_requests answered (owner)
  uint32_t blocked_by;         // while waiting (admission != kAdmitted): the slot + 1 of the job
                               // that holds what it waits for, as the waiter saw it; 0: none known

  // --- scheduling: written under the lock ---
  uint32_t job_state;        // JobState
  uint32_t weight;           // GSHARE_WEIGHT, >= 1
  int32_t priority;          // GSHARE_PRIORITY
  uint32_t handover_mode;    // HandoverMode (GSHARE_HANDOVER)
  uint64_t quantum_ns;       // GSHARE_QUANTUM_MS
  uint64_t idle_ns;          // GSHARE_IDLE_MS
  uint64_t slice_max_ns;     // GSHARE_SLICE_MAX_MS: how far a slice may run past its end
  uint64_t expected_ns;      // GSHARE_EXPECTED_SECONDS; 0: not given
  uint64_t expected_iters;   // GSHARE_EXPECTED_ITERS; 0: not given
  uint64_t arrival_mono_ns;  // when the job attached: fifo's order
  uint64_t served_ns;        // token time received
  uint64_t vtime_ns;         // fair's clock (rules/policy.h)
  uint64_t accounted_mono_ns;  // the holder's token time is counted up to here
  uint64_t wait_ns;          // total time spent waiting for the token
  uint64_t wait_since_mono_ns; // start of the current wait; 0 when not waiting
  uint64_t granted;          // times this job was given the token
  uint32_t share_us[kShareSeconds];      // token time per second, see kShareSeconds
  uint32_t share_second[kShareSeconds];  // which monotonic second each bucket holds

  // --- the gate: written under the lock, read by the owner without it ---
  alignas(64) std::atomic<uint32_t> gate;  // GateBits
  // --- owner, no lock ---
  std::atomic<uint32_t> gpu_waits;  // threads inside a host sync: busy, never idle
  std::atomic<uint64_t> launches;   // kernels + graphs launched, not counting capture
  std::atomic<uint64_t> syncs;      // host synchronisations seen
  std::atomic<uint64_t> iterations;    // training iterations detected (scheduler/iterations.h)
  std::atomic<uint64_t> iteration_ns;  // the latest iteration's length; 0: none detected
  std::atomic<uint32_t> iteration_launches;  // launches per iteration; 0: unknown
  std::atomic<uint32_t> iteration_source;    // IterationSource
  // Threads inside a host sync that ends an iteration: the job is at a
  // boundary with all its work queued, so under overlap a waiter may take
  // the token at its slice end without waiting for the sync to return.
  std::atomic<uint32_t> boundary_waits;
  // Threads inside scheduler::wait_for_token. A job marked waiting with none
  // there for its idle time is not waiting: it was switched out and has not
  // launched since (scheduler/token.cpp, gather_locked).
  std::atomic<uint32_t> token_waits;
  // What a switch to this job costs beyond its work, over its recent
  // switches (runtime/switch_cost.h); the policies lengthen its turns by
  // it. 0: nothing measured.
  std::atomic<uint64_t> switch_cost_ns;

  // --- switches to this job (scheduler/token.h): written under the lock ---
  // The grant of a switch whose first launch has not come yet; 0: none.
  // Meaningful only while the job holds its token (a later switch to it
  // overwrites a value left by one it never launched in).
  alignas(64) uint64_t switched_in_mono_ns;
  uint64_t switches;         // switches to this job that reached their first launch
  uint64_t switch_ns;        // their cost in all: grant to first launch
  uint64_t last_switch_ns;   // the latest one's cost
  // While this job, asked to yield, gives its cache back before handing
  // over: when that began (a switch's cost includes it); 0 otherwise.
  uint64_t handover_began_mono_ns;
  uint64_t admission_timeouts;  // allocations that gave up waiting (GSHARE_ADMIT_TIMEOUT_S)
  uint64_t lane_holder_since_mono_ns;  // holds its lane's ephemeral space since (shm/arbiter.h); 0: not
  // The part of switch_cost_ns that is memory handed over (caches given
  // back, memory allocated anew, waits for it): owner-written, no lock.
  // Only it lengthens turns past twice the quantum (rules::slice_length).
  std::atomic<uint64_t> switch_memory_ns;

  // --- paging to host memory (allocator/pager.h): written under the lock,
  // except movable_bytes (owner, no lock: a hint for whoever asks for room) ---
  alignas(64) uint64_t paged_out_bytes;  // device bytes now in host memory; not in reserved_bytes
  uint64_t host_paging_bytes;  // pinned host memory this job holds for paging
  uint64_t movable_bytes;      // resident bytes that could be paged out
  uint64_t page_outs;          // page-outs completed
  uint64_t page_ins;           // page-ins completed
  uint64_t paging_ns;          // time spent copying and mapping, both ways (waits not included)
  uint32_t residency;          // Residency
  uint32_t page_out_requests;  // bumped by a job that needs the room this one's memory takes
  uint32_t page_out_acks;      // requests answered (owner)
  uint32_t page_out_copying;   // 1 once a page-out has its host memory and copies (pager)
  // --- owner, no lock: when a thread last began device work (a launch, a
  // copy, a memset) under paging; a job that hands its token over may go on
  // copying for a while, and is not paged out meanwhile ---
  alignas(64) std::atomic<uint64_t> last_device_work_mono_ns;
  // --- more paging, written under the lock ---
  uint64_t paged_in_bytes;   // bytes copied back to the GPU, in all (prefetches too)
  uint64_t page_in_copy_ns;  // the time those copies took: the page-in rate
  uint64_t prefetches;       // page-ins done ahead of the job's turn, while another ran
  uint32_t host_release_requests;  // bumped by a job whose page-out needs the
                                   // pinned host memory this one keeps while resident
  uint32_t host_release_acks;      // requests answered (owner)
  // How much of its kept copies the latest request wants freed, at least;
  // 0: all of them. Written with host_release_requests.
  uint64_t host_release_bytes;
  // --- owner, no lock: the launch count when a host sync of the job last
  // ended. Equal to `launches`: nothing it launched is still queued (its
  // GPU idles while it works on the host), so its token may be lent ---
  std::atomic<uint64_t> launches_at_sync;
  // Written under the lock: the time its own page-ins waited for its turn
  // and for room before copying (not in paging_ns).
  uint64_t page_in_wait_ns;
  // Written under the lock: 1 while a prefetch copies this job's memory
  // back, its room reserved (the pager). The holder's turn may run on
  // until the copy ends (scheduler/token.cpp).
  alignas(64) uint32_t prefetch_copying;
  // Written at join: 1 when GSHARE_QUANTUM_MS was not set, so that the
  // quantum shrinks among many jobs (rules::quantum_among); 0 keeps
  // quantum_ns as it is.
  uint32_t quantum_adapts;
  // Written under the lock as this job, found idle holding its token, lost
  // it: the slice it had, and the GPU's handovers then. Taking the token
  // back before any other job held it, it resumes that slice rather than
  // start a new turn (scheduler/token.cpp, grant_locked). 0: nothing kept.
  uint64_t idle_slice_start_mono_ns;
  uint64_t idle_slice_end_mono_ns;
  uint64_t idle_at_handovers;
  // Shared turns (scheduler/token.h). Written at join: SharesTurns, from
  // GSHARE_SHARED_TURNS. Owner, no lock: 1 while the job's syncs say
  // its host work leaves the GPU mostly idle (runtime/host_bound.h).
  // Written under the lock: 1 while it runs beside the holder of its
  // token, its gate open, in the holder's turn. 0 from a library that
  // predates them: never shared.
  uint32_t shares_turns;
  std::atomic<uint32_t> host_bound;
  uint32_t beside;
  // Owner, no lock: the share of the time it ran that it waited for the
  // GPU, in thousandths, at its latest judgement (gshare-top).
  std::atomic<uint32_t> gpu_wait_permille;
  // Owner, no lock: how busy its kernels kept the GPU in its own turns, in
  // thousandths, at its latest measure (runtime/gpu_busy.h), at least 1
  // once measured; 0: not measured yet (never shares a turn).
  std::atomic<uint32_t> gpu_busy_permille;
  // Written under the lock: bumped as a run beside a holder begins, on the
  // job beside and on the holder. A judgement of either's host work over a
  // window in which it changed is a shared one (runtime/host_bound.cpp):
  // beside others a job's waits are theirs too. 0 from a library that
  // predates it.
  std::atomic<uint32_t> shared_runs;
  // Owner, no lock: 1 while the job keeps the GPU busy yet its kernels
  // leave gaps a second job could fill (runtime/leaves_gaps.h): under
  // GSHARE_SHARED_TURNS=gaps (the default) it shares turns two at a time. 0 from a library
  // that predates it.
  std::atomic<uint32_t> leaves_gaps;
};
static_assert(sizeof(Slot) == 768, "Slot layout changed: bump kLayoutVersion");

// Where a job's movable memory is (allocator/pager.h). Only a resident job
// launches; a job being paged in holds its memory again but not yet its data.
enum Residency : uint32_t {
  kResident = 0,
  kPagingOut = 1,
  kPagedOut = 2,
  kPagingIn = 3,
};

// A job's memory classes, from its slot (allocator/classifier.h):
// P, what stays resident across iterations;
inline uint64_t persistent_of(const Slot& s) { return s.context_bytes + s.persistent_bytes; }
// A job never holds more persistent memory than it holds: a P measured from
// a framework's figures (allocator/classifier.h) may be stale when a
// give-back trims below it, and a stale P would promise space the job no
// longer uses.
inline void keep_persistent_within_held(Slot& s) {
  if (persistent_of(s) > s.reserved_bytes)
    s.persistent_bytes = s.reserved_bytes > s.context_bytes ? s.reserved_bytes - s.context_bytes : 0;
}
// what it holds beyond P now: ephemeral memory, in use or cached;
inline uint64_t ephemeral_now(const Slot& s) {
  uint64_t p = persistent_of(s);
  return s.reserved_bytes > p ? s.reserved_bytes - p : 0;
}
// and E as the safety condition counts it: the learned peak, or more if it
// holds more now.
inline uint64_t ephemeral_of(const Slot& s) {
  uint64_t now = ephemeral_now(s);
  return s.ephemeral_bytes > now ? s.ephemeral_bytes : now;
}

// A launch token: who holds it and its current slice.
struct Token {
  uint32_t holder;             // slot index + 1; 0: nobody holds the token
  uint32_t holder_generation;  // the holder slot's generation when granted
  uint64_t slice_start_mono_ns;
  uint64_t slice_end_mono_ns;  // when the policy looks again; UINT64_MAX: never
  // A loan (scheduler/token.h): the holder lent the token while its GPU
  // sat idle and it worked on the host; it takes the token back at its
  // next launch, with the slice it had. lender: slot index + 1; 0: no loan.
  uint32_t lender;
  uint32_t lender_generation;
  uint64_t lent_mono_ns;
  uint64_t lender_slice_start_mono_ns;
  uint64_t lender_slice_end_mono_ns;
};

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
  uint64_t admission_timeouts;  // allocations on this GPU that gave up waiting, ended jobs included
  uint64_t admission_waits;     // allocations on this GPU that had to wait, ended jobs included
  // The least vtime of the active jobs, never lowered (single-token fair
  // policies): a job that becomes active starts no further behind it than
  // one turn (rules::activate), even when no other job is active then.
  uint64_t vtime_floor_ns;
  uint64_t loans;  // times a holder idle on the host lent its token

  // --- the launch token: written under the lock ---
  // Waiters sleep on token_futex (FUTEX_WAIT on the shared mapping); it is
  // bumped whenever the holder or a gate changes, and everyone woken, but at
  // a grant: then the new holder and the token's watcher (token_watcher).
  // Memory waiters (allocator/admission.h) sleep on it too: it is bumped
  // when memory is given back while someone waits for it.
  alignas(64) std::atomic<uint32_t> token_futex;
  uint32_t policy;             // Policy; set by the first live process
  uint64_t handovers;          // times a token changed hands
  uint32_t memory_waiters;     // jobs blocked in an allocation: frees wake them
  uint32_t lane_count;         // lanes with members
  uint64_t safety_bytes;       // Σ P + Σ_lanes max E over live jobs (rules/lanes.h)
  uint32_t live_slots;         // slots in state kSlotLive: an allocation asks "am I alone?" cheaply
  // The waiter that watches the holder of token 0 (slot index + 1; 0:
  // none): for the slice's end, an idle holder, one working on the host.
  // While it waits, the other waiters of that token leave the slice's end
  // and loans to it (scheduler/token.cpp), and a grant wakes only the new
  // holder and the watcher.
  std::atomic<uint32_t> token_watcher;
  // Switches on this GPU's tokens that reached the new holder's first
  // launch (scheduler/token.h), and their cost, since the region was
  // created: jobs that have ended still count here, not in a slot.
  uint64_t switches;
  uint64_t switch_ns_total;
  uint64_t switch_ns_max;
  Token tokens[kMaxLanes];     // [0] only, except under pack: one per lane
};
static_assert(sizeof(RegionHeader) == 14656, "RegionHeader layout changed: bump kLayoutVersion");

struct Region {
  RegionHeader header;
  Slot slots[kMaxSlots];
};

// The liveness lock of slot i is byte kLivenessByteBase + i of the file.
// Any offset works for fcntl locks; using the slot area keeps them in-file.
inline constexpr off_t kLivenessByteBase = 0;

}  // namespace gshare::shm
