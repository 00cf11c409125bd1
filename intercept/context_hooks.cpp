// Contexts: destroying one makes the driver free every allocation made in
// it (cudaDeviceReset does this), so gshare forgets them and gives their
// bytes back. The primary context dies on reset or on its last release.
#include "allocator/tracked_memory.h"
#include "intercept/driver_api.h"
#include "intercept/interception.h"

using namespace gshare;
using namespace gshare::intercept;

namespace {
void forget_if_primary_gone(CUdevice device) {
  unsigned int flags = 0;
  int active = 1;
  if (driver().device_primary_ctx_get_state &&
      driver().device_primary_ctx_get_state(device, &flags, &active) == CUDA_SUCCESS && !active)
    allocator::forget_context_allocations(allocator::primary_context(device));
}
}  // namespace

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * context, CUdevice device)) {
  CUresult result = REAL(cuDevicePrimaryCtxRetain)(context, device);
  if (result == CUDA_SUCCESS && hooks_active() && context)
    allocator::remember_primary_context(int(device), *context);
  return result;
}

GSHARE_HOOK(CUresult, cuCtxDestroy_v2, (CUcontext context)) {
  CUresult result = REAL(cuCtxDestroy_v2)(context);
  if (result == CUDA_SUCCESS && hooks_active()) {
    HookScope scope;
    allocator::forget_context_allocations(context);
  }
  return result;
}

GSHARE_HOOK(CUresult, cuCtxDestroy, (CUcontext context)) {
  CUresult result = REAL(cuCtxDestroy)(context);
  if (result == CUDA_SUCCESS && hooks_active()) {
    HookScope scope;
    allocator::forget_context_allocations(context);
  }
  return result;
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice device)) {
  CUresult result = REAL(cuDevicePrimaryCtxRelease_v2)(device);
  if (result == CUDA_SUCCESS && hooks_active()) {
    HookScope scope;
    forget_if_primary_gone(device);
  }
  return result;
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxRelease, (CUdevice device)) {
  CUresult result = REAL(cuDevicePrimaryCtxRelease)(device);
  if (result == CUDA_SUCCESS && hooks_active()) {
    HookScope scope;
    forget_if_primary_gone(device);
  }
  return result;
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxReset_v2, (CUdevice device)) {
  CUresult result = REAL(cuDevicePrimaryCtxReset_v2)(device);
  if (result == CUDA_SUCCESS && hooks_active()) {
    HookScope scope;
    allocator::forget_context_allocations(allocator::primary_context(device));
  }
  return result;
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxReset, (CUdevice device)) {
  CUresult result = REAL(cuDevicePrimaryCtxReset)(device);
  if (result == CUDA_SUCCESS && hooks_active()) {
    HookScope scope;
    allocator::forget_context_allocations(allocator::primary_context(device));
  }
  return result;
}
