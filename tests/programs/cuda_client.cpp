// A scriptable CUDA driver client for the multi-process tests. It reaches
// the driver the three ways real programs do (docs/DESIGN.md, §3.1):
//   --load=gpa     dlopen("libcuda.so.1") + dlsym(cuGetProcAddress_v2), then
//                  every function through cuGetProcAddress, as cudart does
//   --load=dlsym   dlopen + dlsym of each exact ABI name, as Triton and ctypes do
//   --load=link    direct calls, linked against libcuda (cuda_client_linked)
// Commands come from the arguments, then (with --stdin) one per line on
// standard input. Each prints exactly one line, flushed, so a test can
// drive a client step by step:
//   init | alloc SIZE [NAME] | free NAME | pitch WIDTH HEIGHT [NAME] |
//   ipc NAME (cuIpcGetMemHandle; replies "ipc ok HANDLE_HEX") |
//   ipcopen HANDLE_HEX NAME (cuIpcOpenMemHandle) | ipcclose NAME |
//   put NAME WORD BYTES (cuMemsetD32 of BYTES/4 words, then a sync) |
//   peek NAME OFFSET (the 32-bit word at byte OFFSET: "peek WORD") |
//   managed SIZE [NAME] | async SIZE [NAME] | freeasync NAME | trim |
//   vmm SIZE [NAME] | vmmfree NAME | meminfo | totalmem | nvmlmem |
//   launch COUNT MICROS | sync | fill CHUNK | reset | fork | sleep SECONDS |
//   pid | release | lastiters | exit |
//   allocloop SIZE HOLD_MS GAP_MS   allocates SIZE, holds it HOLD_MS, frees it,
//       waits GAP_MS, and again until released: "allocloop ok ROUNDS" |
//   train ITERS KERNELS MICROS sync|copy|acopy|nosync|paced GAP_MICROS   a training-like
//       loop: each iteration launches KERNELS spin kernels, each a different
//       function (gshare_spin_0, _1, ...), of MICROS each; then syncs the
//       context (sync), reads 4 bytes back with cuMemcpyDtoH (copy, like a
//       loss read with cudaMemcpy), with cuMemcpyDtoHAsync into pageable
//       memory and a stream sync (acopy, as PyTorch's `.item()`: the copy
//       itself waits for the kernels) or neither, then spends GAP_MICROS on
//       the host; with paced, it spends GAP_MICROS on the host first and
//       then syncs (launches that keep pace with their kernels: the GPU
//       stays busy, the sync waits little). Replies
//       "train ok ITERATIONS ELAPSED_MS".
//   trainfor SECONDS KERNELS MICROS MODE GAP_MICROS   the same loop
//       for a wall-clock time instead of a count, or until released.
//   lastiters   the shortest and longest of the iterations that ended in
//       the last half second (at least the last 10) of the last train,
//       trainfor or memtrain loop, as the loop timed them (from one
//       iteration's start to the next's): "lastiters MIN_MS MAX_MS", or
//       "lastiters none". gshare publishes its latest iteration every
//       250 ms, from one of these.
//   memtrain ITERS P E CHUNKS KERNELS MICROS [SETUP_SYNCS [chunksync] [nosync] [firstgap] [temps] [pool]]
//       a training loop with memory: allocates P once (persistent) and
//       syncs SETUP_SYNCS times with nothing launched (a model's set-up
//       copies), then each iteration allocates E in CHUNKS equal pieces
//       (ephemeral), launches KERNELS spin kernels of MICROS, syncs the
//       context and frees the pieces. With chunksync, each piece has its
//       own kernels and sync, as a forward pass that reads a value back
//       holds its activations across syncs; with temps, each such sync
//       also allocates and frees 1 MiB first (the read-back value's
//       buffer). With nosync, each piece has its own kernels and nothing
//       ever syncs: the iteration ends with the frees. With firstgap, the
//       first iteration spends 300 ms on the host after each piece (a
//       first step's library set-up), launching nothing. With hostgap, each
//       iteration ends with 1.5 ms asleep on the host (a step bound by its
//       host work), and the loop ends early when released. With pool, the pieces come
//       from the device's stream-ordered pool (cuMemAllocAsync and
//       cuMemFreeAsync), which keeps all it frees (a release threshold of
//       UINT64_MAX, as PyTorch's cudaMallocAsync backend sets). Replies
//       "memtrain ok ITERATIONS ELAPSED_MS", or "memtrain err CODE at I".
//   pagetrain ITERS P PIECES KERNELS MICROS GAP_MS [E EPIECES]   a job
//       whose memory may be paged out while it waits: allocates P in PIECES
//       equal allocations, fills piece k with the 32-bit word pid * 64 + k,
//       then each iteration launches KERNELS spin kernels of MICROS, syncs,
//       checks the first, middle and last word of every piece, and spends
//       GAP_MS on the host. With E, each iteration first allocates E in
//       EPIECES pieces (ephemeral), fills piece j with pid * 64 + 32 + j and
//       launches the kernels and syncs after each, checks them all at the
//       iteration's end and frees them: a job switched out mid-iteration
//       is paged out with them live. At the end it checks every word of the
//       P pieces and frees.
//       With "@ITERS" it replies "pagetrain ready" once its P is filled and
//       starts its iterations when released (ELAPSED_MS counts from there).
//       Replies "pagetrain ok ITERATIONS ELAPSED_MS", "pagetrain bad PIECE
//       OFFSET GOT WANT at I" (data lost or mixed up), or "pagetrain err
//       CODE at I".
//   probe COUNT MICROS PERIOD_MS   a latency-critical loop: COUNT times, one
//       kernel of MICROS and a sync, PERIOD_MS apart. Replies
//       "probe ok MEDIAN_US MAX_US" (launch to sync return).
// SIZE accepts K/M/G suffixes (binary). Failures print "err <code>".
// Released: a command read from stdin that waits (trainfor, sleep) ends
// early, with its usual reply, as soon as the next line arrives there, so
// that a test holds a client busy exactly as long as it needs to, SECONDS
// being only the bound. The command `release` itself replies "release ok".
#include <cuda.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/spin_kernel.h"

