#include "tools/sim_paging.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>

#include "base/tunables.h"
#include "rules/policy.h"

namespace gshare::sim {

namespace {

constexpr uint64_t kMiB = 1ull << 20;

struct JobState {
  uint64_t left_ns = 0;
  uint64_t iteration_ns = 0;
  uint64_t arrival_ns = 0;
  uint64_t bytes = 0;  // F = P + E: the room it takes on the GPU
  uint64_t moved = 0;  // what its page-out and page-in copy (TraceJob::paged_mib)
  uint64_t host = 0;   // pinned host memory it holds: its copy, kept or paged out
  uint64_t last_run_ns = 0;
  uint64_t quantum_ns = 0;   // its quantum times its weight: its turn before switch costs
  uint64_t exits_at_ns = 0;  // done, its memory still on the GPU until then (Trace::exit_ms)
  bool started = false, resident = false, done = false, exiting = false;
};

uint64_t copy_ns(uint64_t bytes, const PagingModel& model) {
  return uint64_t(double(bytes) / (model.gb_per_s * 1e9) * 1e9);
}

uint64_t pin_ns(uint64_t bytes, const PagingModel& model) {
  return model.pin_gb_per_s > 0 ? uint64_t(double(bytes) / (model.pin_gb_per_s * 1e9) * 1e9) : 0;
}

// The pinned host memory all jobs hold.
uint64_t host_held(const std::vector<JobState>& jobs) {
  uint64_t held = 0;
  for (const JobState& s : jobs) held += s.host;
  return held;
}

// A page-out of `victim`: the host memory it must pin (none if it kept its
// copy). Past the host limit, resident jobs other than it give their kept
// copies up, the largest first, until it fits (as far as they can).
uint64_t page_out_pins(std::vector<JobState>& jobs, int victim, const PagingModel& model) {
  JobState& v = jobs[victim];
  const uint64_t pins = v.moved > v.host ? v.moved - v.host : 0;
  if (model.host_limit_bytes) {
    uint64_t held = host_held(jobs);
    while (held + pins > model.host_limit_bytes) {
      int keeper = -1;
      for (size_t k = 0; k < jobs.size(); ++k)
        if (int(k) != victim && jobs[k].resident && jobs[k].host > 0 &&
            (keeper < 0 || jobs[k].host > jobs[keeper].host))
          keeper = int(k);
      if (keeper < 0) break;
      const uint64_t freed = std::min(jobs[keeper].host, held + pins - model.host_limit_bytes);
      jobs[keeper].host -= freed;
      held -= freed;
    }
  }
  v.host = v.moved;
  return pins;
}

// While `job` runs for `compute_ns`, what of its copy it pins ahead
// (PagingModel::copies_ahead): within the host limit, asking no one.
void pin_ahead(std::vector<JobState>& jobs, JobState& job, uint64_t compute_ns, const PagingModel& model) {
  if (!model.copies_ahead || model.pin_gb_per_s <= 0 || job.host >= job.moved) return;
  uint64_t room = UINT64_MAX;
  if (model.host_limit_bytes) {
    const uint64_t held = host_held(jobs);
    room = model.host_limit_bytes > held ? model.host_limit_bytes - held : 0;
  }
  const double rate = model.pin_gb_per_s * tunables::kPrepareTouchers / tunables::kPageOutTouchers;
  const uint64_t in_turn = uint64_t(double(compute_ns) * rate);  // GB/s is bytes per ns
  job.host += std::min({job.moved - job.host, room, in_turn});
}

// A turn's length, as live (rules/policy.h): it pays for its switch, at
// least kTurnPerSwitchCost times what the switch cost (or would cost, the
// copies hidden), up to kMaxTurnNs.
uint64_t turn_ns(uint64_t quantum_ns, uint64_t switch_ns) {
  return std::max(quantum_ns, std::min(tunables::kTurnPerSwitchCost * switch_ns, tunables::kMaxTurnNs));
}

bool wants_gpu(const JobState& job, uint64_t now) { return !job.done && job.arrival_ns <= now; }

// The resident jobs that would be paged out to make room for job `j`, the
// least recently run first, never `j`: as the turn before `j`'s does.
std::vector<int> victims_for(const std::vector<JobState>& jobs, int j, uint64_t used, uint64_t capacity) {
  std::vector<int> victims;
  std::vector<bool> out(jobs.size(), false);
  while (capacity && used + jobs[j].bytes > capacity) {
    int victim = -1;
    for (size_t k = 0; k < jobs.size(); ++k)
      if (int(k) != j && jobs[k].resident && !out[k] &&
          (victim < 0 || jobs[k].last_run_ns < jobs[victim].last_run_ns))
        victim = int(k);
    if (victim < 0) break;
    out[victim] = true;
    used -= jobs[victim].bytes;
    victims.push_back(victim);
  }
  return victims;
}

// Whether the page-outs that make room for job `j` fit the host limit, as
// live (shm/host_room.h): with the copies other resident jobs keep freed
// for them (`freeing_kept`: a page-in in its turn, page_out_pins), or
// within the host memory still free (a prefetch never has kept copies
// freed for it, and pins nothing past the limit).
bool swap_fits_host(const std::vector<JobState>& jobs, int j, uint64_t used, uint64_t capacity,
                    const PagingModel& model, bool freeing_kept) {
  if (!model.host_limit_bytes) return true;
  const std::vector<int> victims = victims_for(jobs, j, used, capacity);
  uint64_t pins = 0, kept = 0;
  for (int v : victims) pins += jobs[v].moved - std::min(jobs[v].host, jobs[v].moved);
  for (size_t k = 0; freeing_kept && k < jobs.size(); ++k)
    if (jobs[k].resident && std::find(victims.begin(), victims.end(), int(k)) == victims.end())
      kept += jobs[k].host;
  return host_held(jobs) + pins <= model.host_limit_bytes + kept;
}

// Whether job `i`, paged out, is passed over, as live (scheduler/token.cpp,
// pick_locked): while a job other than the holder (`holder`) whose memory
// is on the GPU, or that has yet to allocate it, wants the GPU. Granted,
// it would only wait for its room while that job waits too. With prefetch
// the job next in line comes back during the turn before its own, so that
// the pick sees it resident, unless making its room would pass the host
// limit; without, it is passed over until it has been away for one of its
// turns (as long as a switch to it makes it), and then paged in on demand,
// unless no swap could make its room within the host limit or a job yet to
// allocate waits for room.
bool passed_over(const std::vector<JobState>& jobs, int i, int holder, uint64_t now, uint64_t used,
                 uint64_t capacity, const PagingModel& model) {
  const JobState& job = jobs[i];
  if (!job.started || job.resident) return false;
  if (model.prefetch && swap_fits_host(jobs, i, used, capacity, model, /*freeing_kept=*/false)) return false;
  // Room a job yet to allocate waits for goes to it first.
  bool newcomer = false;
  for (size_t k = 0; k < jobs.size(); ++k)
    newcomer = newcomer || (int(k) != i && !jobs[k].started && wants_gpu(jobs[k], now));
  if (!newcomer && now >= job.last_run_ns &&
      now - job.last_run_ns >= turn_ns(job.quantum_ns, copy_ns(job.moved, model)) &&
      swap_fits_host(jobs, i, used, capacity, model, /*freeing_kept=*/true))
    return false;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const JobState& other = jobs[k];
    if (int(k) != i && int(k) != holder && wants_gpu(other, now) && (other.resident || !other.started))
      return true;
  }
  return false;
}

// The prefetch policy's pick (Schedule::by_weight): the jobs as the live
// policy sees them, levelled on arrival as live, then rules::pick_next.
int weighted_job(std::vector<JobState>& jobs, std::vector<rules::Job>& view, int holder, uint64_t now,
                 uint64_t used, uint64_t capacity, const PagingModel& model) {
  const int n = int(jobs.size());
  for (int i = 0; i < n; ++i) {
    rules::Job& v = view[i];
    const JobState& job = jobs[i];
    const bool wants = wants_gpu(job, now);
    if (!wants) v.active = false;
    else if (!v.active) rules::activate(Policy::kPrefetch, view.data(), n, i);
    // All of its memory, resident or not, as live (scheduler/token.cpp).
    v.bring_back_ns = job.started ? copy_ns(job.moved, model) : 0;
  }
  // Passed over, a job stays on the policy's clock (it competes again as
  // soon as nothing resident is left), only out of this pick.
  std::vector<int> parked;
  for (int i = 0; i < n; ++i)
    if (view[i].active && passed_over(jobs, i, holder, now, used, capacity, model)) {
      view[i].active = false;
      parked.push_back(i);
    }
  const int current = holder >= 0 && view[holder].active ? holder : -1;
  const int next = rules::pick_next(Policy::kPrefetch, view.data(), n, current);
  for (int i : parked) view[i].active = true;
  return next;
}

// The next job to run from `cursor` on (by turns, cyclically, passing over
// paged-out jobs as live; to completion, the first in order), among those
// arrived and not done; -1 if none has arrived.
int next_job(const std::vector<JobState>& jobs, const Schedule& s, size_t cursor, int holder, uint64_t now,
             uint64_t used, uint64_t capacity, const PagingModel& model) {
  const size_t n = s.order.size();
  int first = -1;
  for (size_t k = 0; k < n; ++k) {
    int j = s.order[s.by_turns ? (cursor + k) % n : k];
    if (!wants_gpu(jobs[j], now)) continue;
    if (!s.by_turns || !passed_over(jobs, j, holder, now, used, capacity, model)) return j;
    if (first < 0) first = j;
  }
  return first;
}

bool better(const PagingResult& a, const PagingResult& b) {
  return std::tie(a.makespan_ns, a.swapped_bytes) < std::tie(b.makespan_ns, b.swapped_bytes);
}

}  // namespace

