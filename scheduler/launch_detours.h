// How many reasons send every launch of the process to the launch gate's
// slow path (runtime/launch_gate.h): one for each stream capture in
// progress, one while an iteration-observation window is open
// (scheduler/iterations.h) and one while a stretch of launches is timed on
// the GPU (runtime/gpu_busy.h). Zero lets launches take the fast path.
#pragma once

#include <atomic>

namespace gshare::scheduler {

extern std::atomic<int> g_launch_detours;

}  // namespace gshare::scheduler