namespace {

struct Api {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*primary_retain)(CUcontext*, CUdevice);
  CUresult (*primary_reset)(CUdevice);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*mem_alloc_pitch)(CUdeviceptr*, size_t*, size_t, size_t, unsigned);
  CUresult (*mem_alloc_managed)(CUdeviceptr*, size_t, unsigned);
  CUresult (*mem_alloc_async)(CUdeviceptr*, size_t, CUstream);
  CUresult (*mem_free_async)(CUdeviceptr, CUstream);
  CUresult (*device_get_mem_pool)(CUmemoryPool*, CUdevice);
  CUresult (*mem_pool_trim_to)(CUmemoryPool, size_t);
  CUresult (*mem_pool_set_attribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*mem_create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                         unsigned long long);
  CUresult (*mem_release)(CUmemGenericAllocationHandle);
  CUresult (*mem_address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*mem_address_free)(CUdeviceptr, size_t);
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*mem_unmap)(CUdeviceptr, size_t);
  CUresult (*mem_get_info)(size_t*, size_t*);
  CUresult (*device_total_mem)(size_t*, CUdevice);
  CUresult (*module_load_data)(CUmodule*, const void*);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**);
  CUresult (*ctx_synchronize)();
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*memset_d32)(CUdeviceptr, unsigned int, size_t);
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*ipc_get_mem_handle)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*ipc_open_mem_handle)(CUdeviceptr*, CUipcMemHandle, unsigned int);
  CUresult (*ipc_close_mem_handle)(CUdeviceptr);
};

Api g_api;
CUdevice g_device = 0;
CUmodule g_module = nullptr;
std::map<std::string, uint64_t> g_named;       // name -> pointer or handle
std::map<std::string, uint64_t> g_vmm_size;    // name -> mapped size
std::map<std::string, uint64_t> g_vmm_handle;  // name -> physical handle

template <class Fn>
void from_gpa(Fn* slot, const char* name) {
  using Gpa = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  static Gpa gpa = nullptr;
  if (!gpa) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { fprintf(stderr, "no libcuda.so.1: %s\n", dlerror()); exit(3); }
    gpa = reinterpret_cast<Gpa>(dlsym(h, "cuGetProcAddress_v2"));
    if (!gpa) { fprintf(stderr, "no cuGetProcAddress_v2\n"); exit(3); }
  }
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  // Version 12000: the ABI this client's prototypes have. (At 13000 the
  // driver hands out cuCtxSynchronize_v2, which takes a context.)
  gpa(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  *slot = reinterpret_cast<Fn>(p);
}

template <class Fn>
void from_dlsym(Fn* slot, const char* abi_name) {
  static void* h = nullptr;
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) { fprintf(stderr, "no libcuda.so.1: %s\n", dlerror()); exit(3); }
  *slot = reinterpret_cast<Fn>(dlsym(h, abi_name));
}

