#include "rules/policy.h"

#include <algorithm>

#include "base/tunables.h"

namespace gshare::rules {

using tunables::kMaxTurnNs;
using tunables::kMinQuantumNs;
using tunables::kRoundNs;
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
    case Policy::kPrefetch:
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

// prefetch (rules/policy.h): the due jobs, alternating by weight.
int pick_prefetch(const Job* jobs, int count, int holder) {
  uint64_t least = kForever;
  int64_t sum = 0;
  int active = 0;
  for (int i = 0; i < count; ++i) {
    if (!jobs[i].active) continue;
    least = std::min(least, jobs[i].vtime_ns);
    sum += paging_weight(jobs[i]);
    ++active;
  }
  if (active == 0) return -1;
  // Due: less than one of its own turns (on the fair clock) ahead of the
  // furthest behind. The furthest behind is always due, so some job is.
  auto due = [&](int i) {
    const Job& j = jobs[i];
    const uint64_t turn = std::max<uint64_t>(j.turn_ns / (j.weight ? j.weight : 1), 1);
    return j.active && i != holder && j.vtime_ns - least < turn;
  };
  // After a high holder the least weight, else the most.
  const bool want_least =
      holder >= 0 && holder < count && paging_weight(jobs[holder]) * active >= sum;
  int best = -1;
  for (int i = 0; i < count; ++i) {
    if (!due(i)) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const int64_t wi = paging_weight(jobs[i]), wb = paging_weight(jobs[best]);
    if (wi != wb ? (want_least ? wi < wb : wi > wb) : fairer(jobs, i, best, holder)) best = i;
  }
  if (best >= 0) return best;
  // Only the holder is due, or it is the furthest behind: it goes on.
  if (holder >= 0 && holder < count && jobs[holder].active) return holder;
  return -1;
}

}  // namespace

int64_t paging_weight(const Job& job) {
  // Capped at about two years each: 64 jobs' weights still add up.
  constexpr uint64_t kCap = uint64_t(1) << 56;
  return int64_t(std::min(job.turn_ns, kCap)) - int64_t(std::min(job.bring_back_ns, kCap));
}

int pick_next(Policy policy, const Job* jobs, int count, int holder) {
  if (policy == Policy::kPrefetch) return pick_prefetch(jobs, count, holder);
  int best = -1;
  for (int i = 0; i < count; ++i) {
    if (!jobs[i].active) continue;
    if (best < 0 || better(policy, jobs, i, best, holder)) best = i;
  }
  return best;
}

uint64_t quantum_among(uint64_t quantum_ns, bool adapts, int takers) {
  if (!adapts || takers <= 0 || quantum_ns <= kMinQuantumNs) return quantum_ns;
  return std::clamp<uint64_t>(kRoundNs / uint64_t(takers), kMinQuantumNs, quantum_ns);
}

uint64_t slice_length(Policy policy, const Job& job) {
  const uint64_t quantum_ns = job.quantum_ns;
  uint64_t base = quantum_ns;
  switch (policy) {
    case Policy::kFifo: return kForever;
    case Policy::kFair:
    case Policy::kPack:
    case Policy::kPrefetch: base = quantum_ns * (job.weight ? job.weight : 1); break;
    case Policy::kSrtf:
    case Policy::kPriority: break;
  }
  // Jobs that hand memory over at each switch (one lane's) would otherwise
  // switch at every short iteration and spend the GPU on that: the turn
  // grows with what the job's switches have cost in memory, up to
  // kMaxTurnNs. The rest of a switch's cost (waking the job) lengthens it
  // to twice the base at most: among many jobs on a busy CPU that cost
  // reads milliseconds, and turns of many times it would be the grain of
  // every job's share.
  auto amortized = [](uint64_t cost) {
    return cost >= kMaxTurnNs / kTurnPerSwitchCost ? kMaxTurnNs : cost * kTurnPerSwitchCost;
  };
  const uint64_t woken = std::min(amortized(job.switch_cost_ns), base > kMaxTurnNs ? base : 2 * base);
  return std::max({base, amortized(job.switch_memory_ns), woken});
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

uint64_t least_active_vtime(const Job* jobs, int count) {
  uint64_t least = kForever;
  for (int i = 0; i < count; ++i)
    if (jobs[i].active && jobs[i].vtime_ns < least) least = jobs[i].vtime_ns;
  return least;
}

bool keeps_vtime_floor(Policy policy) { return policy == Policy::kFair || policy == Policy::kPrefetch; }

void activate(Policy policy, Job* jobs, int count, int index, uint64_t floor_ns) {
  uint64_t least = kForever;
  for (int i = 0; i < count; ++i) {
    if (i == index || !jobs[i].active) continue;
    if (policy == Policy::kPriority && jobs[i].priority != jobs[index].priority) continue;
    if (jobs[i].vtime_ns < least) least = jobs[i].vtime_ns;
  }
  if (floor_ns > 0 && (least == kForever || least < floor_ns)) least = floor_ns;
  // One turn of credit: a job idle only between two of its iterations (its
  // own sync after a hand-over, a process the CPU got to late) keeps its
  // place; one idle for longer comes back no further behind than that, nor
  // further ahead; one away for long comes back level.
  const uint64_t credit = jobs[index].away_ns >= tunables::kLongIdleNs
                              ? 0
                              : jobs[index].turn_ns / (jobs[index].weight ? jobs[index].weight : 1);
  if (least != kForever && least > credit && jobs[index].vtime_ns < least - credit)
    jobs[index].vtime_ns = least - credit;
  if (least != kForever && least <= kForever - credit && jobs[index].vtime_ns > least + credit)
    jobs[index].vtime_ns = least + credit;
  jobs[index].active = true;
}

}  // namespace gshare::rules
