// Device allocations and frees: cuMemAlloc, cuMemAllocPitch,
// cuMemAllocManaged, cuMemFree, each in every exported ABI form.
#include "allocator/tracked_memory.h"
#include "base/log.h"
#include "intercept/interception.h"
#include "intercept/memory_events.h"

using namespace gshare;
using namespace gshare::intercept;
using allocator::AllocationKind;

namespace {
// Pitch: the driver picks the pitch, so the guess admitted first has rows
// aligned to 512 bytes, what current GPUs use.
template <class Call, class Undo>
CUresult allocate_pitched(size_t width, size_t height, Call&& call, Undo&& undo) {
  allocator::Device* device = allocator::current_device();
  if (!device) {
    uint64_t key, bytes;
    return call(&key, &bytes);
  }
  runtime::MemoryCallTime timing;
  uint64_t guess = ((uint64_t(width) + 511) & ~uint64_t(511)) * height;
  return note_allocation(allocator::allocate_pitched_tracked(*device, "cuMemAllocPitch", guess, call, undo));
}

template <class Call>
CUresult allocate(AllocationKind kind, const char* name, uint64_t bytes, Call&& call) {
  allocator::Device* device = allocator::current_device();
  if (!device) {
    uint64_t ignored;
    return call(&ignored);
  }
  runtime::MemoryCallTime timing;
  return note_allocation(allocator::allocate_tracked(*device, kind, name, bytes, call));
}
}  // namespace

GSHARE_HOOK(CUresult, cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize)) {
  if (!hooks_active() || !dptr) return REAL(cuMemAlloc_v2)(dptr, bytesize);
  HookScope scope;
  if (allocator::paging_enabled()) {
    allocator::Device* device = allocator::current_device();
    if (uint64_t size = device ? allocator::movable_size(*device, bytesize) : 0) {
      runtime::MemoryCallTime timing;
      return note_allocation(allocator::allocate_movable_tracked(*device, size, dptr));
    }
  }
  return allocate(AllocationKind::kDevice, "cuMemAlloc", bytesize, [&](uint64_t* key) {
    CUresult r = REAL(cuMemAlloc_v2)(dptr, bytesize);
    *key = *dptr;
    return r;
  });
}

GSHARE_HOOK(CUresult, cuMemAlloc, (CUdeviceptr_v1 * dptr, unsigned int bytesize)) {
  if (!hooks_active() || !dptr) return REAL(cuMemAlloc)(dptr, bytesize);
  HookScope scope;
  return allocate(AllocationKind::kDevice, "cuMemAlloc", bytesize, [&](uint64_t* key) {
    CUresult r = REAL(cuMemAlloc)(dptr, bytesize);
    *key = *dptr;
    return r;
  });
}

GSHARE_HOOK(CUresult, cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags)) {
  if (!hooks_active() || !dptr) return REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  HookScope scope;
  // Managed memory may live on the host for a while; it is counted in full
  // anyway, since it can all migrate to the GPU at any moment.
  return allocate(AllocationKind::kManaged, "cuMemAllocManaged", bytesize, [&](uint64_t* key) {
    CUresult r = REAL(cuMemAllocManaged)(dptr, bytesize, flags);
    *key = *dptr;
    return r;
  });
}

GSHARE_HOOK(CUresult, cuMemAllocPitch_v2,
            (CUdeviceptr * dptr, size_t* pitch, size_t width, size_t height, unsigned int element)) {
  if (!hooks_active() || !dptr || !pitch)
    return REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element);
  HookScope scope;
  return allocate_pitched(
      width, height,
      [&](uint64_t* key, uint64_t* bytes) {
        CUresult r = REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element);
        *key = *dptr;
        *bytes = uint64_t(*pitch) * height;
        return r;
      },
      [](uint64_t key) { REAL(cuMemFree_v2)(CUdeviceptr(key)); });
}

GSHARE_HOOK(CUresult, cuMemAllocPitch, (CUdeviceptr_v1 * dptr, unsigned int* pitch, unsigned int width,
                                        unsigned int height, unsigned int element)) {
  if (!hooks_active() || !dptr || !pitch)
    return REAL(cuMemAllocPitch)(dptr, pitch, width, height, element);
  HookScope scope;
  return allocate_pitched(
      width, height,
      [&](uint64_t* key, uint64_t* bytes) {
        CUresult r = REAL(cuMemAllocPitch)(dptr, pitch, width, height, element);
        *key = *dptr;
        *bytes = uint64_t(*pitch) * height;
        return r;
      },
      [](uint64_t key) { REAL(cuMemFree)(CUdeviceptr_v1(key)); });
}

GSHARE_HOOK(CUresult, cuMemFree_v2, (CUdeviceptr dptr)) {
  if (!hooks_active()) return REAL(cuMemFree_v2)(dptr);
  HookScope scope;
  return free_noted(dptr, [&] { return REAL(cuMemFree_v2)(dptr); });
}

GSHARE_HOOK(CUresult, cuMemFree, (CUdeviceptr_v1 dptr)) {
  if (!hooks_active()) return REAL(cuMemFree)(dptr);
  HookScope scope;
  return free_noted(dptr, [&] { return REAL(cuMemFree)(dptr); });
}