// Each row: API name (for cuGetProcAddress) and exact ABI name (for dlsym).
#define CLIENT_FUNCTIONS(X)                                        \
  X(init, "cuInit", "cuInit")                                      \
  X(device_get, "cuDeviceGet", "cuDeviceGet")                      \
  X(primary_retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain") \
  X(primary_reset, "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2") \
  X(ctx_set_current, "cuCtxSetCurrent", "cuCtxSetCurrent")         \
  X(mem_alloc, "cuMemAlloc", "cuMemAlloc_v2")                      \
  X(mem_free, "cuMemFree", "cuMemFree_v2")                         \
  X(mem_alloc_pitch, "cuMemAllocPitch", "cuMemAllocPitch_v2")      \
  X(mem_alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged")   \
  X(mem_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync")         \
  X(mem_free_async, "cuMemFreeAsync", "cuMemFreeAsync")            \
  X(device_get_mem_pool, "cuDeviceGetMemPool", "cuDeviceGetMemPool") \
  X(mem_pool_trim_to, "cuMemPoolTrimTo", "cuMemPoolTrimTo")        \
  X(mem_pool_set_attribute, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute") \
  X(memset_d32, "cuMemsetD32", "cuMemsetD32_v2")                   \
  X(mem_create, "cuMemCreate", "cuMemCreate")                      \
  X(mem_release, "cuMemRelease", "cuMemRelease")                   \
  X(mem_address_reserve, "cuMemAddressReserve", "cuMemAddressReserve") \
  X(mem_address_free, "cuMemAddressFree", "cuMemAddressFree")      \
  X(mem_map, "cuMemMap", "cuMemMap")                               \
  X(mem_unmap, "cuMemUnmap", "cuMemUnmap")                         \
  X(mem_get_info, "cuMemGetInfo", "cuMemGetInfo_v2")               \
  X(device_total_mem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2")   \
  X(module_load_data, "cuModuleLoadData", "cuModuleLoadData")      \
  X(module_get_function, "cuModuleGetFunction", "cuModuleGetFunction") \
  X(launch_kernel, "cuLaunchKernel", "cuLaunchKernel")             \
  X(ctx_synchronize, "cuCtxSynchronize", "cuCtxSynchronize")      \
  X(memcpy_dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2")                \
  X(memcpy_dtoh_async, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2") \
  X(stream_synchronize, "cuStreamSynchronize", "cuStreamSynchronize") \
  X(ipc_get_mem_handle, "cuIpcGetMemHandle", "cuIpcGetMemHandle")  \
  X(ipc_open_mem_handle, "cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2") \
  X(ipc_close_mem_handle, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle")

void load(const std::string& mode) {
  if (mode == "gpa") {
#define FROM_GPA(field, api, abi) from_gpa(&g_api.field, api);
    CLIENT_FUNCTIONS(FROM_GPA)
  } else if (mode == "dlsym") {
#define FROM_DLSYM(field, api, abi) from_dlsym(&g_api.field, abi);
    CLIENT_FUNCTIONS(FROM_DLSYM)
  } else if (mode == "link") {
#ifdef CLIENT_LINKED
    g_api = Api{cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxReset,
                cuCtxSetCurrent, cuMemAlloc, cuMemFree, cuMemAllocPitch, cuMemAllocManaged,
                cuMemAllocAsync, cuMemFreeAsync, cuDeviceGetMemPool, cuMemPoolTrimTo, cuMemPoolSetAttribute,
                cuMemCreate,
                cuMemRelease, cuMemAddressReserve, cuMemAddressFree, cuMemMap, cuMemUnmap,
                cuMemGetInfo, cuDeviceTotalMem, cuModuleLoadData, cuModuleGetFunction,
                cuLaunchKernel, cuCtxSynchronize, cuMemcpyDtoH};
#else
    fprintf(stderr, "--load=link needs cuda_client_linked\n");
    exit(2);
#endif
  } else {
    fprintf(stderr, "unknown --load=%s\n", mode.c_str());
    exit(2);
  }
}

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  switch (end && *end ? *end : 0) {
    case 'K': v *= 1024.0; break;
    case 'M': v *= 1024.0 * 1024; break;
    case 'G': v *= 1024.0 * 1024 * 1024; break;
  }
  return uint64_t(v);
}

std::string name_or(const std::vector<std::string>& args, size_t index) {
  static int counter = 0;
  return args.size() > index ? args[index] : "a" + std::to_string(counter++);
}


