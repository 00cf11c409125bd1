// Every driver and NVML entry point gshare hooks, by exact ABI name. One row
// per exported symbol: a `_v2` or `_ptsz` form is its own row, because each
// is its own function in libcuda with its own ABI (docs/DESIGN.md, §3.1).
// The wrapper of each row is defined in one of the *_hooks.cpp files with
// GSHARE_HOOK.
#pragma once

#define GSHARE_CUDA_HOOKS(X)                                                  \
  /* initialisation and lookup */                                             \
  X(cuInit) X(cuGetProcAddress) X(cuGetProcAddress_v2)                        \
  /* allocation and free */                                                   \
  X(cuMemAlloc) X(cuMemAlloc_v2) X(cuMemAllocPitch) X(cuMemAllocPitch_v2)     \
  X(cuMemAllocManaged) X(cuMemFree) X(cuMemFree_v2)                           \
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
  X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)

#define GSHARE_NVML_HOOKS(X) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)
