// How many jobs one shared turn holds (scheduler/token.h, docs/DESIGN.md
// §7.9). Beside one another the jobs run as they would natively: each one's
// host work needs a CPU, and their kernels take turns on the GPU's time.
// So a turn holds no more jobs than the deciding process has CPUs (among 64
// host-bound PyTorch jobs on an H200 with 16 cores, 32 beside one another
// made the slowest 0.45 of the fastest), and their GPU shares, each measured
// in its own turns (runtime/gpu_busy.h), add up to one GPU at most. A job
// that keeps the GPU busy (it shares turns as one of a pair: under
// GSHARE_SHARED_TURNS=gaps while its kernels leave the GPU gaps,
// rules/leaves_gaps.h, or under pairs) shares its turn with one other job
// at most: the other fills the gaps between its launches (on an H200, four
// PyTorch jobs of 3 ms steps, two to a turn: 0.999 of their native
// aggregate, against 0.963 in turns of one job, five trials), and a third
// would only queue for the GPU's time. Pure code: the scheduler calls it
// under the region's lock, the unit tests directly.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gshare::rules {

// `jobs` in the turn with the one asking to join, on `cpus` CPUs, their
// GPU shares summing to `busy_permille` thousandths; `with_busy_job`: one
// of them keeps the GPU busy (shares as one of a pair).
inline bool turn_has_room(uint32_t jobs, unsigned cpus, uint64_t busy_permille, bool with_busy_job = false) {
  if (with_busy_job) return jobs <= 2 && jobs <= cpus;
  return jobs <= cpus && busy_permille <= 1000;
}

// The turns a round of `jobs` active jobs takes when `sharers` of them may
// share turns as host-bound jobs, their GPU shares summing to
// `sharers_busy_permille`, and `paired` others as ones of a pair: one each
// for the rest, the sharers as many to a turn as turn_has_room lets in at
// their mean share, the paired two to a turn. (Sharers of unequal weights
// share no turn: counted as one kind, the round is somewhat longer than
// this says.)
inline int turns_in_round(int jobs, int sharers, uint64_t sharers_busy_permille, unsigned cpus, int paired = 0) {
  if (paired < 0 || paired > jobs) paired = 0;
  const int alone = jobs - paired;
  const int pair_turns = (paired + 1) / 2;
  if (sharers <= 1 || sharers > alone) return alone + pair_turns;
  const uint64_t mean = std::max<uint64_t>(1, sharers_busy_permille / uint64_t(sharers));
  const uint64_t per_turn = std::max<uint64_t>(1, std::min<uint64_t>(cpus, 1000 / mean));
  return alone - sharers + int((uint64_t(sharers) + per_turn - 1) / per_turn) + pair_turns;
}

}  // namespace gshare::rules