CUfunction spin_function(int index) {
  static std::map<int, CUfunction> functions;
  if (auto it = functions.find(index); it != functions.end()) return it->second;
  if (!g_module && g_api.module_load_data(&g_module, gshare::kSpinKernelPtx) != CUDA_SUCCESS)
    return nullptr;
  CUfunction f = nullptr;
  std::string name = "gshare_spin_" + std::to_string(index);
  if (g_api.module_get_function(&f, g_module, name.c_str()) != CUDA_SUCCESS) return nullptr;
  return functions[index] = f;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Where a release comes from: stdin while a command read from it runs
// (main reads stdin unbuffered, so that a line waiting there shows to
// poll), none for commands given as arguments.
int g_release_fd = -1;

// Waits up to `seconds` for a release; whether one came (or stdin ended).
bool released(double seconds = 0) {
  if (g_release_fd < 0) {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return false;
  }
  pollfd fd{g_release_fd, POLLIN, 0};
  return poll(&fd, 1, seconds > 0 ? int(seconds * 1000) : 0) > 0;
}

// The last loop's last iterations, as lastiters reports them.
struct LastIterations {
  std::deque<std::pair<double, double>> ended;  // (end, length) in seconds, the latest last
  double began = 0;                             // the running iteration's start, or 0
  void restart() {
    ended.clear();
    began = 0;
  }
  // An iteration starts (or the loop ends) now: the one before has ended.
  void next(double now) {
    if (began > 0) ended.emplace_back(now, now - began);
    while (ended.size() > 10 && ended.front().first < now - 0.5) ended.pop_front();
    began = now;
  }
} g_last_iterations;

// The loop behind train and trainfor. Stops after `iterations`, or at
// `until` (steady-clock seconds). Returns the iterations run, or -1.
long train_loop(long iterations, double until, int kernels, unsigned long long micros,
                const std::string& mode, long gap_us, CUresult* error) {
  static CUdeviceptr loss = 0;
  const bool copies = mode == "copy" || mode == "acopy";
  if (copies && !loss && (*error = g_api.mem_alloc(&loss, 4)) != CUDA_SUCCESS) return -1;
  unsigned long long ns = micros * 1000ull;
  void* params[] = {&ns};
  long done = 0;
  const bool releasable = until < 1e300;
  g_last_iterations.restart();
  for (; done < iterations && seconds_now() < until && !(releasable && released()); ++done) {
    g_last_iterations.next(seconds_now());
    for (int k = 0; k < kernels; ++k) {
      CUfunction f = spin_function(k);
      if (!f) return *error = CUDA_ERROR_NOT_FOUND, -1;
      if ((*error = g_api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)) != CUDA_SUCCESS)
        return -1;
    }
    float value;
    if (mode == "paced") {
      std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      if ((*error = g_api.ctx_synchronize()) != CUDA_SUCCESS) return -1;
      continue;
    }
    if (mode == "sync" && (*error = g_api.ctx_synchronize()) != CUDA_SUCCESS) return -1;
    if (mode == "copy" && (*error = g_api.memcpy_dtoh(&value, loss, sizeof value)) != CUDA_SUCCESS)
      return -1;
    if (mode == "acopy" && ((*error = g_api.memcpy_dtoh_async(&value, loss, sizeof value, nullptr)) != CUDA_SUCCESS ||
                            (*error = g_api.stream_synchronize(nullptr)) != CUDA_SUCCESS))
      return -1;
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
  }
  g_last_iterations.next(seconds_now());
  return done;
}

