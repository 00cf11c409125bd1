// Stream-ordered pools (cuMemAllocAsync, cuMemAllocFromPoolAsync, and the
// graph memory pool of cuGraphAddMemAllocNode).
//
// A pool holds more than its live blocks: it keeps freed memory for reuse
// (PyTorch's cudaMallocAsync backend keeps all of it, with a release
// threshold of UINT64_MAX). What the GPU really gives the process is the
// pool's reserved size, so that is what gshare charges: each pool's charge
// follows CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, measured after every
// allocation from it, at host synchronisations that follow frees, and once
// a second. An allocation reserves only what the pool cannot serve from its
// own free memory, so a process at its quota can still reuse its cache.
// When the pool grows past that reservation (it grows in chunks) and the
// excess does not fit, the block is freed, the pool trimmed, and the call
// fails with CUDA_ERROR_OUT_OF_MEMORY.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gshare::allocator {

struct Device;

using PoolCall = CUresult (*)(void* state, CUdeviceptr* out);
CUresult allocate_from_pool_with(Device& device, CUmemoryPool pool, CUstream stream,
                                 uint64_t bytes, const char* name, PoolCall call, void* state);

// `pool` null means the device's current pool (cuMemAllocAsync).
// `call(&pointer)` runs the real allocation.
template <class Call>
CUresult allocate_from_pool(Device& device, CUmemoryPool pool, CUstream stream, uint64_t bytes,
                            const char* name, Call&& call) {
  PoolCall trampoline = [](void* state, CUdeviceptr* out) {
    return (*static_cast<Call*>(state))(out);
  };
  return allocate_from_pool_with(device, pool, stream, bytes, name, trampoline, &call);
}

void note_pool_block_freed(Device& device);
// Re-measures `device`'s pools if a block was freed since the last time.
void refresh_pool_charges_if_freed(Device& device);
// Re-measures every pool of `device` and its graph memory.
void refresh_pool_charges(Device& device);
// Gives the free memory of `device`'s pools back to the GPU (another job
// needs it: allocator/admission.h). Returns the bytes given back.
uint64_t trim_pools(Device& device);
// A pool was destroyed: its memory went back to the GPU.
void forget_pool(CUmemoryPool pool);
// A context was destroyed: re-measure the pools of devices it used.
void forget_context_pools(CUcontext context);

}  // namespace gshare::allocator
