// gshare-demo-job: a small, real CUDA program for the README's demo. It asks
// the driver how much memory it sees, allocates in chunks up to a target
// (showing where a quota stops it), then keeps the GPU busy with a spin
// kernel and reports its launch rate. Plain driver API and PTX, so the same
// binary runs on a real GPU and over the bundled fake driver.
//
//   gshare-demo-job NAME MEMORY_MIB SECONDS [KERNEL_MICROSECONDS]
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tools/spin_kernel.h"

namespace {

const char* g_name = "job";

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  cuGetErrorName(r, &text);
  fprintf(stderr, "[%s] %s failed: %s\n", g_name, what, text ? text : "?");
  exit(1);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s NAME MEMORY_MIB SECONDS [KERNEL_MICROSECONDS]\n", argv[0]);
    return 2;
  }
  g_name = argv[1];
  const size_t target_mib = strtoull(argv[2], nullptr, 10);
  const double seconds = atof(argv[3]);
  unsigned long long kernel_ns = (argc > 4 ? strtoull(argv[4], nullptr, 10) : 200) * 1000ull;

  check(cuInit(0), "cuInit");
  CUdevice device;
  CUcontext context;
  check(cuDeviceGet(&device, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  char gpu[128] = "?";
  cuDeviceGetName(gpu, sizeof gpu, device);
  size_t free_bytes = 0, total_bytes = 0;
  check(cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo");
  printf("[%s] %s: the driver reports %.2f GiB total, %.2f GiB free\n", g_name, gpu,
         total_bytes / 1073741824.0, free_bytes / 1073741824.0);

  std::vector<CUdeviceptr> blocks;
  const size_t chunk = 256ull << 20;
  size_t held = 0;
  while (held + chunk <= target_mib << 20) {
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, chunk);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      printf("[%s] allocation refused at %.2f GiB held (CUDA_ERROR_OUT_OF_MEMORY): the quota holds\n",
             g_name, held / 1073741824.0);
      break;
    }
    check(r, "cuMemAlloc");
    blocks.push_back(p);
    held += chunk;
  }
  printf("[%s] holding %.2f GiB on the GPU\n", g_name, held / 1073741824.0);
  fflush(stdout);

  CUmodule module;
  CUfunction spin;
  check(cuModuleLoadData(&module, gshare::kSpinKernelPtx), "cuModuleLoadData");
  check(cuModuleGetFunction(&spin, module, gshare::kSpinKernelName), "cuModuleGetFunction");
  void* params[] = {&kernel_ns};
  auto start = std::chrono::steady_clock::now();
  unsigned long long launches = 0;
  while (seconds_since(start) < seconds) {
    for (int i = 0; i < 50; ++i)
      check(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
    launches += 50;
    check(cuCtxSynchronize(), "cuCtxSynchronize");
  }
  double elapsed = seconds_since(start);
  printf("[%s] ran %llu kernels of %llu us in %.1f s (%.0f kernels/s)\n", g_name, launches,
         kernel_ns / 1000, elapsed, launches / elapsed);
  for (CUdeviceptr p : blocks) cuMemFree(p);
  cuDevicePrimaryCtxRelease(device);
  return 0;
}
