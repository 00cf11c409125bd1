// The gate every kernel and graph launch passes. For now it counts: each
// launch adds one to the process's slot, which gshare-top turns into
// launches per second. Time-slicing between processes will gate here.
//
// The fast path is two relaxed loads and one relaxed atomic add: no
// syscall, no lock, no driver call. Launches recorded during stream capture
// are not run, so they are not counted: a process-wide count of captures in
// progress keeps the capture-status query off the path when none is.
#pragma once

#include <cuda.h>

#include <atomic>

#include "allocator/devices.h"

namespace gshare::scheduler {

extern std::atomic<int> g_captures_in_progress;

void note_capture_begun();
void note_capture_ended();
void forget_captures_after_fork();

bool stream_is_capturing(CUstream stream);
void count_launch_slow();

inline void before_launch(CUstream stream) {
  if (__builtin_expect(g_captures_in_progress.load(std::memory_order_relaxed) != 0, 0) &&
      stream_is_capturing(stream))
    return;
  if (shm::Slot* slot = allocator::only_slot(); __builtin_expect(slot != nullptr, 1)) {
    slot->launches.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  count_launch_slow();
}

// A host synchronisation returned (an iteration boundary, later).
void after_host_sync();

}  // namespace gshare::scheduler
