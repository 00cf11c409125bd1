// Kernel launches and host functions. A launch validates its arguments,
// decides the kernel's duration (modules.cpp says how), and queues one Work
// item on the stream (or records it into the graph being captured). It
// returns at once; the stream's worker runs it.
#include <cstring>

#include "fake_cuda_internal.h"

using namespace fakecuda;

namespace {

constexpr unsigned int kMaxCooperativeBlocks = 132 * 32;  // SMs * blocks per SM

// Duration of one launch of f with these parameters.
uint64_t kernel_duration(const CUfunc_st* f, void** kernelParams, void** extra) {
  if (!f->duration_from_param) return f->fixed_ns;
  unsigned long long ns = 0;
  if (kernelParams != nullptr && kernelParams[0] != nullptr) {
    std::memcpy(&ns, kernelParams[0], sizeof(ns));
    return ns;
  }
  // The packed form: {CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
  //                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}
  if (extra != nullptr) {
    const void* buf = nullptr;
    size_t size = 0;
    for (int i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
        std::memcpy(&size, extra[i + 1], sizeof(size));
      }
    }
    if (buf != nullptr && size >= sizeof(ns)) std::memcpy(&ns, buf, sizeof(ns));
  }
  return ns;
}

CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
                CUstream hStream, void** kernelParams, void** extra, bool cooperative) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (bx > 1024 || by > 1024 || bz > 64 ||
      static_cast<unsigned long long>(bx) * by * bz > 1024ULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (gy > 65535 || gz > 65535) return CUDA_ERROR_INVALID_VALUE;
  if (smem > 232448) return CUDA_ERROR_INVALID_VALUE;
  if (kernelParams != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (cooperative &&
      static_cast<unsigned long long>(gx) * gy * gz > kMaxCooperativeBlocks) {
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  Work w;
  w.kind = Work::kKernel;
  std::shared_ptr<CUstream_st> st;
  {
    std::lock_guard<std::mutex> g(S().mu);
    CUctx_st* ctx = nullptr;
    rc = current_ctx_locked(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    CUfunc_st* fn = function_locked(f);
    if (fn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    rc = stream_locked(hStream, &st);
    if (rc != CUDA_SUCCESS) return rc;
    w.name = fn->name;
    w.duration_ns = kernel_duration(fn, kernelParams, extra);
  }
  return submit(st, std::move(w));
}

CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                   void** extra) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (config->numAttrs > 0 && config->attrs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool cooperative = false;
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
        config->attrs[i].value.cooperative != 0) {
      cooperative = true;
    }
  }
  return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                kernelParams, extra, cooperative);
}

CUresult launch_host_func(CUstream hStream, CUhostFn fn, void* userData) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUstream_st> st;
  {
    std::lock_guard<std::mutex> g(S().mu);
    rc = stream_locked(hStream, &st);
    if (rc != CUDA_SUCCESS) return rc;
  }
  Work w;
  w.kind = Work::kCall;
  w.call = [fn, userData] { fn(userData); };
  return submit(st, std::move(w));
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void** kernelParams, void** extra) {
  return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                sharedMemBytes, hStream, kernelParams, extra, false);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra) {
  return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                sharedMemBytes, hStream, kernelParams, extra, false);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                  void** kernelParams, void** extra) {
  return launch_ex(config, f, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                       void** kernelParams, void** extra) {
  return launch_ex(config, f, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                           unsigned int gridDimY, unsigned int gridDimZ,
                                           unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes,
                                           CUstream hStream, void** kernelParams) {
  return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                sharedMemBytes, hStream, kernelParams, nullptr, true);
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams) {
  return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                sharedMemBytes, hStream, kernelParams, nullptr, true);
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  return launch_host_func(hStream, fn, userData);
}

CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
  return launch_host_func(hStream, fn, userData);
}

}  // extern "C"
