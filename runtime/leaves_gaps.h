// Judges whether this busy job's kernels leave the GPU gaps a second job
// could fill (rules/leaves_gaps.h) and publishes it in its slot
// (Slot::leaves_gaps): under GSHARE_SHARED_TURNS=gaps, the default, such
// jobs share turns two at a time (scheduler/token.h).
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace gshare::runtime {

// Upkeep thread, each tick, for the job's slot on the GPU of `ordinal`:
// `busy_permille` is a new reading of its GPU share in its own turns
// (runtime/gpu_busy.h), 0 if none came since the last tick; the share of
// its own turns it waited for the GPU comes from the host-bound rule's
// windows (runtime/host_bound.h).
void judge_leaves_gaps(int ordinal, shm::Slot& slot, uint32_t busy_permille);

}  // namespace gshare::runtime
