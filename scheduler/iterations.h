// A training loop's iterations, found from the driver calls alone: one
// iteration per training step, whether the step syncs once, many times
// or never, for steps of a millisecond to several seconds.
//
// Two signals:
//   syncs     a loop that calls loss.item() synchronises with the host a
//             fixed number of times per step (up to 32), with a fixed number
//             of launches between them. The gaps (launches between syncs)
//             repeat with that period. The period is the one that explains
//             the longest stretch of recent gaps, once seen three times, so
//             equal pieces inside one step do not pass for steps once a
//             step's end has been seen; before that, the process's device
//             memory must be the same at the candidate boundaries (it grows
//             from piece to piece within a step).
//   launches  a loop that never synchronises repeats the same sequence of
//             launches, allocations and frees every step. The launch path
//             records them during observation windows (every launch takes
//             the slow path while one is open), long enough to hold two
//             steps; the upkeep thread finds the smallest period that
//             repeats over at least half the window, so a loop inside a
//             step (a model's layers) is not taken for the step. The
//             iteration starts at the launch after the longest host gap,
//             where a loop does its data loading and bookkeeping.
// Until one is found, the job is unclassified: no iterations are counted.
// An iteration boundary is where a slice should end (scheduler/token.h):
// between iterations, ephemeral memory is free. Without a detected
// iteration, any sync or launch is a boundary.
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace gshare::scheduler::iterations {

struct Estimate {
  shm::IterationSource source = shm::kIterationsUnknown;
  uint64_t iterations = 0;
  uint64_t iteration_ns = 0;
  uint32_t launches_per_iteration = 0;
};

// A host sync returned; `launches` is the process's launch count and
// `process_bytes` its device memory. Returns whether it ends an iteration
// (or no iteration is known).
bool on_sync(uint64_t launches, uint64_t process_bytes, uint64_t now_ns);

// Whether a host sync starting now, with `launches` launched so far, will
// end an iteration (as on_sync would say), without recording anything:
// lets an overlapping handover happen as the sync starts.
bool sync_would_end_iteration(uint64_t launches);

// Whether the launch of `function` (numbered `launch_number` in the
// process's count) starts an iteration, or no iteration is known. False
// while iterations come from syncs: those end at a sync.
bool launch_is_boundary(const void* function, uint64_t launch_number);

// Whether the job stands between two iterations, `launches` being its
// launch count: its latest sync ended one (or no iteration is known) and
// it has launched nothing since; or, in a loop that never syncs, its next
// launch starts one. Only then is what its framework has cached free of a
// step's tensors: emptied mid-step, the framework carves the step's next
// blocks from what survives (PyTorch: its largest free segment) and may no
// longer fit the step's largest block.
bool between_iterations(uint64_t launches);

// Whether an observation window is open: the slow launch path then calls
// record_launch for every launch.
bool observing();
void record_launch(const void* function, uint64_t launch_number, uint64_t now_ns);
// An allocation or free while observing; `launches` is the launch count.
void record_memory_event(bool allocation, uint64_t launches, uint64_t now_ns);

// From the upkeep thread: opens and closes observation windows and finds
// the launch pattern. `launches` is the process's launch count.
void tick(uint64_t launches, uint64_t now_ns);

Estimate current(uint64_t launches);

void forget_after_fork();

}  // namespace gshare::scheduler::iterations
