// Cost of a device allocation and its free through the driver API
// (cuMemAlloc_v2 + cuMemFree_v2), natively or under LD_PRELOAD=libgshare.so.
// Under gshare each allocation also reserves its bytes in the shared region
// (under the arbiter's lock) and enters the ledger, and each free undoes
// that; the difference from native is that cost (bench/run_benchmarks.sh).
//
// usage: alloc_free [--pairs N] [--mib SIZE]...   (default: 20000 pairs of 1 and 64 MiB)
//
// Prints two JSON lines per size:
//   {"benchmark":"alloc_free","bytes":B,"pairs":N,"seconds":S,"ns_per_pair":X}
//   {"benchmark":"alloc_free_ab","bytes":B,"hooked_ns":H,"direct_ns":D,"added_ns":H-D,
//    "added_alloc_ns":A,"added_free_ns":F}
//       in one process, a pair through the linked functions (gshare's
//       wrappers under the preload) alternating with a pair through the
//       driver's own (bench/direct_driver.h); added_ns is the median of the
//       per-round differences, added_alloc_ns and added_free_ns the same
//       for each call on its own (each timed between its own clock reads).
//       Natively both are the same functions and added_* is the noise floor.
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_util.h"
#include "bench/direct_driver.h"

namespace {

inline void alloc_and_free(size_t bytes) {
  CUdeviceptr pointer;
  CHECK(cuMemAlloc(&pointer, bytes));  // cuMemAlloc_v2
  CHECK(cuMemFree(pointer));           // cuMemFree_v2
}

using Alloc = decltype(&cuMemAlloc);
using Free = decltype(&cuMemFree);

void alloc_free_ab(size_t bytes, unsigned long pairs) {
  auto direct_alloc = reinterpret_cast<Alloc>(bench::driver_symbol("cuMemAlloc_v2"));
  auto direct_free = reinterpret_cast<Free>(bench::driver_symbol("cuMemFree_v2"));
  if (!direct_alloc || !direct_free) {
    fprintf(stderr, "alloc_free: cannot find libcuda's own cuMemAlloc_v2/cuMemFree_v2\n");
    return;
  }
  // One hooked pair and one direct pair per round, in alternating order: the
  // driver's own time for a pair varies by tens of microseconds (64 MiB is
  // bimodal), far more than gshare adds, so only the median of per-round
  // differences resolves it.
  std::vector<double> hooked_ns, direct_ns, difference_ns, alloc_difference_ns, free_difference_ns;
  using Clock = std::chrono::steady_clock;
  auto ns_between = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count() * 1e9;
  };
  for (unsigned long r = 0; r < pairs / 2; ++r) {
    double alloc_ns[2], free_ns[2];
    for (int side = 0; side < 2; ++side) {
      bool use_hooked = (side == 0) == (r % 2 == 0);
      Alloc a = use_hooked ? Alloc(&cuMemAlloc) : direct_alloc;
      Free f = use_hooked ? Free(&cuMemFree) : direct_free;
      const auto start = Clock::now();
      CUdeviceptr pointer;
      CHECK(a(&pointer, bytes));
      const auto allocated = Clock::now();
      CHECK(f(pointer));
      const auto freed = Clock::now();
      alloc_ns[use_hooked ? 0 : 1] = ns_between(start, allocated);
      free_ns[use_hooked ? 0 : 1] = ns_between(allocated, freed);
    }
    hooked_ns.push_back(alloc_ns[0] + free_ns[0]);
    direct_ns.push_back(alloc_ns[1] + free_ns[1]);
    difference_ns.push_back(hooked_ns.back() - direct_ns.back());
    alloc_difference_ns.push_back(alloc_ns[0] - alloc_ns[1]);
    free_difference_ns.push_back(free_ns[0] - free_ns[1]);
  }
  printf("{\"benchmark\":\"alloc_free_ab\",\"bytes\":%zu,\"rounds\":%zu,\"hooked_ns\":%.1f,"
         "\"direct_ns\":%.1f,\"added_ns\":%.1f,\"added_alloc_ns\":%.1f,\"added_free_ns\":%.1f}\n",
         bytes, hooked_ns.size(), bench::median(hooked_ns), bench::median(direct_ns),
         bench::median(difference_ns), bench::median(alloc_difference_ns), bench::median(free_difference_ns));
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bench::program() = "alloc_free";
  unsigned long pairs = 20000;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--pairs") == 0) {
      pairs = bench::parse_count(argv[i], argv[i + 1]);
      ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--mib") == 0) {
      sizes.push_back(size_t(bench::parse_count(argv[i], argv[i + 1])) << 20);
      ++i;
    } else {
      fprintf(stderr, "usage: alloc_free [--pairs N] [--mib SIZE]...\n");
      return 2;
    }
  }
  if (sizes.empty()) sizes = {size_t(1) << 20, size_t(64) << 20};

  CHECK(cuInit(0));
  CUdevice device;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));

  for (size_t bytes : sizes) {
    for (int i = 0; i < 200; ++i) alloc_and_free(bytes);
    auto start = std::chrono::steady_clock::now();
    for (unsigned long i = 0; i < pairs; ++i) alloc_and_free(bytes);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    printf("{\"benchmark\":\"alloc_free\",\"bytes\":%zu,\"pairs\":%lu,\"seconds\":%.6f,"
           "\"ns_per_pair\":%.1f}\n",
           bytes, pairs, seconds, seconds * 1e9 / double(pairs));
    fflush(stdout);
    alloc_free_ab(bytes, pairs);
  }

  CHECK(cuDevicePrimaryCtxRelease(device));
  return 0;
}
