// Kernel launch rate through the driver API, the path every framework's
// launches end in. Run natively and under LD_PRELOAD=libgshare.so; the
// ratio is gshare's cost per launch (bench/run_benchmarks.sh).
//
// usage: launch_rate [--launches N] [--burst B]
//
// Prints two JSON lines:
//   {"benchmark":"launch_rate","launches":N,"seconds":S,"per_second":R}
//       N launches of an empty kernel back to back on one stream, then one
//       sync: the sustained rate. Once the GPU's queue fills, the host waits
//       for the GPU, so this also shows whether gshare slows the device side.
//   {"benchmark":"launch_cost","launches":N,"burst":B,"seconds":S,
//    "per_second":R,"ns_per_launch":X}
//       bursts of B launches timed on the host, each followed by an untimed
//       sync, so the queue never fills: the host-side cost of cuLaunchKernel
//       alone, where a hook's overhead shows most.
//
// The kernel comes from PTX text (JIT-compiled by the driver for whatever
// GPU is present), so the program needs no nvcc and runs on any GPU.
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr char kEmptyKernelPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry empty()
{
	ret;
}
)";

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(result, &name);
  fprintf(stderr, "launch_rate: %s failed: %s (%d)\n", call, name ? name : "unknown error",
          int(result));
  exit(1);
}
#define CHECK(call) check((call), #call)

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

unsigned long parse_count(const char* option, const char* text) {
  char* end = nullptr;
  unsigned long value = strtoul(text, &end, 10);
  if (!*text || *end || value == 0) {
    fprintf(stderr, "launch_rate: %s needs a positive integer, got '%s'\n", option, text);
    exit(2);
  }
  return value;
}

CUfunction load_empty_kernel() {
  char error_log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log, reinterpret_cast<void*>(sizeof error_log)};
  CUmodule module;
  CUresult result = cuModuleLoadDataEx(&module, kEmptyKernelPtx, 2, options, values);
  if (result != CUDA_SUCCESS) fprintf(stderr, "launch_rate: PTX JIT log: %s\n", error_log);
  CHECK(result);
  CUfunction kernel;
  CHECK(cuModuleGetFunction(&kernel, module, "empty"));
  return kernel;
}

inline void launch(CUfunction kernel, CUstream stream) {
  CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long launches = 200000;
  unsigned long burst = 1000;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--launches") == 0) {
      launches = parse_count(argv[i], argv[i + 1]);
      ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--burst") == 0) {
      burst = parse_count(argv[i], argv[i + 1]);
      ++i;
    } else {
      fprintf(stderr, "usage: launch_rate [--launches N] [--burst B]\n");
      return 2;
    }
  }

  CHECK(cuInit(0));
  CUdevice device;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  CUfunction kernel = load_empty_kernel();
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  for (int i = 0; i < 2000; ++i) launch(kernel, stream);  // warm caches and the queue
  CHECK(cuStreamSynchronize(stream));

  Clock::time_point start = Clock::now();
  for (unsigned long i = 0; i < launches; ++i) launch(kernel, stream);
  CHECK(cuStreamSynchronize(stream));
  double seconds = seconds_between(start, Clock::now());
  printf("{\"benchmark\":\"launch_rate\",\"launches\":%lu,\"seconds\":%.6f,\"per_second\":%.1f}\n",
         launches, seconds, double(launches) / seconds);

  unsigned long bursts = (launches + burst - 1) / burst;
  double host_seconds = 0;
  for (unsigned long b = 0; b < bursts; ++b) {
    Clock::time_point burst_start = Clock::now();
    for (unsigned long i = 0; i < burst; ++i) launch(kernel, stream);
    host_seconds += seconds_between(burst_start, Clock::now());
    CHECK(cuStreamSynchronize(stream));
  }
  unsigned long timed = bursts * burst;
  printf("{\"benchmark\":\"launch_cost\",\"launches\":%lu,\"burst\":%lu,\"seconds\":%.6f,"
         "\"per_second\":%.1f,\"ns_per_launch\":%.2f}\n",
         timed, burst, host_seconds, double(timed) / host_seconds, host_seconds * 1e9 / double(timed));

  CHECK(cuStreamDestroy(stream));
  CHECK(cuDevicePrimaryCtxRelease(device));
  return 0;
}
