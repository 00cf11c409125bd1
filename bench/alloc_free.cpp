// Cost of a device allocation and its free through the driver API
// (cuMemAlloc_v2 + cuMemFree_v2), natively or under LD_PRELOAD=libgshare.so.
// Under gshare each allocation also reserves its bytes in the shared region
// (under the arbiter's lock) and enters the ledger, and each free undoes
// that; the difference from native is that cost (bench/run_benchmarks.sh).
//
// usage: alloc_free [--pairs N] [--mib SIZE]...   (default: 20000 pairs of 1 and 64 MiB)
//
// Prints one JSON line per size:
//   {"benchmark":"alloc_free","bytes":B,"pairs":N,"seconds":S,"ns_per_pair":X}
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(result, &name);
  fprintf(stderr, "alloc_free: %s failed: %s (%d)\n", call, name ? name : "unknown error",
          int(result));
  exit(1);
}
#define CHECK(call) check((call), #call)

unsigned long parse_count(const char* option, const char* text) {
  char* end = nullptr;
  unsigned long value = strtoul(text, &end, 10);
  if (!*text || *end || value == 0) {
    fprintf(stderr, "alloc_free: %s needs a positive integer, got '%s'\n", option, text);
    exit(2);
  }
  return value;
}

inline void alloc_and_free(size_t bytes) {
  CUdeviceptr pointer;
  CHECK(cuMemAlloc(&pointer, bytes));  // cuMemAlloc_v2
  CHECK(cuMemFree(pointer));           // cuMemFree_v2
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long pairs = 20000;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--pairs") == 0) {
      pairs = parse_count(argv[i], argv[i + 1]);
      ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--mib") == 0) {
      sizes.push_back(size_t(parse_count(argv[i], argv[i + 1])) << 20);
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
  }

  CHECK(cuDevicePrimaryCtxRelease(device));
  return 0;
}
