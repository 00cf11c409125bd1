// Contexts: destroying one makes the driver free every allocation made in
// it (cudaDeviceReset does this), so gshare forgets them and gives their
// bytes back. The primary context dies on reset or on its last release.
#include "allocator/tracked_memory.h"
#include "base/driver_api.h"
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

void forget_primary(CUdevice device) {
  allocator::forget_context_allocations(allocator::primary_context(device));
}
}  // namespace

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * context, CUdevice device)) {
  return on_success(REAL(cuDevicePrimaryCtxRetain)(context, device), [&] {
    if (context) allocator::remember_primary_context(int(device), *context);
  });
}

GSHARE_HOOK(CUresult, cuCtxDestroy_v2, (CUcontext context)) {
  return on_success(REAL(cuCtxDestroy_v2)(context),
                    [&] { allocator::forget_context_allocations(context); });
}

GSHARE_HOOK(CUresult, cuCtxDestroy, (CUcontext context)) {
  return on_success(REAL(cuCtxDestroy)(context),
                    [&] { allocator::forget_context_allocations(context); });
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice device)) {
  return on_success(REAL(cuDevicePrimaryCtxRelease_v2)(device),
                    [&] { forget_if_primary_gone(device); });
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxRelease, (CUdevice device)) {
  return on_success(REAL(cuDevicePrimaryCtxRelease)(device), [&] { forget_if_primary_gone(device); });
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxReset_v2, (CUdevice device)) {
  return on_success(REAL(cuDevicePrimaryCtxReset_v2)(device), [&] { forget_primary(device); });
}

GSHARE_HOOK(CUresult, cuDevicePrimaryCtxReset, (CUdevice device)) {
  return on_success(REAL(cuDevicePrimaryCtxReset)(device), [&] { forget_primary(device); });
}
