// How gshare intercepts the CUDA driver, and how to add a hook.
//
// How it works on Linux
//   A process reaches libcuda in three ways, and gshare covers all three:
//   1. dlsym(handle, "cu...")     -- dlsym_hook.cpp exports `dlsym`. For a
//      hooked name whose real result is libcuda's (or NVML's) function, it
//      returns gshare's wrapper instead. Every other lookup is untouched.
//   2. cuGetProcAddress[_v2]      -- proc_address_hooks.cpp calls the real
//      lookup with the caller's own arguments, then swaps the returned
//      pointer for the wrapper bound to exactly that pointer. The swap is by
//      identity of the real address, never by guessing "_v2" names, so the
//      version the caller asked for is the ABI it gets.
//   3. exported symbols           -- each wrapper is an exported function of
//      the exact ABI name, so programs linked against libcuda bind to it.
//   Real functions are found once, by dlsym on libcuda's own handle (never
//   RTLD_NEXT, which would find ourselves); hook_table.cpp holds them.
//
// How to add a hook
//   1. Add the exact ABI name to GSHARE_CUDA_HOOKS in hook_list.h.
//   2. Define the wrapper in the *_hooks.cpp file of its group:
//        GSHARE_HOOK(CUresult, cuFoo_v2, (CUdeviceptr p, size_t n)) {
//          if (!hooks_active()) return REAL(cuFoo_v2)(p, n);
//          HookScope scope;             // only if it calls back into gshare
//          return allocator::foo(...);  // policy lives outside intercept/
//        }
//   3. Add the name to exports.map if it is not matched by a pattern there.
//   The row is bound at startup; a failed bind is logged once and the
//   wrapper then reports CUDA_ERROR_NOT_FOUND if ever called.
//
// Rules for hook code: no allocation, iostream or exception; before gshare
// is initialised, or when the thread is already inside gshare, call straight
// through; the launch path is a few loads and one relaxed atomic add.
#pragma once

#include "intercept/cuda_abi.h"  // first: the hook names must not be macros
#include "intercept/hook_ids.h"

#define GSHARE_EXPORT extern "C" __attribute__((visibility("default")))

// Defines the exported wrapper `name` with C linkage.
#define GSHARE_HOOK(ret, name, params) GSHARE_EXPORT ret name params

// The real function behind wrapper `name`, with the wrapper's own type.
#define REAL(name)                      \
  (reinterpret_cast<decltype(&name)>( \
      ::gshare::intercept::real_function(::gshare::intercept::HookId::id_##name)))

// For hooks that only take note of what a successful call did: runs
// `note()` inside gshare when the driver succeeded and gshare is active.
template <class Note>
inline CUresult on_success(CUresult result, Note&& note) {
  if (result == CUDA_SUCCESS && ::gshare::intercept::hooks_active()) {
    ::gshare::intercept::HookScope scope;
    note();
  }
  return result;
}

#define GSHARE_LIKELY(x) __builtin_expect(!!(x), 1)
#define GSHARE_UNLIKELY(x) __builtin_expect(!!(x), 0)
