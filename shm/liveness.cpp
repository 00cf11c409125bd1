#include "shm/liveness.h"

#include <fcntl.h>

#include <cerrno>

namespace gshare::shm {

namespace {
struct flock byte_lock(short type, off_t offset) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  return fl;
}
}  // namespace

bool hold_liveness_lock(int fd, off_t offset) {
  struct flock fl = byte_lock(F_WRLCK, offset);
  int rc;
  do rc = fcntl(fd, F_SETLK, &fl); while (rc != 0 && errno == EINTR);
  return rc == 0;
}

void drop_liveness_lock(int fd, off_t offset) {
  struct flock fl = byte_lock(F_UNLCK, offset);
  fcntl(fd, F_SETLK, &fl);
}

Liveness liveness_of(int fd, off_t offset) {
  struct flock fl = byte_lock(F_WRLCK, offset);
  if (fcntl(fd, F_GETLK, &fl) != 0) return Liveness::kUnknown;
  return fl.l_type == F_UNLCK ? Liveness::kDead : Liveness::kLive;
}

}  // namespace gshare::shm
