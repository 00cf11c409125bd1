// The few driver and NVML functions gshare itself calls, as typed pointers
// to the *real* functions. allocator/ and scheduler/ call the driver only
// through this table, so they never know symbol names and unit tests can
// fill it with fakes. base/driver_api.cpp fills it.
#pragma once

#include <cuda.h>

#include "base/nvml_abi.h"

namespace gshare {

struct DriverApi {
  CUresult (*ctx_get_current)(CUcontext*);
  CUresult (*ctx_get_device)(CUdevice*);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_uuid)(CUuuid*, CUdevice);
  CUresult (*device_total_mem)(size_t*, CUdevice);
  CUresult (*device_primary_ctx_get_state)(CUdevice, unsigned int*, int*);
  CUresult (*mem_get_info)(size_t*, size_t*);
  CUresult (*device_get_mem_pool)(CUmemoryPool*, CUdevice);
  CUresult (*mem_pool_get_attribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*mem_pool_trim_to)(CUmemoryPool, size_t);
  CUresult (*device_get_graph_mem_attribute)(CUdevice, CUgraphMem_attribute, void*);
  CUresult (*mem_free_async)(CUdeviceptr, CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*);
  // The scheduler: draining before a strict handover, bounding in-flight work.
  CUresult (*ctx_synchronize)();
  CUresult (*event_create)(CUevent*, unsigned int);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_synchronize)(CUevent);
  CUresult (*event_destroy)(CUevent);
  // How busy a job keeps the GPU (runtime/gpu_busy.h): timed events.
  CUresult (*event_query)(CUevent);
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent);

  // Paging (allocator/movable_memory.h, allocator/pager.h): movable
  // allocations are reserved address space backed by physical memory that
  // comes and goes, copied through pinned host memory on a stream of its own.
  CUresult (*mem_get_allocation_granularity)(size_t*, const CUmemAllocationProp*,
                                             CUmemAllocationGranularity_flags);
  CUresult (*mem_address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*mem_address_free)(CUdeviceptr, size_t);
  CUresult (*mem_create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                         unsigned long long);
  CUresult (*mem_release)(CUmemGenericAllocationHandle);
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                      unsigned long long);
  CUresult (*mem_unmap)(CUdeviceptr, size_t);
  CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*mem_host_alloc)(void**, size_t, unsigned int);
  CUresult (*mem_free_host)(void*);
  CUresult (*mem_host_register)(void*, size_t, unsigned int);
  CUresult (*mem_host_unregister)(void*);
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*stream_create)(CUstream*, unsigned int);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*ctx_push_current)(CUcontext);
  CUresult (*ctx_pop_current)(CUcontext*);
  // CUDA IPC of movable memory (allocator/memory_export.h): its physical
  // memory travels as a file descriptor.
  CUresult (*mem_export_to_shareable_handle)(void*, CUmemGenericAllocationHandle,
                                             CUmemAllocationHandleType, unsigned long long);
  CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle*, void*,
                                               CUmemAllocationHandleType);
  // NVML, loaded by gshare itself when first needed (load_nvml_for_gshare).
  nvml::Return (*nvml_init)();
  nvml::Return (*nvml_device_get_handle_by_uuid)(const char*, nvml::Device*);
  nvml::Return (*nvml_device_get_uuid)(nvml::Device, char*, unsigned int);
  nvml::Return (*nvml_device_get_compute_running_processes)(nvml::Device, unsigned int*,
                                                            nvml::ProcessInfo*);
};

// Filled once the driver is bound; entries may be null on old drivers.
const DriverApi& driver();

// Makes `api` the table, and the real driver is never looked up: for unit
// tests of the layers above, in a process without the preload. Call before
// anything uses the table.
void replace_driver(const DriverApi& api);

// Loads NVML for gshare's own queries, once. False if there is no NVML; the
// nvml_* entries stay null then.
bool load_nvml_for_gshare();

}  // namespace gshare
