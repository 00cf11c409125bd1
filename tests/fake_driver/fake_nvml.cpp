// The fake NVML (libnvidia-ml.so.1). It describes the same fake devices as
// the fake driver (same FAKE_CUDA_* environment, same UUIDs) and reads memory
// use and the process list from the same shared device files, so it works
// whether or not the fake libcuda is loaded in this process.
#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_common.h"
#include "nvml_types.h"

struct nvmlDevice_st {
  unsigned int index = 0;
  unsigned char uuid[16] = {};
  std::string uuid_string;  // "GPU-..."
  unsigned long long total = 0;
  fakegpu::DeviceFile file;
};

namespace {

struct NvmlState {
  std::mutex mu;
  int init_count = 0;  // nvmlInit/nvmlShutdown nest, like the real library
  fakegpu::Config cfg;
  std::vector<std::unique_ptr<nvmlDevice_st>> devices;  // kept after shutdown
};

NvmlState& N() {
  static NvmlState* state = new NvmlState();  // never destroyed
  return *state;
}

nvmlReturn_t init() {
  NvmlState& n = N();
  std::lock_guard<std::mutex> g(n.mu);
  if (n.init_count > 0) {
    ++n.init_count;
    return NVML_SUCCESS;
  }
  if (n.devices.empty()) {
    n.cfg = fakegpu::read_config();
    std::vector<std::unique_ptr<nvmlDevice_st>> devices;
    for (int i = 0; i < n.cfg.devices; ++i) {
      auto d = std::make_unique<nvmlDevice_st>();
      d->index = static_cast<unsigned int>(i);
      fakegpu::device_uuid(n.cfg.uuid_seed, i, d->uuid);
      d->uuid_string = fakegpu::uuid_string(d->uuid);
      d->total = n.cfg.mem_bytes;
      std::string error;
      if (!d->file.open(n.cfg.dir, fakegpu::uuid_hex(d->uuid), &error)) {
        std::fprintf(stderr, "fake-nvml: nvmlInit fails: %s (FAKE_CUDA_DIR)\n", error.c_str());
        return NVML_ERROR_OPERATING_SYSTEM;
      }
      devices.push_back(std::move(d));
    }
    n.devices = std::move(devices);
  }
  n.init_count = 1;
  return NVML_SUCCESS;
}

// The device behind a handle, or null if NVML is not initialised (*rc says
// which error) or the handle is not one of ours.
nvmlDevice_st* device(nvmlDevice_t h, nvmlReturn_t* rc) {
  NvmlState& n = N();
  std::lock_guard<std::mutex> g(n.mu);
  if (n.init_count == 0) {
    *rc = NVML_ERROR_UNINITIALIZED;
    return nullptr;
  }
  for (auto& d : n.devices) {
    if (d.get() == h) return d.get();
  }
  *rc = NVML_ERROR_INVALID_ARGUMENT;
  return nullptr;
}

bool initialized() {
  std::lock_guard<std::mutex> g(N().mu);
  return N().init_count > 0;
}

nvmlReturn_t copy_string(const std::string& s, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

// Without MIG the real NVML reports 0xFFFFFFFF as the instance ids.
void set_no_mig(nvmlProcessInfo_v1_t&) {}
void set_no_mig(nvmlProcessInfo_v2_t& info) {
  info.gpuInstanceId = 0xFFFFFFFFu;
  info.computeInstanceId = 0xFFFFFFFFu;
}
void set_no_mig(nvmlProcessInfo_t& info) {
  info.gpuInstanceId = 0xFFFFFFFFu;
  info.computeInstanceId = 0xFFFFFFFFu;
}

template <typename Info>
nvmlReturn_t running_processes(nvmlDevice_t h, unsigned int* infoCount, Info* infos) {
  nvmlReturn_t rc = NVML_SUCCESS;
  nvmlDevice_st* d = device(h, &rc);
  if (d == nullptr) return rc;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<fakegpu::ProcessUsage> procs = d->file.processes();
  // A real listing takes hundreds of microseconds after it has read the
  // figures (180-700 us on an H200): what it returns may be stale by then.
  if (const char* us = std::getenv("FAKE_NVML_LIST_US")) usleep(useconds_t(std::strtoul(us, nullptr, 10)));
  const unsigned int needed = static_cast<unsigned int>(procs.size());
  if (*infoCount < needed || (needed > 0 && infos == nullptr)) {
    *infoCount = needed;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < needed; ++i) {
    Info info;
    std::memset(&info, 0, sizeof(info));
    info.pid = static_cast<unsigned int>(procs[i].pid);
    info.usedGpuMemory = procs[i].used_bytes;
    set_no_mig(info);
    infos[i] = info;
  }
  *infoCount = needed;
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) { return init(); }
nvmlReturn_t nvmlInit(void) { return init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;  // NVML_INIT_FLAG_NO_GPUS / NO_ATTACH: nothing to do
  return init();
}

nvmlReturn_t nvmlShutdown(void) {
  NvmlState& n = N();
  std::lock_guard<std::mutex> g(n.mu);
  if (n.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --n.init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_OPERATING_SYSTEM: return "Operating System Error";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialized()) return NVML_ERROR_UNINITIALIZED;
  return copy_string("580.00.00-fake", version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  if (!initialized()) return NVML_ERROR_UNINITIALIZED;
  if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *cudaDriverVersion = 13000;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  NvmlState& n = N();
  std::lock_guard<std::mutex> g(n.mu);
  if (n.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = static_cast<unsigned int>(n.devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  NvmlState& n = N();
  std::lock_guard<std::mutex> g(n.mu);
  if (n.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= n.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = n.devices[index].get();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  NvmlState& n = N();
  std::lock_guard<std::mutex> g(n.mu);
  if (n.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (auto& d : n.devices) {
    if (strcasecmp(d->uuid_string.c_str(), uuid) == 0) {
      *device = d.get();
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char* uuid, unsigned int length) {
  nvmlReturn_t rc = NVML_SUCCESS;
  nvmlDevice_st* d = device(h, &rc);
  if (d == nullptr) return rc;
  return copy_string(d->uuid_string, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  nvmlReturn_t rc = NVML_SUCCESS;
  nvmlDevice_st* d = device(h, &rc);
  if (d == nullptr) return rc;
  return copy_string("gshare fake GPU", name, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int* index) {
  nvmlReturn_t rc = NVML_SUCCESS;
  nvmlDevice_st* d = device(h, &rc);
  if (d == nullptr) return rc;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = d->index;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* memory) {
  nvmlReturn_t rc = NVML_SUCCESS;
  nvmlDevice_st* d = device(h, &rc);
  if (d == nullptr) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned long long used = d->file.used();
  memory->total = d->total;
  memory->used = used;
  memory->free = used >= d->total ? 0 : d->total - used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t* memory) {
  nvmlReturn_t rc = NVML_SUCCESS;
  nvmlDevice_st* d = device(h, &rc);
  if (d == nullptr) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const unsigned long long used = d->file.used();
  memory->total = d->total;
  memory->reserved = 0;
  memory->used = used;
  memory->free = used >= d->total ? 0 : d->total - used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  return running_processes(h, infoCount, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned int* infoCount,
                                                     nvmlProcessInfo_v2_t* infos) {
  return running_processes(h, infoCount, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int* infoCount,
                                                  nvmlProcessInfo_v1_t* infos) {
  return running_processes(h, infoCount, infos);
}

}  // extern "C"
