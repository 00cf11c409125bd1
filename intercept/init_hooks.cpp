// cuInit: where gshare starts. A bad GSHARE_* value makes it fail with
// CUDA_ERROR_INVALID_VALUE (the message is already printed), so the program
// reports a CUDA initialisation error instead of running without limits.
#include "intercept/interception.h"
#include "intercept/runtime.h"

using namespace gshare::intercept;

GSHARE_HOOK(CUresult, cuInit, (unsigned int flags)) {
  bind_driver();
  switch (start_runtime()) {
    case StartResult::kRefused: return CUDA_ERROR_INVALID_VALUE;
    case StartResult::kDisabled: return REAL(cuInit)(flags);
    case StartResult::kReady: break;
  }
  CUresult result = REAL(cuInit)(flags);
  if (result == CUDA_SUCCESS) activate_runtime();
  return result;
}
