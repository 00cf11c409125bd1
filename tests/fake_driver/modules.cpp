// Modules, libraries, functions and kernels.
//
// Module images are accepted whatever they contain (nothing is compiled or
// run); a function exists for any name asked for. Its behaviour when launched
// comes from its name (README.md, "Kernels"):
//   contains "spin"        runs for *(unsigned long long*)kernelParams[0] ns
//                          (the repo's PTX kernel gshare_spin(unsigned long long ns))
//   contains "sleep_us_N"  runs for N microseconds
//   anything else          runs for 1 us
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "fake_cuda_internal.h"

namespace fakecuda {

namespace {

CUfunc_st* new_function(const char* name, CUmod_st* mod, CUlib_st* lib) {
  CUfunc_st* f = new CUfunc_st();
  f->name = name;
  f->module = mod;
  f->library = lib;
  if (f->name.find("spin") != std::string::npos) {
    f->duration_from_param = true;
  } else if (size_t at = f->name.find("sleep_us_"); at != std::string::npos) {
    const char* digits = f->name.c_str() + at + std::strlen("sleep_us_");
    f->fixed_ns = std::strtoull(digits, nullptr, 10) * 1000ULL;
  } else {
    f->fixed_ns = 1000;
  }
  S().functions.insert(f);
  return f;
}

CUresult load_module(CUmodule* module, const void* image) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  CUctx_st* ctx = nullptr;
  rc = current_ctx_locked(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  CUmod_st* m = new CUmod_st();
  m->ctx = ctx;
  s.modules.insert(m);
  *module = m;
  return CUDA_SUCCESS;
}

}  // namespace

CUfunc_st* function_locked(CUfunction f) {
  State& s = S();
  if (f == nullptr) return nullptr;
  if (s.functions.count(f) != 0) return f;
  CUkern_st* k = reinterpret_cast<CUkern_st*>(f);  // CUkernel is accepted too
  if (s.kernels.count(k) != 0) return k->func;
  return nullptr;
}

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

// ===========================================================================
// Modules
// ===========================================================================
CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  return load_module(module, image);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                                    CUjit_option* options, void** optionValues) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (numOptions > 0 && (options == nullptr || optionValues == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return load_module(module, image);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return load_module(module, fatCubin);
}

CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (::access(fname, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
  return load_module(module, fname);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (hmod == nullptr || s.modules.count(hmod) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& kv : hmod->functions) s.functions.erase(kv.second);
  hmod->loaded = false;
  s.modules.erase(hmod);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (hmod == nullptr || s.modules.count(hmod) == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto it = hmod->functions.find(name);
  if (it == hmod->functions.end()) {
    it = hmod->functions.emplace(name, new_function(name, hmod, nullptr)).first;
  }
  *hfunc = it->second;
  return CUDA_SUCCESS;
}

// ===========================================================================
// Libraries and kernels (context-independent)
// ===========================================================================
CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                                   void** jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption* libraryOptions,
                                   void** libraryOptionValues, unsigned int numLibraryOptions) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((numJitOptions > 0 && (jitOptions == nullptr || jitOptionsValues == nullptr)) ||
      (numLibraryOptions > 0 && (libraryOptions == nullptr || libraryOptionValues == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  CUlib_st* lib = new CUlib_st();
  s.libraries.insert(lib);
  *library = lib;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (library == nullptr || s.libraries.count(library) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& kv : library->kernels) {
    s.functions.erase(kv.second->func);
    s.kernels.erase(kv.second);
  }
  library->loaded = false;
  s.libraries.erase(library);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pKernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (library == nullptr || s.libraries.count(library) == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto it = library->kernels.find(name);
  if (it == library->kernels.end()) {
    CUkern_st* k = new CUkern_st();
    k->func = new_function(name, nullptr, library);
    s.kernels.insert(k);
    it = library->kernels.emplace(name, k).first;
  }
  *pKernel = it->second;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  CUctx_st* ctx = nullptr;
  rc = current_ctx_locked(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (kernel == nullptr || s.kernels.count(kernel) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *pFunc = kernel->func;
  return CUDA_SUCCESS;
}

// ===========================================================================
// Function attributes and occupancy
// ===========================================================================
CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUfunc_st* f = function_locked(hfunc);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = f->max_dynamic_shared; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = f->preferred_carveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *pi = f->required_cluster_width; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *pi = f->required_cluster_height; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = f->required_cluster_depth; break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      *pi = f->non_portable_cluster_size_allowed;
      break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      *pi = f->cluster_scheduling_policy;
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  CUfunc_st* f = function_locked(hfunc);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0 || value > 232448) return CUDA_ERROR_INVALID_VALUE;
      f->max_dynamic_shared = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
      f->preferred_carveout = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      f->required_cluster_width = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      f->required_cluster_height = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      f->required_cluster_depth = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      f->non_portable_cluster_size_allowed = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      f->cluster_scheduling_policy = value;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUfunc_st* f = function_locked(hfunc);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name.c_str();  // functions are never freed, so this stays valid
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                            int blockSize,
                                                            size_t dynamicSMemSize) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (numBlocks == nullptr || blockSize <= 0 || blockSize > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (dynamicSMemSize > 232448) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  if (function_locked(func) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const int warps = (blockSize + 31) / 32;
  int blocks = 64 / warps;  // 64 warps per SM
  if (blocks > 32) blocks = 32;
  *numBlocks = blocks;
  return CUDA_SUCCESS;
}

}  // extern "C"
