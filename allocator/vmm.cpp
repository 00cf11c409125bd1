#include "allocator/vmm.h"

#include "allocator/devices.h"
#include "allocator/tracked_memory.h"

namespace gshare::allocator {

namespace {
// Drops a physical allocation once nothing keeps it alive.
void release_if_unused(uint64_t handle) {
  Allocation physical;
  if (!ledger().find(AllocationKind::kPhysical, handle, &physical)) return;
  if (!physical.released || physical.map_count > 0) return;
  if (ledger().remove(AllocationKind::kPhysical, handle, &physical)) release_entry(physical);
}
}  // namespace

void note_physical_released(CUmemGenericAllocationHandle handle) {
  ledger().update(AllocationKind::kPhysical, handle, [](Allocation& a) { a.released = 1; });
  release_if_unused(handle);
}

void note_mapped(CUdeviceptr address, size_t bytes, CUmemGenericAllocationHandle handle) {
  // Only mappings of memory gshare counted matter.
  if (!ledger().update(AllocationKind::kPhysical, handle, [](Allocation& a) { a.map_count++; }))
    return;
  Allocation mapping;
  mapping.key = address;
  mapping.extent = bytes;
  mapping.handle = handle;
  mapping.kind = AllocationKind::kMapping;
  mapping.birth_ns = mono_now_ns();
  ledger().insert(mapping);
}

void plan_unmap(CUdeviceptr address, size_t bytes, UnmapPlan* plan) {
  plan->count = 0;
  uint64_t cursor = address, end = address + bytes;
  while (cursor < end && plan->count < UnmapPlan::kMaxMappings) {
    Allocation mapping;
    if (!ledger().find(AllocationKind::kMapping, cursor, &mapping) || mapping.extent == 0) break;
    plan->addresses[plan->count++] = cursor;
    cursor += mapping.extent;
  }
}

void finish_unmap(const UnmapPlan& plan) {
  for (int i = 0; i < plan.count; ++i) {
    Allocation mapping;
    if (!ledger().remove(AllocationKind::kMapping, plan.addresses[i], &mapping)) continue;
    ledger().update(AllocationKind::kPhysical, mapping.handle, [](Allocation& a) {
      if (a.map_count > 0) a.map_count--;
    });
    release_if_unused(mapping.handle);
  }
}

}  // namespace gshare::allocator