PagingResult simulate_paging(const Trace& trace, const Schedule& schedule, const PagingModel& model) {
  PagingResult result;
  std::vector<JobState> jobs(trace.jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TraceJob& t = trace.jobs[i];
    jobs[i].iteration_ns = uint64_t(t.iteration_ms * 1e6);
    jobs[i].left_ns = jobs[i].iteration_ns * t.iterations;
    jobs[i].arrival_ns = uint64_t(t.arrival_s * 1e9);
    jobs[i].bytes = (t.persistent_mib + t.ephemeral_mib) * kMiB;
    jobs[i].moved = t.paged_mib ? t.paged_mib * kMiB : jobs[i].bytes;
  }
  const uint64_t capacity = trace.capacity_mib * kMiB;
  const uint64_t quantum_ns = uint64_t(trace.quantum_ms * 1e6);
  const uint64_t handover_ns = uint64_t(trace.handover_ms * 1e6);
  const uint64_t exit_ns = uint64_t(trace.exit_ms * 1e6);
  uint64_t now = 0, used = 0, prev_compute = 0;
  // Jobs set up before time 0 (TraceJob::at_start): their memory allocated
  // already, on the GPU or in pinned host memory. Paging is active from the
  // start if any is paged out.
  bool paging = false;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const StartState at = trace.jobs[i].at_start;
    if (at == StartState::kNew) continue;
    JobState& job = jobs[i];
    job.started = true;
    job.resident = at != StartState::kPagedOut;
    if (job.resident) used += job.bytes;
    if (at != StartState::kResident) job.host = job.moved;
    paging = paging || at == StartState::kPagedOut;
  }
  int prev = -1;
  size_t cursor = 0, left = jobs.size();
  std::vector<rules::Job> view(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    view[i].id = int(i);
    view[i].arrival_ns = jobs[i].arrival_ns;
    view[i].weight = trace.jobs[i].weight ? trace.jobs[i].weight : 1;
    view[i].turn_ns = quantum_ns * view[i].weight;
    jobs[i].quantum_ns = view[i].turn_ns;
  }
  while (left > 0) {
    int j = schedule.by_weight ? weighted_job(jobs, view, prev, now, used, capacity, model)
                               : next_job(jobs, schedule, cursor, prev, now, used, capacity, model);
    if (j < 0) {
      uint64_t next = UINT64_MAX;
      for (const JobState& s : jobs)
        if (!s.done) next = std::min(next, s.arrival_ns);
      now = next;
      continue;
    }
    JobState& job = jobs[j];
    // Ended jobs' memory goes once their processes have exited; a job that
    // needs that room waits for it, and no prefetch hides that wait.
    uint64_t exit_wait = 0;
    for (;;) {
      int first = -1;
      for (size_t k = 0; k < jobs.size(); ++k) {
        if (!jobs[k].exiting) continue;
        if (jobs[k].exits_at_ns <= now) {
          jobs[k].exiting = false;
          used -= jobs[k].bytes;
        } else if (first < 0 || jobs[k].exits_at_ns < jobs[first].exits_at_ns) {
          first = int(k);
        }
      }
      if (first < 0 || job.resident || !capacity || used + job.bytes <= capacity) break;
      exit_wait += jobs[first].exits_at_ns - now;
      now = jobs[first].exits_at_ns;
    }
    result.stall_ns += exit_wait;
    // Room, least recently run first, never the job about to run.
    uint64_t out_bytes = 0, in_bytes = 0, pinned = 0;
    bool evicted_prev = false;
    // A prefetch that would pass the host limit does not happen (live asks
    // only for page-outs within the free host memory): the copies wait.
    const bool fits_host = job.resident || swap_fits_host(jobs, j, used, capacity, model, /*freeing_kept=*/false);
    if (!job.resident) {
      for (int victim : victims_for(jobs, j, used, capacity)) {
        pinned += page_out_pins(jobs, victim, model);
        jobs[victim].resident = false;
        used -= jobs[victim].bytes;
        out_bytes += jobs[victim].moved;
        if (victim == prev) evicted_prev = true;
      }
      if (job.started) {
        in_bytes = job.moved;
        result.page_ins++;
      }
      job.resident = true;
      used += job.bytes;
    }
    const uint64_t copies = pin_ns(pinned, model) + copy_ns(out_bytes, model) + copy_ns(in_bytes, model);
    // Prefetch overlaps the previous turn only where the copies' room was
    // there during it: the previous job not paged out, and its memory (if
    // it has ended since) fitting beside this job's; and within the host
    // limit.
    uint64_t stall = copies;
    const bool room_during_prev =
        prev >= 0 && !evicted_prev &&
        (!capacity || used + (jobs[prev].done ? jobs[prev].bytes : 0) <= capacity);
    if (model.prefetch && prev != j && room_during_prev && fits_host)
      stall = copies > prev_compute ? copies - prev_compute : 0;
    if (prev != j) now += handover_ns;
    now += stall;
    result.stall_ns += stall;
    result.swapped_bytes += out_bytes + in_bytes;
    paging = paging || result.swapped_bytes > 0;
    uint64_t compute = job.left_ns;
    if (schedule.by_turns || schedule.by_weight) {
      // As live (scheduler/token.cpp): once paging is active, a switch
      // costs at least the time to move the job's memory, hidden or not.
      uint64_t switch_ns = stall + handover_ns;
      if (paging) switch_ns = std::max(switch_ns, copy_ns(job.moved, model));
      uint64_t turn = turn_ns(quantum_ns * view[j].weight, switch_ns);
      view[j].turn_ns = turn;
      uint64_t iters = std::max<uint64_t>(1, (turn + job.iteration_ns - 1) / job.iteration_ns);
      compute = std::min(compute, iters * job.iteration_ns);
    }
    rules::charge(view[j], compute);
    if (paging) pin_ahead(jobs, job, compute, model);
    now += compute;
    job.left_ns -= compute;
    job.started = true;
    job.last_run_ns = now;
    prev = j;
    prev_compute = compute;
    if (job.left_ns == 0) {
      job.done = true;
      job.resident = false;
      job.host = 0;
      job.exiting = exit_ns > 0;
      job.exits_at_ns = now + exit_ns;
      if (!job.exiting) used -= job.bytes;
      --left;
    }
    size_t at = size_t(std::find(schedule.order.begin(), schedule.order.end(), j) - schedule.order.begin());
    cursor = at + 1;
  }
  result.makespan_ns = now;
  return result;
}

