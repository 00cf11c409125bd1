#include "base/hook_depth.h"

namespace gshare {

__thread int t_hook_depth __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace gshare
