// A robust, process-shared pthread mutex living in the arbiter region.
//
// Contract: a lock that returns kLocked or kRepaired holds the mutex. When the
// previous holder died while holding it (EOWNERDEAD), the lock calls `repair`
// first, then marks the mutex consistent, so no caller ever works on a
// half-done update. kFailed means the mutex is unusable: the caller holds
// nothing and must fall back safely.
//
// The mutex lives in a file that other processes write, that may outlive a
// crash of the host (GSHARE_DIR on lasting storage) and that anyone with
// write access may change. So a lock never trusts it:
//   * Before every lock its words are checked (robust_mutex_is_plausible):
//     a type glibc was not asked for (say, priority-inheritance) makes
//     glibc's own assertions abort the program, so anything but exactly
//     what robust_mutex_init writes is refused.
//   * Every lock is bounded (kLockTimeoutNs on CLOCK_MONOTONIC): an owner
//     that no longer exists (a thread of a host that crashed, or two
//     changed bytes) is never woken by anyone, and waiting for it would hang
//     the program forever. The region's lock is held for microseconds.
//   * ENOTRECOVERABLE is a failure: re-creating the mutex in place is not
//     safe while another process may do the same and take it.
// A mutex that failed once stays failed in this process (later locks fail
// at once, without waiting again), and the failure handler, if any, hears
// of it once.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include "base/tunables.h"

namespace gshare::shm {

enum class LockResult { kLocked, kRepaired, kFailed };

// How long one lock may wait for the mutex before it is declared unusable.
using tunables::kLockTimeoutNs;

// Initialises `m` for use across processes, robust. Only the region's
// creator calls this, before the region is published.
bool robust_mutex_init(pthread_mutex_t* m);

// Whether the words of `m` hold what a mutex made by robust_mutex_init can
// hold at any time: exactly its type, and owner thread ids that can exist.
// Reads without locking; false, with the reason in `why`, otherwise.
bool robust_mutex_is_plausible(const pthread_mutex_t* m, char* why, size_t why_len);

using RepairFn = void (*)(void* context);

LockResult robust_mutex_lock(pthread_mutex_t* m, RepairFn repair, void* context);
void robust_mutex_unlock(pthread_mutex_t* m);

// Whether `m` was declared unusable in this process; why, if so.
bool robust_mutex_unusable(const pthread_mutex_t* m, char* why, size_t why_len);
// Forgets what was learnt about `m`: its memory is about to be unmapped,
// and another mutex may later live at its address.
void robust_mutex_forget(const pthread_mutex_t* m);

// Called once per mutex, by the thread whose lock found it unusable, with
// no lock held. One handler per process; nullptr removes it.
using UnusableFn = void (*)(const pthread_mutex_t* m, const char* why);
void robust_mutex_on_unusable(UnusableFn handler);

// Lock failures of the calling thread so far: compared before and after a
// call, it tells whether that call's own lock failed.
uint64_t robust_mutex_failures_in_thread();

}  // namespace gshare::shm
