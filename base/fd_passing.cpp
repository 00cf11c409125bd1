#include "base/fd_passing.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace gshare {

namespace {

// sun_path of the abstract name: a NUL, then the name (not terminated).
socklen_t abstract_address(const char* name, sockaddr_un* address) {
  memset(address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  size_t length = strnlen(name, sizeof address->sun_path - 1);
  memcpy(address->sun_path + 1, name, length);
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + length);
}

}  // namespace

int listen_on_abstract_name(const char* name) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_un address;
  socklen_t length = abstract_address(name, &address);
  if (bind(s, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(s, 16) != 0) {
    int saved = errno;
    close(s);
    errno = saved;
    return -1;
  }
  return s;
}

void set_socket_timeouts(int socket, int timeout_ms) {
  timeval t{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

int connect_to_abstract_name(const char* name, int timeout_ms) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  // Before connecting: a full backlog holds connect() for the send timeout.
  set_socket_timeouts(s, timeout_ms);
  sockaddr_un address;
  socklen_t length = abstract_address(name, &address);
  int r;
  do {
    r = connect(s, reinterpret_cast<sockaddr*>(&address), length);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    int saved = errno;
    close(s);
    errno = saved;
    return -1;
  }
  return s;
}

bool peer_of(int socket, pid_t* pid, uid_t* uid) {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return false;
  *pid = credentials.pid;
  *uid = credentials.uid;
  return true;
}

bool send_message(int socket, const void* data, size_t bytes, int fd) {
  iovec part{const_cast<void*>(data), bytes};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    memset(control, 0, sizeof control);
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof fd);
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == ssize_t(bytes);
}

bool receive_message(int socket, void* data, size_t bytes, int* fd) {
  *fd = -1;
  iovec part{data, bytes};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  // Room for a few: anything beyond the one expected is closed, not leaked.
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = recvmsg(socket, &message, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (got < 0 && errno == EINTR);
  int count = 0;
  for (cmsghdr* h = got >= 0 ? CMSG_FIRSTHDR(&message) : nullptr; h; h = CMSG_NXTHDR(&message, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int received;
      memcpy(&received, CMSG_DATA(h) + i * sizeof(int), sizeof received);
      if (count++ == 0) *fd = received;
      else close(received);
    }
  }
  bool ok = got == ssize_t(bytes) && count <= 1 && !(message.msg_flags & MSG_CTRUNC);
  if (!ok && *fd >= 0) {
    close(*fd);
    *fd = -1;
  }
  return ok;
}

}  // namespace gshare
