#include "rules/policy.h"

#include <algorithm>

#include "base/tunables.h"

namespace gshare::rules {

using tunables::kMaxTurnNs;
using tunables::kTurnPerSwitchCost;

namespace {

// The final tie-break: earlier arrival, then lower id. Total, so every
// policy is deterministic.
bool arrived_before(const Job& a, const Job& b) {
  if (a.arrival_ns != b.arrival_ns) return a.arrival_ns < b.arrival_ns;
  return a.id < b.id;
}

// Fair's order: less vtime first; on equal vtime a job other than the holder.
bool fairer(const Job* jobs, int a, int b, int holder) {
  if (jobs[a].vtime_ns != jobs[b].vtime_ns) return jobs[a].vtime_ns < jobs[b].vtime_ns;
  if ((a == holder) != (b == holder)) return b == holder;
  return arrived_before(jobs[a], jobs[b]);
}

// Whether a should run rather than b, both active.
bool better(Policy policy, const Job* jobs, int a, int b, int holder) {
  const Job& x = jobs[a];
  const Job& y = jobs[b];
  switch (policy) {
    case Policy::kFifo:
      if ((a == holder) != (b == holder)) return a == holder;
      return arrived_before(x, y);
    case Policy::kFair:
    case Policy::kPack:
      return fairer(jobs, a, b, holder);
    case Policy::kSrtf:
      if (x.remaining_ns != y.remaining_ns) return x.remaining_ns < y.remaining_ns;
      if ((a == holder) != (b == holder)) return a == holder;
      return arrived_before(x, y);
    case Policy::kPriority:
      if (x.priority != y.priority) return x.priority > y.priority;
      return fairer(jobs, a, b, holder);
  }
  return arrived_before(x, y);
}

}  // namespace

int pick_next(Policy policy, const Job* jobs, int count, int holder) {
  int best = -1;
  for (int i = 0; i < count; ++i) {
    if (!jobs[i].active) continue;
    if (best < 0 || better(policy, jobs, i, best, holder)) best = i;
  }
  return best;
}

uint64_t slice_length(Policy policy, const Job& job, uint64_t quantum_ns) {
  uint64_t base = quantum_ns;
  switch (policy) {
    case Policy::kFifo: return kForever;
    case Policy::kFair:
    case Policy::kPack: base = quantum_ns * (job.weight ? job.weight : 1); break;
    case Policy::kSrtf:
    case Policy::kPriority: break;
  }
  // Jobs that hand memory over at each switch (one lane's) would otherwise
  // switch at every short iteration and spend the GPU on that: the turn
  // grows with what the job's switches have cost.
  uint64_t amortized = job.switch_cost_ns >= kMaxTurnNs / kTurnPerSwitchCost
                           ? kMaxTurnNs
                           : job.switch_cost_ns * kTurnPerSwitchCost;
  return std::max(base, amortized);
}

bool preempts_now(Policy policy, const Job& holder, const Job& candidate) {
  return policy == Policy::kPriority && candidate.priority > holder.priority;
}

bool bounds_in_flight(Policy policy, const Job& job, const Job* live, int count) {
  if (policy != Policy::kPriority) return false;
  for (int i = 0; i < count; ++i)
    if (live[i].id != job.id && live[i].priority > job.priority) return true;
  return false;
}

void charge(Job& job, uint64_t ns) {
  job.served_ns += ns;
  job.vtime_ns += ns / (job.weight ? job.weight : 1);
  if (job.remaining_ns != kForever) job.remaining_ns = job.remaining_ns > ns ? job.remaining_ns - ns : 0;
}

void activate(Policy policy, Job* jobs, int count, int index) {
  uint64_t least = kForever;
  for (int i = 0; i < count; ++i) {
    if (i == index || !jobs[i].active) continue;
    if (policy == Policy::kPriority && jobs[i].priority != jobs[index].priority) continue;
    if (jobs[i].vtime_ns < least) least = jobs[i].vtime_ns;
  }
  if (least != kForever && jobs[index].vtime_ns < least) jobs[index].vtime_ns = least;
  jobs[index].active = true;
}

}  // namespace gshare::rules
