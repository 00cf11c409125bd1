// Reserve, then allocate (docs/DESIGN.md, §5.2): the sequence every
// allocation hook runs, and its mirror for frees.
//
//   reserve   the bytes in the arbiter, atomically against the quota and C
//             (counted as allocated at once: one lock, not two)
//   call      the real driver function
//   record    on success, the allocation in the ledger
//   release   on failure: the reservation goes back, the driver's error too
//
// Over a limit the driver is never called and the caller gets
// CUDA_ERROR_OUT_OF_MEMORY, which PyTorch's caching allocator answers by
// freeing its cache and retrying, so a quota also trims caches.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "allocator/admission.h"
#include "allocator/allocation_rate.h"
#include "allocator/classifier.h"
#include "allocator/devices.h"
#include "allocator/ledger.h"
#include "allocator/movable_memory.h"
#include "allocator/pager.h"
#include "base/clock.h"
#include "shm/arbiter.h"

namespace gshare::allocator {

Ledger& ledger();

// Logs why `bytes` were refused (rate-capped) and returns OUT_OF_MEMORY.
CUresult refuse(Device& device, const char* call, uint64_t bytes,
                const shm::ReserveResult& why);

// Records a committed allocation. If the ledger cannot grow (no memory for
// its table) the bytes stay charged: over-counting is safe, losing track is
// not.
void record(Device& device, AllocationKind kind, uint64_t key, uint64_t bytes,
            uint64_t handle = 0, const Birth& birth = Birth{});

// Admits `bytes` (`allocations`: 1 for a whole allocation, 0 for a charge
// that `attempt` settles itself) and runs `attempt(&driver_refused)`, which
// returns the driver's result with its charge undone on failure. When the
// driver refused memory gshare had admitted (memory outside gshare's view
// is in use), waits for it and tries again.
template <class Attempt>
CUresult admit_and_try(Device& device, const char* name, uint64_t bytes, uint32_t allocations,
                       shm::MemoryClass kind, Attempt&& attempt) {
  uint64_t refused_since = 0;
  for (;;) {
    shm::ReserveResult granted = admit(device, name, bytes, allocations, kind);
    if (granted.status != shm::ReserveStatus::kGranted) return refuse(device, name, bytes, granted);
    bool driver_refused = false;
    CUresult result = attempt(&driver_refused);
    if (!driver_refused || !wait_after_driver_refused(device, name, bytes, &refused_since)) return result;
  }
}

// Runs `call(&key)` for an allocation of a size known in advance: classify,
// admit (allocator/admission.h: may wait), call the driver, record.
template <class Call>
CUresult allocate_tracked(Device& device, AllocationKind kind, const char* name, uint64_t bytes,
                          Call&& call) {
  Birth birth = classify_birth(bytes);
  return admit_and_try(device, name, bytes, 1, birth.kind, [&](bool* driver_refused) {
    uint64_t key = 0;
    const uint64_t began = bytes >= kTimedAllocationMinBytes ? mono_now_ns() : 0;
    CUresult result = call(&key);
    if (result == CUDA_SUCCESS) {
      if (began != 0) note_driver_allocation(bytes, mono_now_ns() - began);
      record(device, kind, key, bytes, 0, birth);
      return result;
    }
    device.account.release(bytes, 1, birth.kind);
    *driver_refused = result == CUDA_ERROR_OUT_OF_MEMORY;
    return result;
  });
}

// Runs `call(&key, &bytes)` for a pitched allocation, whose size the
// driver picks: admits `guess` bytes first, then settles the charge to the
// bytes the driver took, freeing with `undo(key)` if the difference cannot
// be had.
template <class Call, class Undo>
CUresult allocate_pitched_tracked(Device& device, const char* name, uint64_t guess, Call&& call,
                                  Undo&& undo) {
  Birth birth = classify_birth(guess);
  return admit_and_try(device, name, guess, 0, birth.kind, [&](bool* driver_refused) {
    uint64_t key = 0, bytes = 0;
    CUresult result = call(&key, &bytes);
    if (result != CUDA_SUCCESS) {
      device.account.rollback(guess, birth.kind);
      *driver_refused = result == CUDA_ERROR_OUT_OF_MEMORY;
      return result;
    }
    if (bytes > guess) {
      shm::ReserveResult more = device.account.reserve(bytes - guess, birth.kind);
      if (more.status != shm::ReserveStatus::kGranted) {
        undo(key);
        device.account.rollback(guess, birth.kind);
        return refuse(device, name, bytes, more);
      }
    } else {
      device.account.rollback(guess - bytes, birth.kind);
    }
    device.account.commit(bytes);
    record(device, AllocationKind::kPitch, key, bytes, 0, birth);
    return result;
  });
}

// Gives back what a removed ledger entry charged.
void release_entry(const Allocation& entry);

// Frees a pointer-keyed allocation with `call()`. A pointer gshare never saw
// passes through untouched. The ledger entry is taken out *before* the
// driver frees, so that no other thread can be handed the same address and
// record it while the old entry still stands; it is put back if the driver
// refuses the free.
// Under paging, movable allocations (allocator/movable_memory.h) are freed
// gshare's way, with the pager kept out meanwhile.
template <class Call>
CUresult free_tracked(uint64_t pointer, Call&& call) {
  Allocation entry;
  {
    MovableMemoryLock lock(paging_enabled());
    if (!ledger().remove(AllocationKind::kDevice, pointer, &entry)) return call();
    CUresult result = entry.movable ? free_movable(entry) : call();
    if (result != CUDA_SUCCESS) {
      ledger().insert(entry);
      return result;
    }
    release_entry(entry);
  }
  free_entry_host_copy(entry);
  return CUDA_SUCCESS;
}

// A context was destroyed: the driver freed every allocation made in it.
// Drops this process's records of them and gives their bytes back
// (physical cuMemCreate memory belongs to no context and stays).
void forget_context_allocations(CUcontext context);

// The primary context of each device, learnt from cuDevicePrimaryCtxRetain,
// so that a reset or last release can forget what died with it.
void remember_primary_context(int device, CUcontext context);
CUcontext primary_context(int device);

}  // namespace gshare::allocator
