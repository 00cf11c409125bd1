// The gate every kernel and graph launch passes: the launch token
// (scheduler/token.h) and the launch count gshare-top shows. With the host
// syncs around it, this is where the allocator and the scheduler meet: a
// sync that ends an iteration drives classification, give-backs and the
// hand-over.
//
// The fast path is a few relaxed loads and one relaxed atomic add: no
// syscall, no lock, no clock, no driver call. It applies when nothing in
// the process needs a closer look (g_launch_detours == 0), the process uses
// one GPU, and that GPU's gate is exactly open: this job holds the token and
// nobody has asked it to yield. Everything else takes the slow path:
// waiting for the token, ending a slice at an iteration boundary, bounding
// in-flight work under priority, skipping launches being captured, and the
// first launch after a switch, which measures the switch's cost.
#pragma once

#include <cuda.h>

#include <atomic>

#include "allocator/devices.h"
#include "allocator/pager.h"
#include "scheduler/launch_detours.h"

namespace gshare::runtime {

void note_capture_begun();
void note_capture_ended();
// Whether work issued to `stream` now is recorded into a graph, not run.
bool stream_is_being_captured(CUstream stream);
void forget_launch_state_after_fork();

inline bool launch_fast_path() {
  if (scheduler::g_launch_detours.load(std::memory_order_relaxed) != 0) return false;
  shm::Slot* slot = allocator::only_slot();
  if (slot == nullptr) return false;
  if (slot->gate.load(std::memory_order_relaxed) != shm::kGateOpen) return false;
  slot->launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// What the slow path must do after the driver call.
struct LaunchTicket {
  bool bounded = false;  // record an event: priority's bound on in-flight work
  int busy_pair = -1;    // timed on the GPU (runtime/gpu_busy.h): its events
  allocator::DeviceWork work;  // the pager's gate (allocator/pager.h)
  // Not CUDA_SUCCESS: the launch must not be made (its memory could not be
  // paged back in), and the hook returns this.
  CUresult refused = CUDA_SUCCESS;
};

// Waits for the token, ends the slice at an iteration boundary, counts the
// launch. `function` identifies what is launched (a CUfunction, a graph
// exec) for iteration detection.
LaunchTicket before_launch_slow(CUstream stream, const void* function);
void after_launch_slow(const LaunchTicket& ticket, CUstream stream, CUresult result);

// Around a host synchronisation: a thread inside one keeps its job busy
// (never idle); a sync that ends an iteration is where the job may hand
// the token over. before_host_sync returns whether it is one, for the
// matching after_host_sync.
bool before_host_sync();
void after_host_sync(bool ends_iteration);

// Around a driver call that may wait for the GPU's queued work without
// being a host sync: a copy into pageable host memory returns only once
// the stream's earlier kernels are done (PyTorch's `.item()`). The job is
// busy meanwhile, never idle; nothing else of a sync (iterations,
// hand-overs) happens here.
struct GpuWaitScope {
  GpuWaitScope();
  ~GpuWaitScope();
  GpuWaitScope(const GpuWaitScope&) = delete;
  GpuWaitScope& operator=(const GpuWaitScope&) = delete;
};

// An allocation or free succeeded: while an iteration-observation window
// is open, it marks where a step's pieces begin and end.
void note_memory_event(bool allocation);

// From the upkeep thread: iteration detection's windows, the iteration
// figures gshare-top shows, and the holder's token time.
void scheduler_tick();

}  // namespace gshare::runtime
