// The GPUs this process uses. A device is attached on first use: its UUID
// names the arbiter region, a slot is claimed there, and the quota is fixed
// (a percentage quota needs the GPU's size, known only now).
//
// Devices are indexed by the CUDA ordinal this process sees, which
// CUDA_VISIBLE_DEVICES renumbers; the region is named by UUID, so two
// processes that number one GPU differently still meet in one region.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "allocator/device_account.h"
#include "base/options.h"
#include "shm/layout.h"

namespace gshare::allocator {

inline constexpr int kMaxDevices = 64;

struct Device {
  int ordinal = -1;
  char uuid[shm::kUuidChars] = {};
  uint64_t physical_bytes = 0;  // the GPU's memory, as the driver reports it
  DeviceAccount account;
  std::atomic<bool> attached{false};
};

// The job marked busy on a GPU (Slot::gpu_waits) for a scope, as inside
// a host sync: while it waits for its own work or pages its memory in, a
// waiter must not take it for an idle holder. Null: nothing to mark.
class GpuBusy {
 public:
  explicit GpuBusy(shm::Slot* slot) : slot_(slot) {
    if (slot_) slot_->gpu_waits.fetch_add(1, std::memory_order_relaxed);
  }
  ~GpuBusy() {
    if (slot_) slot_->gpu_waits.fetch_sub(1, std::memory_order_relaxed);
  }
  GpuBusy(const GpuBusy&) = delete;
  GpuBusy& operator=(const GpuBusy&) = delete;

 private:
  shm::Slot* slot_;
};

// Keeps the options for attaching devices later, and `on_attach`, called
// each time a device attaches (the runtime starts its upkeep thread
// there). Called once at cuInit.
void configure_devices(const Options& options, void (*on_attach)());

// Waits for the calling thread's current context to finish its queued
// work: a hand-over that must drain before the next job runs.
void drain_current_context();

// The device of the calling thread's current context, attached. Null when
// the thread has no context (the driver call will then fail by itself).
Device* current_device();
// Device `ordinal`, attached. Null if the driver does not know it.
Device* device_at(int ordinal);
// Device `ordinal` if already attached, else null. Never attaches.
Device* attached_device(int ordinal);
// The device whose UUID is `uuid` ("GPU-..."), if attached.
Device* attached_device_by_uuid(const char* uuid);

// The quota on a GPU of `physical_bytes`, from GSHARE_MEM_LIMIT.
uint64_t quota_for(uint64_t physical_bytes);

// The only attached slot, or null when the process uses no device or
// several: lets the launch path count without asking the driver which
// device a stream belongs to. Inline: it is on every launch.
namespace detail {
extern std::atomic<shm::Slot*> g_only_slot;
}
inline shm::Slot* only_slot() { return detail::g_only_slot.load(std::memory_order_relaxed); }

// Calls fn(Device&) for each attached device.
template <class Fn>
void for_each_attached_device(Fn&& fn);

// The process's launches on every GPU it uses.
uint64_t process_launches();

// In a fork()ed child: the parent owns the slots; attach afresh on use.
void forget_devices_after_fork();

// Formats a CUDA UUID the way nvidia-smi does: GPU-xxxxxxxx-xxxx-....
void format_uuid(const CUuuid& uuid, char* out, size_t out_len);

namespace detail {
// Null until configure_devices: the table is built then, in zeroed storage,
// so that a program that never uses CUDA never even touches its pages.
extern Device* g_devices;
// Bit i set once device i is attached. Syncs and memory calls visit the
// attached devices several times each: reading one word spares them a
// load from each of the 64 entries, each on cache lines of its own (cold
// after a real driver call).
extern std::atomic<uint64_t> g_attached_mask;
static_assert(kMaxDevices <= 64, "g_attached_mask has a bit per device");
}

// In ordinal order, as the arbiters' locks are taken.
template <class Fn>
void for_each_attached_device(Fn&& fn) {
  Device* devices = detail::g_devices;
  if (!devices) return;
  for (uint64_t mask = detail::g_attached_mask.load(std::memory_order_acquire); mask != 0; mask &= mask - 1) {
    Device& device = devices[__builtin_ctzll(mask)];
    if (device.attached.load(std::memory_order_acquire)) fn(device);
  }
}

}  // namespace gshare::allocator
