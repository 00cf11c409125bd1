#include "allocator/memory_import.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>

#include "allocator/ipc_handle.h"
#include "allocator/movable_memory.h"
#include "base/driver_api.h"
#include "base/fd_passing.h"
#include "base/log.h"
#include "base/tunables.h"

namespace gshare::allocator {

namespace {

// The memory this process has open. A fixed table: hooks never call
// malloc, and a process opens few (PyTorch opens each shared segment once).
struct Import {
  uint32_t pid = 0;
  uint64_t secret = 0, pointer = 0, serial = 0;
  CUdeviceptr local = 0;
  uint64_t size = 0;
  CUmemGenericAllocationHandle physical = 0;
  uint32_t references = 0;  // 0: a free row
};
constexpr int kMaxImports = 1024;
Import g_imports[kMaxImports];
// Held across one exchange with an exporter, which its timeouts bound.
pthread_mutex_t g_imports_mutex = PTHREAD_MUTEX_INITIALIZER;

const char* answer_text(IpcAnswer answer) {
  switch (answer) {
    case IpcAnswer::kUnknown: return "it has freed that memory (or never exported it)";
    case IpcAnswer::kRefused: return "it answers only its own user and root";
    case IpcAnswer::kFailed: return "it could not duplicate the memory's descriptor";
    default: return "it answered something unknown";
  }
}

// Asks the exporter for the memory's descriptor; -1 after one message.
int fetch_descriptor(const IpcHandle& h) {
  char name[80];
  ipc_socket_name(h.uid, h.pid, h.secret, name);
  int s = connect_to_abstract_name(name, tunables::kIpcTimeoutMs);
  if (s < 0) {
    GSHARE_ERROR("cuIpcOpenMemHandle: process %u, which exported this memory, does not answer (%s): it "
                 "has exited, or runs in another network namespace",
                 h.pid, strerror(errno));
    return -1;
  }
  pid_t peer_pid = 0;
  uid_t peer_uid = 0;
  // Only the user the handle names: anyone else listening there is not it.
  if (!peer_of(s, &peer_pid, &peer_uid) || peer_uid != h.uid) {
    GSHARE_ERROR("cuIpcOpenMemHandle: the socket of process %u belongs to user %u, not %u: refused",
                 h.pid, unsigned(peer_uid), h.uid);
    close(s);
    return -1;
  }
  IpcRequest request{};
  memcpy(request.magic, kIpcMagic, sizeof kIpcMagic);
  request.secret = h.secret;
  request.pointer = h.pointer;
  request.serial = h.serial;
  IpcReply reply{};
  int fd = -1;
  // A refusal may come before the question is read: the answer counts,
  // even if sending the question failed.
  send_message(s, &request, sizeof request, -1);
  bool ok = receive_message(s, &reply, sizeof reply, &fd);
  close(s);
  if (!ok) {
    GSHARE_ERROR("cuIpcOpenMemHandle: process %u did not answer within %d ms", h.pid, tunables::kIpcTimeoutMs);
    return -1;
  }
  const IpcAnswer answer = IpcAnswer(reply.answer);
  if (answer != IpcAnswer::kGranted || fd < 0 || reply.size != h.size) {
    if (answer == IpcAnswer::kGranted)
      GSHARE_ERROR("cuIpcOpenMemHandle: process %u sent %llu bytes where the handle says %llu", h.pid,
                   (unsigned long long)reply.size, (unsigned long long)h.size);
    else
      GSHARE_ERROR("cuIpcOpenMemHandle: process %u will not share the memory at %#llx: %s", h.pid,
                   (unsigned long long)h.pointer, answer_text(answer));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// Maps the physical memory behind `fd` into new address space of `device`.
CUresult map_descriptor(int fd, uint64_t size, CUdevice device, CUdeviceptr* local,
                        CUmemGenericAllocationHandle* physical) {
  const DriverApi& api = driver();
  if (!api.mem_import_from_shareable_handle || !api.mem_address_reserve || !api.mem_map ||
      !api.mem_set_access || !api.mem_get_allocation_granularity)
    return CUDA_ERROR_NOT_SUPPORTED;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granule = 0;
  CUresult r = api.mem_get_allocation_granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return r;
  if (granule == 0 || size % granule != 0) return CUDA_ERROR_INVALID_VALUE;
  r = api.mem_import_from_shareable_handle(physical, reinterpret_cast<void*>(uintptr_t(fd)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) return r;
  r = api.mem_address_reserve(local, size, granule, 0, 0);
  if (r == CUDA_SUCCESS) {
    r = map_for_device(device, *local, size, *physical);
    if (r == CUDA_SUCCESS) return r;
    api.mem_address_free(*local, size);
  }
  api.mem_release(*physical);
  return r;
}

CUresult open_locked(CUdeviceptr* pointer, const IpcHandle& h) {
  Import* free_row = nullptr;
  for (Import& row : g_imports) {
    if (row.references == 0) {
      if (!free_row) free_row = &row;
      continue;
    }
    if (row.pid == h.pid && row.secret == h.secret && row.pointer == h.pointer && row.serial == h.serial) {
      row.references++;
      *pointer = row.local;
      return CUDA_SUCCESS;
    }
  }
  const DriverApi& api = driver();
  CUdevice device = 0;
  if (!api.ctx_get_device || api.ctx_get_device(&device) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  if (h.size == 0 || h.size > (uint64_t(1) << 48)) {
    GSHARE_ERROR("cuIpcOpenMemHandle: the handle is damaged (it says %llu bytes)", (unsigned long long)h.size);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!free_row) {
    GSHARE_ERROR("cuIpcOpenMemHandle: this process has %d handles of paged memory open, the most it can",
                 kMaxImports);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  int fd = fetch_descriptor(h);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  Import row;
  CUresult r = map_descriptor(fd, h.size, device, &row.local, &row.physical);
  close(fd);
  if (r != CUDA_SUCCESS) {
    GSHARE_ERROR("cuIpcOpenMemHandle: the memory of process %u came, but mapping it failed (error %d)", h.pid,
                 int(r));
    return r;
  }
  row.pid = h.pid;
  row.secret = h.secret;
  row.pointer = h.pointer;
  row.serial = h.serial;
  row.size = h.size;
  row.references = 1;
  *free_row = row;
  *pointer = row.local;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult open_imported(CUdeviceptr* pointer, const CUipcMemHandle& handle) {
  IpcHandle h;
  memcpy(&h, handle.reserved, sizeof h);
  pthread_mutex_lock(&g_imports_mutex);
  CUresult r = open_locked(pointer, h);
  pthread_mutex_unlock(&g_imports_mutex);
  return r;
}

bool close_imported(CUdeviceptr pointer, CUresult* result) {
  Import closing;
  bool found = false;
  pthread_mutex_lock(&g_imports_mutex);
  for (Import& row : g_imports) {
    if (row.references == 0 || row.local != pointer) continue;
    found = true;
    if (--row.references == 0) closing = row;
    break;
  }
  pthread_mutex_unlock(&g_imports_mutex);
  if (!found) return false;
  *result = CUDA_SUCCESS;
  if (closing.local == 0) return true;
  const DriverApi& api = driver();
  // As the driver's close: the memory goes once the work queued on it ends.
  if (api.ctx_synchronize) api.ctx_synchronize();
  CUresult unmapped = api.mem_unmap(closing.local, closing.size);
  CUresult released = api.mem_release(closing.physical);
  CUresult freed = api.mem_address_free(closing.local, closing.size);
  if (unmapped != CUDA_SUCCESS) *result = unmapped;
  else if (released != CUDA_SUCCESS) *result = released;
  else *result = freed;
  return true;
}

}  // namespace gshare::allocator
