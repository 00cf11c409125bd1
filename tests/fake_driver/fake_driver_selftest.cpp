// Self-test of the fake CUDA driver and fake NVML. It links the fake
// libcuda.so.1 / libnvidia-ml.so.1 directly and runs in a private
// FAKE_CUDA_DIR with its own UUID seed, so it never shares a fake device with
// another test. Some checks run in child processes (the program re-executes
// itself with a "child" argument). Exits non-zero if any check fails.
//
//   fake_driver_selftest            run every check
//   fake_driver_selftest hold N     (child) allocate N bytes on device 0,
//                                   print the CUresult, wait for stdin EOF
//   fake_driver_selftest init       (child) print cuInit's result and the
//                                   total memory of device 0
//   fake_driver_selftest nvml       (child) print NVML's used bytes and
//                                   process count of device 0 (no cuInit)
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_common.h"
#include "nvml_types.h"

// Per-thread-stream entry points: cuda.h declares them only for the driver.
extern "C" CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams, void** extra);
extern "C" CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph);
extern "C" CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

namespace {

int g_checks = 0;
int g_failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    ++g_checks;                                                              \
    if (!(cond)) {                                                           \
      ++g_failures;                                                          \
      std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                        \
  } while (0)

#define CHECK_RC(expr, want)                                                   \
  do {                                                                         \
    ++g_checks;                                                                \
    const int rc_ = static_cast<int>(expr);                                    \
    if (rc_ != static_cast<int>(want)) {                                       \
      ++g_failures;                                                            \
      std::fprintf(stderr, "FAIL %s:%d: %s returned %d, want %d\n", __FILE__, \
                   __LINE__, #expr, rc_, static_cast<int>(want));              \
    }                                                                          \
  } while (0)

#define OK(expr) CHECK_RC(expr, CUDA_SUCCESS)

constexpr size_t MiB = 1ULL << 20;
constexpr size_t kMem = 1024 * MiB;      // FAKE_CUDA_MEM for this test
constexpr size_t kCtxBytes = 64 * MiB;   // FAKE_CUDA_CTX_BYTES (the default)
constexpr size_t kChunk = 32 * MiB;      // FAKE_CUDA_POOL_CHUNK (the default)

std::string g_dir;
std::string g_trace;

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
}

void* libcuda() {
  static void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

void* real(const char* name) { return dlsym(libcuda(), name); }

size_t free_mem() {
  size_t f = 0, t = 0;
  if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS) return 0;
  return f;
}

// Bytes the fake NVML says device `index` has in use (all processes).
unsigned long long nvml_used(unsigned int index) {
  nvmlDevice_t d = nullptr;
  nvmlMemory_t m{};
  if (nvmlDeviceGetHandleByIndex_v2(index, &d) != NVML_SUCCESS) return ~0ULL;
  if (nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS) return ~0ULL;
  return m.used;
}

struct TraceLine {
  int pid = 0;
  uint64_t start = 0, end = 0;
  std::string name;
};

std::vector<TraceLine> read_trace() {
  std::vector<TraceLine> out;
  std::ifstream in(g_trace);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    TraceLine t;
    std::string extra;
    if (!(ls >> t.pid >> t.start >> t.end >> t.name) || (ls >> extra)) {
      t.pid = -1;  // malformed
    }
    out.push_back(t);
  }
  return out;
}

std::vector<TraceLine> trace_of(const std::string& name) {
  std::vector<TraceLine> out;
  for (const TraceLine& t : read_trace()) {
    if (t.name == name && t.pid == getpid()) out.push_back(t);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------
struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // child's stdout
  int in_fd = -1;   // child's stdin (closing it lets the child exit)
};

Child spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  static std::string self = "/proc/self/exe";
  argv.push_back(const_cast<char*>("fake_driver_selftest"));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int out[2], in[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(in, O_CLOEXEC) != 0) return {};
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return {};
  exe[n] = '\0';
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(out[1], 1);
    dup2(in[0], 0);
    execv(exe, argv.data());
    _exit(127);
  }
  close(out[1]);
  close(in[0]);
  c.out_fd = out[0];
  c.in_fd = in[1];
  return c;
}

// One line from fd, waiting at most timeout_ms.
std::string read_line(int fd, int timeout_ms) {
  std::string line;
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ULL;
  while (now_ns() < deadline) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char ch;
    if (read(fd, &ch, 1) != 1) break;
    if (ch == '\n') return line;
    line += ch;
  }
  return line;
}

int child_hold(size_t bytes) {
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  CUcontext ctx = nullptr;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) return 3;
  cuCtxSetCurrent(ctx);
  CUdeviceptr p = 0;
  CUresult rc = cuMemAlloc(&p, bytes);
  std::printf("%d\n", static_cast<int>(rc));
  std::fflush(stdout);
  char ch;
  while (read(0, &ch, 1) > 0) {
  }
  return 0;
}

int child_init() {
  CUresult rc = cuInit(0);
  size_t total = 0;
  if (rc == CUDA_SUCCESS) cuDeviceTotalMem(&total, 0);
  std::printf("%d %zu\n", static_cast<int>(rc), total);
  return 0;
}

// Times copies of 64 MiB between host and device, and one within the
// device: "<HtoD ms> <DtoH ms> <async HtoD + sync ms> <DtoD ms>".
int child_copy() {
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  CUcontext ctx = nullptr;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return 3;
  const size_t n = 16 * MiB;
  std::vector<char> host(n, 7);
  CUdeviceptr a = 0, b = 0;
  if (cuMemAlloc(&a, n) != CUDA_SUCCESS || cuMemAlloc(&b, n) != CUDA_SUCCESS) return 4;
  auto ms = [](uint64_t t0) { return double(now_ns() - t0) / 1e6; };
  uint64_t t0 = now_ns();
  if (cuMemcpyHtoD(a, host.data(), n) != CUDA_SUCCESS) return 5;
  const double htod = ms(t0);
  t0 = now_ns();
  if (cuMemcpyDtoH(host.data(), a, n) != CUDA_SUCCESS) return 6;
  const double dtoh = ms(t0);
  t0 = now_ns();
  if (cuMemcpyHtoDAsync(b, host.data(), n, nullptr) != CUDA_SUCCESS) return 7;
  if (cuStreamSynchronize(nullptr) != CUDA_SUCCESS) return 8;
  const double async = ms(t0);
  t0 = now_ns();
  if (cuMemcpyDtoD(b, a, n) != CUDA_SUCCESS) return 9;
  std::printf("%.1f %.1f %.1f %.1f\n", htod, dtoh, async, ms(t0));
  return 0;
}

int child_nvml() {
  if (nvmlInit_v2() != NVML_SUCCESS) return 2;
  nvmlDevice_t d = nullptr;
  nvmlMemory_t m{};
  unsigned int count = 0;
  if (nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 3;
  if (nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS) return 4;
  nvmlDeviceGetComputeRunningProcesses_v3(d, &count, nullptr);
  std::printf("%llu %u\n", m.used, count);
  nvmlShutdown();
  return 0;
}

// Runs a child with one environment variable changed; returns its first line.
std::string run_child(const std::vector<std::string>& args, const char* var, const char* value) {
  const char* old = std::getenv(var);
  const std::string saved = old != nullptr ? old : "";
  if (value != nullptr) {
    setenv(var, value, 1);
  } else {
    unsetenv(var);
  }
  Child c = spawn(args);
  if (old != nullptr) {
    setenv(var, saved.c_str(), 1);
  } else {
    unsetenv(var);
  }
  std::string line = read_line(c.out_fd, 10000);
  close(c.in_fd);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.out_fd);
  return line;
}

