// Stream-ordered allocation: cuMemAllocAsync, cuMemAllocFromPoolAsync,
// cuMemFreeAsync (with their per-thread-stream forms) and cuMemPoolDestroy.
// The pool's growth is what is charged (allocator/pools.h).
#include "allocator/pools.h"
#include "allocator/tracked_memory.h"
#include "intercept/interception.h"
#include "intercept/memory_events.h"
#include "runtime/launch_gate.h"

using namespace gshare;
using namespace gshare::intercept;

namespace {
// During capture an async allocation becomes a graph node: no memory is
// taken now, and the graph's memory is charged through the device's graph
// pool. Such calls pass straight through.
bool capturing(CUstream stream) {
  return runtime::stream_is_being_captured(stream);
}

template <class Call>
CUresult allocate_async(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream,
                        const char* name, Call&& real) {
  if (!hooks_active() || !dptr || capturing(stream)) return real(dptr);
  HookScope scope;
  allocator::Device* device = allocator::current_device();
  if (!device) return real(dptr);
  MemoryCallTime timing;
  return note_allocation(allocator::allocate_from_pool(*device, pool, stream, bytes, name,
                                                      [&](CUdeviceptr* out) {
                                                        CUresult r = real(dptr);
                                                        *out = *dptr;
                                                        return r;
                                                      }));
}

template <class Call>
CUresult free_async(CUdeviceptr dptr, Call&& real) {
  if (!hooks_active()) return real();
  HookScope scope;
  return free_noted(dptr, real);
}
}  // namespace

GSHARE_HOOK(CUresult, cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream stream)) {
  return allocate_async(dptr, bytesize, nullptr, stream, "cuMemAllocAsync", [&](CUdeviceptr* p) {
    return REAL(cuMemAllocAsync)(p, bytesize, stream);
  });
}

GSHARE_HOOK(CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream stream)) {
  return allocate_async(dptr, bytesize, nullptr, stream, "cuMemAllocAsync", [&](CUdeviceptr* p) {
    return REAL(cuMemAllocAsync_ptsz)(p, bytesize, stream);
  });
}

GSHARE_HOOK(CUresult, cuMemAllocFromPoolAsync,
            (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)) {
  return allocate_async(dptr, bytesize, pool, stream, "cuMemAllocFromPoolAsync",
                        [&](CUdeviceptr* p) {
                          return REAL(cuMemAllocFromPoolAsync)(p, bytesize, pool, stream);
                        });
}

GSHARE_HOOK(CUresult, cuMemAllocFromPoolAsync_ptsz,
            (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)) {
  return allocate_async(dptr, bytesize, pool, stream, "cuMemAllocFromPoolAsync",
                        [&](CUdeviceptr* p) {
                          return REAL(cuMemAllocFromPoolAsync_ptsz)(p, bytesize, pool, stream);
                        });
}

GSHARE_HOOK(CUresult, cuMemFreeAsync, (CUdeviceptr dptr, CUstream stream)) {
  return free_async(dptr, [&] { return REAL(cuMemFreeAsync)(dptr, stream); });
}

GSHARE_HOOK(CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream stream)) {
  return free_async(dptr, [&] { return REAL(cuMemFreeAsync_ptsz)(dptr, stream); });
}

GSHARE_HOOK(CUresult, cuMemPoolDestroy, (CUmemoryPool pool)) {
  return on_success(REAL(cuMemPoolDestroy)(pool), [&] { allocator::forget_pool(pool); });
}
