// CUDA IPC of device memory: cuIpcGetMemHandle, cuIpcOpenMemHandle (both
// ABI forms) and cuIpcCloseMemHandle. Memory gshare backs itself (movable
// memory, under GSHARE_PAGING=on) is exported and opened by gshare
// (allocator/memory_export.h, allocator/memory_import.h); everything else
// goes to the driver untouched. A handle of gshare's is opened here
// whatever this process's own settings: the driver cannot open it.
#include "allocator/ipc_handle.h"
#include "allocator/memory_export.h"
#include "allocator/memory_import.h"
#include "allocator/movable_memory.h"
#include "intercept/interception.h"

using namespace gshare;
using namespace gshare::intercept;

GSHARE_HOOK(CUresult, cuIpcGetMemHandle, (CUipcMemHandle * handle, CUdeviceptr dptr)) {
  if (!hooks_active() || !handle || !allocator::paging_enabled()) return REAL(cuIpcGetMemHandle)(handle, dptr);
  HookScope scope;
  allocator::Allocation entry;
  if (!allocator::find_movable(dptr, &entry)) return REAL(cuIpcGetMemHandle)(handle, dptr);
  return allocator::export_movable(entry, handle);
}

GSHARE_HOOK(CUresult, cuIpcOpenMemHandle_v2, (CUdeviceptr * dptr, CUipcMemHandle handle, unsigned int flags)) {
  if (!dptr || !allocator::is_gshare_ipc_handle(handle.reserved)) return REAL(cuIpcOpenMemHandle_v2)(dptr, handle, flags);
  HookScope scope;
  return allocator::open_imported(dptr, handle);
}

GSHARE_HOOK(CUresult, cuIpcOpenMemHandle, (CUdeviceptr * dptr, CUipcMemHandle handle, unsigned int flags)) {
  if (!dptr || !allocator::is_gshare_ipc_handle(handle.reserved)) return REAL(cuIpcOpenMemHandle)(dptr, handle, flags);
  HookScope scope;
  return allocator::open_imported(dptr, handle);
}

GSHARE_HOOK(CUresult, cuIpcCloseMemHandle, (CUdeviceptr dptr)) {
  HookScope scope;
  CUresult result;
  if (allocator::close_imported(dptr, &result)) return result;
  return REAL(cuIpcCloseMemHandle)(dptr);
}
