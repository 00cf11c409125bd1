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
//   {"benchmark":"launch_ab","hooked_ns":H,"direct_ns":D,"ratio":D/H,...}
//       in one process, bursts through the linked cuLaunchKernel (gshare's
//       wrapper under the preload) alternating with bursts through the
//       driver's own function (bench/direct_driver.h), medians of each. The
//       ratio is the hooked launch rate over the direct one; run natively, both
//       are the same function and the ratio is the noise floor.
//   {"benchmark":"request_ab","hooked_ns":H,"direct_ns":D,"added_ns":H-D,...}
//       the same alternation for an inference request's host path: 32
//       launches, a 4-byte copy to the host and a stream sync (what a
//       forward pass ending in .item() asks of the driver), timed whole.
//       Under the preload `added_ns` is gshare's cost per request, syncs
//       and their bookkeeping included; natively it is the noise floor.
//
// The kernel comes from PTX text (JIT-compiled by the driver for whatever
// GPU is present), so the program needs no nvcc and runs on any GPU.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_util.h"
#include "bench/direct_driver.h"

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

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
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

// Alternates timed bursts through `hooked` and `direct`; medians of ns/launch.
void launch_ab(CUfunction kernel, CUstream stream, unsigned long launches, unsigned long burst) {
  using Launch = decltype(&cuLaunchKernel);
  Launch hooked = &cuLaunchKernel;
  Launch direct = reinterpret_cast<Launch>(bench::driver_symbol("cuLaunchKernel"));
  if (!direct) {
    fprintf(stderr, "launch_rate: cannot find libcuda's own cuLaunchKernel\n");
    return;
  }
  std::vector<double> hooked_ns, direct_ns;
  unsigned long rounds = (launches + 2 * burst - 1) / (2 * burst);
  for (unsigned long r = 0; r < rounds; ++r) {
    for (int side = 0; side < 2; ++side) {
      bool use_hooked = (side == 0) == (r % 2 == 0);  // alternate which goes first
      Launch f = use_hooked ? hooked : direct;
      Clock::time_point start = Clock::now();
      for (unsigned long i = 0; i < burst; ++i)
        CHECK(f(kernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
      double ns = seconds_between(start, Clock::now()) * 1e9 / double(burst);
      CHECK(cuStreamSynchronize(stream));
      (use_hooked ? hooked_ns : direct_ns).push_back(ns);
    }
  }
  double h = bench::median(hooked_ns), d = bench::median(direct_ns);
  printf("{\"benchmark\":\"launch_ab\",\"rounds\":%lu,\"burst\":%lu,\"hooked_ns\":%.2f,"
         "\"direct_ns\":%.2f,\"added_ns\":%.2f,\"ratio\":%.5f}\n",
         rounds, burst, h, d, h - d, d / h);
}

// Alternates timed bursts of requests (kRequestLaunches launches, a small
// copy to the host, a sync) through the linked functions and through the
// driver's own; medians of ns per request.
constexpr int kRequestLaunches = 32;
void request_ab(CUfunction kernel, CUstream stream, unsigned long requests, unsigned long burst) {
  using Launch = decltype(&cuLaunchKernel);
  using Copy = decltype(&cuMemcpyDtoHAsync_v2);
  using Sync = decltype(&cuStreamSynchronize);
  struct Path {
    Launch launch;
    Copy copy;
    Sync sync;
  };
  const Path hooked{&cuLaunchKernel, &cuMemcpyDtoHAsync_v2, &cuStreamSynchronize};
  const Path direct{reinterpret_cast<Launch>(bench::driver_symbol("cuLaunchKernel")),
                    reinterpret_cast<Copy>(bench::driver_symbol("cuMemcpyDtoHAsync_v2")),
                    reinterpret_cast<Sync>(bench::driver_symbol("cuStreamSynchronize"))};
  if (!direct.launch || !direct.copy || !direct.sync) {
    fprintf(stderr, "launch_rate: cannot find libcuda's own launch, copy or sync\n");
    return;
  }
  CUdeviceptr value;
  CHECK(cuMemAlloc(&value, 4));
  CHECK(cuMemsetD32(value, 0, 1));
  uint32_t host_value = 0;
  std::vector<double> hooked_ns, direct_ns;
  const unsigned long rounds = (requests + 2 * burst - 1) / (2 * burst);
  for (unsigned long r = 0; r < rounds; ++r) {
    for (int side = 0; side < 2; ++side) {
      const bool use_hooked = (side == 0) == (r % 2 == 0);
      const Path& f = use_hooked ? hooked : direct;
      Clock::time_point start = Clock::now();
      for (unsigned long q = 0; q < burst; ++q) {
        for (int i = 0; i < kRequestLaunches; ++i)
          CHECK(f.launch(kernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
        CHECK(f.copy(&host_value, value, sizeof host_value, stream));
        CHECK(f.sync(stream));
      }
      (use_hooked ? hooked_ns : direct_ns).push_back(seconds_between(start, Clock::now()) * 1e9 / double(burst));
    }
  }
  CHECK(cuMemFree(value));
  const double h = bench::median(hooked_ns), d = bench::median(direct_ns);
  printf("{\"benchmark\":\"request_ab\",\"rounds\":%lu,\"burst\":%lu,\"launches_per_request\":%d,"
         "\"hooked_ns\":%.2f,\"direct_ns\":%.2f,\"added_ns\":%.2f}\n",
         rounds, burst, kRequestLaunches, h, d, h - d);
}

}  // namespace

int main(int argc, char** argv) {
  bench::program() = "launch_rate";
  unsigned long launches = 200000;
  unsigned long burst = 1000;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--launches") == 0) {
      launches = bench::parse_count(argv[i], argv[i + 1]);
      ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--burst") == 0) {
      burst = bench::parse_count(argv[i], argv[i + 1]);
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

  launch_ab(kernel, stream, launches, burst);
  // Requests of 32 launches: a tenth as many, in bursts of 20.
  request_ab(kernel, stream, launches / (10 * kRequestLaunches) * 10, 20);

  CHECK(cuStreamDestroy(stream));
  CHECK(cuDevicePrimaryCtxRelease(device));
  return 0;
}
