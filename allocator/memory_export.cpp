#include "allocator/memory_export.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "allocator/devices.h"
#include "allocator/ipc_handle.h"
#include "allocator/movable_memory.h"
#include "allocator/pager.h"
#include "allocator/tracked_memory.h"
#include "base/background_thread.h"
#include "base/clock.h"
#include "base/driver_api.h"
#include "base/fd_passing.h"
#include "base/log.h"
#include "base/tunables.h"

namespace gshare::allocator {

namespace {

pthread_mutex_t g_server_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> g_listener{-1};
uint64_t g_secret = 0;  // set once, before the listener is published
std::atomic<uint32_t> g_serial{0};

uint64_t draw_secret() {
  uint64_t secret = 0;
  if (getrandom(&secret, sizeof secret, GRND_NONBLOCK) != ssize_t(sizeof secret))
    secret = mono_now_ns() * 0x9e3779b97f4a7c15ull ^ uint64_t(getpid()) << 32;
  return secret | 1;  // never 0: 0 means "none drawn"
}

// One importer's question and its answer. Another user is answered at
// once, before it says anything: it cannot hold the answering thread.
void answer(int connection) {
  set_socket_timeouts(connection, tunables::kIpcTimeoutMs);
  IpcReply reply{};
  pid_t pid = 0;
  uid_t uid = 0;
  if (!peer_of(connection, &pid, &uid) || (uid != geteuid() && uid != 0)) {
    reply.answer = uint32_t(IpcAnswer::kRefused);
    send_message(connection, &reply, sizeof reply, -1);
    GSHARE_WARN("refused a CUDA IPC import asked by process %d of user %u: only this process's user "
                "(%u) or root may import its memory",
                int(pid), unsigned(uid), unsigned(geteuid()));
    return;
  }
  IpcRequest request;
  int stray = -1;
  if (!receive_message(connection, &request, sizeof request, &stray)) return;
  if (stray >= 0) close(stray);
  int fd = -1;
  bool found = false;
  if (memcmp(request.magic, kIpcMagic, sizeof kIpcMagic) == 0 && request.secret == g_secret) {
    // Duplicated under the ledger's lock: a free takes the entry out under
    // it before closing the descriptor, so this never duplicates a closed one.
    ledger().update(AllocationKind::kDevice, request.pointer, [&](Allocation& a) {
      if (!a.exported || a.export_serial != request.serial || a.export_fd < 0) return;
      found = true;
      fd = fcntl(a.export_fd, F_DUPFD_CLOEXEC, 0);
      reply.size = a.extent;
    });
  }
  reply.answer = uint32_t(!found ? IpcAnswer::kUnknown : fd >= 0 ? IpcAnswer::kGranted : IpcAnswer::kFailed);
  send_message(connection, &reply, sizeof reply, fd);
  if (fd >= 0) close(fd);
}

void* serve(void*) {
  for (;;) {
    const int listener = g_listener.load();
    if (listener < 0) return nullptr;
    int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) return nullptr;
      // Out of descriptors, or an aborted connection: a moment, then on.
      if (errno != EINTR && errno != ECONNABORTED) usleep(10'000);
      continue;
    }
    answer(connection);
    close(connection);
  }
}

// The answering thread and its socket, made at the first export.
bool start_server() {
  if (g_listener.load() >= 0) return true;
  pthread_mutex_lock(&g_server_mutex);
  bool ok = g_listener.load() >= 0;
  if (!ok) {
    g_secret = draw_secret();
    char name[80];
    ipc_socket_name(unsigned(geteuid()), unsigned(getpid()), g_secret, name);
    int listener = listen_on_abstract_name(name);
    if (listener < 0) {
      GSHARE_ERROR("cuIpcGetMemHandle: no socket to hand the memory to importers (%s)", strerror(errno));
    } else {
      g_listener.store(listener);
      ok = start_background_thread(serve, "gshare-ipc");
      if (!ok) {
        g_listener.store(-1);
        close(listener);
        GSHARE_ERROR("cuIpcGetMemHandle: no thread to hand the memory to importers");
      }
    }
  }
  pthread_mutex_unlock(&g_server_mutex);
  return ok;
}

// Under the movable-memory lock, `entry` resident: makes it an export,
// unless it is one already, and updates *entry. *host_copy gets the host
// copy it kept, now of no use, for the caller to free.
CUresult pin_and_export(Allocation* entry_out, Allocation* host_copy) {
  const Allocation& entry = *entry_out;
  if (entry.exported) return CUDA_SUCCESS;
  const DriverApi& api = driver();
  if (!api.mem_export_to_shareable_handle) return CUDA_ERROR_NOT_SUPPORTED;
  int fd = -1;
  CUresult r = api.mem_export_to_shareable_handle(&fd, entry.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (r != CUDA_SUCCESS) {
    GSHARE_ERROR("cuIpcGetMemHandle of %#llx: this memory can be paged to host memory (GSHARE_PAGING=on) "
                 "and the driver would not export it as a file descriptor (error %d); programs that "
                 "share device memory between processes here must run with GSHARE_PAGING=off",
                 (unsigned long long)entry.key, int(r));
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (!start_server()) {
    close(fd);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  const uint32_t serial = g_serial.fetch_add(1) + 1;
  ledger().update(AllocationKind::kDevice, entry.key, [&](Allocation& a) {
    *host_copy = a;
    a.exported = 1;
    a.export_fd = fd;
    a.export_serial = serial;
    a.host_copy = 0;
    a.host_registered = 0;
    *entry_out = a;
  });
  if (Device* device = attached_device(entry.device)) note_movable_resident(*device, -int64_t(entry.extent));
  GSHARE_INFO("exported %.1f MiB at %#llx through CUDA IPC: it stays on the GPU from now on",
              double(entry.extent) / (1024.0 * 1024.0), (unsigned long long)entry.key);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult export_movable(const Allocation& found, CUipcMemHandle* handle) {
  // Resident under the lock, it stays so (the pager takes the lock for a
  // whole page-out); paged out, it comes back first, as for a copy.
  for (int attempt = 0; attempt < 3; ++attempt) {
    Allocation entry, host_copy;
    CUresult r = CUDA_SUCCESS;
    bool resident = false;
    {
      MovableMemoryLock lock(true);
      if (!ledger().find(AllocationKind::kDevice, found.key, &entry) || !entry.movable)
        return CUDA_ERROR_INVALID_VALUE;  // freed meanwhile
      resident = !entry.paged;
      if (resident) r = pin_and_export(&entry, &host_copy);
    }
    if (host_copy.host_copy) free_entry_host_copy(host_copy);
    if (resident) {
      if (r != CUDA_SUCCESS) return r;
      IpcHandle h{};
      memcpy(h.magic, kIpcMagic, sizeof kIpcMagic);
      h.pid = uint32_t(getpid());
      h.uid = uint32_t(geteuid());
      h.secret = g_secret;
      h.pointer = entry.key;
      h.serial = entry.export_serial;
      h.size = entry.extent;
      static_assert(sizeof h == sizeof handle->reserved, "handle size");
      memcpy(handle->reserved, &h, sizeof h);
      return CUDA_SUCCESS;
    }
    DeviceWork work = begin_device_work();
    if (!work.entered) return work.result;
    end_device_work(work);
  }
  GSHARE_ERROR("cuIpcGetMemHandle of %#llx: the memory was paged out again each time it came back",
               (unsigned long long)found.key);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void forget_exports_after_fork() {
  // The socket is the parent's (shared with it): the child's first export
  // makes its own, with a new secret.
  const int listener = g_listener.exchange(-1);
  if (listener >= 0) close(listener);
  g_server_mutex = PTHREAD_MUTEX_INITIALIZER;
}

}  // namespace gshare::allocator