// ---------------------------------------------------------------------------
// The -Bsymbolic check: this program interposes one driver entry point, the
// way an LD_PRELOAD library would. The fake driver must neither call it
// internally nor hand it out from cuGetProcAddress.
// ---------------------------------------------------------------------------
std::atomic<int> g_interposed_calls{0};

}  // namespace

extern "C" CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  ++g_interposed_calls;
  using Fn = CUresult (*)(size_t*, CUdevice);
  static Fn next = reinterpret_cast<Fn>(real("cuDeviceTotalMem_v2"));
  return next != nullptr ? next(bytes, dev) : CUDA_ERROR_UNKNOWN;
}

namespace {

// ===========================================================================
// Tests
// ===========================================================================
void test_before_init() {
  CUdeviceptr p = 0;
  int n = 0;
  CHECK_RC(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
  CHECK_RC(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CHECK_RC(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
  int v = 0;
  OK(cuDriverGetVersion(&v));
  CHECK(v == 13000);
  const char* s = nullptr;
  OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  CHECK(s != nullptr && std::strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
  OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  CHECK(s != nullptr && std::strcmp(s, "out of memory") == 0);
  CHECK_RC(cuGetErrorString(static_cast<CUresult>(12345), &s), CUDA_ERROR_INVALID_VALUE);
  CHECK_RC(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

void test_config() {
  uint64_t v = 0;
  CHECK(fakegpu::parse_size("1073741824", &v) && v == 1073741824ULL);
  CHECK(fakegpu::parse_size("512MiB", &v) && v == 512 * MiB);
  CHECK(fakegpu::parse_size("8GiB", &v) && v == 8ULL << 30);
  CHECK(fakegpu::parse_size("4G", &v) && v == 4ULL << 30);
  CHECK(fakegpu::parse_size("64k", &v) && v == 64ULL << 10);
  CHECK(!fakegpu::parse_size("12x", &v));
  CHECK(!fakegpu::parse_size("", &v));
  CHECK(!fakegpu::parse_size("-5", &v));
  CHECK(!fakegpu::parse_size("99999999999T", &v));
  // The environment, seen by fresh processes.
  CHECK(run_child({"init"}, "FAKE_CUDA_DEVICES", "0") ==
        std::to_string(CUDA_ERROR_NO_DEVICE) + " 0");
  CHECK(run_child({"init"}, "FAKE_CUDA_MEM", "3GiB") ==
        "0 " + std::to_string(3ULL << 30));
  CHECK(run_child({"init"}, "FAKE_CUDA_MEM", "lots") ==  // bad value: default
        "0 " + std::to_string(8ULL << 30));
  CHECK(run_child({"init"}, "FAKE_CUDA_DIR", "/proc/nonexistent") ==
        std::to_string(CUDA_ERROR_OPERATING_SYSTEM) + " 0");
  // Copies across the link take their bytes over FAKE_CUDA_COPY_MBPS: 16 MiB
  // at 8 MB/s is 2097 ms; within the device they take no such time, nor
  // does any copy without the variable. The bounds are loose enough for a
  // busy machine: beside CI's other test entries an untimed copy of 64 MiB
  // has taken over 900 ms (the process starved of CPU).
  double htod = 0, dtoh = 0, async = 0, dtod = 0;
  const std::string timed = run_child({"copy"}, "FAKE_CUDA_COPY_MBPS", "8");
  CHECK(std::sscanf(timed.c_str(), "%lf %lf %lf %lf", &htod, &dtoh, &async, &dtod) == 4);
  CHECK(htod >= 2090);
  CHECK(dtoh >= 2090);
  CHECK(async >= 2090);
  CHECK(dtod < 1500);
  CHECK(std::sscanf(run_child({"copy"}, "FAKE_CUDA_COPY_MBPS", nullptr).c_str(), "%lf %lf %lf %lf",
                    &htod, &dtoh, &async, &dtod) == 4);
  CHECK(htod < 1500);
  CHECK(dtoh < 1500);
}

void test_devices() {
  int n = 0;
  OK(cuDeviceGetCount(&n));
  CHECK(n == 2);
  CUdevice d = -1;
  OK(cuDeviceGet(&d, 1));
  CHECK(d == 1);
  CHECK_RC(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
  CHECK_RC(cuDeviceGet(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  char name[64];
  OK(cuDeviceGetName(name, sizeof(name), 0));
  CHECK(std::strcmp(name, "gshare fake GPU") == 0);
  CUuuid u0, u1;
  OK(cuDeviceGetUuid(&u0, 0));
  OK(cuDeviceGetUuid(&u1, 1));
  CHECK(std::memcmp(u0.bytes, u1.bytes, 16) != 0);
  unsigned char expect[16];
  fakegpu::device_uuid(std::getenv("FAKE_CUDA_UUID_SEED"), 0, expect);
  CHECK(std::memcmp(u0.bytes, expect, 16) == 0);
  // Device 0 of the default seed has a fixed, documented UUID.
  fakegpu::device_uuid("fake", 0, expect);
  CHECK(fakegpu::uuid_string(expect) == "GPU-e9ce5372-27b0-f740-35a7-5b578f29e37e");
  size_t total = 0;
  OK(cuDeviceTotalMem(&total, 0));
  CHECK(total == kMem);
  int v = 0;
  OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  CHECK(v == 9);
  OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  CHECK(v == 132);
  OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
  CHECK(v == 32);
  CHECK_RC(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  char bus[32];
  OK(cuDeviceGetPCIBusId(bus, sizeof(bus), 1));
  CHECK(std::strcmp(bus, "0000:19:00.0") == 0);
  // Each device has its shared file in FAKE_CUDA_DIR.
  struct stat sb;
  CHECK(stat((g_dir + "/fakecuda-" + fakegpu::uuid_hex(reinterpret_cast<unsigned char*>(
                                          u1.bytes))).c_str(),
             &sb) == 0);
}

void test_contexts() {
  CUdeviceptr p = 0;
  CUcontext cur = reinterpret_cast<CUcontext>(1);
  OK(cuCtxGetCurrent(&cur));
  CHECK(cur == nullptr);
  CHECK_RC(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  CHECK(nvml_used(0) == 0);

  // Primary context: charged once, refcounted.
  CUcontext prim = nullptr, prim2 = nullptr;
  OK(cuDevicePrimaryCtxRetain(&prim, 0));
  CHECK(nvml_used(0) == kCtxBytes);
  OK(cuDevicePrimaryCtxRetain(&prim2, 0));
  CHECK(prim == prim2);
  CHECK(nvml_used(0) == kCtxBytes);
  unsigned int flags = 99;
  int active = 0;
  OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  CHECK(active == 1 && flags == 0);
  OK(cuCtxSetCurrent(prim));
  CUdevice dev = -1;
  OK(cuCtxGetDevice(&dev));
  CHECK(dev == 0);

  // A second context on device 1 is charged there and freed with it.
  CUcontext c1 = nullptr;
  OK(cuCtxCreate(&c1, nullptr, 0, 1));  // cuCtxCreate_v4
  OK(cuCtxGetCurrent(&cur));
  CHECK(cur == c1);
  OK(cuCtxGetDevice(&dev));
  CHECK(dev == 1);
  CHECK(nvml_used(1) == kCtxBytes);
  OK(cuMemAlloc(&p, 8 * MiB));
  CHECK(nvml_used(1) == kCtxBytes + 8 * MiB);
  size_t f = 0, t = 0;
  OK(cuMemGetInfo(&f, &t));
  CHECK(t == kMem && f == kMem - kCtxBytes - 8 * MiB);
  OK(cuCtxDestroy(c1));  // frees its allocation too
  CHECK(nvml_used(1) == 0);
  OK(cuCtxGetCurrent(&cur));
  CHECK(cur == prim);
  CHECK_RC(cuCtxDestroy(c1), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_RC(cuCtxSetCurrent(c1), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_RC(cuCtxDestroy(prim), CUDA_ERROR_INVALID_CONTEXT);

  // Push / pop.
  CUcontext c2 = nullptr, popped = nullptr;
  OK(cuCtxCreate(&c2, nullptr, 0, 0));
  OK(cuCtxPopCurrent(&popped));
  CHECK(popped == c2);
  OK(cuCtxGetCurrent(&cur));
  CHECK(cur == prim);
  OK(cuCtxPushCurrent(c2));
  OK(cuCtxGetDevice_v2(&dev, nullptr));
  CHECK(dev == 0);
  OK(cuCtxDestroy(c2));
  // A context destroyed by another thread while current here.
  CUcontext c3 = nullptr;
  OK(cuCtxCreate(&c3, nullptr, 0, 0));
  std::thread([c3] { OK(cuCtxDestroy(c3)); }).join();
  CHECK_RC(cuMemAlloc(&p, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  OK(cuCtxPopCurrent(&popped));
  CHECK(popped == c3);
  unsigned int api = 0;
  OK(cuCtxGetApiVersion(nullptr, &api));
  CHECK(api == 3020);

  // Releasing the primary context to zero references frees it.
  OK(cuDevicePrimaryCtxRelease(0));
  CHECK(nvml_used(0) == kCtxBytes);
  OK(cuDevicePrimaryCtxRelease(0));
  CHECK(nvml_used(0) == 0);
  CHECK_RC(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_RC(cuMemAlloc(&p, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  OK(cuDevicePrimaryCtxRetain(&prim, 0));  // for the remaining tests
  CHECK(nvml_used(0) == kCtxBytes);
  OK(cuCtxSetCurrent(prim));
}

void test_memory() {
  const size_t f0 = free_mem();
  CHECK(f0 == kMem - kCtxBytes);
  CUdeviceptr a = 0, b = 0;
  OK(cuMemAlloc(&a, 100 * MiB));
  CHECK(a % 256 == 0);
  CHECK(free_mem() == f0 - 100 * MiB);
  CHECK_RC(cuMemAlloc(&b, kMem), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_RC(cuMemAlloc(&b, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_RC(cuMemAlloc(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemAlloc(&b, 4096));

  // Copies and memsets round-trip through "device" memory.
  std::vector<unsigned char> host(4096), back(4096, 0);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);
  OK(cuMemcpyHtoD(a + 1000, host.data(), host.size()));
  OK(cuMemcpyDtoD(b, a + 1000, host.size()));
  OK(cuMemcpyDtoH(back.data(), b, back.size()));
  CHECK(host == back);
  OK(cuMemsetD8(b, 0xAB, 16));
  OK(cuMemsetD32(b + 16, 0x01020304u, 4));
  OK(cuMemcpyDtoH(back.data(), b, 32));
  CHECK(back[0] == 0xAB && back[15] == 0xAB);
  uint32_t word = 0;
  std::memcpy(&word, back.data() + 16, 4);
  CHECK(word == 0x01020304u);
  CHECK_RC(cuMemsetD32(b + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);  // misaligned
  CHECK_RC(cuMemcpyHtoD(b + 4000, host.data(), 200), CUDA_ERROR_INVALID_VALUE);  // past end
  CHECK_RC(cuMemcpyDtoH(back.data(), 0x1000, 16), CUDA_ERROR_INVALID_VALUE);  // unknown
  OK(cuMemcpy(b, reinterpret_cast<CUdeviceptr>(host.data()), 64));  // unified addressing

  // Address range and pointer attributes.
  CUdeviceptr base = 0;
  size_t size = 0;
  OK(cuMemGetAddressRange(&base, &size, a + 12345));
  CHECK(base == a && size == 100 * MiB);
  CHECK_RC(cuMemGetAddressRange(&base, &size, 0x1000), CUDA_ERROR_NOT_FOUND);
  int ordinal = -1;
  unsigned int type = 0;
  CUcontext ctx = nullptr, cur = nullptr;
  OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a + 5));
  OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 5));
  OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, a + 5));
  OK(cuCtxGetCurrent(&cur));
  CHECK(ordinal == 0 && type == CU_MEMORYTYPE_DEVICE && ctx == cur);
  CHECK_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0x1000),
           CUDA_ERROR_INVALID_VALUE);

  // Pitch: rounded up to 512 bytes, charged pitch*height.
  CUdeviceptr pitched = 0;
  size_t pitch = 0;
  const size_t before = free_mem();
  OK(cuMemAllocPitch(&pitched, &pitch, 1000, 10, 4));
  CHECK(pitch == 1024);
  CHECK(before - free_mem() == 10240);
  OK(cuMemFree(pitched));

  // Host memory is not charged to the device.
  void* hp = nullptr;
  OK(cuMemAllocHost(&hp, 1 * MiB));
  CHECK(free_mem() == f0 - 100 * MiB - 4096);
  OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                           reinterpret_cast<CUdeviceptr>(hp)));
  CHECK(type == CU_MEMORYTYPE_HOST);
  CHECK_RC(cuMemFree(reinterpret_cast<CUdeviceptr>(hp)), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemFreeHost(hp));
  CHECK_RC(cuMemFreeHost(hp), CUDA_ERROR_INVALID_VALUE);

  // Registered host memory: remembered, not charged; registered once,
  // unregistered once.
  static char registered[64 * 1024];
  OK(cuMemHostRegister(registered, sizeof registered, 0));
  CHECK(free_mem() == f0 - 100 * MiB - 4096);
  CHECK_RC(cuMemHostRegister(registered, sizeof registered, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  OK(cuMemHostUnregister(registered));
  CHECK_RC(cuMemHostUnregister(registered), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

  // Managed memory is.
  CUdeviceptr m = 0;
  OK(cuMemAllocManaged(&m, 2 * MiB, CU_MEM_ATTACH_GLOBAL));
  CHECK(free_mem() == f0 - 100 * MiB - 4096 - 2 * MiB);
  OK(cuMemFree(m));

  OK(cuMemFree(a));
  OK(cuMemFree(b));
  CHECK_RC(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);  // double free
  CHECK_RC(cuMemFree(a + 8), CUDA_ERROR_INVALID_VALUE);
  CHECK(free_mem() == f0);

  // Legacy entry points.
  unsigned int f32 = 0, t32 = 0;
  using LegacyInfo = CUresult (*)(unsigned int*, unsigned int*);
  auto legacy_info = reinterpret_cast<LegacyInfo>(real("cuMemGetInfo"));
  CHECK(legacy_info != nullptr);
  if (legacy_info != nullptr) {
    OK(legacy_info(&f32, &t32));
    CHECK(t32 == kMem && f32 == f0);
  }
  using LegacyAlloc = CUresult (*)(unsigned int*, unsigned int);
  auto legacy_alloc = reinterpret_cast<LegacyAlloc>(real("cuMemAlloc"));
  unsigned int p32 = 0;
  CHECK(legacy_alloc != nullptr && legacy_alloc(&p32, 16) == CUDA_ERROR_NOT_SUPPORTED);

  // Many threads allocating at once.
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      CUcontext pc = nullptr;
      if (cuDevicePrimaryCtxRetain(&pc, 0) != CUDA_SUCCESS) ++errors;
      cuCtxSetCurrent(pc);
      for (int i = 0; i < 200; ++i) {
        CUdeviceptr q = 0;
        if (cuMemAlloc(&q, 1 * MiB) != CUDA_SUCCESS) ++errors;
        if (cuMemFree(q) != CUDA_SUCCESS) ++errors;
      }
      cuDevicePrimaryCtxRelease(0);
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(free_mem() == f0);
}

void test_two_processes() {
  const size_t f0 = free_mem();
  // A child holds 512 MiB (+ its context): both see the device fill up.
  Child c = spawn({"hold", std::to_string(512 * MiB)});
  CHECK(c.pid > 0);
  CHECK(read_line(c.out_fd, 10000) == "0");
  CHECK(free_mem() == f0 - kCtxBytes - 512 * MiB);
  CUdeviceptr p = 0;
  CHECK_RC(cuMemAlloc(&p, 512 * MiB), CUDA_ERROR_OUT_OF_MEMORY);

  // NVML lists both processes with their use.
  bool saw_child = false, saw_self = false;
  nvmlDevice_t d = nullptr;
  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
  unsigned int count = 0;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &count, nullptr) ==
        NVML_ERROR_INSUFFICIENT_SIZE);
  CHECK(count == 2);
  std::vector<nvmlProcessInfo_t> infos(count + 2);
  unsigned int got = static_cast<unsigned int>(infos.size());
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &got, infos.data()) == NVML_SUCCESS);
  for (unsigned int i = 0; i < got; ++i) {
    if (static_cast<pid_t>(infos[i].pid) == c.pid) {
      saw_child = infos[i].usedGpuMemory == kCtxBytes + 512 * MiB;
    }
    if (static_cast<pid_t>(infos[i].pid) == getpid()) {
      saw_self = infos[i].usedGpuMemory == kMem - f0;
      CHECK(infos[i].gpuInstanceId == 0xFFFFFFFFu);
    }
  }
  CHECK(saw_child && saw_self);
  // A process that only uses NVML (no cuInit) sees the same.
  CHECK(run_child({"nvml"}, "FAKE_CUDA_TRACE", nullptr) ==
        std::to_string(kMem - f0 + kCtxBytes + 512 * MiB) + " 2");
  unsigned int small = 1;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &small, infos.data()) ==
        NVML_ERROR_INSUFFICIENT_SIZE);
  CHECK(small == 2);

  // kill -9: its memory comes back as soon as it is dead, even before it is
  // reaped (a zombie holds no GPU memory).
  kill(c.pid, SIGKILL);
  const uint64_t deadline = now_ns() + 5000000000ULL;
  while (free_mem() != f0 && now_ns() < deadline) usleep(10000);
  CHECK(free_mem() == f0);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.out_fd);
  close(c.in_fd);
  OK(cuMemAlloc(&p, 512 * MiB));
  OK(cuMemFree(p));

  // A child that exits normally gives its memory back too.
  Child c2 = spawn({"hold", std::to_string(100 * MiB)});
  CHECK(read_line(c2.out_fd, 10000) == "0");
  CHECK(free_mem() == f0 - kCtxBytes - 100 * MiB);
  close(c2.in_fd);  // lets it exit
  waitpid(c2.pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(free_mem() == f0);
  close(c2.out_fd);

  // A child that asks for more than is left gets CUDA_ERROR_OUT_OF_MEMORY.
  OK(cuMemAlloc(&p, 800 * MiB));
  Child c3 = spawn({"hold", std::to_string(200 * MiB)});
  CHECK(read_line(c3.out_fd, 10000) == std::to_string(CUDA_ERROR_OUT_OF_MEMORY));
  close(c3.in_fd);
  waitpid(c3.pid, &status, 0);
  close(c3.out_fd);
  OK(cuMemFree(p));

  // A fork()ed child of an initialised process cannot use the driver.
  pid_t pid = fork();
  if (pid == 0) {
    CUdeviceptr q = 0;
    const bool ok = cuMemAlloc(&q, 16) == CUDA_ERROR_NOT_INITIALIZED &&
                    cuInit(0) == CUDA_ERROR_NOT_INITIALIZED;
    _exit(ok ? 0 : 1);
  }
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

void test_proc_address() {
  struct Case {
    const char* name;
    int version;
    cuuint64_t flags;
    const char* expect;  // exported symbol, or null for "not found"
  };
  const Case cases[] = {
      {"cuMemAlloc", 12000, 0, "cuMemAlloc_v2"},
      {"cuMemAlloc", 3000, 0, "cuMemAlloc"},
      {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
      {"cuMemFree", 13000, 0, "cuMemFree_v2"},
      {"cuMemGetInfo", 12080, 0, "cuMemGetInfo_v2"},
      {"cuDeviceTotalMem", 2000, 0, "cuDeviceTotalMem"},
      {"cuCtxDestroy", 3020, 0, "cuCtxDestroy"},
      {"cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2"},
      {"cuCtxPushCurrent", 12000, 0, "cuCtxPushCurrent_v2"},
      {"cuStreamDestroy", 12000, 0, "cuStreamDestroy_v2"},
      {"cuEventDestroy", 3999, 0, "cuEventDestroy"},
      {"cuDevicePrimaryCtxRelease", 10020, 0, "cuDevicePrimaryCtxRelease"},
      {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2"},
      {"cuDevicePrimaryCtxSetFlags", 12000, 0, "cuDevicePrimaryCtxSetFlags_v2"},
      {"cuCtxCreate", 11080, 0, "cuCtxCreate_v2"},
      {"cuCtxCreate", 12000, 0, "cuCtxCreate_v3"},
      {"cuCtxCreate", 12049, 0, "cuCtxCreate_v3"},
      {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
      {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
      {"cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture"},
      {"cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2"},
      {"cuStreamBeginCapture", 12000, 2, "cuStreamBeginCapture_v2_ptsz"},
      {"cuCtxSynchronize", 12080, 0, "cuCtxSynchronize"},
      {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"},
      {"cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2"},
      {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
      {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
      {"cuEventElapsedTime", 12000, 0, "cuEventElapsedTime"},
      {"cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"},
      {"cuLaunchKernel", 12000, 0, "cuLaunchKernel"},
      {"cuLaunchKernel", 12000, 1, "cuLaunchKernel"},
      {"cuLaunchKernel", 12000, 2, "cuLaunchKernel_ptsz"},
      {"cuLaunchKernelEx", 12000, 2, "cuLaunchKernelEx_ptsz"},
      {"cuMemcpyDtoH", 12000, 2, "cuMemcpyDtoH_v2_ptds"},
      {"cuMemcpyDtoH", 12000, 0, "cuMemcpyDtoH_v2"},
      {"cuMemcpyDtoHAsync", 12000, 2, "cuMemcpyDtoHAsync_v2_ptsz"},
      {"cuStreamSynchronize", 12000, 2, "cuStreamSynchronize_ptsz"},
      {"cuMemAllocAsync", 12000, 2, "cuMemAllocAsync_ptsz"},
      {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync"},
      {"cuGraphLaunch", 12000, 2, "cuGraphLaunch_ptsz"},
      {"cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2"},
      {"cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags"},
      {"cuMemCreate", 12000, 2, "cuMemCreate"},  // no per-thread variant
      {"cuInit", 12000, 0, "cuInit"},
      {"cuMemAllocAsync", 11000, 0, nullptr},  // too old
      {"cuFooBar", 12000, 0, nullptr},
      {"cuMemAlloc_v2", 12000, 0, nullptr},  // ABI names are not base names
  };
  for (const Case& c : cases) {
    void* pfn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult rc = cuGetProcAddress(c.name, &pfn, c.version, c.flags, &st);
    if (c.expect != nullptr) {
      void* want = real(c.expect);
      const bool good = rc == CUDA_SUCCESS && pfn == want && want != nullptr &&
                        st == CU_GET_PROC_ADDRESS_SUCCESS;
      CHECK(good);
      if (!good) {
        std::fprintf(stderr, "  cuGetProcAddress(%s, %d, %llu): rc=%d pfn=%p want %s=%p\n",
                     c.name, c.version, static_cast<unsigned long long>(c.flags), rc, pfn,
                     c.expect, want);
      }
    } else {
      CHECK(rc == CUDA_ERROR_NOT_FOUND && pfn == nullptr);
      CHECK(st == (std::strcmp(c.name, "cuMemAllocAsync") == 0
                       ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                       : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND));
    }
  }
  void* pfn = nullptr;
  CHECK_RC(cuGetProcAddress(nullptr, &pfn, 12000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  // The legacy 4-argument entry.
  using Legacy = CUresult (*)(const char*, void**, int, cuuint64_t);
  auto legacy = reinterpret_cast<Legacy>(real("cuGetProcAddress"));
  CHECK(legacy != nullptr);
  if (legacy != nullptr) {
    OK(legacy("cuMemFree", &pfn, 12000, 0));
    CHECK(pfn == real("cuMemFree_v2"));
  }

  // An interposer (cuDeviceTotalMem_v2 above) is neither handed out nor
  // called by the fake driver's own legacy entry.
  OK(cuGetProcAddress("cuDeviceTotalMem", &pfn, 12000, 0, nullptr));
  CHECK(pfn == real("cuDeviceTotalMem_v2"));
  CHECK(pfn != reinterpret_cast<void*>(&cuDeviceTotalMem_v2));
  g_interposed_calls = 0;
  using LegacyTotal = CUresult (*)(unsigned int*, CUdevice);
  auto legacy_total = reinterpret_cast<LegacyTotal>(real("cuDeviceTotalMem"));
  unsigned int t32 = 0;
  CHECK(legacy_total != nullptr && legacy_total(&t32, 0) == CUDA_SUCCESS && t32 == kMem);
  CHECK(g_interposed_calls == 0);
  size_t total = 0;
  OK(cuDeviceTotalMem(&total, 0));  // this program's own call is interposed
  CHECK(g_interposed_calls == 1);
}

void test_kernels_and_trace() {
  CUmodule mod = nullptr;
  OK(cuModuleLoadData(&mod, "any image"));
  CUfunction spin = nullptr, sleeper = nullptr, plain = nullptr;
  OK(cuModuleGetFunction(&spin, mod, "_Z11gshare_spiny"));
  OK(cuModuleGetFunction(&sleeper, mod, "sleep_us_3000"));
  OK(cuModuleGetFunction(&plain, mod, "vector_add"));
  const char* fname = nullptr;
  OK(cuFuncGetName(&fname, spin));
  CHECK(fname != nullptr && std::strcmp(fname, "_Z11gshare_spiny") == 0);
  CUstream s = nullptr;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  // A spin kernel runs for its first parameter's nanoseconds, asynchronously
  // (the launch returns long before the kernel ends).
  unsigned long long ns = 200000000ULL;
  void* params[] = {&ns};
  const uint64_t t0 = now_ns();
  OK(cuLaunchKernel(spin, 4, 1, 1, 128, 1, 1, 0, s, params, nullptr));
  const uint64_t t1 = now_ns();
  CHECK(t1 - t0 < 100000000ULL);
  CHECK_RC(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  OK(cuStreamSynchronize(s));
  CHECK(now_ns() - t0 >= 200000000ULL);
  OK(cuStreamQuery(s));
  auto lines = trace_of("_Z11gshare_spiny");
  CHECK(lines.size() == 1);
  if (lines.size() == 1) {
    CHECK(lines[0].end - lines[0].start >= 200000000ULL);
    CHECK(lines[0].start >= t0 && lines[0].end <= now_ns());
  }

  // sleep_us_N kernels, timed by events.
  CUevent e0 = nullptr, e1 = nullptr;
  OK(cuEventCreate(&e0, 0));
  OK(cuEventCreate(&e1, 0));
  float ms = 0;
  CHECK_RC(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);  // not recorded
  OK(cuEventRecord(e0, s));
  OK(cuLaunchKernel(sleeper, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  OK(cuEventRecord(e1, s));
  OK(cuEventSynchronize(e1));
  OK(cuEventQuery(e1));
  OK(cuEventElapsedTime(&ms, e0, e1));
  CHECK(ms >= 2.9f && ms < 1000.0f);
  lines = trace_of("sleep_us_3000");
  CHECK(lines.size() == 1 && lines[0].end - lines[0].start >= 3000000ULL);

  // Any other kernel takes 1 us; launched on the NULL stream.
  OK(cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  OK(cuCtxSynchronize());
  lines = trace_of("vector_add");
  CHECK(lines.size() == 1 && lines[0].end - lines[0].start >= 1000ULL);

  // The packed-parameter form and cuLaunchKernelEx.
  ns = 30000000ULL;
  unsigned long long ns2 = 5000000ULL;
  size_t sz = sizeof(ns2);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &ns2, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz,
                   CU_LAUNCH_PARAM_END};
  OK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;
  OK(cuLaunchKernelEx(&cfg, spin, params, nullptr));
  OK(cuStreamSynchronize(s));
  lines = trace_of("_Z11gshare_spiny");
  CHECK(lines.size() == 3);
  if (lines.size() == 3) {
    CHECK(lines[1].end - lines[1].start >= 5000000ULL);
    CHECK(lines[2].end - lines[2].start >= 30000000ULL);
    CHECK(lines[1].start >= lines[0].end && lines[2].start >= lines[1].end);  // in order
  }

  // Libraries and kernels; a CUkernel can be launched directly.
  CUlibrary lib = nullptr;
  CUkernel k = nullptr;
  CUfunction kf = nullptr;
  OK(cuLibraryLoadData(&lib, "image", nullptr, nullptr, 0, nullptr, nullptr, 0));
  OK(cuLibraryGetKernel(&k, lib, "sleep_us_1500_lib"));
  OK(cuKernelGetFunction(&kf, k));
  OK(cuLaunchKernel(reinterpret_cast<CUfunction>(k), 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  OK(cuLaunchKernel(kf, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  OK(cuStreamSynchronize(s));
  lines = trace_of("sleep_us_1500_lib");
  CHECK(lines.size() == 2 && lines[0].end - lines[0].start >= 1500000ULL);
  int attr = 0;
  OK(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kf));
  CHECK(attr == 1024);
  OK(cuFuncSetAttribute(kf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
  OK(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kf));
  CHECK(attr == 100000);
  int blocks = 0;
  OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kf, 256, 0));
  CHECK(blocks == 8);
  OK(cuLibraryUnload(lib));
  CHECK_RC(cuLaunchKernel(kf, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr),
           CUDA_ERROR_INVALID_HANDLE);

  // Host functions run in stream order.
  static std::atomic<int> order{0};
  static int seen = -1;
  order = 0;
  OK(cuLaunchKernel(sleeper, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  OK(cuLaunchHostFunc(s, [](void*) { seen = order.fetch_add(1); }, nullptr));
  OK(cuStreamSynchronize(s));
  CHECK(seen == 0);

  // Bad launches.
  CHECK_RC(cuLaunchKernel(plain, 0, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_RC(cuLaunchKernel(plain, 1, 1, 1, 2048, 1, 1, 0, s, nullptr, nullptr),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_RC(cuLaunchKernel(reinterpret_cast<CUfunction>(0x1234), 1, 1, 1, 1, 1, 1, 0, s,
                          nullptr, nullptr),
           CUDA_ERROR_INVALID_HANDLE);
  CHECK_RC(cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(0x1234),
                          nullptr, nullptr),
           CUDA_ERROR_INVALID_HANDLE);

  // The launch queue holds at most 1024 items: behind a 300 ms kernel, the
  // 1024th launch waits for it.
  ns = 300000000ULL;
  OK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
  const uint64_t q0 = now_ns();
  for (int i = 0; i < 1030; ++i) {
    if (cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr) != CUDA_SUCCESS) {
      CHECK(false);
      break;
    }
  }
  CHECK(now_ns() - q0 >= 200000000ULL);
  OK(cuStreamSynchronize(s));

  // Every trace line is well formed.
  for (const TraceLine& t : read_trace()) CHECK(t.pid > 0 && t.start <= t.end);

  OK(cuEventDestroy(e0));
  OK(cuEventDestroy(e1));
  CHECK_RC(cuEventDestroy(e1), CUDA_ERROR_INVALID_HANDLE);
  OK(cuStreamDestroy(s));
  CHECK_RC(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  OK(cuModuleUnload(mod));
  CHECK_RC(cuModuleGetFunction(&plain, mod, "x"), CUDA_ERROR_INVALID_HANDLE);
}

void test_capture_and_graphs() {
  CUmodule mod = nullptr;
  OK(cuModuleLoadData(&mod, "image"));
  CUfunction f = nullptr;
  OK(cuModuleGetFunction(&f, mod, "sleep_us_2000_captured"));
  CUstream s = nullptr, s2 = nullptr;
  OK(cuStreamCreate(&s, 0));
  OK(cuStreamCreate(&s2, 0));

  CHECK_RC(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph g = nullptr;
  CHECK_RC(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);

  OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_RC(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  OK(cuStreamIsCapturing(s, &status));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cuuint64_t id = 0;
  CUgraph cg = nullptr;
  OK(cuStreamGetCaptureInfo(s, &status, &id, &cg, nullptr, nullptr, nullptr));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && cg != nullptr);
  for (int i = 0; i < 2; ++i) OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  // A second stream joins the capture through an event.
  CUevent ev = nullptr;
  OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  OK(cuEventRecord(ev, s));
  OK(cuStreamWaitEvent(s2, ev, 0));
  OK(cuStreamIsCapturing(s2, &status));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s2, nullptr, nullptr));
  CHECK_RC(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  usleep(20000);
  CHECK(trace_of("sleep_us_2000_captured").empty());  // captured, not run
  OK(cuStreamEndCapture(s, &g));
  CHECK(g == cg);
  OK(cuStreamIsCapturing(s2, &status));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_NONE);
  size_t n = 0;
  OK(cuGraphGetNodes(g, nullptr, &n));
  CHECK(n == 3);

  CUgraphExec exec = nullptr;
  OK(cuGraphInstantiate(&exec, g, 0));  // cuGraphInstantiateWithFlags
  OK(cuGraphUpload(exec, s));
  const uint64_t t0 = now_ns();
  OK(cuGraphLaunch(exec, s));
  OK(cuGraphLaunch(exec, s));
  OK(cuStreamSynchronize(s));
  CHECK(now_ns() - t0 >= 12000000ULL);
  auto lines = trace_of("sleep_us_2000_captured");
  CHECK(lines.size() == 6);
  for (size_t i = 1; i < lines.size(); ++i) CHECK(lines[i].start >= lines[i - 1].end);

  // Synchronising a capturing stream invalidates the capture.
  OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CHECK_RC(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  OK(cuStreamIsCapturing(s, &status));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph bad = reinterpret_cast<CUgraph>(1);
  CHECK_RC(cuStreamEndCapture(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(bad == nullptr);
  OK(cuStreamIsCapturing(s, &status));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_NONE);

  // Capture into an existing graph, with the per-thread stream entry points.
  CUgraph g2 = nullptr;
  OK(cuGraphCreate(&g2, 0));
  OK(cuStreamBeginCaptureToGraph(s, g2, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  OK(cuStreamEndCapture_ptsz(s, &g));
  CHECK(g == g2);
  OK(cuGraphGetNodes(g2, nullptr, &n));
  CHECK(n == 1);

  OK(cuGraphExecDestroy(exec));
  CHECK_RC(cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE);
  OK(cuGraphDestroy(cg));
  OK(cuGraphDestroy(g2));
  OK(cuEventDestroy(ev));
  OK(cuStreamDestroy(s));
  OK(cuStreamDestroy(s2));
  OK(cuModuleUnload(mod));
}

cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a) {
  cuuint64_t v = ~0ULL;
  if (cuMemPoolGetAttribute(pool, a, &v) != CUDA_SUCCESS) return ~0ULL;
  return v;
}

void test_pools() {
  CUmemoryPool pool = nullptr, cur = nullptr;
  OK(cuDeviceGetDefaultMemPool(&pool, 0));
  OK(cuDeviceGetMemPool(&cur, 0));
  CHECK(pool == cur && pool != nullptr);
  CUstream s = nullptr;
  OK(cuStreamCreate(&s, 0));
  const size_t f0 = free_mem();

  // Grows in chunks, charged to the device.
  CUdeviceptr a = 0, b = 0, c = 0;
  OK(cuMemAllocAsync(&a, 10 * MiB, s));
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == kChunk);
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 10 * MiB);
  CHECK(free_mem() == f0 - kChunk);
  OK(cuMemAllocAsync(&b, 10 * MiB, s));  // fits in the free reserved bytes
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == kChunk);
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 20 * MiB);
  OK(cuMemAllocAsync(&c, 40 * MiB, s));  // does not: grows by 64 MiB
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 3 * kChunk);
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 60 * MiB);
  CHECK(free_mem() == f0 - 3 * kChunk);

  // Pool memory is usable and knows its pool.
  const char msg[] = "pool memory";
  char back[sizeof(msg)] = {};
  OK(cuMemcpyHtoDAsync(c + 100, msg, sizeof(msg), s));
  OK(cuMemcpyDtoHAsync(back, c + 100, sizeof(msg), s));
  OK(cuStreamSynchronize(s));
  CHECK(std::strcmp(back, msg) == 0);
  // The synchronisation gave the free reserved bytes back (threshold 0).
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 60 * MiB);
  CHECK(free_mem() == f0 - 60 * MiB);
  CUmemoryPool owner = nullptr;
  OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, c));
  CHECK(owner == pool);
  int ordinal = -1;
  OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, c));
  CHECK(ordinal == 0);

  // Frees return bytes to the pool; synchronisation gives them back to the
  // device down to the release threshold (0 by default).
  OK(cuMemFreeAsync(a, s));
  OK(cuMemFreeAsync(b, s));
  OK(cuMemFreeAsync_ptsz(c, s));
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 60 * MiB);
  CHECK_RC(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
  OK(cuStreamSynchronize(s));
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
  CHECK(free_mem() == f0);
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 3 * kChunk);
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 60 * MiB);
  cuuint64_t zero = 0;
  OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 0);
  CHECK_RC(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
           CUDA_ERROR_INVALID_VALUE);

  // With the threshold at UINT64_MAX (what PyTorch sets) nothing goes back
  // until cuMemPoolTrimTo.
  cuuint64_t keep_all = ~0ULL;
  OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
  OK(cuMemAllocAsync(&a, 10 * MiB, s));
  OK(cuMemFreeAsync(a, s));
  OK(cuStreamSynchronize(s));
  OK(cuCtxSynchronize());
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == kChunk);
  OK(cuMemAllocAsync(&a, 10 * MiB, s));
  OK(cuMemPoolTrimTo(pool, 0));  // keeps what is in use
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 10 * MiB);
  OK(cuMemFree(a));  // cuMemFree works on pool memory too
  OK(cuMemPoolTrimTo(pool, 4 * MiB));
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MiB);
  OK(cuMemPoolTrimTo(pool, 0));
  CHECK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
  CHECK(free_mem() == f0);
  OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));

  // Too big for the device.
  CHECK_RC(cuMemAllocAsync(&a, 2 * kMem, s), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(free_mem() == f0);

  // Explicit pools; destroying one with live allocations.
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool mine = nullptr;
  OK(cuMemPoolCreate(&mine, &props));
  OK(cuMemAllocFromPoolAsync(&a, 1 * MiB, mine, s));
  CHECK(free_mem() == f0 - kChunk);
  OK(cuMemPoolDestroy(mine));
  CHECK(free_mem() == f0 - 1 * MiB);  // free bytes went back at once
  OK(cuMemFreeAsync(a, s));
  OK(cuStreamSynchronize(s));
  CHECK(free_mem() == f0);
  CHECK_RC(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);  // the default pool
  CHECK_RC(cuMemAllocFromPoolAsync(&a, 1 * MiB, mine, s), CUDA_ERROR_INVALID_VALUE);
  OK(cuStreamDestroy(s));
}

void test_vmm() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CHECK(gran == 2 * MiB);
  const size_t f0 = free_mem();

  CUmemGenericAllocationHandle h = 0, h2 = 0;
  CHECK_RC(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemCreate(&h, 4 * MiB, &prop, 0));
  CHECK(free_mem() == f0 - 4 * MiB);
  CUdeviceptr va = 0;
  OK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
  CHECK(va % (2 * MiB) == 0);
  CHECK(free_mem() == f0 - 4 * MiB);  // address space is never charged
  CHECK_RC(cuMemMap(va + 4096, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemMap(va, 4 * MiB, 0, h, 0));
  CHECK_RC(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // overlaps
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  OK(cuMemSetAccess(va, 4 * MiB, &acc, 1));
  CHECK_RC(cuMemSetAccess(va, 8 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE);  // hole
  unsigned long long flags = 0;
  OK(cuMemGetAccess(&flags, &prop.location, va + 100));
  CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  const char msg[] = "mapped memory";
  char back[sizeof(msg)] = {};
  OK(cuMemcpyHtoD(va + 3 * MiB, msg, sizeof(msg)));
  OK(cuMemcpyDtoH(back, va + 3 * MiB, sizeof(msg)));
  CHECK(std::strcmp(back, msg) == 0);
  CUdeviceptr base = 0;
  size_t size = 0;
  OK(cuMemGetAddressRange(&base, &size, va + 5));
  CHECK(base == va && size == 4 * MiB);
  int ordinal = -1;
  OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va));
  CHECK(ordinal == 0);

  // Released but still mapped: still charged. Unmapped: gone.
  OK(cuMemRelease(h));
  CHECK_RC(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  CHECK(free_mem() == f0 - 4 * MiB);
  OK(cuMemUnmap(va, 4 * MiB));
  CHECK(free_mem() == f0);
  CHECK_RC(cuMemUnmap(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE);

  // Unmapped but not released: still charged until released.
  OK(cuMemCreate(&h2, 2 * MiB, &prop, 0));
  OK(cuMemMap(va + 6 * MiB, 2 * MiB, 0, h2, 0));
  OK(cuMemUnmap(va + 6 * MiB, 2 * MiB));
  CHECK(free_mem() == f0 - 2 * MiB);
  OK(cuMemRelease(h2));
  CHECK(free_mem() == f0);

  OK(cuMemAddressFree(va, 8 * MiB));
  CHECK_RC(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
  CHECK_RC(cuMemCreate(&h, 2 * kMem, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
}

// Exported memory is shared: contents written before the export survive it,
// an import maps the same pages, uncharged, and outlives the exporter's release.
void test_shareable() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  const size_t f0 = free_mem();
  CUmemGenericAllocationHandle plain = 0, h = 0, imported = 0;
  OK(cuMemCreate(&plain, 2 * MiB, &prop, 0));
  int fd = -1;
  CHECK_RC(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE);  // not created exportable
  OK(cuMemRelease(plain));
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  OK(cuMemCreate(&h, 4 * MiB, &prop, 0));
  CUdeviceptr va = 0, vb = 0;
  OK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
  OK(cuMemAddressReserve(&vb, 4 * MiB, 0, 0, 0));
  OK(cuMemMap(va, 4 * MiB, 0, h, 0));
  const uint32_t before = 0x5eed;
  OK(cuMemcpyHtoD(va + 3 * MiB, &before, sizeof before));
  OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CHECK(fd >= 0);
  OK(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t(fd)),
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  CHECK(free_mem() == f0 - 4 * MiB);  // the import is not charged again
  OK(cuMemMap(vb, 4 * MiB, 0, imported, 0));
  uint32_t got = 0;
  OK(cuMemcpyDtoH(&got, vb + 3 * MiB, sizeof got));
  CHECK(got == before);
  const uint32_t after = 0xfeed;
  OK(cuMemcpyHtoD(vb + 1 * MiB, &after, sizeof after));
  OK(cuMemcpyDtoH(&got, va + 1 * MiB, sizeof got));
  CHECK(got == after);
  OK(cuMemRelease(h));
  OK(cuMemUnmap(va, 4 * MiB));
  CHECK(free_mem() == f0);
  OK(cuMemcpyDtoH(&got, vb + 1 * MiB, sizeof got));  // the import keeps the pages
  CHECK(got == after);
  OK(cuMemRelease(imported));
  OK(cuMemUnmap(vb, 4 * MiB));
  OK(cuMemAddressFree(va, 4 * MiB));
  OK(cuMemAddressFree(vb, 4 * MiB));
  CHECK(free_mem() == f0);
  CHECK_RC(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t(0)),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
           CUDA_ERROR_INVALID_VALUE);  // not one of ours
}

void test_nvml() {
  unsigned int n = 0;
  CHECK(nvmlDeviceGetCount_v2(&n) == NVML_SUCCESS && n == 2);
  nvmlDevice_t d = nullptr, d2 = nullptr;
  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  CHECK(nvmlDeviceGetUUID(d, uuid, sizeof(uuid)) == NVML_SUCCESS);
  CUuuid cu{};
  OK(cuDeviceGetUuid(&cu, 0));
  CHECK(fakegpu::uuid_string(reinterpret_cast<unsigned char*>(cu.bytes)) == uuid);
  CHECK(nvmlDeviceGetUUID(d, uuid, 10) == NVML_ERROR_INSUFFICIENT_SIZE);
  CHECK(nvmlDeviceGetHandleByUUID(fakegpu::uuid_string(
                                      reinterpret_cast<unsigned char*>(cu.bytes)).c_str(),
                                  &d2) == NVML_SUCCESS);
  CHECK(d == d2);
  CHECK(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &d2) ==
        NVML_ERROR_NOT_FOUND);
  unsigned int index = 9;
  CHECK(nvmlDeviceGetIndex(d, &index) == NVML_SUCCESS && index == 0);
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  CHECK(nvmlDeviceGetName(d, name, sizeof(name)) == NVML_SUCCESS);
  CHECK(std::strcmp(name, "gshare fake GPU") == 0);

  CUdeviceptr p = 0;
  OK(cuMemAlloc(&p, 10 * MiB));
  nvmlMemory_t m{};
  CHECK(nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS);
  CHECK(m.total == kMem && m.free == free_mem() && m.used == kMem - m.free);
  nvmlMemory_v2_t m2{};
  CHECK(nvmlDeviceGetMemoryInfo_v2(d, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m2.version = nvmlMemory_v2;
  CHECK(nvmlDeviceGetMemoryInfo_v2(d, &m2) == NVML_SUCCESS);
  CHECK(m2.total == kMem && m2.used == m.used && m2.free == m.free);
  nvmlProcessInfo_t infos[4];
  unsigned int count = 4;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &count, infos) == NVML_SUCCESS);
  CHECK(count == 1 && static_cast<pid_t>(infos[0].pid) == getpid() &&
        infos[0].usedGpuMemory == kCtxBytes + 10 * MiB);
  nvmlProcessInfo_v2_t infos2[4];
  count = 4;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v2(d, &count, infos2) == NVML_SUCCESS);
  CHECK(count == 1 && infos2[0].usedGpuMemory == kCtxBytes + 10 * MiB);
  OK(cuMemFree(p));
  CHECK(nvmlDeviceGetHandleByIndex_v2(1, &d2) == NVML_SUCCESS);
  count = 4;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d2, &count, infos) == NVML_SUCCESS);
  CHECK(count == 0);
  CHECK(nvmlDeviceGetHandleByIndex_v2(2, &d2) == NVML_ERROR_INVALID_ARGUMENT);
}

void remove_dir(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "hold") == 0) {
    return child_hold(std::strtoull(argv[2], nullptr, 10));
  }
  if (argc == 2 && std::strcmp(argv[1], "init") == 0) return child_init();
  if (argc == 2 && std::strcmp(argv[1], "nvml") == 0) return child_nvml();
  if (argc == 2 && std::strcmp(argv[1], "copy") == 0) return child_copy();

  // A private device directory and seed: no other test shares these devices.
  char tmpl[] = "/tmp/fake-driver-selftest-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  g_dir = tmpl;
  g_trace = g_dir + "/trace";
  setenv("FAKE_CUDA_DIR", g_dir.c_str(), 1);
  setenv("FAKE_CUDA_UUID_SEED", ("selftest-" + std::to_string(getpid())).c_str(), 1);
  setenv("FAKE_CUDA_DEVICES", "2", 1);
  setenv("FAKE_CUDA_MEM", "1GiB", 1);
  setenv("FAKE_CUDA_TRACE", g_trace.c_str(), 1);
  unsetenv("FAKE_CUDA_CTX_BYTES");
  unsetenv("FAKE_CUDA_POOL_CHUNK");

  test_before_init();
  CHECK_RC(cuInit(0), CUDA_SUCCESS);
  if (g_failures != 0) {
    std::fprintf(stderr, "cannot continue without cuInit\n");
    return 1;
  }
  CHECK(nvmlInit_v2() == NVML_SUCCESS);

  struct {
    const char* name;
    void (*fn)();
  } tests[] = {
      {"config", test_config},
      {"devices", test_devices},
      {"contexts", test_contexts},
      {"memory", test_memory},
      {"two processes", test_two_processes},
      {"cuGetProcAddress", test_proc_address},
      {"kernels and trace", test_kernels_and_trace},
      {"capture and graphs", test_capture_and_graphs},
      {"pools", test_pools},
      {"virtual memory", test_vmm},
      {"shareable memory", test_shareable},
      {"nvml", test_nvml},
  };
  for (const auto& t : tests) {
    const int before = g_failures;
    const uint64_t t0 = now_ns();
    t.fn();
    std::printf("%-20s %s (%.0f ms)\n", t.name, g_failures == before ? "ok" : "FAILED",
                (now_ns() - t0) / 1e6);
  }

  CHECK(nvmlShutdown() == NVML_SUCCESS);
  unsigned int n = 0;
  CHECK(nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED);

  remove_dir(g_dir);
  std::printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}
