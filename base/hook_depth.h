// How many gshare frames the calling thread is inside. A driver call made
// from inside gshare that comes back through an exported name passes
// straight through while it is non-zero (intercept/hook_ids.h); code that
// runs a program's own work from inside gshare (a framework emptying its
// cache, whose frees must be counted) clears it for that while.
#pragma once

namespace gshare {

// Plain __thread with the initial-exec model: one %fs-relative load, no TLS
// wrapper call and no allocation on first touch (gshare is loaded at
// startup, so static TLS).
extern __thread int t_hook_depth __attribute__((tls_model("initial-exec")));

}  // namespace gshare
