// Internal header of the fake CUDA driver (libcuda.so.1). Every source file of
// the driver includes it; nothing outside tests/fake_driver does.
//
// It includes cuda.h normally (so the exported functions are checked against
// the real prototypes), then removes the few macros that rename legacy entry
// points (cuMemAlloc -> cuMemAlloc_v2, ...) and declares the legacy, _ptsz
// and _ptds entry points that cuda.h only declares for the driver itself.
//
// Object model (all state lives in one State, guarded by State::mu):
//   CUctx_st       a context. Never freed: a destroyed context is removed from
//                  the registry, so a stale handle reads as invalid.
//   CUstream_st    a FIFO of Work run in order by the stream's worker thread.
//                  Each context has a default stream (NULL, CU_STREAM_LEGACY
//                  and CU_STREAM_PER_THREAD all mean it). Shared-owned: the
//                  worker keeps a destroyed stream alive until it drains.
//   CUevent_st     record/done sequence numbers and a timestamp.
//   CUmemPoolHandle_st, CUmod_st, CUfunc_st, CUlib_st, CUkern_st: never freed.
//   CUgraph_st, CUgraphExec_st: a list of Work nodes, shared-owned.
//
// Lock order: State::mu, then a stream's mu, then State::ev_mu, then a device
// file's process-shared mutex. Nobody blocks (waits for a stream, sleeps)
// while holding State::mu.
#pragma once

#ifndef CUDA_ENABLE_DEPRECATED
#define CUDA_ENABLE_DEPRECATED 1  // no deprecation warnings for legacy entries
#endif
#include <cuda.h>

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fake_common.h"

// ---------------------------------------------------------------------------
// Legacy names that cuda.h turns into their _v2 (or later) forms. The fake
// driver exports both, like the real one, so the macros must go.
// ---------------------------------------------------------------------------
#undef cuDeviceTotalMem
#undef cuCtxCreate
#undef cuMemGetInfo
#undef cuMemAlloc
#undef cuMemAllocPitch
#undef cuMemFree
#undef cuMemGetAddressRange
#undef cuIpcOpenMemHandle
#undef cuMemAllocHost
#undef cuMemcpyHtoD
#undef cuMemcpyDtoH
#undef cuMemcpyDtoD
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemcpyDtoDAsync
#undef cuMemsetD8
#undef cuMemsetD32
#undef cuCtxDestroy
#undef cuCtxPopCurrent
#undef cuCtxPushCurrent
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuStreamBeginCapture
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
#undef cuDeviceGetUuid
#undef cuGraphInstantiate
#undef cuGetProcAddress
#undef cuEventElapsedTime
#undef cuStreamGetCaptureInfo

extern "C" {
typedef unsigned int fake_deviceptr_v1;  // CUdeviceptr_v1 (32-bit era)

// Legacy (pre-_v2) ABIs.
CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev);
CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray,
                                int numParams, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuMemGetInfo(unsigned int* free, unsigned int* total);
CUresult CUDAAPI cuMemAlloc(fake_deviceptr_v1* dptr, unsigned int bytesize);
CUresult CUDAAPI cuMemAllocPitch(fake_deviceptr_v1* dptr, unsigned int* pPitch,
                                 unsigned int WidthInBytes, unsigned int Height,
                                 unsigned int ElementSizeBytes);
CUresult CUDAAPI cuMemFree(fake_deviceptr_v1 dptr);
CUresult CUDAAPI cuMemGetAddressRange(fake_deviceptr_v1* pbase, unsigned int* psize,
                                      fake_deviceptr_v1 dptr);
CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int bytesize);
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags);
CUresult CUDAAPI cuMemcpyHtoD(fake_deviceptr_v1 dstDevice, const void* srcHost,
                              unsigned int ByteCount);
CUresult CUDAAPI cuMemcpyDtoH(void* dstHost, fake_deviceptr_v1 srcDevice,
                              unsigned int ByteCount);
CUresult CUDAAPI cuMemcpyDtoD(fake_deviceptr_v1 dstDevice, fake_deviceptr_v1 srcDevice,
                              unsigned int ByteCount);
CUresult CUDAAPI cuMemcpyHtoDAsync(fake_deviceptr_v1 dstDevice, const void* srcHost,
                                   unsigned int ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dstHost, fake_deviceptr_v1 srcDevice,
                                   unsigned int ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemsetD8(fake_deviceptr_v1 dstDevice, unsigned char uc,
                            unsigned int N);
CUresult CUDAAPI cuMemsetD32(fake_deviceptr_v1 dstDevice, unsigned int ui,
                             unsigned int N);
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx);
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx);
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx);
CUresult CUDAAPI cuStreamDestroy(CUstream hStream);
CUresult CUDAAPI cuEventDestroy(CUevent hEvent);
CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream);
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                        cuuint64_t* id_out);
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream,
                                           CUstreamCaptureStatus* captureStatus_out,
                                           cuuint64_t* id_out, CUgraph* graph_out,
                                           const CUgraphNode** dependencies_out,
                                           size_t* numDependencies_out);
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph,
                                    CUgraphNode* phErrorNode, char* logBuffer,
                                    size_t bufferSize);
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                       CUgraphNode* phErrorNode, char* logBuffer,
                                       size_t bufferSize);
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                  cuuint64_t flags);

