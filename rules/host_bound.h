// Whether a job's host work leaves the GPU mostly idle: the rule behind
// shared turns (scheduler/token.h, docs/DESIGN.md §7.9).
//
// Two measures must agree. Its waits for the GPU (a host sync, a copy that
// waits for its kernels): a job that waits for much of the time it runs
// keeps the GPU busy. And its kernels' time on the GPU in its own turns
// (runtime/gpu_busy.h): waits alone cannot tell a job whose launches keep
// pace with its kernels, the GPU busy throughout and its syncs short
// (PyTorch training steps of 3 ms on an H200 waited 9% to 62% of the time
// they ran, from one judgement to the next), from one whose kernels are
// done long before its next launch (Python between small kernels, a data
// pipeline, an environment step). A job is host-bound after several
// judgements in a row with waits well under the limit and a GPU share
// under kHostBoundBusy (after one where both are far under), and stays so
// until its waits pass a much higher limit or its GPU share passes
// kHostBoundLeaveBusy. In a shared turn, its own or another's, a job's
// waits are the others' too (their kernels and the GPU's switches between
// contexts lengthen them): a window in which it shared one says only
// whether it has turned busy, at a higher limit still, or a new reading
// of its GPU share past kHostBoundLeaveBusy does. A verdict rests on a GPU
// share read within the streak of windows that gives it: a reading taken
// before (at its start, in its first steps' lazy set-up, while it paused)
// says nothing of the work it does now. (On an H200, jobs of 3 ms steps
// that read 0.001 to 0.117 in their first steps were judged host-bound on
// it once their steps began, their waits low, and beside others were
// never measured again: two of eight made half the others' steps.) And a
// job judged so may turn busy later (an evaluation ends) where beside
// others it is never in a turn of its own to be measured again. Each
// shared window with waits past the limit of its own turns is a doubt,
// each under it takes one away (one window swings with where its syncs
// fall); kHostBoundDoubts end the verdict, and the job is judged anew in
// turns of its own, on a new reading.
// Pure code: the upkeep thread feeds it (runtime/host_bound.h), the unit
// tests call it.
#pragma once

#include <cstdint>

#include "base/tunables.h"

namespace gshare::rules {

struct HostBoundState {
  bool host_bound = false;
  uint32_t streak = 0;  // judgements in a row under kHostBoundShare
  uint32_t doubts = 0;  // shared windows past kHostBoundLeaveShare, less those under it
  // Its GPU share read within the streak, or since the verdict (the
  // latest), in thousandths; 0: none yet.
  uint32_t busy_permille = 0;
};

// One judgement over a window in which the job ran for `run_ns` (the
// window's length less its waits for the token: its token time, and its
// host work after its token was lent or its turn ended), `wait_ns` of it
// waiting for the GPU in `waits` waits; `read_permille` is its GPU share
// read in the window, in thousandths, 0 if none was; `shared`: it ran in a
// shared turn in the window. Returns false, changing nothing, while the
// window holds too little running time, or too few waits, to say (the
// caller keeps the window's reading for the judgement that comes). A
// verdict ended in a shared window was given on a GPU share read before
// it: the caller forgets that reading.
inline bool judge_host_bound(HostBoundState* state, uint64_t run_ns, uint64_t wait_ns, uint64_t waits,
                             uint32_t read_permille, bool shared = false) {
  if (run_ns < tunables::kHostBoundJudgeNs) return false;
  // Too few waits yet to know where its work goes: the window goes on, up
  // to kHostBoundFewWaitsNs of running time. (A job of 2 ms steps waits
  // about ten times in 20 ms: judged on one wait fewer, it would lose its
  // streak.)
  if (waits < tunables::kHostBoundMinWaits && run_ns < tunables::kHostBoundFewWaitsNs) return false;
  if (read_permille != 0) state->busy_permille = read_permille;
  if (shared) {
    const double share = double(wait_ns) / double(run_ns);
    const bool enough_waits = waits >= tunables::kHostBoundMinWaits;
    // A reading comes only from a turn of its own, never from a shared one.
    const bool turned_busy = read_permille > tunables::kHostBoundLeaveBusy;
    if (!state->host_bound || turned_busy || (enough_waits && share >= tunables::kHostBoundLeaveShareShared)) {
      *state = {};
      return true;
    }
    if (enough_waits && share >= tunables::kHostBoundLeaveShare)
      state->doubts++;
    else if (state->doubts > 0)
      state->doubts--;
    if (state->doubts >= tunables::kHostBoundDoubts) *state = {};
    return true;
  }
  state->doubts = 0;
  // Still too few: a job that hardly ever syncs may keep the GPU full
  // through queued launches.
  if (waits < tunables::kHostBoundMinWaits) {
    *state = {};
    return true;
  }
  const double share = double(wait_ns) / double(run_ns);
  if (state->host_bound) {
    if (share < tunables::kHostBoundLeaveShare && state->busy_permille <= tunables::kHostBoundLeaveBusy) return true;
    *state = {};
    return true;
  }
  state->streak = share < tunables::kHostBoundShare ? state->streak + 1 : 0;
  // A reading taken before the streak began is of other work.
  if (state->streak == 0) state->busy_permille = 0;
  const uint32_t busy_permille = state->busy_permille;
  // Not measured on the GPU in the streak: not host-bound, whatever its
  // waits say.
  const bool idle_gpu = busy_permille != 0 && busy_permille < tunables::kHostBoundBusy;
  // The streak guards against waits that swing from one window to the
  // next (a busy job's); with both measures far under their limits one
  // window says it, and a job among many, which runs a few milliseconds a
  // round, need not wait three windows (seconds among 64) to share turns.
  const bool sure = share < tunables::kHostBoundSureShare && busy_permille < tunables::kHostBoundSureBusy;
  state->host_bound = (state->streak >= tunables::kHostBoundStreak || sure) && idle_gpu;
  return true;
}

}  // namespace gshare::rules
