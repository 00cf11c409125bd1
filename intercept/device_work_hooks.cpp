// Copies and memsets. Under GSHARE_PAGING=on each passes the pager's gate
// (allocator/pager.h): a job paged out to host memory is paged back in
// before the call touches device memory, and no page-out starts while a
// call is inside the driver. With paging off they call straight through,
// but for copies to the host, which may wait for the GPU (see below).
#include "allocator/movable_memory.h"
#include "allocator/pager.h"
#include "intercept/interception.h"
#include "runtime/launch_gate.h"

using namespace gshare;
using namespace gshare::intercept;

#define GSHARE_DEVICE_WORK_HOOK(name, params, args)                   \
  GSHARE_HOOK(CUresult, name, params) {                               \
    if (!hooks_active() || !allocator::paging_enabled()) return REAL(name) args; \
    HookScope scope;                                                  \
    allocator::DeviceWork work = allocator::begin_device_work();      \
    if (!work.entered) return work.result;                            \
    CUresult result = REAL(name) args;                                \
    allocator::end_device_work(work);                                 \
    return result;                                                    \
  }

GSHARE_DEVICE_WORK_HOOK(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t n),
                        (dst, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void* src, size_t n),
                        (dst, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t n, CUstream s),
                        (dst, src, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void* src, size_t n, CUstream s),
                        (dst, src, n, s))
// Into pageable memory these wait for the stream's earlier work
// (runtime::GpuWaitScope): busy meanwhile, with paging on or off.
#define GSHARE_TO_HOST_COPY_HOOK(name, params, args)                  \
  GSHARE_HOOK(CUresult, name, params) {                               \
    if (!hooks_active()) return REAL(name) args;                      \
    HookScope scope;                                                  \
    runtime::GpuWaitScope busy;                                       \
    if (!allocator::paging_enabled()) return REAL(name) args;         \
    allocator::DeviceWork work = allocator::begin_device_work();      \
    if (!work.entered) return work.result;                            \
    CUresult result = REAL(name) args;                                \
    allocator::end_device_work(work);                                 \
    return result;                                                    \
  }

GSHARE_TO_HOST_COPY_HOOK(cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t n, CUstream s),
                         (dst, src, n, s))
GSHARE_TO_HOST_COPY_HOOK(cuMemcpyDtoHAsync_v2_ptsz, (void* dst, CUdeviceptr src, size_t n, CUstream s),
                         (dst, src, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n),
                        (dst, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n),
                        (dst, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n),
                        (dst, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n),
                        (dst, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
                        (dst, dc, src, sc, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyPeer_ptds, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
                        (dst, dc, src, sc, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyPeerAsync, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
                        (dst, dc, src, sc, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyPeerAsync_ptsz, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
                        (dst, dc, src, sc, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyDtoA_v2, (CUarray dst, size_t offset, CUdeviceptr src, size_t n),
                        (dst, offset, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyDtoA_v2_ptds, (CUarray dst, size_t offset, CUdeviceptr src, size_t n),
                        (dst, offset, src, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t offset, size_t n),
                        (dst, src, offset, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyAtoD_v2_ptds, (CUdeviceptr dst, CUarray src, size_t offset, size_t n),
                        (dst, src, offset, n))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy2D_v2, (const CUDA_MEMCPY2D* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D* p, CUstream s),
                        (p, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D* p, CUstream s),
                        (p, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3D_v2, (const CUDA_MEMCPY3D* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D* p, CUstream s),
                        (p, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D* p, CUstream s),
                        (p, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER* p),
                        (p))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER* p, CUstream s),
                        (p, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER* p, CUstream s),
                        (p, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyBatchAsync_v2, (CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs, size_t* attr_indices, size_t attr_count, CUstream s),
                        (dsts, srcs, sizes, count, attrs, attr_indices, attr_count, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpyBatchAsync_v2_ptsz, (CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs, size_t* attr_indices, size_t attr_count, CUstream s),
                        (dsts, srcs, sizes, count, attrs, attr_indices, attr_count, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DBatchAsync_v2, (size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream s),
                        (count, ops, flags, s))
GSHARE_DEVICE_WORK_HOOK(cuMemcpy3DBatchAsync_v2_ptsz, (size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream s),
                        (count, ops, flags, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n),
                        (d, v, n))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n),
                        (d, v, n))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream s),
                        (d, v, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream s),
                        (d, v, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D8_v2, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
                        (d, pitch, v, w, h))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D8_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
                        (d, pitch, v, w, h))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D8Async, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
                        (d, pitch, v, w, h, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D8Async_ptsz, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
                        (d, pitch, v, w, h, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD16_v2, (CUdeviceptr d, unsigned short v, size_t n),
                        (d, v, n))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD16_v2_ptds, (CUdeviceptr d, unsigned short v, size_t n),
                        (d, v, n))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD16Async, (CUdeviceptr d, unsigned short v, size_t n, CUstream s),
                        (d, v, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD16Async_ptsz, (CUdeviceptr d, unsigned short v, size_t n, CUstream s),
                        (d, v, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D16_v2, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h),
                        (d, pitch, v, w, h))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D16_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h),
                        (d, pitch, v, w, h))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D16Async, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
                        (d, pitch, v, w, h, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D16Async_ptsz, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
                        (d, pitch, v, w, h, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n),
                        (d, v, n))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n),
                        (d, v, n))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream s),
                        (d, v, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream s),
                        (d, v, n, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D32_v2, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h),
                        (d, pitch, v, w, h))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D32_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h),
                        (d, pitch, v, w, h))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D32Async, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
                        (d, pitch, v, w, h, s))
GSHARE_DEVICE_WORK_HOOK(cuMemsetD2D32Async_ptsz, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
                        (d, pitch, v, w, h, s))
