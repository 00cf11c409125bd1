#include "allocator/context_memory.h"

#include <unistd.h>

#include <atomic>

#include "allocator/devices.h"
#include "allocator/movable_memory.h"
#include "base/clock.h"
#include "base/driver_api.h"
#include "base/log.h"

namespace gshare::allocator {

namespace {
std::atomic<bool> g_said_no_nvml{false};
std::atomic<bool> g_said_not_listed{false};

// NVML's own figure for this process on `device`. False if it cannot tell.
bool process_bytes_from_nvml(const Device& device, uint64_t* bytes) {
  const DriverApi& api = driver();
  if (!load_nvml_for_gshare() || !api.nvml_device_get_handle_by_uuid ||
      !api.nvml_device_get_compute_running_processes) {
    if (!g_said_no_nvml.exchange(true))
      GSHARE_WARN("NVML (libnvidia-ml.so.1) is not available: the driver's per-context memory "
                  "is not counted against quotas");
    return false;
  }
  const uint64_t began = log_enabled(LogLevel::kDebug) ? mono_now_ns() : 0;
  nvml::Device handle;
  if (api.nvml_device_get_handle_by_uuid(device.uuid, &handle) != nvml::kSuccess) return false;
  nvml::ProcessInfo processes[256];
  unsigned int count = sizeof processes / sizeof processes[0];
  if (api.nvml_device_get_compute_running_processes(handle, &count, processes) != nvml::kSuccess)
    return false;
  // A question to the driver that other processes' work may wait on: its
  // length, to line up with their latency at GSHARE_LOG=debug.
  if (began) GSHARE_DEBUG("NVML listed the GPU's processes in %.0f us", double(mono_now_ns() - began) / 1e3);
  const unsigned int self = unsigned(getpid());
  for (unsigned int i = 0; i < count; ++i) {
    if (processes[i].pid != self) continue;
    *bytes = processes[i].usedGpuMemory;
    return true;
  }
  if (!g_said_not_listed.exchange(true))
    GSHARE_INFO("NVML does not list pid %u on GPU %s (another PID namespace?): the driver's "
                "per-context memory is not counted", self, device.uuid);
  return false;
}
}  // namespace

bool refresh_context_bytes(Device& device) {
  // Mid page-out or page-in the driver's figure and gshare's disagree for a
  // moment (physical memory made or gone, not yet counted): look later.
  const bool paging = paging_enabled();
  if (paging && !try_lock_movable_memory()) return false;
  struct Unlock {
    bool held;
    ~Unlock() {
      if (held) unlock_movable_memory();
    }
  } unlock{paging};
  // NVML's figure and gshare's must be of one moment. A free that lands
  // between them (the driver's memory gone, then the account's) would count
  // the freed bytes as context until the next refresh, and a job that gave
  // a 5 GiB cache back was then refused 5 GiB over its quota. gshare's
  // figure is read on both sides of NVML's: if it moved, look again at the
  // next tick (reported as a change, which keeps refreshes frequent).
  const uint64_t allocated_before = device.account.allocated_bytes();
  uint64_t held = 0;
  if (!process_bytes_from_nvml(device, &held)) return false;
  const uint64_t allocated = device.account.allocated_bytes();
  if (allocated != allocated_before) return true;
  uint64_t context = held > allocated ? held - allocated : 0;
  shm::Slot* slot = device.account.slot();
  bool changed = !slot || slot->context_bytes != context;
  if (changed) device.account.set_context_bytes(context);
  return changed;
}

}  // namespace gshare::allocator
