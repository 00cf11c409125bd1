// How busy this job keeps the GPU in its own turns: the share of a stretch
// of its launches' time in which their kernels ran. The host-bound rule
// (rules/host_bound.h) needs it: a job's waits at its syncs cannot tell a
// job whose launches keep pace with its kernels (the GPU busy throughout)
// from one whose kernels are done long before its next launch (the GPU
// idle); their times on the GPU can.
//
// A stretch is sampled, never every launch: the upkeep thread arms one
// (at most every kGpuBusyEveryNs, base/tunables.h), which sends launches to
// the slow path; there, in the job's own turn, each launch is bracketed by
// two timed events on its stream, up to kGpuBusyPairs launches or
// kGpuBusyStretchNs. Elapsed time between a pair is that launch's time on
// the GPU, less the host's part where the GPU was idle before it (the
// kernel arrived only as the launch returned); the sum over the launches
// after the first, over the time from the first launch to the last, is the
// share, capped at 1. Kernels that overlap on several streams count each.
// A stretch ends early, with what it has, when the job's turn ends or it
// runs beside another (others' kernels would count as its own).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gshare::runtime {

// Upkeep thread: starts a stretch if none is under way and the last began
// kGpuBusyEveryNs ago; gives up one that found too few launches in that
// time (a job that stopped launching).
void arm_gpu_busy_sample(uint64_t now_ns);

// Upkeep thread: the share of the last finished stretch, in thousandths,
// once its events have all completed. False while there is none.
bool collect_gpu_busy(uint32_t* permille);

// Upkeep thread: the host clock at the first launch of the stretch that
// collect_gpu_busy read last (0: none yet). A reading tells of the work
// done from then on, however much later it is read.
uint64_t collected_gpu_busy_began_ns();

// Launch slow path: whether a stretch is armed (a relaxed load).
bool gpu_busy_armed();

// Launch slow path, while armed. `own_turn`: the job holds its token, no
// job runs beside it, and it has not waited for the token at this launch;
// otherwise an open stretch ends before it. `shared`: a job runs beside the
// holder of its token (it, or the job itself): a stretch that has timed
// nothing yet is given up. Returns the pair this launch is timed by, or -1.
int gpu_busy_before_launch(CUstream stream, bool own_turn, bool shared);
void gpu_busy_after_launch(int pair, CUstream stream, bool launched);

void forget_gpu_busy_after_fork();

}  // namespace gshare::runtime
