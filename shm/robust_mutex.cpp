#include "shm/robust_mutex.h"

#include <cerrno>

namespace gshare::shm {

bool robust_mutex_init(pthread_mutex_t* m) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return false;
  bool ok = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
            pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
            pthread_mutex_init(m, &attr) == 0;
  pthread_mutexattr_destroy(&attr);
  return ok;
}

LockResult robust_mutex_lock(pthread_mutex_t* m, RepairFn repair, void* context) {
  int rc = pthread_mutex_lock(m);
  if (rc == 0) return LockResult::kLocked;
  if (rc == EOWNERDEAD) {
    // We hold the lock and the state may be half-updated: repair, then
    // declare it consistent so later lockers get a normal lock.
    repair(context);
    pthread_mutex_consistent(m);
    return LockResult::kRepaired;
  }
  // ENOTRECOVERABLE: a process saw EOWNERDEAD and died before repairing.
  // glibc will never hand this mutex out again; nobody can be holding it, so
  // re-create it in place and repair under it.
  if (rc == ENOTRECOVERABLE) {
    if (!robust_mutex_init(m)) return LockResult::kFailed;
    rc = pthread_mutex_lock(m);
    if (rc != 0 && rc != EOWNERDEAD) return LockResult::kFailed;
    repair(context);
    if (rc == EOWNERDEAD) pthread_mutex_consistent(m);
    return LockResult::kRepaired;
  }
  return LockResult::kFailed;  // EINVAL, EDEADLK: corrupt mutex or a bug
}

void robust_mutex_unlock(pthread_mutex_t* m) { pthread_mutex_unlock(m); }

}  // namespace gshare::shm