// Per-thread default stream variants (_ptds: synchronous, _ptsz: async).
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N);
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N);
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void* srcHost,
                                           size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dstHost, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                    CUstream hStream);
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                      CUstream hStream);
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                       CUstream hStream);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                              CUmemoryPool pool, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                     unsigned int gridDimY, unsigned int gridDimZ,
                                     unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes,
                                     CUstream hStream, void** kernelParams, void** extra);
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                       void** kernelParams, void** extra);
CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void** kernelParams);
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx);
CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext* pCtx,
                                        CUgreenCtx* pGreenCtx);
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int* priority);
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags);
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                          void* userData, unsigned int flags);
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                             unsigned int flags);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  const CUgraphEdgeData* dependencyData,
                                                  size_t numDependencies,
                                                  CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph);
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream,
                                          CUstreamCaptureStatus* captureStatus);
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                             CUstreamCaptureStatus* captureStatus_out,
                                             cuuint64_t* id_out);
CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus_out,
                                                cuuint64_t* id_out, CUgraph* graph_out,
                                                const CUgraphNode** dependencies_out,
                                                size_t* numDependencies_out);
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus_out,
                                                cuuint64_t* id_out, CUgraph* graph_out,
                                                const CUgraphNode** dependencies_out,
                                                const CUgraphEdgeData** edgeData_out,
                                                size_t* numDependencies_out);
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream);
}  // extern "C"

// ---------------------------------------------------------------------------
// Work: one item of a stream's queue, or one node of a graph.
// ---------------------------------------------------------------------------
namespace fakecuda {

struct Work {
  enum Kind { kKernel, kCall } kind = kCall;
  std::string name;          // kKernel: the function's name (for the trace)
  uint64_t duration_ns = 0;  // kKernel: how long it runs
  std::function<void()> call;  // kCall: copies, host functions, events...
};

// Runs one item on the calling (worker) thread: a kernel waits out its
// duration and appends its trace line; a call is called.
void execute(const Work& w);

}  // namespace fakecuda

// ---------------------------------------------------------------------------
// Handle types. cuda.h only forward-declares these structs, so the driver
// defines them and hands out pointers to them.
// ---------------------------------------------------------------------------
struct CUgraph_st;

struct CUctx_st {
  int device = 0;
  bool primary = false;
  bool active = true;          // false: destroyed / primary released or reset
  unsigned int flags = 0;
  unsigned int api_version = 3020;
  unsigned long long id = 0;
  std::shared_ptr<struct CUstream_st> default_stream;  // created lazily
  std::vector<std::shared_ptr<struct CUstream_st>> streams;  // created ones
};

struct CUstream_st {
  CUctx_st* ctx = nullptr;
  unsigned int flags = 0;
  int priority = 0;
  bool is_default = false;
  unsigned long long id = 0;

  // Queue state, guarded by mu. cv is notified on every change (new work,
  // item started, item finished, destroyed).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<fakecuda::Work> queue;
  bool running = false;     // the worker is executing an item
  bool destroyed = false;   // the worker exits once the queue drains
  bool has_worker = false;

  // Capture state, guarded by State::mu.
  std::shared_ptr<CUgraph_st> capture_graph;
  unsigned long long capture_id = 0;
  bool capture_origin = false;
  bool capture_invalidated = false;
  CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
};

struct CUevent_st {
  CUctx_st* ctx = nullptr;
  unsigned int flags = 0;
  // Guarded by State::ev_mu.
  uint64_t record_seq = 0;  // records issued
  uint64_t done_seq = 0;    // records executed
  uint64_t time_ns = 0;     // CLOCK_MONOTONIC of the last executed record
  // Guarded by State::mu: set when recorded in a capturing stream.
  std::shared_ptr<CUgraph_st> capture_graph;
  unsigned long long capture_id = 0;
};

struct CUmemPoolHandle_st {
  int device = 0;
  bool is_default = false;
  bool destroyed = false;
  CUmemPoolProps props{};
  uint64_t reserved = 0, reserved_high = 0;
  uint64_t used = 0, used_high = 0;
  uint64_t release_threshold = 0;
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
};

struct CUmod_st {
  CUctx_st* ctx = nullptr;
  bool loaded = true;
  std::map<std::string, struct CUfunc_st*> functions;
};

