// What a CUDA IPC handle of gshare's own says, and what its exporter and
// importer say to each other (allocator/memory_export.h,
// allocator/memory_import.h).
//
// The driver's cuIpcGetMemHandle exports only memory cuMemAlloc made
// itself; movable memory is gshare's (reserved address space and physical
// memory it maps), so its handle is gshare's: 64 bytes naming the
// exporting process, a secret the process drew, and the allocation. The
// importer asks the exporter, over a socket whose name both derive from
// the handle, for a descriptor of the physical memory, and maps it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace gshare::allocator {

constexpr char kIpcMagic[8] = {'g', 's', 'h', 'a', 'r', 'e', 'I', 'P'};

// Laid over CUipcMemHandle's 64 bytes.
struct IpcHandle {
  char magic[8];
  uint32_t pid;      // the exporting process
  uint32_t uid;      // its user: only the same user (or root) is answered
  uint64_t secret;   // drawn once per exporting process, names its socket
  uint64_t pointer;  // the allocation's base in the exporter
  uint64_t serial;   // its export: a later allocation at the same address differs
  uint64_t size;     // bytes, whole granules
  uint64_t unused[2];
};
static_assert(sizeof(IpcHandle) == 64, "CUipcMemHandle is 64 bytes");

inline bool is_gshare_ipc_handle(const void* bytes) {
  return memcmp(bytes, kIpcMagic, sizeof kIpcMagic) == 0;
}

// The exporter's socket, in the abstract namespace.
inline void ipc_socket_name(uint32_t uid, uint32_t pid, uint64_t secret, char (&name)[80]) {
  snprintf(name, sizeof name, "gshare-ipc/%u/%u/%016llx", uid, pid, (unsigned long long)secret);
}

struct IpcRequest {
  char magic[8];
  uint64_t secret, pointer, serial;
};

enum class IpcAnswer : uint32_t {
  kGranted = 0,    // the descriptor comes with the reply
  kUnknown = 1,    // no such export: freed, or never made
  kRefused = 2,    // another user asked
  kFailed = 3,     // the descriptor could not be made
};

struct IpcReply {
  uint32_t answer;
  uint32_t unused;
  uint64_t size;
};

}  // namespace gshare::allocator
