// A training loop's iterations, found from the driver calls alone.
//
// Two signals, as DESIGN.md describes:
//   syncs     a loop that calls loss.item() synchronises with the host a
//             fixed number of times per iteration, with a fixed number of
//             launches between them. The gaps (launches between syncs) then
//             repeat with a short period; one period is one iteration.
//   launches  a loop that never synchronises launches the same sequence of
//             functions every iteration. The launch path records the
//             functions launched during short observation windows (every
//             launch takes the slow path while one is open); the upkeep
//             thread finds the sequence's period. The iteration starts at
//             the position preceded by the longest host gap, where a loop
//             does its data loading and bookkeeping.
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

// A host sync returned; `launches` is the process's launch count. Returns
// whether it ends an iteration (or no iteration is known).
bool on_sync(uint64_t launches, uint64_t now_ns);

// Whether a host sync starting now, with `launches` launched so far, will
// end an iteration (as on_sync would say), without recording anything:
// lets an overlapping handover happen as the sync starts.
bool sync_would_end_iteration(uint64_t launches);

// Whether the launch of `function` (numbered `launch_number` in the
// process's count) starts an iteration, or no iteration is known. False
// while iterations come from syncs: those end at a sync.
bool launch_is_boundary(const void* function, uint64_t launch_number);

// Whether an observation window is open: the slow launch path then calls
// record_launch for every launch.
bool observing();
void record_launch(const void* function, uint64_t launch_number, uint64_t now_ns);

// From the upkeep thread: opens and closes observation windows and finds
// the launch pattern. `launches` is the process's launch count.
void tick(uint64_t launches, uint64_t now_ns);

Estimate current(uint64_t launches);

void forget_after_fork();

}  // namespace gshare::scheduler::iterations
