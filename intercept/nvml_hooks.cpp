// NVML's memory info answers with the same virtual view as cuMemGetInfo, so
// a framework that sizes itself from NVML (or a script printing it) sees
// the quota too. Only the calling process's own view changes: gshare-top and
// nvidia-smi (not preloaded) still see the real GPU.
#include "allocator/devices.h"
#include "allocator/memory_view.h"
#include "base/driver_api.h"
#include "intercept/interception.h"
#include "base/nvml_abi.h"
#include "intercept/runtime.h"

using namespace gshare;
using namespace gshare::intercept;

namespace {
// Rewrites total and free; false leaves NVML's answer as it was.
bool virtual_view(nvml::Device handle, unsigned long long* total, unsigned long long* free) {
  if (g_state.load(std::memory_order_relaxed) != int(RuntimeState::kActive) || t_hook_depth != 0)
    return false;
  HookScope scope;
  char uuid[96];
  if (!load_nvml_for_gshare() || !driver().nvml_device_get_uuid ||
      driver().nvml_device_get_uuid(handle, uuid, sizeof uuid) != nvml::kSuccess)
    return false;
  allocator::MemoryView view;
  if (allocator::Device* device = allocator::attached_device_by_uuid(uuid))
    view = allocator::memory_view(*device, *free);
  else
    view = allocator::memory_view_unattached(*total, *free);
  *total = view.total_bytes;
  *free = view.free_bytes;
  return true;
}
}  // namespace

GSHARE_HOOK(nvml::Return, nvmlDeviceGetMemoryInfo, (nvml::Device device, nvml::Memory* memory)) {
  nvml::Return result = REAL(nvmlDeviceGetMemoryInfo)(device, memory);
  if (result == nvml::kSuccess && memory && virtual_view(device, &memory->total, &memory->free))
    memory->used = memory->total - memory->free;
  return result;
}

GSHARE_HOOK(nvml::Return, nvmlDeviceGetMemoryInfo_v2, (nvml::Device device, nvml::MemoryV2* memory)) {
  nvml::Return result = REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
  if (result == nvml::kSuccess && memory && virtual_view(device, &memory->total, &memory->free)) {
    memory->reserved = 0;  // the driver's reserve is outside any quota
    memory->used = memory->total - memory->free;
  }
  return result;
}
