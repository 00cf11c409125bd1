// Capacity queries answer with the process's virtual view: its quota as the
// total, quota − own usage as free (allocator/memory_view.h).
#include "allocator/devices.h"
#include "allocator/memory_view.h"
#include "intercept/interception.h"

using namespace gshare;
using namespace gshare::intercept;

namespace {
CUresult view_of_current_device(size_t* free_bytes, size_t* total_bytes, CUresult real) {
  if (real != CUDA_SUCCESS || !hooks_active()) return real;
  HookScope scope;
  allocator::Device* device = allocator::current_device();
  if (!device) return real;
  allocator::MemoryView view = allocator::memory_view(*device, *free_bytes);
  *free_bytes = size_t(view.free_bytes);
  *total_bytes = size_t(view.total_bytes);
  return real;
}

uint64_t total_of(CUdevice ordinal, uint64_t physical) {
  if (allocator::Device* device = allocator::attached_device(int(ordinal)))
    return device->account.quota_bytes();
  // Not in use yet: report the quota without claiming a slot on this GPU.
  return allocator::quota_for(physical);
}

// The legacy 32-bit forms saturate, as the driver does for large GPUs.
unsigned int clamp32(uint64_t v) { return v > 0xffffffffull ? 0xffffffffu : unsigned(v); }
}  // namespace

GSHARE_HOOK(CUresult, cuMemGetInfo_v2, (size_t * free_bytes, size_t* total_bytes)) {
  if (!free_bytes || !total_bytes) return REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
  return view_of_current_device(free_bytes, total_bytes, REAL(cuMemGetInfo_v2)(free_bytes, total_bytes));
}

GSHARE_HOOK(CUresult, cuMemGetInfo, (unsigned int* free_bytes, unsigned int* total_bytes)) {
  if (!free_bytes || !total_bytes || !hooks_active()) return REAL(cuMemGetInfo)(free_bytes, total_bytes);
  size_t free64 = 0, total64 = 0;
  CUresult result = view_of_current_device(&free64, &total64, REAL(cuMemGetInfo_v2)(&free64, &total64));
  if (result == CUDA_SUCCESS) {
    *free_bytes = clamp32(free64);
    *total_bytes = clamp32(total64);
  }
  return result;
}

GSHARE_HOOK(CUresult, cuDeviceTotalMem_v2, (size_t * bytes, CUdevice device)) {
  CUresult result = REAL(cuDeviceTotalMem_v2)(bytes, device);
  if (result == CUDA_SUCCESS && bytes && hooks_active()) *bytes = size_t(total_of(device, *bytes));
  return result;
}

GSHARE_HOOK(CUresult, cuDeviceTotalMem, (unsigned int* bytes, CUdevice device)) {
  if (!bytes || !hooks_active()) return REAL(cuDeviceTotalMem)(bytes, device);
  size_t physical = 0;
  CUresult result = REAL(cuDeviceTotalMem_v2)(&physical, device);
  if (result == CUDA_SUCCESS) *bytes = clamp32(total_of(device, physical));
  return result;
}
