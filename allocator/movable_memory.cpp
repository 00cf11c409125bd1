#include "allocator/movable_memory.h"

#include "allocator/host_copies.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include "allocator/devices.h"
#include "allocator/host_copies.h"
#include "allocator/pager.h"
#include "allocator/tracked_memory.h"
#include "base/driver_api.h"
#include "base/log.h"

namespace gshare::allocator {

namespace detail {
bool g_paging = false;
}

namespace {

pthread_mutex_t g_movable_mutex = PTHREAD_MUTEX_INITIALIZER;
// Each device's granule, learnt at its first movable allocation; 0: not yet.
std::atomic<uint64_t> g_granule[kMaxDevices];
// Whether physical memory is made exportable as a file descriptor (CUDA
// IPC of movable memory, allocator/memory_export.h): until the driver
// refuses it once (some containers and drivers do), then never again.
std::atomic<bool> g_shareable{true};

CUmemAllocationProp device_memory(int device, bool shareable) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  if (shareable) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

CUmemAllocationProp device_memory(int device) { return device_memory(device, false); }

// cuMemCreate of exportable memory, else (once refused) of plain memory.
CUresult create_physical(int device, uint64_t size, CUmemGenericAllocationHandle* handle) {
  const DriverApi& api = driver();
  if (g_shareable.load(std::memory_order_relaxed)) {
    CUmemAllocationProp prop = device_memory(device, true);
    CUresult r = api.mem_create(handle, size, &prop, 0);
    if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_NOT_PERMITTED && r != CUDA_ERROR_INVALID_VALUE)
      return r;
    if (g_shareable.exchange(false))
      GSHARE_INFO("the driver makes no exportable device memory (error %d): memory that can be paged "
                  "cannot be shared through CUDA IPC in this process",
                  int(r));
  }
  CUmemAllocationProp prop = device_memory(device, false);
  return api.mem_create(handle, size, &prop, 0);
}

uint64_t granule_of(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  uint64_t g = g_granule[device].load(std::memory_order_relaxed);
  if (g != 0) return g;
  const DriverApi& api = driver();
  if (!api.mem_get_allocation_granularity || !api.mem_address_reserve || !api.mem_create ||
      !api.mem_map || !api.mem_set_access || !api.mem_unmap || !api.mem_release ||
      !api.mem_address_free)
    return 0;
  CUmemAllocationProp prop = device_memory(device);
  size_t granule = 0;
  if (api.mem_get_allocation_granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
          CUDA_SUCCESS ||
      granule == 0)
    return 0;
  g_granule[device].store(granule, std::memory_order_relaxed);
  return granule;
}

}  // namespace

void configure_movable_memory(const Options& options) { detail::g_paging = options.paging; }

uint64_t movable_size(Device& device, uint64_t bytes) {
  if (!paging_enabled()) return 0;
  const uint64_t granule = granule_of(device.ordinal);
  if (granule == 0 || bytes < granule) return 0;
  const uint64_t size = (bytes + granule - 1) / granule * granule;
  return size - bytes <= bytes / 16 ? size : 0;
}

CUresult map_for_device(int device, CUdeviceptr pointer, uint64_t size, uint64_t handle) {
  const DriverApi& api = driver();
  CUresult r = api.mem_map(pointer, size, 0, handle, 0);
  if (r != CUDA_SUCCESS) return r;
  CUmemAccessDesc access{};
  access.location = device_memory(device).location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = api.mem_set_access(pointer, size, &access, 1);
  if (r != CUDA_SUCCESS) api.mem_unmap(pointer, size);
  return r;
}

CUresult back_range(int device, CUdeviceptr pointer, uint64_t size, uint64_t* handle) {
  CUmemGenericAllocationHandle h = 0;
  CUresult r = create_physical(device, size, &h);
  if (r != CUDA_SUCCESS) return r;
  r = map_for_device(device, pointer, size, h);
  if (r != CUDA_SUCCESS) {
    driver().mem_release(h);
    return r;
  }
  *handle = h;
  return CUDA_SUCCESS;
}

void unback_range(CUdeviceptr pointer, uint64_t size, uint64_t handle) {
  const DriverApi& api = driver();
  CUresult unmapped = api.mem_unmap(pointer, size);
  CUresult released = api.mem_release(handle);
  if (unmapped != CUDA_SUCCESS || released != CUDA_SUCCESS)
    GSHARE_ERROR("could not take back the %llu bytes at %#llx (unmap: error %d, release: error %d)",
                 (unsigned long long)size, (unsigned long long)pointer, int(unmapped),
                 int(released));
}

CUresult allocate_movable(Device& device, uint64_t size, CUdeviceptr* pointer, uint64_t* handle) {
  const DriverApi& api = driver();
  const uint64_t granule = granule_of(device.ordinal);
  CUdeviceptr va = 0;
  CUresult r = api.mem_address_reserve(&va, size, granule, 0, 0);
  if (r != CUDA_SUCCESS) return r;
  r = back_range(device.ordinal, va, size, handle);
  if (r != CUDA_SUCCESS) {
    api.mem_address_free(va, size);
    return r;
  }
  *pointer = va;
  return CUDA_SUCCESS;
}

bool find_movable(uint64_t address, Allocation* out) {
  if (!paging_enabled()) return false;
  bool found = false;
  ledger().for_each([&](Allocation& a) {
    if (found || a.kind != AllocationKind::kDevice || !a.movable) return;
    if (address < a.key || address - a.key >= a.extent) return;
    *out = a;
    found = true;
  });
  return found;
}

CUresult allocate_movable_tracked(Device& device, uint64_t size, CUdeviceptr* pointer) {
  Birth birth = classify_birth(size);
  return admit_and_try(device, "cuMemAlloc", size, 1, birth.kind, [&](bool* driver_refused) {
    uint64_t handle = 0;
    MovableMemoryLock lock(true);
    CUresult result = allocate_movable(device, size, pointer, &handle);
    if (result != CUDA_SUCCESS) {
      device.account.release(size, 1, birth.kind);
      *driver_refused = result == CUDA_ERROR_OUT_OF_MEMORY;
      return result;
    }
    record(device, AllocationKind::kDevice, *pointer, size, handle, birth);
    ledger().update(AllocationKind::kDevice, *pointer, [&](Allocation& a) {
      a.movable = 1;
      a.extent = size;
    });
    note_movable_resident(device, int64_t(size));
    return result;
  });
}

CUresult free_movable(const Allocation& entry) {
  const DriverApi& api = driver();
  // cuMemFree waits for the device's work: so does this, before the memory
  // goes (queued kernels may still use it).
  if (!entry.paged && entry.context != 0 &&
      api.ctx_push_current(reinterpret_cast<CUcontext>(entry.context)) == CUDA_SUCCESS) {
    Device* device = attached_device(entry.device);
    {
      GpuBusy busy(device ? device->account.slot() : nullptr);
      api.ctx_synchronize();
    }
    CUcontext ignored;
    api.ctx_pop_current(&ignored);
  }
  if (!entry.paged) unback_range(entry.key, entry.extent, entry.handle);
  // Out of the ledger, no importer can be handed it any more; those that
  // were keep the physical memory alive until they close it.
  if (entry.exported && entry.export_fd >= 0) close(entry.export_fd);
  return api.mem_address_free(entry.key, entry.extent);
}

void lock_movable_memory() { pthread_mutex_lock(&g_movable_mutex); }
bool try_lock_movable_memory() { return pthread_mutex_trylock(&g_movable_mutex) == 0; }
void unlock_movable_memory() { pthread_mutex_unlock(&g_movable_mutex); }

}  // namespace gshare::allocator
