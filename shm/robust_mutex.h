// A robust, process-shared pthread mutex living in the arbiter region.
//
// Contract: a lock that returns kLocked or kRepaired holds the mutex. When the
// previous holder died while holding it (EOWNERDEAD), the lock calls `repair`
// first, then marks the mutex consistent, so no caller ever works on a
// half-done update. kFailed means the mutex itself is unusable (corrupt
// memory): the caller holds nothing and must fall back safely.
#pragma once

#include <pthread.h>

namespace gshare::shm {

enum class LockResult { kLocked, kRepaired, kFailed };

// Initialises `m` for use across processes, robust. Only the region's
// creator calls this, before the region is published.
bool robust_mutex_init(pthread_mutex_t* m);

using RepairFn = void (*)(void* context);

LockResult robust_mutex_lock(pthread_mutex_t* m, RepairFn repair, void* context);
void robust_mutex_unlock(pthread_mutex_t* m);

}  // namespace gshare::shm
