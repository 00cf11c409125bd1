// What every hook that allocates or frees device memory does around the
// allocator's tracked paths: tells the iteration detector
// (scheduler/iterations.h) of each allocation and free that happened, and
// times the call while a switch's cost is measured (runtime/switch_cost.h).
#pragma once

#include "allocator/tracked_memory.h"
#include "runtime/launch_gate.h"
#include "runtime/switch_cost.h"

namespace gshare::intercept {

using runtime::MemoryCallTime;

// Passes `result` on, noting an allocation if it succeeded.
inline CUresult note_allocation(CUresult result) {
  if (result == CUDA_SUCCESS) runtime::note_memory_event(true);
  return result;
}

// Frees a pointer-keyed allocation with `call()` (allocator::free_tracked)
// and notes the free if it succeeded.
template <class Call>
CUresult free_noted(CUdeviceptr dptr, Call&& call) {
  MemoryCallTime timing;
  CUresult result = allocator::free_tracked(dptr, call);
  if (result == CUDA_SUCCESS) runtime::note_memory_event(false);
  return result;
}

}  // namespace gshare::intercept