struct CUlib_st {
  bool loaded = true;
  std::map<std::string, struct CUkern_st*> kernels;
};

struct CUfunc_st {
  std::string name;
  CUmod_st* module = nullptr;   // or null for a library kernel's function
  CUlib_st* library = nullptr;
  // Behaviour, decided from the name (README.md): spin kernels read their
  // duration from the first parameter, the others have a fixed one.
  bool duration_from_param = false;
  uint64_t fixed_ns = 1000;
  // Settable attributes.
  int max_dynamic_shared = 0;
  int preferred_carveout = -1;
  int cluster_scheduling_policy = 0;
  int required_cluster_width = 0, required_cluster_height = 0,
      required_cluster_depth = 0;
  int non_portable_cluster_size_allowed = 0;
};

struct CUkern_st {
  CUfunc_st* func = nullptr;  // the library-scoped function behind it
};

struct CUgraphNode_st {
  fakecuda::Work work;
};

struct CUgraph_st {
  std::vector<std::shared_ptr<CUgraphNode_st>> nodes;
};

struct CUgraphExec_st {
  std::vector<std::shared_ptr<CUgraphNode_st>> nodes;
};

namespace fakecuda {

// ---------------------------------------------------------------------------
// Process-local records
// ---------------------------------------------------------------------------
enum class AllocKind { kDevice, kManaged, kHost, kPool };

struct Alloc {
  uintptr_t base = 0;
  size_t size = 0;        // bytes the caller asked for (pitch*height for pitch)
  size_t map_len = 0;     // bytes mmapped
  size_t charged = 0;     // bytes charged to the device (0 for host memory)
  AllocKind kind = AllocKind::kDevice;
  int device = 0;
  CUctx_st* ctx = nullptr;
  CUmemPoolHandle_st* pool = nullptr;
  unsigned long long buffer_id = 0;
};

struct PhysAlloc {  // cuMemCreate, or cuMemImportFromShareableHandle
  size_t size = 0;
  int device = 0;
  bool released = false;
  int mappings = 0;
  CUmemAllocationProp prop{};
  // Once exported (or when imported): the memfd that holds its contents,
  // mapped shared by every mapping, in every process that has it.
  int memfd = -1;
  bool imported = false;  // charged to the exporter's device use, not here
};

struct Reservation {  // cuMemAddressReserve
  uintptr_t base = 0;
  size_t size = 0;
};

struct Mapping {  // cuMemMap
  uintptr_t base = 0;
  size_t size = 0;
  size_t offset = 0;  // into the physical allocation
  CUmemGenericAllocationHandle handle = 0;
  unsigned long long access = 0;  // CUmemAccess_flags set by cuMemSetAccess
};

struct Device {
  int ordinal = 0;
  unsigned char uuid[16] = {};
  uint64_t total = 0;
  fakegpu::DeviceFile file;
  CUctx_st* primary = nullptr;   // always exists; active while retained
  int primary_refs = 0;
  unsigned int primary_flags = 0;
  CUmemPoolHandle_st* default_pool = nullptr;
  CUmemPoolHandle_st* current_pool = nullptr;
};

struct State {
  std::mutex mu;
  std::atomic<bool> initialized{false};  // cuInit succeeded
  bool init_attempted = false;           // cuInit ran (its result is sticky)
  CUresult init_result = CUDA_SUCCESS;
  fakegpu::Config cfg;
  int trace_fd = -1;
  pid_t init_pid = 0;  // a forked child of an initialised process is poisoned

  std::vector<std::unique_ptr<Device>> devices;

  // Registries: a handle is valid iff it is in its registry.
  std::unordered_set<CUctx_st*> contexts;
  std::unordered_map<CUstream_st*, std::shared_ptr<CUstream_st>> streams;
  std::unordered_map<CUevent_st*, std::shared_ptr<CUevent_st>> events;
  std::unordered_set<CUmemPoolHandle_st*> pools;
  std::unordered_set<CUmod_st*> modules;
  std::unordered_set<CUfunc_st*> functions;
  std::unordered_set<CUlib_st*> libraries;
  std::unordered_set<CUkern_st*> kernels;
  std::unordered_map<CUgraph_st*, std::shared_ptr<CUgraph_st>> graphs;
  std::unordered_map<CUgraphExec_st*, std::shared_ptr<CUgraphExec_st>> execs;

  std::map<uintptr_t, Alloc> allocs;  // by base address
  std::map<CUmemGenericAllocationHandle, PhysAlloc> phys;
  std::map<uintptr_t, Reservation> reservations;
  std::map<uintptr_t, Mapping> mappings;
  std::map<uintptr_t, size_t> registered_host;  // cuMemHostRegister: base -> bytes

