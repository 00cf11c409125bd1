// Every driver and NVML entry point gshare hooks, by exact ABI name. One row
// per exported symbol: a `_v2` or `_ptsz` form is its own row, because each
// is its own function in libcuda with its own ABI (docs/DESIGN.md, §3.1).
// The wrapper of each row is defined in one of the *_hooks.cpp files with
// GSHARE_HOOK.
#pragma once

// Copies and memsets: under paging they pass the pager's gate
// (allocator/pager.h), like launches.
#define GSHARE_DEVICE_WORK_HOOKS(X) \
  X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyHtoDAsync_v2)         \
  X(cuMemcpyHtoDAsync_v2_ptsz) X(cuMemcpyDtoHAsync_v2)                       \
  X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds)    \
  X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz) X(cuMemcpy)           \
  X(cuMemcpy_ptds) X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz) X(cuMemcpyPeer)    \
  X(cuMemcpyPeer_ptds) X(cuMemcpyPeerAsync) X(cuMemcpyPeerAsync_ptsz)        \
  X(cuMemcpyDtoA_v2) X(cuMemcpyDtoA_v2_ptds) X(cuMemcpyAtoD_v2)              \
  X(cuMemcpyAtoD_v2_ptds) X(cuMemcpy2D_v2) X(cuMemcpy2D_v2_ptds)             \
  X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DUnaligned_v2_ptds)                   \
  X(cuMemcpy2DAsync_v2) X(cuMemcpy2DAsync_v2_ptsz) X(cuMemcpy3D_v2)          \
  X(cuMemcpy3D_v2_ptds) X(cuMemcpy3DAsync_v2) X(cuMemcpy3DAsync_v2_ptsz)     \
  X(cuMemcpy3DPeer) X(cuMemcpy3DPeer_ptds) X(cuMemcpy3DPeerAsync)            \
  X(cuMemcpy3DPeerAsync_ptsz) X(cuMemcpyBatchAsync_v2)                       \
  X(cuMemcpyBatchAsync_v2_ptsz) X(cuMemcpy3DBatchAsync_v2)                   \
  X(cuMemcpy3DBatchAsync_v2_ptsz) X(cuMemsetD8_v2) X(cuMemsetD8_v2_ptds)     \
  X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz) X(cuMemsetD2D8_v2)              \
  X(cuMemsetD2D8_v2_ptds) X(cuMemsetD2D8Async) X(cuMemsetD2D8Async_ptsz)     \
  X(cuMemsetD16_v2) X(cuMemsetD16_v2_ptds) X(cuMemsetD16Async)               \
  X(cuMemsetD16Async_ptsz) X(cuMemsetD2D16_v2) X(cuMemsetD2D16_v2_ptds)      \
  X(cuMemsetD2D16Async) X(cuMemsetD2D16Async_ptsz) X(cuMemsetD32_v2)         \
  X(cuMemsetD32_v2_ptds) X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz)        \
  X(cuMemsetD2D32_v2) X(cuMemsetD2D32_v2_ptds) X(cuMemsetD2D32Async)         \
  X(cuMemsetD2D32Async_ptsz)

#define GSHARE_CUDA_HOOKS(X)                                                  \
  /* initialisation and lookup */                                             \
  X(cuInit) X(cuGetProcAddress) X(cuGetProcAddress_v2)                        \
  /* allocation and free */                                                   \
  X(cuMemAlloc) X(cuMemAlloc_v2) X(cuMemAllocPitch) X(cuMemAllocPitch_v2)     \
  X(cuMemAllocManaged) X(cuMemFree) X(cuMemFree_v2)                           \
  /* CUDA IPC: movable memory is exported by gshare itself */                \
  X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2)         \
  X(cuIpcCloseMemHandle)                                                      \
  /* stream-ordered pools */                                                  \
  X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync)       \
  X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz)    \
  X(cuMemPoolDestroy)                                                         \
  /* virtual memory management: physical memory counts at cuMemCreate */      \
  X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)                    \
  /* contexts: destroying one frees its allocations */                        \
  X(cuCtxDestroy) X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)             \
  X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset)                  \
  X(cuDevicePrimaryCtxReset_v2)                                               \
  /* capacity */                                                              \
  X(cuMemGetInfo) X(cuMemGetInfo_v2) X(cuDeviceTotalMem) X(cuDeviceTotalMem_v2) \
  /* launches */                                                              \
  X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx)                \
  X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                       \
  X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz)    \
  /* synchronisation */                                                       \
  X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuCtxSynchronize)      \
  X(cuCtxSynchronize_v2) X(cuEventSynchronize)                                \
  X(cuMemcpyDtoH) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds)                  \
  /* stream capture: launches recorded into a graph are never counted */      \
  X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz)                        \
  X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz)                  \
  X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz)          \
  X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz) \
  GSHARE_DEVICE_WORK_HOOKS(X)

#define GSHARE_NVML_HOOKS(X) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)
