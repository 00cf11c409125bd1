// Measures whether this job is host-bound (rules/host_bound.h) and
// publishes it in its slots (Slot::host_bound), for shared turns
// (scheduler/token.h).
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace gshare::runtime {

// Around every wait of a thread for the GPU's queued work (a host sync, a
// copy into pageable memory): the wait is timed, two clock reads. Nested
// waits count once.
void begin_gpu_wait();
void end_gpu_wait();

// A switch made this job the holder (its first launch since): its next
// wait for the GPU is not counted. It waits behind the last holder's
// queued tail and the GPU's switch between contexts, others' work, not
// its own: after turns shared by many jobs, that one wait kept host-bound
// jobs from ever being judged so.
void note_switched_in();

// This job hands its token over inside a wait for the GPU (at a sync's
// start, under overlap): that wait is not counted either. Its tail runs
// beside the next job's first kernels, and after many jobs' turn, beside
// their tails too.
void uncount_current_wait();

// Upkeep thread, before the judgements below: collects the job's GPU share
// in its own turns (runtime/gpu_busy.h) into Slot::gpu_busy_permille and
// arms the next stretch, while it asks to share turns and `may_share`
// (scheduler::turns_may_be_shared). Returns a new reading in thousandths,
// 0 if none came.
uint32_t measure_gpu_share(shm::Slot& slot, bool may_share);

// Upkeep thread: judges the job on the GPU of `ordinal` (its slot there is
// `slot`) over its waits for the GPU and the time it ran (not waiting for
// the token) since its last judgement, and the GPU shares read since
// (`read_permille`: this tick's reading from measure_gpu_share, 0 if
// none), and publishes the verdict. A window in which it ran in a shared
// turn, beside the holder or holding one with others beside
// (`holds_shared_turn`: now), judges it only at a higher limit
// (rules/host_bound.h).
void judge_host_bound(int ordinal, shm::Slot& slot, bool holds_shared_turn, uint32_t read_permille);

// The share of its running time the job on the GPU of `ordinal` waited for
// the GPU in turns of its own, a running mean over its judged windows run
// so (each an eighth of it), in thousandths (the rule on gaps,
// rules/leaves_gaps.h, needs it: in a shared turn its waits are the
// others' kernels too); rules::kNoWaitShare before one.
uint32_t own_turn_wait_permille(int ordinal);

}  // namespace gshare::runtime
