// Whether a busy job's kernels leave the GPU gaps that a second job could
// fill: the rule that seats such jobs two to a turn under
// GSHARE_SHARED_TURNS=gaps (scheduler/token.h, docs/DESIGN.md §7.9).
//
// A job that keeps the GPU busy still leaves it idle between one step's
// last kernel and the next step's first (its sync returns, Python runs,
// the next launches arrive). In turns of one job those gaps are lost; two
// jobs to a turn fill each other's, as they would natively, at the price
// of sharing the GPU as natively (its switches between their contexts),
// by which jobs with no gaps only lose (base/tunables.h, kGapsBusy, says
// what was measured). One stretch's share (runtime/gpu_busy.h) sees one to
// three steps and swings with where it falls: one reading far under the
// limit says it, else a running mean does, with a higher limit to leave
// than to enter. A share that is not far under its limit counts only
// where the job's host is not ahead of its kernels: a job that waits at
// its syncs for a good part of its own turns keeps the GPU as busy as its
// kernels can, and the gaps its share shows (a sync's wake-up, the GPU's
// switch from the last holder's tail) are not ones a second job fills.
// A job seated as one of a pair is not measured, so a
// verdict would never be checked again: kGapsRecheckNs after it was given
// the job is judged anew (in turns of its own until then, a second or
// two).
// Pure code: the upkeep thread feeds it (runtime/leaves_gaps.h), the unit
// tests call it.
#pragma once

#include <cstdint>

#include "base/tunables.h"

namespace gshare::rules {

struct GapsState {
  uint32_t mean_permille = 0;  // running mean of its GPU shares; 0: none yet
  uint32_t readings = 0;       // since the mean began, up to kGapsMinReadings
  bool leaves_gaps = false;    // the verdict
  uint64_t judged_ns = 0;      // when the verdict was given
};

// A new reading of the job's GPU share in its own turns, in thousandths,
// at `now_ns` (0: none). `wait_permille`: the share of its own turns it
// waited at its syncs for the GPU (kNoWaitShare: not yet known, as if
// long). `host_bound`: the host-bound rule's verdict, which comes first
// (such a job shares turns with many, not one).
inline constexpr uint32_t kNoWaitShare = UINT32_MAX;

// The running mean of its waits in turns of its own, `mean` (kNoWaitShare:
// none yet), with one more window's share: each window an eighth of it.
// One window of 20 ms or so swings with where its syncs fall (on an H200 a
// 3 ms training job read 0.22 to 0.35 from one window to the next).
inline uint32_t mean_wait_permille(uint32_t mean, uint32_t window_permille) {
  return mean == kNoWaitShare ? window_permille : (7 * mean + window_permille + 4) / 8;
}
inline void note_gpu_share(GapsState* s, uint32_t busy_permille, uint32_t wait_permille, bool host_bound,
                           uint64_t now_ns) {
  if (busy_permille == 0) return;
  // An idle GPU is for the host-bound rule to judge, in turns of its own.
  if (host_bound || busy_permille < tunables::kGapsLeastBusy) {
    *s = {};
    return;
  }
  if (busy_permille >= tunables::kGapsClearBusy && wait_permille >= tunables::kGapsMostWait) busy_permille = 1000;
  s->mean_permille = s->readings == 0 ? busy_permille : (s->mean_permille + busy_permille + 1) / 2;
  if (s->readings < tunables::kGapsMinReadings) s->readings++;
  if (s->leaves_gaps) {
    s->leaves_gaps = s->mean_permille < tunables::kGapsLeaveBusy;
    return;
  }
  s->leaves_gaps = busy_permille < tunables::kGapsSureBusy ||
                   (s->readings >= tunables::kGapsMinReadings && s->mean_permille < tunables::kGapsBusy);
  if (s->leaves_gaps) s->judged_ns = now_ns;
}

// Whether the job shares as one of a pair at `now_ns`: the verdict, until
// kGapsRecheckNs after it was given; then it is forgotten, and the job is
// judged anew from its next readings.
inline bool shares_in_pairs(GapsState* s, uint64_t now_ns) {
  if (s->leaves_gaps && now_ns - s->judged_ns >= tunables::kGapsRecheckNs) *s = {};
  return s->leaves_gaps;
}

}  // namespace gshare::rules
