// What a framework's own allocator says it holds.
//
// A caching allocator (PyTorch's, CuPy's pool, XLA's BFC) keeps freed
// memory in segments the driver never sees freed, and a training loop may
// sync anywhere in its iteration: seen from the driver, a cached
// activation and a weight look alike. The framework knows which of its
// bytes hold live tensors, so at host syncs gshare asks it:
//
//   torch  torch._C._cuda_memoryStats(d): allocated_bytes and
//          reserved_bytes, all pools, current (torch.cuda.memory_allocated
//          and memory_reserved where that is missing)
//   cupy   get_default_memory_pool(): used_bytes() and total_bytes()
//   jax    device.memory_stats(): bytes_in_use and pool_bytes, once JAX's
//          backend is up (asking never starts it)
//
// allocator/framework_classes.h turns the answers into P.
//
// The question runs on Python's main thread at its next bytecode
// (Py_AddPendingCall): never inside a hook, never waiting for the GIL from
// a thread that may hold a framework's lock, never importing anything. One
// question is outstanding at most. Each answer's cost buys 99 times as
// much time without questions (at most 100 ms), so they take at most about
// 1% of the time (an answer costs tens of microseconds); time not spent
// asking is saved, up to 100 ms, for a burst at syncs that come close
// together. Once its first answers have filled P's window, a job is asked
// at most once a second and once in 500 syncs (and at least every 30 s)
// while it is alone on its GPUs or while its answers repeat themselves: the
// question runs on the program's critical path (between an inference
// request's sync and its reply), and such answers teach nothing.
#pragma once

#include <cstdint>

namespace gshare::allocator {

// One framework's figures for one device ordinal.
struct FrameworkCount {
  int64_t ordinal;
  uint64_t allocated;  // in live tensors
  uint64_t reserved;   // taken from the driver: allocated + cached
};

// Asks the frameworks, if a question is due and Python runs; the answer
// reaches note_framework_counts (allocator/framework_classes.h) later, from
// Python's main thread. Cheap when not due.
void ask_framework_counts();

void forget_framework_counts_after_fork();

}  // namespace gshare::allocator
