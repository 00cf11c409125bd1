// Whether a job's host work leaves the GPU mostly idle: the rule behind
// shared turns (scheduler/token.h, docs/DESIGN.md §7.9).
//
// A job that waits for the GPU (a host sync, a copy that waits for its
// kernels) for much of the time it runs keeps the GPU busy: its turns are
// its own. One whose waits are a small share of it spends its time on the
// host, launching kernels the GPU finishes faster than they come (Python
// between small kernels, a data pipeline, an environment step): turns
// alone would leave the GPU idle, so it may run beside other such jobs.
// The share is a lower bound of the GPU's use: a job whose launches keep
// pace with its kernels waits little at its syncs and still keeps the GPU
// busy (PyTorch training steps of 3 ms on an H200 waited 9% to 62% of the
// time they ran, from one judgement to the next). So a job becomes
// host-bound only after several judgements in a row well under the limit,
// and stays so until its waits pass a much higher one. Pure code: the
// upkeep thread feeds it (runtime/host_bound.h), the unit tests call it.
#pragma once

#include <cstdint>

#include "base/tunables.h"

namespace gshare::rules {

struct HostBoundState {
  bool host_bound = false;
  uint32_t streak = 0;  // judgements in a row under kHostBoundShare
};

// One judgement over a window in which the job ran for `run_ns` (the
// window's length less its waits for the token: its token time, and its
// host work after its token was lent or its turn ended), `wait_ns` of it
// waiting for the GPU in `waits` waits. Returns false, changing nothing,
// while the window holds too little running time to say.
inline bool judge_host_bound(HostBoundState* state, uint64_t run_ns, uint64_t wait_ns, uint64_t waits) {
  if (run_ns < tunables::kHostBoundJudgeNs) return false;
  // Too few waits to know where its work goes: a job that never syncs may
  // keep the GPU full through queued launches.
  if (waits < tunables::kHostBoundMinWaits) {
    *state = {};
    return true;
  }
  const double share = double(wait_ns) / double(run_ns);
  if (state->host_bound) {
    state->host_bound = share < tunables::kHostBoundLeaveShare;
    if (!state->host_bound) state->streak = 0;
    return true;
  }
  state->streak = share < tunables::kHostBoundShare ? state->streak + 1 : 0;
  state->host_bound = state->streak >= tunables::kHostBoundStreak;
  return true;
}

}  // namespace gshare::rules
