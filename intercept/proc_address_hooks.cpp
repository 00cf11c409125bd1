// Path 2 of 3 into the driver: cuGetProcAddress. Every cudart copy (PyTorch's,
// cuBLAS's, cuDNN's, NCCL's) fetches the driver's functions this way. gshare
// calls the real lookup with the caller's arguments unchanged and swaps the
// result for the wrapper bound to exactly that pointer: the driver picks the
// ABI version, gshare never guesses one.
#include "intercept/interception.h"

namespace {
void swap_for_wrapper(CUresult result, void** pfn) {
  if (result != CUDA_SUCCESS || !pfn || !*pfn) return;
  if (void* wrapper = gshare::intercept::wrapper_for_real(*pfn)) *pfn = wrapper;
}
}  // namespace

// Pre-12.0 signature, still exported by the driver.
GSHARE_HOOK(CUresult, cuGetProcAddress,
            (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags)) {
  gshare::intercept::bind_driver();
  CUresult result = REAL(cuGetProcAddress)(symbol, pfn, cuda_version, flags);
  if (gshare::intercept::g_state.load(std::memory_order_relaxed) !=
      int(gshare::intercept::RuntimeState::kDisabled))
    swap_for_wrapper(result, pfn);
  return result;
}

GSHARE_HOOK(CUresult, cuGetProcAddress_v2,
            (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
             CUdriverProcAddressQueryResult* symbol_status)) {
  gshare::intercept::bind_driver();
  CUresult result = REAL(cuGetProcAddress_v2)(symbol, pfn, cuda_version, flags, symbol_status);
  if (gshare::intercept::g_state.load(std::memory_order_relaxed) !=
      int(gshare::intercept::RuntimeState::kDisabled))
    swap_for_wrapper(result, pfn);
  return result;
}
