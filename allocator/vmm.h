// Virtual memory management (cuMemCreate / cuMemMap), as PyTorch's
// expandable segments use it. Physical memory counts when it is created,
// never when address space is reserved. It is released to the GPU only when
// the handle has been released *and* every mapping of it unmapped, so the
// charge lasts exactly as long: code that releases its handle right after
// mapping (NCCL does) still pays for the mapped memory.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gshare::allocator {

struct Device;

void note_physical_released(CUmemGenericAllocationHandle handle);
void note_mapped(CUdeviceptr address, size_t bytes, CUmemGenericAllocationHandle handle);

// cuMemUnmap of [address, address+bytes) may cover several mappings. Collects
// them before the driver unmaps, so that `finish_unmap` can drop them after.
struct UnmapPlan {
  static constexpr int kMaxMappings = 64;
  uint64_t addresses[kMaxMappings];
  int count = 0;
};
void plan_unmap(CUdeviceptr address, size_t bytes, UnmapPlan* plan);
void finish_unmap(const UnmapPlan& plan);

}  // namespace gshare::allocator
