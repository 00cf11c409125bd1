// The fake CUDA driver: initialisation, version, devices and contexts.
// Memory is in memory.cpp, pools.cpp and vmm.cpp; streams, events and the
// execution of work in streams.cpp; launches in launch.cpp; modules and
// kernel durations in modules.cpp; capture and graphs in graphs.cpp;
// cuGetProcAddress in proc_address.cpp; error strings in errors.cpp.
// README.md describes the emulation as a whole.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "fake_cuda_internal.h"

namespace fakecuda {

namespace {

// The calling thread's context stack; its top is the current context.
thread_local std::vector<CUctx_st*> tls_ctx_stack;

// Flags accepted by context creation and cuDevicePrimaryCtxSetFlags.
constexpr unsigned int kCtxFlagsMask = 0xFF;

}  // namespace

State& S() {
  static State* state = new State();  // never destroyed (see the header)
  return *state;
}

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL +
         static_cast<uint64_t>(ts.tv_nsec);
}

CUresult check_init() {
  State& s = S();
  if (!s.initialized.load(std::memory_order_acquire)) {
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  if (s.init_pid != ::getpid()) return CUDA_ERROR_NOT_INITIALIZED;  // fork()ed
  return CUDA_SUCCESS;
}

Device* find_device(CUdevice dev) {
  State& s = S();
  if (dev < 0 || static_cast<size_t>(dev) >= s.devices.size()) return nullptr;
  return s.devices[static_cast<size_t>(dev)].get();
}

CUctx_st* current_ctx_raw() {
  return tls_ctx_stack.empty() ? nullptr : tls_ctx_stack.back();
}

CUresult current_ctx_locked(CUctx_st** out) {
  CUctx_st* ctx = current_ctx_raw();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // Only validated handles enter the stack and contexts are never freed, so
  // one missing from the registry (or inactive) was destroyed since.
  if (S().contexts.count(ctx) == 0 || !ctx->active) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult resolve_ctx_locked(CUcontext h, CUctx_st** out) {
  if (h == nullptr) return current_ctx_locked(out);
  if (S().contexts.count(h) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!h->active) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = h;
  return CUDA_SUCCESS;
}

bool charge(int device, uint64_t bytes) {
  Device* d = find_device(device);
  if (d == nullptr) return false;
  return d->file.charge(bytes, d->total);
}

void uncharge(int device, uint64_t bytes) {
  Device* d = find_device(device);
  if (d != nullptr) d->file.uncharge(bytes);
}

void trace_kernel(uint64_t start_ns, uint64_t end_ns, const std::string& name) {
  const int fd = S().trace_fd;
  if (fd < 0) return;
  char line[512];
  int n = std::snprintf(line, sizeof(line), "%d %llu %llu ",
                        static_cast<int>(::getpid()),
                        static_cast<unsigned long long>(start_ns),
                        static_cast<unsigned long long>(end_ns));
  if (n < 0) return;
  // The name is the last field; keep the line one line of four fields.
  size_t pos = static_cast<size_t>(n);
  for (char ch : name) {
    if (pos >= sizeof(line) - 2) break;
    line[pos++] = (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') ? '_' : ch;
  }
  if (name.empty()) line[pos++] = '?';
  line[pos++] = '\n';
  // One write() per line: with O_APPEND, lines of concurrent processes never
  // interleave.
  ssize_t ignored = ::write(fd, line, pos);
  (void)ignored;
}

void destroy_context_resources_locked(CUctx_st* ctx) {
  State& s = S();
  // Allocations owned by the context (pool allocations belong to the pool).
  for (auto it = s.allocs.begin(); it != s.allocs.end();) {
    auto next = std::next(it);
    if (it->second.ctx == ctx && it->second.kind != AllocKind::kPool) {
      free_alloc_locked(it);
    }
    it = next;
  }
  // Streams: their workers exit once drained.
  std::vector<std::shared_ptr<CUstream_st>> streams = ctx->streams;
  if (ctx->default_stream) streams.push_back(ctx->default_stream);
  for (const auto& st : streams) {
    {
      std::lock_guard<std::mutex> g(st->mu);
      st->destroyed = true;
    }
    st->cv.notify_all();
    s.streams.erase(st.get());
  }
  ctx->streams.clear();
  ctx->default_stream.reset();
  // Events.
  for (auto it = s.events.begin(); it != s.events.end();) {
    if (it->second->ctx == ctx) {
      it = s.events.erase(it);
    } else {
      ++it;
    }
  }
  // Modules and their functions.
  for (CUmod_st* m : std::vector<CUmod_st*>(s.modules.begin(), s.modules.end())) {
    if (m->ctx != ctx) continue;
    for (auto& kv : m->functions) s.functions.erase(kv.second);
    m->loaded = false;
    s.modules.erase(m);
  }
  if (ctx->active) uncharge(ctx->device, s.cfg.ctx_bytes);
  ctx->active = false;
}

namespace {

// Creates a (non-primary) context on dev and pushes it on this thread.
CUresult create_context(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~kCtxFlagsMask) != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (find_device(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (!charge(dev, s.cfg.ctx_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUctx_st* ctx = new CUctx_st();
  ctx->device = dev;
  ctx->primary = false;
  ctx->active = true;
  ctx->flags = flags;
  ctx->id = s.next_id++;
  s.contexts.insert(ctx);
  tls_ctx_stack.push_back(ctx);
  *pctx = ctx;
  return CUDA_SUCCESS;
}

// Drains ctx's streams (without the lock), then frees its resources -
// unless it is a primary context that was retained again meanwhile.
void drain_and_destroy(CUctx_st* ctx) {
  sync_context(ctx, /*blocking_only=*/false);
  std::lock_guard<std::mutex> g(S().mu);
  if (ctx->primary && find_device(ctx->device)->primary_refs > 0) return;
  destroy_context_resources_locked(ctx);
}

void remove_from_this_thread(CUctx_st* ctx) {
  tls_ctx_stack.erase(std::remove(tls_ctx_stack.begin(), tls_ctx_stack.end(), ctx),
                      tls_ctx_stack.end());
}

int device_attribute(CUdevice_attribute attrib, int ordinal) {
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + ordinal;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return ordinal;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32505856;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return 0;
    default: return 0;
  }
}

}  // namespace

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

// ===========================================================================
// Initialisation and version
// ===========================================================================
CUresult CUDAAPI cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  if (s.initialized.load(std::memory_order_acquire)) {
    // A fork()ed child of an initialised process cannot use the driver
    // (and must not touch the locks its parent's threads may have held).
    return (s.init_pid == ::getpid()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
  }
  std::lock_guard<std::mutex> g(s.mu);
  if (s.init_attempted) return s.init_result;
  s.init_attempted = true;
  s.cfg = fakegpu::read_config();
  if (s.cfg.devices == 0) {
    s.init_result = CUDA_ERROR_NO_DEVICE;
    return s.init_result;
  }
  for (int i = 0; i < s.cfg.devices; ++i) {
    auto d = std::make_unique<Device>();
    d->ordinal = i;
    fakegpu::device_uuid(s.cfg.uuid_seed, i, d->uuid);
    d->total = s.cfg.mem_bytes;
    std::string error;
    if (!d->file.open(s.cfg.dir, fakegpu::uuid_hex(d->uuid), &error)) {
      std::fprintf(stderr, "fake-cuda: cuInit fails: %s (FAKE_CUDA_DIR)\n",
                   error.c_str());
      s.devices.clear();
      s.init_result = CUDA_ERROR_OPERATING_SYSTEM;
      return s.init_result;
    }
    CUctx_st* primary = new CUctx_st();
    primary->device = i;
    primary->primary = true;
    primary->active = false;
    primary->id = s.next_id++;
    d->primary = primary;
    s.contexts.insert(primary);
    CUmemPoolHandle_st* pool = new CUmemPoolHandle_st();
    pool->device = i;
    pool->is_default = true;
    pool->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pool->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pool->props.location.id = i;
    d->default_pool = pool;
    d->current_pool = pool;
    s.pools.insert(pool);
    s.devices.push_back(std::move(d));
  }
  if (!s.cfg.trace_path.empty()) {
    s.trace_fd = ::open(s.cfg.trace_path.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (s.trace_fd < 0) {
      std::fprintf(stderr, "fake-cuda: cuInit fails: cannot open FAKE_CUDA_TRACE=%s: %s\n",
                   s.cfg.trace_path.c_str(), std::strerror(errno));
      s.init_result = CUDA_ERROR_OPERATING_SYSTEM;
      return s.init_result;
    }
  }
  s.init_pid = ::getpid();
  s.init_result = CUDA_SUCCESS;
  s.initialized.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  if (ppExportTable == nullptr || pExportTableId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ===========================================================================
// Devices
// ===========================================================================
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (find_device(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(S().devices.size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (find_device(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", "gshare fake GPU");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::memcpy(uuid->bytes, d->uuid, 16);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<size_t>(d->total);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t total = 0;
  CUresult rc = cuDeviceTotalMem_v2(&total, dev);
  if (rc == CUDA_SUCCESS) {
    *bytes = static_cast<unsigned int>(std::min<size_t>(total, UINT_MAX));
  }
  return rc;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (find_device(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (static_cast<int>(attrib) <= 0 ||
      static_cast<int>(attrib) >= static_cast<int>(CU_DEVICE_ATTRIBUTE_MAX)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pi = device_attribute(attrib, dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (find_device(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0", 0x18 + dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (find_device(dev) == nullptr || find_device(peerDev) == nullptr) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *canAccessPeer = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void* value) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (find_device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  return find_device(device) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// ===========================================================================
// Primary contexts
// ===========================================================================
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* ctx = d->primary;
  if (!ctx->active) {
    if (!charge(dev, s.cfg.ctx_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->active = true;
    ctx->flags = d->primary_flags;
  }
  ++d->primary_refs;
  *pctx = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  CUctx_st* ctx = nullptr;
  {
    std::lock_guard<std::mutex> g(s.mu);
    Device* d = find_device(dev);
    if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    if (d->primary_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--d->primary_refs > 0) return CUDA_SUCCESS;
    ctx = d->primary;
  }
  drain_and_destroy(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  CUctx_st* ctx = nullptr;
  {
    std::lock_guard<std::mutex> g(s.mu);
    Device* d = find_device(dev);
    if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    d->primary_refs = 0;
    ctx = d->primary;
    if (!ctx->active) return CUDA_SUCCESS;
  }
  drain_and_destroy(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *flags = d->primary_flags;
  *active = d->primary->active ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if ((flags & ~kCtxFlagsMask) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  d->primary_flags = flags;
  d->primary->flags = flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  // The legacy entry refuses to change an active primary context.
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  {
    std::lock_guard<std::mutex> g(S().mu);
    Device* d = find_device(dev);
    if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    if (d->primary->active) return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
  }
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// ===========================================================================
// Contexts
// ===========================================================================
CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return create_context(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return create_context(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray,
                                int numParams, unsigned int flags, CUdevice dev) {
  if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return create_context(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                                unsigned int flags, CUdevice dev) {
  (void)ctxCreateParams;  // execution affinity / CIG are not emulated
  return create_context(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> g(S().mu);
    if (S().contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;  // use PrimaryCtxRelease
  }
  drain_and_destroy(ctx);
  {
    std::lock_guard<std::mutex> g(S().mu);
    S().contexts.erase(ctx);  // the object is kept: stale handles stay invalid
  }
  remove_from_this_thread(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) {
    if (!tls_ctx_stack.empty()) tls_ctx_stack.pop_back();
    return CUDA_SUCCESS;
  }
  {
    std::lock_guard<std::mutex> g(S().mu);
    if (S().contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (tls_ctx_stack.empty()) {
    tls_ctx_stack.push_back(ctx);
  } else {
    tls_ctx_stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current_ctx_raw();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  {
    std::lock_guard<std::mutex> g(S().mu);
    if (S().contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  }
  tls_ctx_stack.push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (tls_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = tls_ctx_stack.back();
  tls_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUctx_st* c = nullptr;
  rc = resolve_ctx_locked(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  *device = c->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) { return cuCtxGetDevice_v2(device, nullptr); }

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  CUctx_st* c = nullptr;
  {
    std::lock_guard<std::mutex> g(S().mu);
    rc = resolve_ctx_locked(ctx, &c);
    if (rc != CUDA_SUCCESS) return rc;
  }
  sync_context(c, /*blocking_only=*/false);
  release_pool_memory(c->device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) { return cuCtxSynchronize_v2(nullptr); }

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUctx_st* c = nullptr;
  rc = resolve_ctx_locked(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  *version = c->api_version;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUctx_st* c = nullptr;
  rc = current_ctx_locked(&c);
  if (rc != CUDA_SUCCESS) return rc;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUctx_st* c = nullptr;
  rc = resolve_ctx_locked(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  *ctxId = c->id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

}  // extern "C"
