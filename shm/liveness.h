// Liveness of a slot's owner, independent of PIDs.
//
// The owner holds a POSIX (process-associated) write lock on one byte of the
// region file. The kernel drops it when the process dies, however it dies,
// and F_GETLK sees it from any PID namespace that shares the file. POSIX
// rather than open-file-description locks on purpose: a fork()ed child (a
// DataLoader worker) must not inherit its parent's liveness.
// Caveat of POSIX locks: closing *any* descriptor of the region file in the
// owner drops its locks, so the owner keeps exactly one open descriptor.
#pragma once

#include <sys/types.h>

namespace gshare::shm {

// Takes the liveness lock of byte `offset`. False if another process holds it.
bool hold_liveness_lock(int fd, off_t offset);
void drop_liveness_lock(int fd, off_t offset);

enum class Liveness { kLive, kDead, kUnknown };

// Whether some *other* process holds the lock on `offset` (a process never
// sees its own POSIX locks as conflicting). kUnknown if fcntl failed.
Liveness liveness_of(int fd, off_t offset);

}  // namespace gshare::shm
