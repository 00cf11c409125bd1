#include "rules/lanes.h"

#include <algorithm>

namespace gshare::rules {

namespace {

// The arbiter's slot table bounds the jobs; no allocation on this path (it
// runs inside allocation hooks, under the region's lock).
constexpr int kMaxJobs = 256;
constexpr int kMaxLaneNumbers = 64;

uint64_t sum_with(const LaneJob* jobs, int count, int lanes_cap) {
  uint64_t max_e[kMaxLaneNumbers] = {};
  uint64_t total = 0;
  for (int i = 0; i < count; ++i) {
    total += jobs[i].persistent;
    int lane = jobs[i].lane;
    if (lane < 0 || lane >= lanes_cap) {
      total += jobs[i].ephemeral;
    } else {
      max_e[lane] = std::max(max_e[lane], jobs[i].ephemeral);
    }
  }
  for (int l = 0; l < lanes_cap; ++l) total += max_e[l];
  return total;
}

bool valid_lanes(const LaneJob* jobs, int count, int max_lanes) {
  for (int i = 0; i < count; ++i)
    if (jobs[i].lane < 0 || jobs[i].lane >= max_lanes) return false;
  return true;
}

LanePlan finish(const LaneJob* jobs, int count, bool fits, int moved, uint64_t short_bytes) {
  LanePlan plan;
  plan.fits = fits;
  plan.safety_bytes = safety_bytes(jobs, count);
  plan.lane_count = lanes_in_use(jobs, count);
  plan.moved = moved;
  plan.short_bytes = short_bytes;
  return plan;
}

// Places the jobs without a lane one by one, largest E first: a new lane
// if the condition allows it, else the lane that grows least. False (and
// `jobs` partly changed) if one cannot be placed.
bool place_newcomers(LaneJob* jobs, int count, uint64_t capacity, int max_lanes, int* moved) {
  int order[kMaxJobs];
  int n = 0;
  for (int i = 0; i < count; ++i)
    if (jobs[i].lane < 0 || jobs[i].lane >= max_lanes) {
      jobs[i].lane = kNoLane;
      order[n++] = i;
    }
  std::stable_sort(order, order + n,
                   [&](int a, int b) { return jobs[a].ephemeral > jobs[b].ephemeral; });
  for (int k = 0; k < n; ++k) {
    LaneJob& job = jobs[order[k]];
    // The sum over placed jobs only: the ones still to place come later.
    uint64_t max_e[kMaxLaneNumbers] = {};
    int members[kMaxLaneNumbers] = {};
    uint64_t base = 0;
    for (int i = 0; i < count; ++i) {
      if (jobs[i].lane == kNoLane) continue;
      base += jobs[i].persistent;
      max_e[jobs[i].lane] = std::max(max_e[jobs[i].lane], jobs[i].ephemeral);
      members[jobs[i].lane]++;
    }
    for (int l = 0; l < max_lanes; ++l) base += max_e[l];
    base += job.persistent;
    int free_lane = -1;
    for (int l = 0; l < max_lanes && free_lane < 0; ++l)
      if (members[l] == 0) free_lane = l;
    if (free_lane >= 0 && base + job.ephemeral <= capacity) {
      job.lane = free_lane;
      ++*moved;
      continue;
    }
    int best = -1;
    uint64_t best_extra = 0;
    for (int l = 0; l < max_lanes; ++l) {
      if (members[l] == 0) continue;
      uint64_t extra = job.ephemeral > max_e[l] ? job.ephemeral - max_e[l] : 0;
      if (best < 0 || extra < best_extra || (extra == best_extra && members[l] < members[best])) {
        best = l;
        best_extra = extra;
      }
    }
    if (best < 0 || base + best_extra > capacity) return false;
    job.lane = best;
    ++*moved;
  }
  return true;
}

// The least sum over k lanes puts the k-1 jobs with the smallest E in lanes
// of their own and every other job in one lane with the largest E: any
// k-lane form has the largest E in some lane and k-1 other lanes whose
// maxima are at least the k-1 smallest E. The shared lane keeps the lane
// number of its largest job, the others keep theirs where they can.
void form_lanes(LaneJob* jobs, int count, int k, int max_lanes, int* moved) {
  int order[kMaxJobs];
  for (int i = 0; i < count; ++i) order[i] = i;
  std::stable_sort(order, order + count,
                   [&](int a, int b) { return jobs[a].ephemeral > jobs[b].ephemeral; });
  int old_lane[kMaxJobs];
  for (int i = 0; i < count; ++i) old_lane[i] = jobs[i].lane;
  bool taken[kMaxLaneNumbers] = {};
  int new_lane[kMaxJobs];
  for (int i = 0; i < count; ++i) new_lane[i] = kNoLane;
  const int shared = count - (k - 1);  // order[0 .. shared) share one lane
  auto keep_or_take = [&](int i) {
    int l = old_lane[i];
    if (l < 0 || l >= max_lanes || taken[l]) {
      l = 0;
      while (taken[l]) ++l;
    }
    taken[l] = true;
    return l;
  };
  int shared_lane = keep_or_take(order[0]);
  for (int r = 0; r < shared; ++r) new_lane[order[r]] = shared_lane;
  for (int r = shared; r < count; ++r) new_lane[order[r]] = keep_or_take(order[r]);
  for (int i = 0; i < count; ++i) {
    if (new_lane[i] != old_lane[i]) ++*moved;
    jobs[i].lane = new_lane[i];
  }
}

// The largest k whose best form fits, or 0 if even one lane does not.
int lanes_that_fit(const LaneJob* jobs, int count, uint64_t capacity, int max_lanes) {
  if (count == 0) return 0;
  uint64_t e[kMaxJobs];
  uint64_t sum = 0;
  for (int i = 0; i < count; ++i) {
    sum += jobs[i].persistent;
    e[i] = jobs[i].ephemeral;
  }
  std::sort(e, e + count);  // ascending: e[count-1] is the largest
  sum += e[count - 1];
  if (sum > capacity) return 0;
  int k = 1;
  for (int i = 0; i < count - 1 && k < max_lanes; ++i) {
    sum += e[i];
    if (sum > capacity) break;
    ++k;
  }
  return k;
}

uint64_t one_lane_sum(const LaneJob* jobs, int count) {
  uint64_t total = 0, max_e = 0;
  for (int i = 0; i < count; ++i) {
    total += jobs[i].persistent;
    max_e = std::max(max_e, jobs[i].ephemeral);
  }
  return total + max_e;
}

int clamp_lanes(int max_lanes) { return std::max(1, std::min(max_lanes, kMaxLaneNumbers)); }

}  // namespace

uint64_t safety_bytes(const LaneJob* jobs, int count) { return sum_with(jobs, count, kMaxLaneNumbers); }

int lanes_in_use(const LaneJob* jobs, int count) {
  bool used[kMaxLaneNumbers] = {};
  int n = 0;
  for (int i = 0; i < count; ++i) {
    int l = jobs[i].lane;
    if (l >= 0 && l < kMaxLaneNumbers && !used[l]) {
      used[l] = true;
      ++n;
    }
  }
  return n;
}

// The planners below on `jobs` with every provisional job folded into one:
// P their sum, E their largest, in the lane of the first that has one.
// Afterwards they all take that one's lane.
template <class Plan>
LanePlan with_provisional_together(LaneJob* jobs, int count, Plan&& plan) {
  count = std::min(count, kMaxJobs);
  int first = -1, provisional = 0;
  for (int i = 0; i < count; ++i) {
    if (!jobs[i].provisional) continue;
    ++provisional;
    if (first < 0 || (jobs[first].lane == kNoLane && jobs[i].lane != kNoLane)) first = i;
  }
  if (provisional == 0) return plan(jobs, count);
  LaneJob folded[kMaxJobs];
  int position[kMaxJobs];  // where each job stands in `folded`
  int n = 0, together = -1;
  for (int i = 0; i < count; ++i) {
    if (!jobs[i].provisional) {
      position[i] = n;
      folded[n++] = jobs[i];
      continue;
    }
    if (together < 0) {
      together = n++;
      folded[together] = jobs[first];
      folded[together].persistent = 0;
      folded[together].ephemeral = 0;
      folded[together].provisional = false;
    }
    position[i] = together;
    folded[together].persistent += jobs[i].persistent;
    folded[together].ephemeral = std::max(folded[together].ephemeral, jobs[i].ephemeral);
  }
  LanePlan result = plan(folded, n);
  if (!result.fits) return result;
  // Their E is not known yet, only what they hold so far: planned in a lane
  // of their own, they could grow past it beside a job mid-iteration in
  // another. They share the lane of the largest learned E instead, which
  // keeps the sum as low or lower.
  int largest = -1;
  for (int i = 0; i < n; ++i)
    if (i != together && folded[i].lane >= 0 && (largest < 0 || folded[i].ephemeral > folded[largest].ephemeral))
      largest = i;
  if (largest >= 0) folded[together].lane = folded[largest].lane;
  result.moved = 0;
  for (int i = 0; i < count; ++i) {
    int lane = folded[position[i]].lane;
    if (jobs[i].lane != lane) result.moved++;
    jobs[i].lane = lane;
  }
  result.lane_count = lanes_in_use(jobs, count);
  result.safety_bytes = safety_bytes(jobs, count);
  return result;
}

LanePlan place_ungrouped(LaneJob* jobs, int count, uint64_t capacity, int max_lanes) {
  max_lanes = clamp_lanes(max_lanes);
  count = std::min(count, kMaxJobs);
  if (valid_lanes(jobs, count, max_lanes) && safety_bytes(jobs, count) <= capacity)
    return finish(jobs, count, true, 0, 0);
  LaneJob saved[kMaxJobs];
  std::copy(jobs, jobs + count, saved);
  int moved = 0;
  // A growth past the lane (all placed, sum over C) goes straight to re-forming.
  bool placed = !valid_lanes(jobs, count, max_lanes) &&
                place_newcomers(jobs, count, capacity, max_lanes, &moved) &&
                safety_bytes(jobs, count) <= capacity;
  if (placed) return finish(jobs, count, true, moved, 0);
  std::copy(saved, saved + count, jobs);
  int k = lanes_that_fit(jobs, count, capacity, max_lanes);
  if (k == 0) {
    uint64_t need = one_lane_sum(jobs, count);
    return finish(jobs, count, false, 0, need > capacity ? need - capacity : 0);
  }
  moved = 0;
  form_lanes(jobs, count, k, max_lanes, &moved);
  return finish(jobs, count, true, moved, 0);
}

LanePlan widen_ungrouped(LaneJob* jobs, int count, uint64_t capacity, int max_lanes) {
  max_lanes = clamp_lanes(max_lanes);
  count = std::min(count, kMaxJobs);
  int now = lanes_in_use(jobs, count);
  int k = lanes_that_fit(jobs, count, capacity, max_lanes);
  if (k <= now || !valid_lanes(jobs, count, max_lanes))
    return place_ungrouped(jobs, count, capacity, max_lanes);
  int moved = 0;
  form_lanes(jobs, count, k, max_lanes, &moved);
  return finish(jobs, count, true, moved, 0);
}

LanePlan place_jobs(LaneJob* jobs, int count, uint64_t capacity, int max_lanes) {
  return with_provisional_together(
      jobs, count, [&](LaneJob* j, int n) { return place_ungrouped(j, n, capacity, max_lanes); });
}

LanePlan widen_lanes(LaneJob* jobs, int count, uint64_t capacity, int max_lanes) {
  return with_provisional_together(
      jobs, count, [&](LaneJob* j, int n) { return widen_ungrouped(j, n, capacity, max_lanes); });
}

}  // namespace gshare::rules
