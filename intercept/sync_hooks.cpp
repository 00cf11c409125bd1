// Host synchronisations, and the start and end of stream capture. A sync
// is where freed pool memory is re-measured and where iteration boundaries
// show (scheduler/iterations.h).
#include "intercept/interception.h"
#include "allocator/movable_memory.h"
#include "allocator/pager.h"
#include "runtime/launch_gate.h"

using namespace gshare;
using namespace gshare::intercept;

namespace {
// A thread inside a sync keeps its job busy (never idle); the hooks count
// it in and out around the driver call, whatever the result.
template <class Call>
CUresult host_sync(Call&& call) {
  if (!hooks_active()) return call();
  bool ends_iteration = runtime::before_host_sync();
  CUresult result = call();
  runtime::after_host_sync(ends_iteration);
  return result;
}

// A synchronous copy also touches device memory: under paging it passes
// the pager's gate (allocator/pager.h) before it starts waiting.
template <class Call>
CUresult host_copy(Call&& call) {
  if (!hooks_active() || !allocator::paging_enabled()) return host_sync(call);
  allocator::DeviceWork work;
  {
    HookScope scope;
    work = allocator::begin_device_work();
  }
  if (!work.entered) return work.result;
  CUresult result = host_sync(call);
  allocator::end_device_work(work);
  return result;
}

CUresult after_begin_capture(CUresult result) {
  if (result == CUDA_SUCCESS) runtime::note_capture_begun();
  return result;
}

CUresult after_end_capture(CUresult result) {
  // The capture ends even when the driver reports it invalidated.
  runtime::note_capture_ended();
  return result;
}
}  // namespace

GSHARE_HOOK(CUresult, cuStreamSynchronize, (CUstream stream)) {
  return host_sync([&] { return REAL(cuStreamSynchronize)(stream); });
}
GSHARE_HOOK(CUresult, cuStreamSynchronize_ptsz, (CUstream stream)) {
  return host_sync([&] { return REAL(cuStreamSynchronize_ptsz)(stream); });
}
GSHARE_HOOK(CUresult, cuCtxSynchronize, ()) { return host_sync([&] { return REAL(cuCtxSynchronize)(); }); }
GSHARE_HOOK(CUresult, cuCtxSynchronize_v2, (CUcontext context)) {
  return host_sync([&] { return REAL(cuCtxSynchronize_v2)(context); });
}
// A synchronous copy to the host waits for the stream's work before it:
// the other way a loop reads its loss (a plain cudaMemcpy of a scalar).
GSHARE_HOOK(CUresult, cuMemcpyDtoH, (void* host, CUdeviceptr_v1 device, unsigned int bytes)) {
  return host_copy([&] { return REAL(cuMemcpyDtoH)(host, device, bytes); });
}
GSHARE_HOOK(CUresult, cuMemcpyDtoH_v2, (void* host, CUdeviceptr device, size_t bytes)) {
  return host_copy([&] { return REAL(cuMemcpyDtoH_v2)(host, device, bytes); });
}
GSHARE_HOOK(CUresult, cuMemcpyDtoH_v2_ptds, (void* host, CUdeviceptr device, size_t bytes)) {
  return host_copy([&] { return REAL(cuMemcpyDtoH_v2_ptds)(host, device, bytes); });
}
GSHARE_HOOK(CUresult, cuEventSynchronize, (CUevent event)) {
  return host_sync([&] { return REAL(cuEventSynchronize)(event); });
}

GSHARE_HOOK(CUresult, cuStreamBeginCapture, (CUstream stream)) {
  return after_begin_capture(REAL(cuStreamBeginCapture)(stream));
}
GSHARE_HOOK(CUresult, cuStreamBeginCapture_ptsz, (CUstream stream)) {
  return after_begin_capture(REAL(cuStreamBeginCapture_ptsz)(stream));
}
GSHARE_HOOK(CUresult, cuStreamBeginCapture_v2, (CUstream stream, CUstreamCaptureMode mode)) {
  return after_begin_capture(REAL(cuStreamBeginCapture_v2)(stream, mode));
}
GSHARE_HOOK(CUresult, cuStreamBeginCapture_v2_ptsz, (CUstream stream, CUstreamCaptureMode mode)) {
  return after_begin_capture(REAL(cuStreamBeginCapture_v2_ptsz)(stream, mode));
}
GSHARE_HOOK(CUresult, cuStreamBeginCaptureToGraph,
            (CUstream stream, CUgraph graph, const CUgraphNode* dependencies,
             const CUgraphEdgeData* edges, size_t count, CUstreamCaptureMode mode)) {
  return after_begin_capture(
      REAL(cuStreamBeginCaptureToGraph)(stream, graph, dependencies, edges, count, mode));
}
GSHARE_HOOK(CUresult, cuStreamBeginCaptureToGraph_ptsz,
            (CUstream stream, CUgraph graph, const CUgraphNode* dependencies,
             const CUgraphEdgeData* edges, size_t count, CUstreamCaptureMode mode)) {
  return after_begin_capture(
      REAL(cuStreamBeginCaptureToGraph_ptsz)(stream, graph, dependencies, edges, count, mode));
}
GSHARE_HOOK(CUresult, cuStreamEndCapture, (CUstream stream, CUgraph* graph)) {
  return after_end_capture(REAL(cuStreamEndCapture)(stream, graph));
}
GSHARE_HOOK(CUresult, cuStreamEndCapture_ptsz, (CUstream stream, CUgraph* graph)) {
  return after_end_capture(REAL(cuStreamEndCapture_ptsz)(stream, graph));
}
