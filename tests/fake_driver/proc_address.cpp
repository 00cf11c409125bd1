// cuGetProcAddress: the versioned symbol lookup of the real driver.
//
// Each row maps a base name and the first CUDA version whose ABI it has to
// the exported function with that ABI. A lookup picks, among the rows of the
// name with version <= cudaVersion, the newest; with
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM it prefers the per-thread
// (_ptsz/_ptds) rows when the name has one. The versions are those of
// cudaTypedefs.h (PFN_<name>_v<version>), except cuCtxCreate -> _v3 from
// 12000 (what driver 580 returns) and cuGraphInstantiate ->
// cuGraphInstantiateWithFlags from 12000 (what cuda.h 12+ maps it to).
// Names the fake driver does not export are not found, as on a real driver
// that lacks them.
//
// The addresses are taken directly (the library links with -Bsymbolic), so an
// LD_PRELOAD that exports the same names never replaces them: like the real
// driver, this returns its own functions.
#include <cstring>

#include "fake_cuda_internal.h"

namespace {

struct ProcEntry {
  const char* name;     // base name, as asked for
  int version;          // first cudaVersion with this ABI
  bool per_thread;      // a _ptsz / _ptds variant
  void* fn;
};

const ProcEntry kProcTable[] = {
    {"cuInit", 2000, false, reinterpret_cast<void*>(&cuInit)},
    {"cuDriverGetVersion", 2020, false, reinterpret_cast<void*>(&cuDriverGetVersion)},
    {"cuGetErrorString", 6000, false, reinterpret_cast<void*>(&cuGetErrorString)},
    {"cuGetErrorName", 6000, false, reinterpret_cast<void*>(&cuGetErrorName)},
    {"cuGetExportTable", 3000, false, reinterpret_cast<void*>(&cuGetExportTable)},
    {"cuGetProcAddress", 11030, false, reinterpret_cast<void*>(&cuGetProcAddress)},
    {"cuGetProcAddress", 12000, false, reinterpret_cast<void*>(&cuGetProcAddress_v2)},
    {"cuDeviceGet", 2000, false, reinterpret_cast<void*>(&cuDeviceGet)},
    {"cuDeviceGetCount", 2000, false, reinterpret_cast<void*>(&cuDeviceGetCount)},
    {"cuDeviceGetName", 2000, false, reinterpret_cast<void*>(&cuDeviceGetName)},
    {"cuDeviceGetUuid", 9020, false, reinterpret_cast<void*>(&cuDeviceGetUuid)},
    {"cuDeviceGetUuid", 11040, false, reinterpret_cast<void*>(&cuDeviceGetUuid_v2)},
    {"cuDeviceTotalMem", 2000, false, reinterpret_cast<void*>(&cuDeviceTotalMem)},
    {"cuDeviceTotalMem", 3020, false, reinterpret_cast<void*>(&cuDeviceTotalMem_v2)},
    {"cuDeviceGetAttribute", 2000, false, reinterpret_cast<void*>(&cuDeviceGetAttribute)},
    {"cuDeviceGetPCIBusId", 4010, false, reinterpret_cast<void*>(&cuDeviceGetPCIBusId)},
    {"cuDeviceCanAccessPeer", 4000, false, reinterpret_cast<void*>(&cuDeviceCanAccessPeer)},
    {"cuDeviceGetMemPool", 11020, false, reinterpret_cast<void*>(&cuDeviceGetMemPool)},
    {"cuDeviceGetDefaultMemPool", 11020, false, reinterpret_cast<void*>(&cuDeviceGetDefaultMemPool)},
    {"cuDeviceSetMemPool", 11020, false, reinterpret_cast<void*>(&cuDeviceSetMemPool)},
    {"cuDeviceGetGraphMemAttribute", 11040, false, reinterpret_cast<void*>(&cuDeviceGetGraphMemAttribute)},
    {"cuDeviceGraphMemTrim", 11040, false, reinterpret_cast<void*>(&cuDeviceGraphMemTrim)},
    {"cuDevicePrimaryCtxRetain", 7000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", 7000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease)},
    {"cuDevicePrimaryCtxRelease", 11000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2)},
    {"cuDevicePrimaryCtxReset", 7000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxReset)},
    {"cuDevicePrimaryCtxReset", 11000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxReset_v2)},
    {"cuDevicePrimaryCtxSetFlags", 7000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxSetFlags)},
    {"cuDevicePrimaryCtxSetFlags", 11000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxSetFlags_v2)},
    {"cuDevicePrimaryCtxGetState", 7000, false, reinterpret_cast<void*>(&cuDevicePrimaryCtxGetState)},
    {"cuCtxCreate", 2000, false, reinterpret_cast<void*>(&cuCtxCreate)},
    {"cuCtxCreate", 3020, false, reinterpret_cast<void*>(&cuCtxCreate_v2)},
    {"cuCtxCreate", 12000, false, reinterpret_cast<void*>(&cuCtxCreate_v3)},
    {"cuCtxCreate", 12050, false, reinterpret_cast<void*>(&cuCtxCreate_v4)},
    {"cuCtxDestroy", 2000, false, reinterpret_cast<void*>(&cuCtxDestroy)},
    {"cuCtxDestroy", 4000, false, reinterpret_cast<void*>(&cuCtxDestroy_v2)},
    {"cuCtxPushCurrent", 2000, false, reinterpret_cast<void*>(&cuCtxPushCurrent)},
    {"cuCtxPushCurrent", 4000, false, reinterpret_cast<void*>(&cuCtxPushCurrent_v2)},
    {"cuCtxPopCurrent", 2000, false, reinterpret_cast<void*>(&cuCtxPopCurrent)},
    {"cuCtxPopCurrent", 4000, false, reinterpret_cast<void*>(&cuCtxPopCurrent_v2)},
    {"cuCtxSetCurrent", 4000, false, reinterpret_cast<void*>(&cuCtxSetCurrent)},
    {"cuCtxGetCurrent", 4000, false, reinterpret_cast<void*>(&cuCtxGetCurrent)},
    {"cuCtxGetDevice", 2000, false, reinterpret_cast<void*>(&cuCtxGetDevice)},
    {"cuCtxGetDevice", 13000, false, reinterpret_cast<void*>(&cuCtxGetDevice_v2)},
    {"cuCtxSynchronize", 2000, false, reinterpret_cast<void*>(&cuCtxSynchronize)},
    {"cuCtxSynchronize", 13000, false, reinterpret_cast<void*>(&cuCtxSynchronize_v2)},
    {"cuCtxGetApiVersion", 3020, false, reinterpret_cast<void*>(&cuCtxGetApiVersion)},
    {"cuCtxGetFlags", 7000, false, reinterpret_cast<void*>(&cuCtxGetFlags)},
    {"cuCtxGetId", 12000, false, reinterpret_cast<void*>(&cuCtxGetId)},
    {"cuCtxGetStreamPriorityRange", 5050, false, reinterpret_cast<void*>(&cuCtxGetStreamPriorityRange)},
    {"cuMemAlloc", 2000, false, reinterpret_cast<void*>(&cuMemAlloc)},
    {"cuMemAlloc", 3020, false, reinterpret_cast<void*>(&cuMemAlloc_v2)},
    {"cuMemAllocPitch", 2000, false, reinterpret_cast<void*>(&cuMemAllocPitch)},
    {"cuMemAllocPitch", 3020, false, reinterpret_cast<void*>(&cuMemAllocPitch_v2)},
    {"cuMemFree", 2000, false, reinterpret_cast<void*>(&cuMemFree)},
    {"cuMemFree", 3020, false, reinterpret_cast<void*>(&cuMemFree_v2)},
    {"cuMemGetInfo", 2000, false, reinterpret_cast<void*>(&cuMemGetInfo)},
    {"cuMemGetInfo", 3020, false, reinterpret_cast<void*>(&cuMemGetInfo_v2)},
    {"cuMemGetAddressRange", 2000, false, reinterpret_cast<void*>(&cuMemGetAddressRange)},
    {"cuMemGetAddressRange", 3020, false, reinterpret_cast<void*>(&cuMemGetAddressRange_v2)},
    {"cuIpcGetMemHandle", 4010, false, reinterpret_cast<void*>(&cuIpcGetMemHandle)},
    {"cuIpcOpenMemHandle", 4010, false, reinterpret_cast<void*>(&cuIpcOpenMemHandle)},
    {"cuIpcOpenMemHandle", 11000, false, reinterpret_cast<void*>(&cuIpcOpenMemHandle_v2)},
    {"cuIpcCloseMemHandle", 4010, false, reinterpret_cast<void*>(&cuIpcCloseMemHandle)},
    {"cuMemAllocHost", 2000, false, reinterpret_cast<void*>(&cuMemAllocHost)},
    {"cuMemAllocHost", 3020, false, reinterpret_cast<void*>(&cuMemAllocHost_v2)},
    {"cuMemHostAlloc", 2020, false, reinterpret_cast<void*>(&cuMemHostAlloc)},
    {"cuMemFreeHost", 2000, false, reinterpret_cast<void*>(&cuMemFreeHost)},
    {"cuMemHostRegister", 6050, false, reinterpret_cast<void*>(&cuMemHostRegister_v2)},
    {"cuMemHostUnregister", 4000, false, reinterpret_cast<void*>(&cuMemHostUnregister)},
    {"cuMemHostGetDevicePointer", 3020, false, reinterpret_cast<void*>(&cuMemHostGetDevicePointer_v2)},
    {"cuMemAllocManaged", 6000, false, reinterpret_cast<void*>(&cuMemAllocManaged)},
    {"cuMemcpyHtoD", 2000, false, reinterpret_cast<void*>(&cuMemcpyHtoD)},
    {"cuMemcpyHtoD", 3020, false, reinterpret_cast<void*>(&cuMemcpyHtoD_v2)},
    {"cuMemcpyHtoD", 7000, true, reinterpret_cast<void*>(&cuMemcpyHtoD_v2_ptds)},
    {"cuMemcpyDtoH", 2000, false, reinterpret_cast<void*>(&cuMemcpyDtoH)},
    {"cuMemcpyDtoH", 3020, false, reinterpret_cast<void*>(&cuMemcpyDtoH_v2)},
    {"cuMemcpyDtoH", 7000, true, reinterpret_cast<void*>(&cuMemcpyDtoH_v2_ptds)},
    {"cuMemcpyDtoD", 2000, false, reinterpret_cast<void*>(&cuMemcpyDtoD)},
    {"cuMemcpyDtoD", 3020, false, reinterpret_cast<void*>(&cuMemcpyDtoD_v2)},
    {"cuMemcpyDtoD", 7000, true, reinterpret_cast<void*>(&cuMemcpyDtoD_v2_ptds)},
    {"cuMemcpy", 4000, false, reinterpret_cast<void*>(&cuMemcpy)},
    {"cuMemcpy", 7000, true, reinterpret_cast<void*>(&cuMemcpy_ptds)},
    {"cuMemcpyHtoDAsync", 2000, false, reinterpret_cast<void*>(&cuMemcpyHtoDAsync)},
    {"cuMemcpyHtoDAsync", 3020, false, reinterpret_cast<void*>(&cuMemcpyHtoDAsync_v2)},
    {"cuMemcpyHtoDAsync", 7000, true, reinterpret_cast<void*>(&cuMemcpyHtoDAsync_v2_ptsz)},
    {"cuMemcpyDtoHAsync", 2000, false, reinterpret_cast<void*>(&cuMemcpyDtoHAsync)},
    {"cuMemcpyDtoHAsync", 3020, false, reinterpret_cast<void*>(&cuMemcpyDtoHAsync_v2)},
    {"cuMemcpyDtoHAsync", 7000, true, reinterpret_cast<void*>(&cuMemcpyDtoHAsync_v2_ptsz)},
    {"cuMemcpyDtoDAsync", 3020, false, reinterpret_cast<void*>(&cuMemcpyDtoDAsync_v2)},
    {"cuMemcpyDtoDAsync", 7000, true, reinterpret_cast<void*>(&cuMemcpyDtoDAsync_v2_ptsz)},
    {"cuMemcpyAsync", 4000, false, reinterpret_cast<void*>(&cuMemcpyAsync)},
    {"cuMemcpyAsync", 7000, true, reinterpret_cast<void*>(&cuMemcpyAsync_ptsz)},
    {"cuMemsetD8", 2000, false, reinterpret_cast<void*>(&cuMemsetD8)},
    {"cuMemsetD8", 3020, false, reinterpret_cast<void*>(&cuMemsetD8_v2)},
    {"cuMemsetD8", 7000, true, reinterpret_cast<void*>(&cuMemsetD8_v2_ptds)},
    {"cuMemsetD16", 3020, false, reinterpret_cast<void*>(&cuMemsetD16_v2)},
    {"cuMemsetD32", 2000, false, reinterpret_cast<void*>(&cuMemsetD32)},
    {"cuMemsetD32", 3020, false, reinterpret_cast<void*>(&cuMemsetD32_v2)},
    {"cuMemsetD32", 7000, true, reinterpret_cast<void*>(&cuMemsetD32_v2_ptds)},
    {"cuMemsetD8Async", 3020, false, reinterpret_cast<void*>(&cuMemsetD8Async)},
    {"cuMemsetD8Async", 7000, true, reinterpret_cast<void*>(&cuMemsetD8Async_ptsz)},
    {"cuMemsetD32Async", 3020, false, reinterpret_cast<void*>(&cuMemsetD32Async)},
    {"cuMemsetD32Async", 7000, true, reinterpret_cast<void*>(&cuMemsetD32Async_ptsz)},
    {"cuPointerGetAttribute", 4000, false, reinterpret_cast<void*>(&cuPointerGetAttribute)},
    {"cuMemAllocAsync", 11020, false, reinterpret_cast<void*>(&cuMemAllocAsync)},
    {"cuMemAllocAsync", 11020, true, reinterpret_cast<void*>(&cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, false, reinterpret_cast<void*>(&cuMemAllocFromPoolAsync)},
    {"cuMemAllocFromPoolAsync", 11020, true, reinterpret_cast<void*>(&cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemFreeAsync", 11020, false, reinterpret_cast<void*>(&cuMemFreeAsync)},
    {"cuMemFreeAsync", 11020, true, reinterpret_cast<void*>(&cuMemFreeAsync_ptsz)},
    {"cuMemPoolCreate", 11020, false, reinterpret_cast<void*>(&cuMemPoolCreate)},
    {"cuMemPoolDestroy", 11020, false, reinterpret_cast<void*>(&cuMemPoolDestroy)},
    {"cuMemPoolGetAttribute", 11020, false, reinterpret_cast<void*>(&cuMemPoolGetAttribute)},
    {"cuMemPoolSetAttribute", 11020, false, reinterpret_cast<void*>(&cuMemPoolSetAttribute)},
    {"cuMemPoolTrimTo", 11020, false, reinterpret_cast<void*>(&cuMemPoolTrimTo)},
    {"cuMemGetAllocationGranularity", 10020, false, reinterpret_cast<void*>(&cuMemGetAllocationGranularity)},
    {"cuMemCreate", 10020, false, reinterpret_cast<void*>(&cuMemCreate)},
    {"cuMemRelease", 10020, false, reinterpret_cast<void*>(&cuMemRelease)},
    {"cuMemExportToShareableHandle", 10020, false, reinterpret_cast<void*>(&cuMemExportToShareableHandle)},
    {"cuMemImportFromShareableHandle", 10020, false, reinterpret_cast<void*>(&cuMemImportFromShareableHandle)},
    {"cuMemAddressReserve", 10020, false, reinterpret_cast<void*>(&cuMemAddressReserve)},
    {"cuMemAddressFree", 10020, false, reinterpret_cast<void*>(&cuMemAddressFree)},
    {"cuMemMap", 10020, false, reinterpret_cast<void*>(&cuMemMap)},
    {"cuMemUnmap", 10020, false, reinterpret_cast<void*>(&cuMemUnmap)},
    {"cuMemSetAccess", 10020, false, reinterpret_cast<void*>(&cuMemSetAccess)},
    {"cuMemGetAccess", 10020, false, reinterpret_cast<void*>(&cuMemGetAccess)},
    {"cuModuleLoadData", 2000, false, reinterpret_cast<void*>(&cuModuleLoadData)},
    {"cuModuleLoadDataEx", 2010, false, reinterpret_cast<void*>(&cuModuleLoadDataEx)},
    {"cuModuleLoadFatBinary", 2000, false, reinterpret_cast<void*>(&cuModuleLoadFatBinary)},
    {"cuModuleLoad", 2000, false, reinterpret_cast<void*>(&cuModuleLoad)},
    {"cuModuleUnload", 2000, false, reinterpret_cast<void*>(&cuModuleUnload)},
    {"cuModuleGetFunction", 2000, false, reinterpret_cast<void*>(&cuModuleGetFunction)},
    {"cuLibraryLoadData", 12000, false, reinterpret_cast<void*>(&cuLibraryLoadData)},
    {"cuLibraryGetKernel", 12000, false, reinterpret_cast<void*>(&cuLibraryGetKernel)},
    {"cuLibraryUnload", 12000, false, reinterpret_cast<void*>(&cuLibraryUnload)},
    {"cuKernelGetFunction", 12000, false, reinterpret_cast<void*>(&cuKernelGetFunction)},
    {"cuFuncGetAttribute", 2020, false, reinterpret_cast<void*>(&cuFuncGetAttribute)},
    {"cuFuncSetAttribute", 9000, false, reinterpret_cast<void*>(&cuFuncSetAttribute)},
    {"cuFuncGetName", 12030, false, reinterpret_cast<void*>(&cuFuncGetName)},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, false, reinterpret_cast<void*>(&cuOccupancyMaxActiveBlocksPerMultiprocessor)},
    {"cuLaunchKernel", 4000, false, reinterpret_cast<void*>(&cuLaunchKernel)},
    {"cuLaunchKernel", 7000, true, reinterpret_cast<void*>(&cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", 11060, false, reinterpret_cast<void*>(&cuLaunchKernelEx)},
    {"cuLaunchKernelEx", 11060, true, reinterpret_cast<void*>(&cuLaunchKernelEx_ptsz)},
    {"cuLaunchCooperativeKernel", 9000, false, reinterpret_cast<void*>(&cuLaunchCooperativeKernel)},
    {"cuLaunchCooperativeKernel", 9000, true, reinterpret_cast<void*>(&cuLaunchCooperativeKernel_ptsz)},
    {"cuLaunchHostFunc", 10000, false, reinterpret_cast<void*>(&cuLaunchHostFunc)},
    {"cuLaunchHostFunc", 10000, true, reinterpret_cast<void*>(&cuLaunchHostFunc_ptsz)},
    {"cuStreamCreate", 2000, false, reinterpret_cast<void*>(&cuStreamCreate)},
    {"cuStreamCreateWithPriority", 5050, false, reinterpret_cast<void*>(&cuStreamCreateWithPriority)},
    {"cuStreamDestroy", 2000, false, reinterpret_cast<void*>(&cuStreamDestroy)},
    {"cuStreamDestroy", 4000, false, reinterpret_cast<void*>(&cuStreamDestroy_v2)},
    {"cuStreamSynchronize", 2000, false, reinterpret_cast<void*>(&cuStreamSynchronize)},
    {"cuStreamSynchronize", 7000, true, reinterpret_cast<void*>(&cuStreamSynchronize_ptsz)},
    {"cuStreamQuery", 2000, false, reinterpret_cast<void*>(&cuStreamQuery)},
    {"cuStreamQuery", 7000, true, reinterpret_cast<void*>(&cuStreamQuery_ptsz)},
    {"cuStreamWaitEvent", 3020, false, reinterpret_cast<void*>(&cuStreamWaitEvent)},
    {"cuStreamWaitEvent", 7000, true, reinterpret_cast<void*>(&cuStreamWaitEvent_ptsz)},
    {"cuStreamGetCtx", 9020, false, reinterpret_cast<void*>(&cuStreamGetCtx)},
    {"cuStreamGetCtx", 9020, true, reinterpret_cast<void*>(&cuStreamGetCtx_ptsz)},
    {"cuStreamGetCtx", 12050, false, reinterpret_cast<void*>(&cuStreamGetCtx_v2)},
    {"cuStreamGetCtx", 12050, true, reinterpret_cast<void*>(&cuStreamGetCtx_v2_ptsz)},
    {"cuStreamGetPriority", 5050, false, reinterpret_cast<void*>(&cuStreamGetPriority)},
    {"cuStreamGetPriority", 7000, true, reinterpret_cast<void*>(&cuStreamGetPriority_ptsz)},
    {"cuStreamGetFlags", 5050, false, reinterpret_cast<void*>(&cuStreamGetFlags)},
    {"cuStreamGetFlags", 7000, true, reinterpret_cast<void*>(&cuStreamGetFlags_ptsz)},
    {"cuStreamAddCallback", 5000, false, reinterpret_cast<void*>(&cuStreamAddCallback)},
    {"cuStreamAddCallback", 7000, true, reinterpret_cast<void*>(&cuStreamAddCallback_ptsz)},
    {"cuEventCreate", 2000, false, reinterpret_cast<void*>(&cuEventCreate)},
    {"cuEventRecord", 2000, false, reinterpret_cast<void*>(&cuEventRecord)},
    {"cuEventRecord", 7000, true, reinterpret_cast<void*>(&cuEventRecord_ptsz)},
    {"cuEventRecordWithFlags", 11010, false, reinterpret_cast<void*>(&cuEventRecordWithFlags)},
    {"cuEventRecordWithFlags", 11010, true, reinterpret_cast<void*>(&cuEventRecordWithFlags_ptsz)},
    {"cuEventQuery", 2000, false, reinterpret_cast<void*>(&cuEventQuery)},
    {"cuEventSynchronize", 2000, false, reinterpret_cast<void*>(&cuEventSynchronize)},
    {"cuEventElapsedTime", 2000, false, reinterpret_cast<void*>(&cuEventElapsedTime)},
    {"cuEventElapsedTime", 12080, false, reinterpret_cast<void*>(&cuEventElapsedTime_v2)},
    {"cuEventDestroy", 2000, false, reinterpret_cast<void*>(&cuEventDestroy)},
    {"cuEventDestroy", 4000, false, reinterpret_cast<void*>(&cuEventDestroy_v2)},
    {"cuStreamBeginCapture", 10000, false, reinterpret_cast<void*>(&cuStreamBeginCapture)},
    {"cuStreamBeginCapture", 10000, true, reinterpret_cast<void*>(&cuStreamBeginCapture_ptsz)},
    {"cuStreamBeginCapture", 10010, false, reinterpret_cast<void*>(&cuStreamBeginCapture_v2)},
    {"cuStreamBeginCapture", 10010, true, reinterpret_cast<void*>(&cuStreamBeginCapture_v2_ptsz)},
    {"cuStreamBeginCaptureToGraph", 12030, false, reinterpret_cast<void*>(&cuStreamBeginCaptureToGraph)},
    {"cuStreamBeginCaptureToGraph", 12030, true, reinterpret_cast<void*>(&cuStreamBeginCaptureToGraph_ptsz)},
    {"cuStreamEndCapture", 10000, false, reinterpret_cast<void*>(&cuStreamEndCapture)},
    {"cuStreamEndCapture", 10000, true, reinterpret_cast<void*>(&cuStreamEndCapture_ptsz)},
    {"cuStreamIsCapturing", 10000, false, reinterpret_cast<void*>(&cuStreamIsCapturing)},
    {"cuStreamIsCapturing", 10000, true, reinterpret_cast<void*>(&cuStreamIsCapturing_ptsz)},
    {"cuStreamGetCaptureInfo", 10010, false, reinterpret_cast<void*>(&cuStreamGetCaptureInfo)},
    {"cuStreamGetCaptureInfo", 10010, true, reinterpret_cast<void*>(&cuStreamGetCaptureInfo_ptsz)},
    {"cuStreamGetCaptureInfo", 11030, false, reinterpret_cast<void*>(&cuStreamGetCaptureInfo_v2)},
    {"cuStreamGetCaptureInfo", 11030, true, reinterpret_cast<void*>(&cuStreamGetCaptureInfo_v2_ptsz)},
    {"cuStreamGetCaptureInfo", 12030, false, reinterpret_cast<void*>(&cuStreamGetCaptureInfo_v3)},
    {"cuStreamGetCaptureInfo", 12030, true, reinterpret_cast<void*>(&cuStreamGetCaptureInfo_v3_ptsz)},
    {"cuGraphCreate", 10000, false, reinterpret_cast<void*>(&cuGraphCreate)},
    {"cuGraphDestroy", 10000, false, reinterpret_cast<void*>(&cuGraphDestroy)},
    {"cuGraphGetNodes", 10000, false, reinterpret_cast<void*>(&cuGraphGetNodes)},
    {"cuGraphInstantiate", 10000, false, reinterpret_cast<void*>(&cuGraphInstantiate)},
    {"cuGraphInstantiate", 11000, false, reinterpret_cast<void*>(&cuGraphInstantiate_v2)},
    {"cuGraphInstantiate", 12000, false, reinterpret_cast<void*>(&cuGraphInstantiateWithFlags)},
    {"cuGraphInstantiateWithFlags", 11040, false, reinterpret_cast<void*>(&cuGraphInstantiateWithFlags)},
    {"cuGraphExecDestroy", 10000, false, reinterpret_cast<void*>(&cuGraphExecDestroy)},
    {"cuGraphLaunch", 10000, false, reinterpret_cast<void*>(&cuGraphLaunch)},
    {"cuGraphLaunch", 10000, true, reinterpret_cast<void*>(&cuGraphLaunch_ptsz)},
    {"cuGraphUpload", 11010, false, reinterpret_cast<void*>(&cuGraphUpload)},
    {"cuGraphUpload", 11010, true, reinterpret_cast<void*>(&cuGraphUpload_ptsz)},
};

CUresult lookup(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if ((flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  bool found_name = false;
  const ProcEntry* best = nullptr;     // newest default-stream row <= cudaVersion
  const ProcEntry* best_pt = nullptr;  // newest per-thread row <= cudaVersion
  for (const ProcEntry& e : kProcTable) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    found_name = true;
    if (e.version > cudaVersion) continue;
    const ProcEntry*& slot = e.per_thread ? best_pt : best;
    if (slot == nullptr || e.version >= slot->version) slot = &e;
  }
  const ProcEntry* chosen = (per_thread && best_pt != nullptr) ? best_pt : best;
  if (chosen == nullptr) {
    if (status != nullptr) {
      *status = found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = chosen->fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                     cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* symbolStatus) {
  return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                  cuuint64_t flags) {
  return lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