  unsigned long long next_id = 1;  // contexts, streams, buffers, captures
  CUmemGenericAllocationHandle next_phys_handle = 0x1000;

  // Event completion: record_seq/done_seq/time_ns of every event.
  std::mutex ev_mu;
  std::condition_variable ev_cv;
};

// The one State. Allocated once and never destroyed, so that worker threads
// still running at exit never see it torn down.
State& S();

// ---------------------------------------------------------------------------
// Helpers shared by the driver's source files
// ---------------------------------------------------------------------------
uint64_t now_ns();  // CLOCK_MONOTONIC

// CUDA_SUCCESS once cuInit succeeded in this process; otherwise
// CUDA_ERROR_NOT_INITIALIZED (also in a fork()ed child of an initialised
// process, like the real driver). Does not lock.
CUresult check_init();

// The calling thread's current context (or null).
CUctx_st* current_ctx_raw();
// Caller holds S().mu. The current context if it is valid and active:
// CUDA_ERROR_INVALID_CONTEXT when there is none, CUDA_ERROR_CONTEXT_IS_DESTROYED
// when it was destroyed (or is a released / reset primary context).
CUresult current_ctx_locked(CUctx_st** out);
// Caller holds S().mu. Validates a context handle (null = current).
CUresult resolve_ctx_locked(CUcontext h, CUctx_st** out);

// Valid device ordinal -> Device, else null. The device list and each
// Device's ordinal, uuid and total never change after cuInit, so those may be
// read without S().mu; everything else in Device needs it.
Device* find_device(CUdevice dev);

// Caller holds S().mu. Charge/uncharge bytes on a device (all processes
// share its capacity). charge() returns false if they do not fit.
bool charge(int device, uint64_t bytes);
void uncharge(int device, uint64_t bytes);

// Caller holds S().mu. Resolves a stream handle: NULL, CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD mean the current context's default stream (created on
// first use); anything else must be a live created stream.
CUresult stream_locked(CUstream h, std::shared_ptr<CUstream_st>* out);
// Caller holds S().mu. The default stream of ctx (created on first use).
std::shared_ptr<CUstream_st> default_stream_locked(CUctx_st* ctx);

// Runs `w` on stream `s` after the work already queued there, or records it
// as a graph node if `s` is capturing. Blocks while 1024 items are pending.
// Caller must NOT hold S().mu.
CUresult submit(const std::shared_ptr<CUstream_st>& s, Work w);
// Blocks until `s` has no queued or running work. No locks held by caller.
void wait_idle(CUstream_st* s);
// cuStreamSynchronize (ptsz: _ptsz's default stream), for the driver's own
// use: a call to the exported name would go through gshare's hook.
CUresult synchronize_stream(CUstream h, bool ptsz);
// Blocks until every stream of ctx is idle (only blocking streams and the
// default stream if blocking_only). No locks held by caller.
void sync_context(CUctx_st* ctx, bool blocking_only);
// Pools of `device` give back free reserved memory above their release
// threshold (what the real driver does at synchronisation). Locks S().mu.
void release_pool_memory(int device);

// Caller holds S().mu. Frees everything owned by ctx (allocations, streams,
// events, modules) and its context memory; marks it inactive. The caller has
// already drained its streams.
void destroy_context_resources_locked(CUctx_st* ctx);

// Caller holds S().mu. The allocation containing [p, p+len), or null.
Alloc* find_alloc_locked(uintptr_t p, size_t len);
// Caller holds S().mu. True if [p, p+len) lies in one cuMemMap'ped range.
bool in_mapping_locked(uintptr_t p, size_t len);
// Caller holds S().mu. Removes one allocation record and returns its bytes
// to its device or pool; the memory stays mapped (the caller unmaps it, now
// or in stream order).
Alloc take_alloc_locked(std::map<uintptr_t, Alloc>::iterator it);
// Caller holds S().mu. take_alloc_locked, then unmap at once.
void free_alloc_locked(std::map<uintptr_t, Alloc>::iterator it);
// Caller holds S().mu. A pool allocation of `bytes` was freed (pools.cpp).
void pool_return_locked(CUmemPoolHandle_st* pool, uint64_t bytes);

// Caller holds S().mu. The function behind a CUfunction or CUkernel handle.
CUfunc_st* function_locked(CUfunction f);

// Appends "pid start end name" to FAKE_CUDA_TRACE (one write()).
void trace_kernel(uint64_t start_ns, uint64_t end_ns, const std::string& name);

// mmap/munmap wrappers for fake device memory (MAP_NORESERVE; no RAM is used
// until touched). map_memory returns null on failure.
void advise_huge_pages(void* p, size_t len);
void* map_memory(size_t len);
void unmap_memory(void* p, size_t len);

}  // namespace fakecuda
