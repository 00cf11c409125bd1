#include "base/driver_api.h"

#include <dlfcn.h>
#include <pthread.h>

#include "base/log.h"
#include "base/real_dlsym.h"

namespace gshare {

namespace {
DriverApi g_api;
pthread_once_t g_driver_once = PTHREAD_ONCE_INIT;
pthread_once_t g_nvml_once = PTHREAD_ONCE_INIT;
bool g_nvml_ok = false;

template <class Fn>
void look_up(void* handle, Fn* slot, const char* name, const char* fallback = nullptr) {
  void* f = real_dlsym()(handle, name);
  if (!f && fallback) f = real_dlsym()(handle, fallback);
  *slot = reinterpret_cast<Fn>(f);
}

// Handle lookups reach libcuda's own functions, never gshare's wrappers.
void fill_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return;
  look_up(h, &g_api.ctx_get_current, "cuCtxGetCurrent");
  look_up(h, &g_api.ctx_get_device, "cuCtxGetDevice");
  look_up(h, &g_api.device_get, "cuDeviceGet");
  look_up(h, &g_api.device_get_uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
  look_up(h, &g_api.device_total_mem, "cuDeviceTotalMem_v2");
  look_up(h, &g_api.device_primary_ctx_get_state, "cuDevicePrimaryCtxGetState");
  look_up(h, &g_api.mem_get_info, "cuMemGetInfo_v2");
  look_up(h, &g_api.device_get_mem_pool, "cuDeviceGetMemPool");
  look_up(h, &g_api.mem_pool_get_attribute, "cuMemPoolGetAttribute");
  look_up(h, &g_api.mem_pool_trim_to, "cuMemPoolTrimTo");
  look_up(h, &g_api.device_get_graph_mem_attribute, "cuDeviceGetGraphMemAttribute");
  look_up(h, &g_api.mem_free_async, "cuMemFreeAsync");
  look_up(h, &g_api.stream_synchronize, "cuStreamSynchronize");
  look_up(h, &g_api.ctx_synchronize, "cuCtxSynchronize");
  look_up(h, &g_api.event_create, "cuEventCreate");
  look_up(h, &g_api.event_record, "cuEventRecord");
  look_up(h, &g_api.event_synchronize, "cuEventSynchronize");
  look_up(h, &g_api.event_destroy, "cuEventDestroy_v2", "cuEventDestroy");
  look_up(h, &g_api.event_query, "cuEventQuery");
  look_up(h, &g_api.event_elapsed_time, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  look_up(h, &g_api.stream_is_capturing, "cuStreamIsCapturing");
  look_up(h, &g_api.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  look_up(h, &g_api.mem_address_reserve, "cuMemAddressReserve");
  look_up(h, &g_api.mem_address_free, "cuMemAddressFree");
  look_up(h, &g_api.mem_create, "cuMemCreate");
  look_up(h, &g_api.mem_release, "cuMemRelease");
  look_up(h, &g_api.mem_map, "cuMemMap");
  look_up(h, &g_api.mem_unmap, "cuMemUnmap");
  look_up(h, &g_api.mem_set_access, "cuMemSetAccess");
  look_up(h, &g_api.mem_host_alloc, "cuMemHostAlloc");
  look_up(h, &g_api.mem_free_host, "cuMemFreeHost");
  look_up(h, &g_api.mem_host_register, "cuMemHostRegister_v2");
  look_up(h, &g_api.mem_host_unregister, "cuMemHostUnregister");
  look_up(h, &g_api.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  look_up(h, &g_api.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  look_up(h, &g_api.stream_create, "cuStreamCreate");
  look_up(h, &g_api.stream_destroy, "cuStreamDestroy_v2", "cuStreamDestroy");
  look_up(h, &g_api.ctx_push_current, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
  look_up(h, &g_api.ctx_pop_current, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
  look_up(h, &g_api.mem_export_to_shareable_handle, "cuMemExportToShareableHandle");
  look_up(h, &g_api.mem_import_from_shareable_handle, "cuMemImportFromShareableHandle");
}

void fill_nvml() {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  nvml::Return (*init)() = nullptr;
  look_up(h, &init, "nvmlInit_v2", "nvmlInit");
  if (!init || init() != nvml::kSuccess) return;
  look_up(h, &g_api.nvml_device_get_handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  look_up(h, &g_api.nvml_device_get_uuid, "nvmlDeviceGetUUID");
  look_up(h, &g_api.nvml_device_get_compute_running_processes,
          "nvmlDeviceGetComputeRunningProcesses_v3");
  g_api.nvml_init = init;
  g_nvml_ok = true;
}
}  // namespace

const DriverApi& driver() {
  pthread_once(&g_driver_once, fill_driver);
  return g_api;
}

void replace_driver(const DriverApi& api) {
  pthread_once(&g_driver_once, [] {});
  g_api = api;
}

bool load_nvml_for_gshare() {
  pthread_once(&g_nvml_once, fill_nvml);
  return g_nvml_ok;
}

}  // namespace gshare