std::string run(const std::vector<std::string>& a) {
  std::ostringstream out;
  const std::string& cmd = a[0];
  auto result = [&](CUresult r) -> bool {
    if (r != CUDA_SUCCESS) out << cmd << " err " << int(r);
    return r == CUDA_SUCCESS;
  };
  if (cmd == "init") {
    CUcontext ctx;
    if (result(g_api.init(0)) && result(g_api.device_get(&g_device, 0)) &&
        result(g_api.primary_retain(&ctx, g_device)) && result(g_api.ctx_set_current(ctx)))
      out << "init ok";
  } else if (cmd == "alloc" || cmd == "managed") {
    uint64_t size = parse_size(a.at(1));
    std::string name = name_or(a, 2);
    CUdeviceptr p = 0;
    CUresult r = cmd == "alloc" ? g_api.mem_alloc(&p, size)
                                : g_api.mem_alloc_managed(&p, size, CU_MEM_ATTACH_GLOBAL);
    if (result(r)) {
      g_named[name] = p;
      out << cmd << " ok " << name;
    }
  } else if (cmd == "allocloop") {
    // allocloop SIZE HOLD_MS GAP_MS: allocate, hold, free, wait, until released.
    const uint64_t size = parse_size(a.at(1));
    const auto hold = std::chrono::milliseconds(std::stol(a.at(2)));
    const auto gap = std::chrono::milliseconds(std::stol(a.at(3)));
    long rounds = 0;
    for (; !released(); ++rounds) {
      CUdeviceptr p = 0;
      if (!result(g_api.mem_alloc(&p, size))) return out.str();
      std::this_thread::sleep_for(hold);
      if (!result(g_api.mem_free(p))) return out.str();
      std::this_thread::sleep_for(gap);
    }
    out << "allocloop ok " << rounds;
  } else if (cmd == "pitch") {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    std::string name = name_or(a, 3);
    if (result(g_api.mem_alloc_pitch(&p, &pitch, parse_size(a.at(1)), parse_size(a.at(2)), 4))) {
      g_named[name] = p;
      out << "pitch ok " << name << " " << pitch;
    }
  } else if (cmd == "free") {
    if (result(g_api.mem_free(g_named.at(a.at(1))))) out << "free ok";
    g_named.erase(a.at(1));
  } else if (cmd == "ipc") {
    CUipcMemHandle handle;
    if (result(g_api.ipc_get_mem_handle(&handle, g_named.at(a.at(1))))) {
      out << "ipc ok ";
      for (unsigned char c : handle.reserved) out << "0123456789abcdef"[c >> 4] << "0123456789abcdef"[c & 15];
    }
  } else if (cmd == "ipcopen") {
    CUipcMemHandle handle{};
    const std::string& hex = a.at(1);
    for (size_t i = 0; i < sizeof handle.reserved && 2 * i + 1 < hex.size(); ++i)
      handle.reserved[i] = char(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    CUdeviceptr p = 0;
    if (result(g_api.ipc_open_mem_handle(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))) {
      g_named[a.at(2)] = p;
      out << "ipcopen ok " << a.at(2);
    }
  } else if (cmd == "ipcclose") {
    if (result(g_api.ipc_close_mem_handle(g_named.at(a.at(1))))) out << "ipcclose ok";
    g_named.erase(a.at(1));
  } else if (cmd == "put") {
    if (result(g_api.memset_d32(g_named.at(a.at(1)), unsigned(std::stoul(a.at(2), nullptr, 0)),
                                parse_size(a.at(3)) / 4)) &&
        result(g_api.ctx_synchronize()))
      out << "put ok";
  } else if (cmd == "peek") {
    uint32_t word = 0;
    if (result(g_api.memcpy_dtoh(&word, g_named.at(a.at(1)) + parse_size(a.at(2)), sizeof word)))
      out << "peek " << word;
  } else if (cmd == "async") {
    CUdeviceptr p = 0;
    std::string name = name_or(a, 2);
    if (result(g_api.mem_alloc_async(&p, parse_size(a.at(1)), nullptr))) {
      g_named[name] = p;
      out << "async ok " << name;
    }
  } else if (cmd == "freeasync") {
    if (result(g_api.mem_free_async(g_named.at(a.at(1)), nullptr))) out << "freeasync ok";
    g_named.erase(a.at(1));
  } else if (cmd == "trim") {
    CUmemoryPool pool;
    if (result(g_api.device_get_mem_pool(&pool, g_device)) && result(g_api.ctx_synchronize()) &&
        result(g_api.mem_pool_trim_to(pool, 0)))
      out << "trim ok";
  } else if (cmd == "vmm") {
    uint64_t size = parse_size(a.at(1));
    std::string name = name_or(a, 2);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g_device;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    if (result(g_api.mem_create(&h, size, &prop, 0)) &&
        result(g_api.mem_address_reserve(&va, size, 0, 0, 0)) &&
        result(g_api.mem_map(va, size, 0, h, 0))) {
      // Release the handle right away, as NCCL does: the mapping keeps it.
      if (result(g_api.mem_release(h))) {
        g_named[name] = va;
        g_vmm_size[name] = size;
        out << "vmm ok " << name;
      }
    }
  } else if (cmd == "vmmfree") {
    const std::string& name = a.at(1);
    if (result(g_api.mem_unmap(g_named.at(name), g_vmm_size.at(name))) &&
        result(g_api.mem_address_free(g_named.at(name), g_vmm_size.at(name))))
      out << "vmmfree ok";
  } else if (cmd == "meminfo") {
    size_t free_bytes = 0, total = 0;
    if (result(g_api.mem_get_info(&free_bytes, &total)))
      out << "meminfo " << free_bytes << " " << total;
  } else if (cmd == "totalmem") {
    size_t total = 0;
    if (result(g_api.device_total_mem(&total, g_device))) out << "totalmem " << total;
  } else if (cmd == "nvmlmem") {
    struct { unsigned long long total, free, used; } m{};
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    using Init = int (*)();
    using ByIndex = int (*)(unsigned, void**);
    using MemInfo = int (*)(void*, void*);
    void* dev = nullptr;
    int r = -1;
    if (h) {
      auto init = reinterpret_cast<Init>(dlsym(h, "nvmlInit_v2"));
      auto by_index = reinterpret_cast<ByIndex>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
      auto mem_info = reinterpret_cast<MemInfo>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
      if (init && by_index && mem_info && init() == 0 && by_index(0, &dev) == 0)
        r = mem_info(dev, &m);
    }
    if (r == 0) out << "nvmlmem " << m.free << " " << m.total << " " << m.used;
    else out << "nvmlmem err " << r;
  } else if (cmd == "launch") {
    if (!g_module && !result(g_api.module_load_data(&g_module, gshare::kSpinKernelPtx))) return out.str();
    CUfunction f;
    if (!result(g_api.module_get_function(&f, g_module, gshare::kSpinKernelName))) return out.str();
    int count = std::stoi(a.at(1));
    unsigned long long ns = std::stoull(a.at(2)) * 1000ull;
    void* params[] = {&ns};
    for (int i = 0; i < count; ++i)
      if (!result(g_api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)))
        return out.str();
    out << "launch ok " << count;
  } else if (cmd == "train" || cmd == "trainfor") {
    double start = seconds_now();
    long iterations = cmd == "train" ? std::stol(a.at(1)) : LONG_MAX;
    double until = cmd == "trainfor" ? start + std::stod(a.at(1)) : 1e300;
    CUresult error = CUDA_SUCCESS;
    long done = train_loop(iterations, until, std::stoi(a.at(2)), std::stoull(a.at(3)),
                           a.at(4), std::stol(a.at(5)), &error);
    if (done < 0) {
      result(error);
      return out.str();
    }
    out << "train ok " << done << " " << long((seconds_now() - start) * 1000);
  } else if (cmd == "memtrain") {
    double start = seconds_now();
    long iterations = std::stol(a.at(1));
    uint64_t persistent = parse_size(a.at(2)), ephemeral = parse_size(a.at(3));
    int chunks = std::max(1, std::stoi(a.at(4)));
    int kernels = std::stoi(a.at(5));
    unsigned long long ns = std::stoull(a.at(6)) * 1000ull;
    void* params[] = {&ns};
    int setup_syncs = a.size() > 7 ? std::stoi(a.at(7)) : 0;
    bool chunk_sync = std::find(a.begin() + std::min<size_t>(a.size(), 8), a.end(), "chunksync") != a.end();
    bool from_pool = std::find(a.begin() + std::min<size_t>(a.size(), 8), a.end(), "pool") != a.end();
    bool temps = std::find(a.begin() + std::min<size_t>(a.size(), 8), a.end(), "temps") != a.end();
    bool no_sync = std::find(a.begin() + std::min<size_t>(a.size(), 8), a.end(), "nosync") != a.end();
    if (no_sync) chunk_sync = true;
    bool first_gap = std::find(a.begin() + std::min<size_t>(a.size(), 8), a.end(), "firstgap") != a.end();
    bool host_gap = std::find(a.begin() + std::min<size_t>(a.size(), 8), a.end(), "hostgap") != a.end();
    CUdeviceptr weights = 0;
    if (!result(g_api.mem_alloc(&weights, persistent))) return out.str();
    if (from_pool) {
      CUmemoryPool pool = nullptr;
      cuuint64_t keep_all = UINT64_MAX;
      if (!result(g_api.device_get_mem_pool(&pool, g_device)) ||
          !result(g_api.mem_pool_set_attribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all)))
        return out.str();
    }
    auto allocate_piece = [&](CUdeviceptr* p, size_t bytes) {
      return from_pool ? g_api.mem_alloc_async(p, bytes, nullptr) : g_api.mem_alloc(p, bytes);
    };
    auto free_piece = [&](CUdeviceptr p) { return from_pool ? g_api.mem_free_async(p, nullptr) : g_api.mem_free(p); };
    for (int i = 0; i < setup_syncs; ++i)
      if (!result(g_api.ctx_synchronize())) return out.str();
    std::vector<CUdeviceptr> pieces(size_t(chunks), 0);
    auto run_kernels = [&] {
      CUresult r = CUDA_SUCCESS;
      for (int k = 0; k < kernels && r == CUDA_SUCCESS; ++k)
        r = g_api.launch_kernel(spin_function(k), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
      return r == CUDA_SUCCESS && !no_sync ? g_api.ctx_synchronize() : r;
    };
    g_last_iterations.restart();
    long i = 0;
    for (; i < iterations && !(host_gap && released()); ++i) {
      g_last_iterations.next(seconds_now());
      CUresult r = CUDA_SUCCESS;
      for (int c = 0; c < chunks && r == CUDA_SUCCESS; ++c) {
        r = allocate_piece(&pieces[c], ephemeral / chunks);
        if (r == CUDA_SUCCESS && chunk_sync && temps) {
          CUdeviceptr temp = 0;
          r = g_api.mem_alloc(&temp, 1 << 20);
          if (r == CUDA_SUCCESS) r = g_api.mem_free(temp);
        }
        if (r == CUDA_SUCCESS && chunk_sync) r = run_kernels();
        if (first_gap && i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
      if (r == CUDA_SUCCESS && !chunk_sync) r = run_kernels();
      for (CUdeviceptr& p : pieces) {
        if (p) free_piece(p);
        p = 0;
      }
      if (r != CUDA_SUCCESS) {
        g_api.mem_free(weights);
        out << "memtrain err " << int(r) << " at " << i;
        return out.str();
      }
      if (host_gap) std::this_thread::sleep_for(std::chrono::microseconds(1500));
    }
    g_last_iterations.next(seconds_now());
    g_api.mem_free(weights);
    out << "memtrain ok " << i << " " << long((seconds_now() - start) * 1000);
  } else if (cmd == "pagetrain") {
    double start = seconds_now();
    // "@ITERS": set up, say so, and start the steps only when released,
    // so that several jobs' steps start together.
    const bool barrier = a.at(1).rfind('@', 0) == 0;
    long iterations = std::stol(a.at(1).substr(barrier ? 1 : 0));
    uint64_t total = parse_size(a.at(2));
    int count = std::max(1, std::stoi(a.at(3)));
    int kernels = std::stoi(a.at(4));
    unsigned long long ns = std::stoull(a.at(5)) * 1000ull;
    long gap_ms = std::stol(a.at(6));
    void* params[] = {&ns};
    const uint64_t piece = total / uint64_t(count) / 4 * 4;
    std::vector<CUdeviceptr> pieces(size_t(count), 0);
    // getpid() once: the final check compares every word against it.
    const uint32_t pid_word = uint32_t(getpid()) * 64u;
    auto want = [pid_word](int k) { return pid_word + uint32_t(k); };
    auto fail = [&](const std::string& what, long at) {
      for (CUdeviceptr p : pieces)
        if (p) g_api.mem_free(p);
      out << "pagetrain " << what << " at " << at;
      return out.str();
    };
    for (int k = 0; k < count; ++k) {
      CUresult r = g_api.mem_alloc(&pieces[k], piece);
      if (r == CUDA_SUCCESS) r = g_api.memset_d32(pieces[k], want(k), piece / 4);
      if (r != CUDA_SUCCESS) return fail("err " + std::to_string(int(r)), -1);
    }
    if (barrier) {
      printf("pagetrain ready\n");
      fflush(stdout);
      released(600);
      start = seconds_now();
    }
    // Checks words of piece k at `offsets` (in words); "" if all are right.
    auto check = [&](int k, const std::vector<uint64_t>& offsets) -> std::string {
      for (uint64_t w : offsets) {
        uint32_t got = 0;
        CUresult r = g_api.memcpy_dtoh(&got, pieces[k] + w * 4, 4);
        if (r != CUDA_SUCCESS) return "err " + std::to_string(int(r));
        if (got != want(k))
          return "bad " + std::to_string(k) + " " + std::to_string(w) + " " + std::to_string(got) +
                 " " + std::to_string(want(k));
      }
      return "";
    };
    const uint64_t words = piece / 4;
    const uint64_t ephemeral = a.size() > 8 ? parse_size(a.at(7)) : 0;
    const int ephemeral_count = a.size() > 8 ? std::max(1, std::stoi(a.at(8))) : 0;
    const uint64_t ephemeral_piece = ephemeral_count ? ephemeral / uint64_t(ephemeral_count) / 4 * 4 : 0;
    auto run_kernels = [&] {
      CUresult r = CUDA_SUCCESS;
      for (int k = 0; k < kernels && r == CUDA_SUCCESS; ++k)
        r = g_api.launch_kernel(spin_function(k), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
      return r == CUDA_SUCCESS ? g_api.ctx_synchronize() : r;
    };
    for (long i = 0; i < iterations; ++i) {
      // The step's pieces: allocated, filled and computed on one by one.
      std::vector<CUdeviceptr> step(size_t(ephemeral_count), 0);
      auto free_step = [&] {
        for (CUdeviceptr p : step)
          if (p) g_api.mem_free(p);
      };
      for (int j = 0; j < ephemeral_count; ++j) {
        CUresult r = g_api.mem_alloc(&step[j], ephemeral_piece);
        if (r == CUDA_SUCCESS) r = g_api.memset_d32(step[j], want(32 + j), ephemeral_piece / 4);
        if (r == CUDA_SUCCESS) r = run_kernels();
        if (r != CUDA_SUCCESS) {
          free_step();
          return fail("err " + std::to_string(int(r)), i);
        }
      }
      for (int j = 0; j < ephemeral_count; ++j) {
        const uint64_t n = ephemeral_piece / 4;
        for (uint64_t w : {uint64_t(0), n / 2, n - 1}) {
          uint32_t got = 0;
          CUresult r = g_api.memcpy_dtoh(&got, step[j] + w * 4, 4);
          if (r != CUDA_SUCCESS || got != want(32 + j)) {
            free_step();
            return fail(r != CUDA_SUCCESS ? "err " + std::to_string(int(r))
                                          : "bad step " + std::to_string(j) + " " + std::to_string(w) +
                                                " " + std::to_string(got) + " " + std::to_string(want(32 + j)),
                        i);
          }
        }
      }
      free_step();
      CUresult r = run_kernels();
      if (r != CUDA_SUCCESS) return fail("err " + std::to_string(int(r)), i);
      for (int k = 0; k < count; ++k)
        if (std::string bad = check(k, {0, words / 2, words - 1}); !bad.empty()) return fail(bad, i);
      if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
    // Every word, 1 MiB at a time.
    std::vector<uint32_t> buffer(1 << 18);
    for (int k = 0; k < count; ++k) {
      for (uint64_t w = 0; w < words; w += buffer.size()) {
        uint64_t n = std::min<uint64_t>(buffer.size(), words - w);
        CUresult r = g_api.memcpy_dtoh(buffer.data(), pieces[k] + w * 4, n * 4);
        if (r != CUDA_SUCCESS) return fail("err " + std::to_string(int(r)), iterations);
        for (uint64_t j = 0; j < n; ++j)
          if (buffer[j] != want(k))
            return fail("bad " + std::to_string(k) + " " + std::to_string(w + j) + " " +
                            std::to_string(buffer[j]) + " " + std::to_string(want(k)),
                        iterations);
      }
    }
    for (CUdeviceptr& p : pieces) {
      g_api.mem_free(p);
      p = 0;
    }
    out << "pagetrain ok " << iterations << " " << long((seconds_now() - start) * 1000);
  } else if (cmd == "probe") {
    int count = std::stoi(a.at(1));
    unsigned long long ns = std::stoull(a.at(2)) * 1000ull;
    double period = std::stod(a.at(3)) / 1000;
    void* params[] = {&ns};
    std::vector<double> latencies;
    for (int i = 0; i < count; ++i) {
      double begin = seconds_now();
      CUfunction f = spin_function(100);
      if (!f || !result(g_api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)) ||
          !result(g_api.ctx_synchronize()))
        return out.str();
      double end = seconds_now();
      latencies.push_back((end - begin) * 1e6);
      if (end < begin + period) std::this_thread::sleep_for(std::chrono::duration<double>(begin + period - end));
    }
    std::sort(latencies.begin(), latencies.end());
    out << "probe ok " << long(latencies[latencies.size() / 2]) << " " << long(latencies.back());
  } else if (cmd == "sync") {
    if (result(g_api.ctx_synchronize())) out << "sync ok";
  } else if (cmd == "fill") {
    uint64_t chunk = parse_size(a.at(1)), total = 0;
    CUdeviceptr p;
    CUresult r;
    while ((r = g_api.mem_alloc(&p, chunk)) == CUDA_SUCCESS) {
      total += chunk;
      g_named["fill" + std::to_string(total)] = p;
    }
    out << "fill " << total << " stopped " << int(r);
  } else if (cmd == "reset") {
    g_named.clear();
    if (result(g_api.primary_reset(g_device))) out << "reset ok";
  } else if (cmd == "sleep") {
    for (double until = seconds_now() + std::stod(a.at(1)), left; (left = until - seconds_now()) > 0;)
      if (released(left)) break;
    out << "sleep ok";
  } else if (cmd == "release") {
    out << "release ok";
  } else if (cmd == "lastiters") {
    if (g_last_iterations.ended.empty()) {
      out << "lastiters none";
    } else {
      double shortest = 1e300, longest = 0;
      for (const auto& [end, length] : g_last_iterations.ended) {
        shortest = std::min(shortest, length);
        longest = std::max(longest, length);
      }
      out << "lastiters " << shortest * 1e3 << " " << longest * 1e3;
    }
  } else if (cmd == "fork") {
    // Like a DataLoader worker: a child that never touches CUDA and exits
    // normally (closing every descriptor it inherited, running the
    // preload's exit handlers); the parent has it reaped before it replies.
    pid_t child = fork();
    if (child == 0) exit(0);
    int status = 0;
    waitpid(child, &status, 0);
    out << "fork ok " << WEXITSTATUS(status);
  } else if (cmd == "pid") {
    out << "pid " << getpid();
  } else if (cmd == "exit") {
    exit(0);
  } else {
    out << "unknown " << cmd;
  }
  return out.str();
}

void run_line(const std::string& line) {
  std::istringstream words(line);
  std::vector<std::string> args;
  for (std::string w; words >> w;) args.push_back(w);
  if (args.empty()) return;
  std::string reply;
  try {
    reply = run(args);
  } catch (const std::exception& e) {
    reply = args[0] + " bad arguments";
  }
  printf("%s\n", reply.c_str());
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "gpa";
  bool from_stdin = false;
  std::vector<std::string> commands;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--load=", 0) == 0) mode = arg.substr(7);
    else if (arg == "--stdin") from_stdin = true;
    else commands.push_back(arg);
  }
  load(mode);
  for (const std::string& c : commands) run_line(c);
  if (from_stdin) {
    g_release_fd = 0;
    std::string line;
    for (char c; read(0, &c, 1) == 1;) {
      if (c != '\n') {
        line += c;
        continue;
      }
      run_line(line);
      line.clear();
    }
    if (!line.empty()) run_line(line);
  }
  return 0;
}
