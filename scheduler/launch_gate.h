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

// The common case, all inline: no capture in progress anywhere in the
// process and one device in use. Counts the launch and returns true; false
// sends the launch to before_launch_slow, which handles everything else.
inline bool launch_fast_path() {
  if (g_captures_in_progress.load(std::memory_order_relaxed) != 0) return false;
  shm::Slot* slot = allocator::only_slot();
  if (slot == nullptr) return false;
  slot->launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Skips launches being captured into a graph; counts the rest on the device
// of the current context (attaching it, for a program whose first act on a
// GPU is a launch).
void before_launch_slow(CUstream stream);

// A host synchronisation returned (an iteration boundary, later).
void after_host_sync();

}  // namespace gshare::scheduler
