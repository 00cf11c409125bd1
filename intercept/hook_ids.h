// The hook rows as numbers, their real functions, and the per-thread guard.
// Free of cuda.h on purpose: hook_table.cpp sees the wrappers only as
// addresses. Everything else includes interception.h.
#pragma once

#include <atomic>

#include "base/hook_depth.h"
#include "intercept/hook_list.h"

namespace gshare::intercept {

// Enumerators are pasted (`id_cuMemAlloc`), so a cuda.h renaming macro that
// happens to be visible cannot turn two rows into one name.
enum class HookId : int {
#define GSHARE_HOOK_ID(name) id_##name,
  GSHARE_CUDA_HOOKS(GSHARE_HOOK_ID) GSHARE_NVML_HOOKS(GSHARE_HOOK_ID)
#undef GSHARE_HOOK_ID
  kCount
};

// Real function of each row; null until bound.
extern void* g_real[int(HookId::kCount)];

// Binds `id` now (a wrapper was called before cuInit bound the driver).
// Never null: an unavailable function yields a stub returning "not found".
void* bind_real_slow(HookId id);

inline void* real_function(HookId id) {
  void* real = __atomic_load_n(&g_real[int(id)], __ATOMIC_RELAXED);
  return __builtin_expect(real != nullptr, 1) ? real : bind_real_slow(id);
}

// Binds every CUDA row to libcuda (idempotent, thread-safe). False if
// libcuda cannot be found.
bool bind_driver();
// Binds the NVML rows to libnvidia-ml if it is loaded (or loads it if
// `load` is set). False if it is not there.
bool bind_nvml(bool load);

// The wrapper bound to real function `real`, or null if `real` is not the
// real function of any row. Used by cuGetProcAddress.
void* wrapper_for_real(void* real);
// For dlsym: given a looked-up name and the real result, the pointer to hand
// back (the wrapper if `result` is the real function of a hooked name).
void* substitute_for_dlsym(const char* name, void* result);

// Process-wide state, one relaxed load on every hook.
enum class RuntimeState : int {
  kWaiting = 0,   // before a successful cuInit: pass through
  kActive = 1,    // accounting and limits on
  kDisabled = 2,  // GSHARE_DISABLE=1: pass through for good
  kRefused = 3,   // bad configuration: cuInit fails, everything passes through
};
extern std::atomic<int> g_state;

inline bool hooks_active() {
  return g_state.load(std::memory_order_relaxed) == int(RuntimeState::kActive) && t_hook_depth == 0;
}

// Marks this thread as inside gshare for the scope's lifetime, so driver calls
// that re-enter a hook (a driver calling its own exported names) pass through.
struct HookScope {
  HookScope() { ++t_hook_depth; }
  ~HookScope() { --t_hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

}  // namespace gshare::intercept
