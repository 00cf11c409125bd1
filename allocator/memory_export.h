// CUDA IPC of movable memory, the exporting side.
//
// cuIpcGetMemHandle of a movable allocation (allocator/movable_memory.h)
// cannot go to the driver, which exports only memory cuMemAlloc made. So
// gshare exports it itself:
//   - the allocation is brought back to the GPU if it was paged out, and
//     stops moving for the rest of its life: another process may use it
//     at any moment, and a page-out would take its memory from under it.
//     Its bytes stay counted, in their class, like any resident memory.
//   - the physical memory behind it is exported as a file descriptor
//     (cuMemExportToShareableHandle), kept until the allocation is freed;
//   - the handle (allocator/ipc_handle.h) names this process, a secret it
//     drew and the allocation; a thread of this process answers each
//     importer, of the same user or root, with a duplicate of the
//     descriptor over a Unix socket.
// The importer maps the same physical memory (allocator/memory_import.h).
// As with the driver's own IPC, the exporter must not free the memory
// while others use it; if it does, or exits, importers keep what they
// mapped, but it is no longer counted against anyone's quota.
#pragma once

#include <cuda.h>

#include "allocator/ledger.h"

namespace gshare::allocator {

// Exports `entry`, the movable allocation `pointer` lies in, into *handle.
// CUDA_SUCCESS, or an error with one message saying why.
CUresult export_movable(const Allocation& entry, CUipcMemHandle* handle);

// In a fork()ed child: the parent's answering thread did not come along.
void forget_exports_after_fork();

}  // namespace gshare::allocator