Schedule policy_schedule(const Trace& trace, const std::string& policy) {
  Schedule s;
  s.order.resize(trace.jobs.size());
  std::iota(s.order.begin(), s.order.end(), 0);
  const auto& jobs = trace.jobs;
  auto by_arrival = [&](int a, int b) { return jobs[a].arrival_s < jobs[b].arrival_s; };
  std::stable_sort(s.order.begin(), s.order.end(), by_arrival);
  if (policy == "srtf") {
    std::stable_sort(s.order.begin(), s.order.end(), [&](int a, int b) {
      return jobs[a].iteration_ms * double(jobs[a].iterations) < jobs[b].iteration_ms * double(jobs[b].iterations);
    });
  } else if (policy == "priority") {
    std::stable_sort(s.order.begin(), s.order.end(),
                     [&](int a, int b) { return jobs[a].priority > jobs[b].priority; });
  }
  s.by_turns = policy == "fair" || policy == "pack" || policy == "prefetch";
  s.by_weight = policy == "prefetch";
  return s;
}

Schedule search_schedule(const Trace& trace, const PagingModel& model, const SearchOptions& options,
                         PagingResult* best_result) {
  const int n = int(trace.jobs.size());
  std::mt19937_64 random(options.seed);
  struct Member {
    Schedule schedule;
    PagingResult result;
  };
  auto evaluate = [&](Schedule s) { return Member{s, simulate_paging(trace, s, model)}; };
  std::vector<Member> population;
  for (const char* policy : {"fifo", "srtf", "priority", "fair", "prefetch"})
    population.push_back(evaluate(policy_schedule(trace, policy)));
  while (int(population.size()) < std::max(options.population, 4)) {
    Schedule s = policy_schedule(trace, "fifo");
    std::shuffle(s.order.begin(), s.order.end(), random);
    s.by_turns = random() % 2 == 0;
    population.push_back(evaluate(s));
  }
  auto pick = [&]() -> const Member& {  // tournament of three
    const Member* best = nullptr;
    for (int k = 0; k < 3; ++k) {
      const Member& m = population[random() % population.size()];
      if (!best || better(m.result, best->result)) best = &m;
    }
    return *best;
  };
  std::uniform_real_distribution<double> chance(0, 1);
  for (int g = 0; g < options.generations && n > 1; ++g) {
    std::sort(population.begin(), population.end(),
              [](const Member& a, const Member& b) { return better(a.result, b.result); });
    std::vector<Member> next(population.begin(), population.begin() + 2);  // the best stay
    while (next.size() < population.size()) {
      const Schedule& a = pick().schedule;
      const Schedule& b = pick().schedule;
      // Order crossover: a slice of a, the rest in b's order.
      int lo = int(random() % n), hi = int(random() % n);
      if (lo > hi) std::swap(lo, hi);
      Schedule child;
      child.order.assign(n, -1);
      std::vector<bool> taken(n, false);
      for (int k = lo; k <= hi; ++k) {
        child.order[k] = a.order[k];
        taken[a.order[k]] = true;
      }
      int fill = 0;
      for (int job : b.order) {
        if (taken[job]) continue;
        while (child.order[fill] != -1) ++fill;
        child.order[fill] = job;
      }
      // A child is an order: by weight, a parent's order means nothing,
      // and such a schedule lives on only as one of the best.
      child.by_turns = random() % 2 ? a.by_turns : b.by_turns;
      // Mutation: two jobs swap places (still a permutation), or the mode flips.
      if (chance(random) < options.mutation) std::swap(child.order[random() % n], child.order[random() % n]);
      if (chance(random) < options.mutation / 4) child.by_turns = !child.by_turns;
      next.push_back(evaluate(child));
    }
    population = std::move(next);
  }
  const Member* best = &population[0];
  for (const Member& m : population)
    if (better(m.result, best->result)) best = &m;
  if (best_result) *best_result = best->result;
  return best->schedule;
}

}  // namespace gshare::sim
