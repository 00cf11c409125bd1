// CUDA IPC of movable memory, the importing side: cuIpcOpenMemHandle of a
// handle gshare made (allocator/ipc_handle.h) asks the exporting process
// for its physical memory's descriptor (allocator/memory_export.h), maps
// it at new address space in this process, readable and writable by the
// current context's device, and returns the allocation's base, as the
// driver does. Opening one handle again returns the same address and
// counts a reference; cuIpcCloseMemHandle drops one, and the last unmaps.
// Imported memory is not counted here: its exporter is charged for it.
// Both processes must run under gshare: the driver cannot open these
// handles.
#pragma once

#include <cuda.h>

namespace gshare::allocator {

// Opens a handle for which is_gshare_ipc_handle holds. On failure, one
// message saying why: CUDA_ERROR_INVALID_HANDLE for a handle whose
// exporter is gone, freed the memory, or refused; CUDA_ERROR_INVALID_CONTEXT
// with no current context.
CUresult open_imported(CUdeviceptr* pointer, const CUipcMemHandle& handle);

// cuIpcCloseMemHandle of `pointer`, if it was opened by open_imported:
// true, with the result in *result. False: not one of them.
bool close_imported(CUdeviceptr pointer, CUresult* result);

}  // namespace gshare::allocator
