// Virtual memory management: physical memory is charged at cuMemCreate and
// given back when it is both released and unmapped (allocator/vmm.h).
// Address reservations (cuMemAddressReserve) hold no memory and pass by.
#include "allocator/tracked_memory.h"
#include "allocator/vmm.h"
#include "intercept/interception.h"
#include "runtime/switch_cost.h"

using namespace gshare;
using namespace gshare::intercept;

GSHARE_HOOK(CUresult, cuMemCreate,
            (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,
             unsigned long long flags)) {
  if (!hooks_active() || !handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return REAL(cuMemCreate)(handle, size, prop, flags);
  HookScope scope;
  allocator::Device* device = allocator::device_at(prop->location.id);
  if (!device) return REAL(cuMemCreate)(handle, size, prop, flags);
  runtime::MemoryCallTime timing;
  return allocator::allocate_tracked(*device, allocator::AllocationKind::kPhysical, "cuMemCreate",
                                     size, [&](uint64_t* key) {
                                       CUresult r = REAL(cuMemCreate)(handle, size, prop, flags);
                                       *key = *handle;
                                       return r;
                                     });
}

GSHARE_HOOK(CUresult, cuMemRelease, (CUmemGenericAllocationHandle handle)) {
  return on_success(REAL(cuMemRelease)(handle), [&] { allocator::note_physical_released(handle); });
}

GSHARE_HOOK(CUresult, cuMemMap,
            (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
             unsigned long long flags)) {
  return on_success(REAL(cuMemMap)(ptr, size, offset, handle, flags),
                    [&] { allocator::note_mapped(ptr, size, handle); });
}

GSHARE_HOOK(CUresult, cuMemUnmap, (CUdeviceptr ptr, size_t size)) {
  if (!hooks_active()) return REAL(cuMemUnmap)(ptr, size);
  HookScope scope;
  runtime::MemoryCallTime timing;
  allocator::UnmapPlan plan;
  allocator::plan_unmap(ptr, size, &plan);
  CUresult result = REAL(cuMemUnmap)(ptr, size);
  if (result == CUDA_SUCCESS) allocator::finish_unmap(plan);
  return result;
}
