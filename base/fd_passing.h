// Passing an open file descriptor to another process: a Unix stream socket
// in the abstract namespace (no file to clean up after a crash), one
// request and one reply per connection, the descriptor riding on the reply
// as SCM_RIGHTS. Every call is bounded: sockets carry send and receive
// timeouts, and connecting to a full backlog waits no longer than the
// send timeout. Used by CUDA IPC of memory gshare backs itself
// (allocator/memory_export.h).
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace gshare {

// A listening socket bound to the abstract name `name`, close-on-exec; -1
// with errno set if it could not be made (the name is taken, for one).
int listen_on_abstract_name(const char* name);

// Connected to `name`, with both timeouts set to `timeout_ms`; -1 with errno.
int connect_to_abstract_name(const char* name, int timeout_ms);

// Sets both timeouts of a connected socket.
void set_socket_timeouts(int socket, int timeout_ms);

// The process at the other end of a connected socket.
bool peer_of(int socket, pid_t* pid, uid_t* uid);

// Sends exactly `bytes` of `data`, with `fd` attached when it is not -1.
bool send_message(int socket, const void* data, size_t bytes, int fd);

// Receives exactly `bytes` into `data`; *fd gets a descriptor that came
// with them (close-on-exec) or -1. False on a short read, a timeout or
// more than one descriptor (any that came are closed).
bool receive_message(int socket, void* data, size_t bytes, int* fd);

}  // namespace gshare
