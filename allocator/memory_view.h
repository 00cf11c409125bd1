// The memory a process sees: its quota as the GPU's total, and
// quota − its own usage as free, never more than is really free. cuMemGetInfo,
// cuDeviceTotalMem and NVML's memory info all answer from here, so they agree
// with each other; PyTorch, JAX/XLA and vLLM size their pools from them and
// so fit inside the quota.
#pragma once

#include <cstdint>

namespace gshare::allocator {

struct Device;

struct MemoryView {
  uint64_t free_bytes;
  uint64_t total_bytes;
};

// `real_free` is what the driver says is free on the GPU right now.
MemoryView memory_view(const Device& device, uint64_t real_free);
// For a GPU this process has not used yet: nothing of its own is held.
MemoryView memory_view_unattached(uint64_t physical_bytes, uint64_t real_free);

}  // namespace gshare::allocator
