#include "tools/sim_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>

#include "shm/layout.h"

namespace gshare::sim {

using rules::kForever;

namespace {

uint64_t seconds_to_ns(double seconds) { return uint64_t(std::llround(seconds * 1e9)); }
uint64_t ms_to_ns(double ms) { return uint64_t(std::llround(ms * 1e6)); }
uint64_t mib_to_bytes(uint64_t mib) { return mib << 20; }

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kForever - b ? kForever : a + b; }

// What the simulator knows of a job beyond what the policy sees.
struct Workload {
  uint64_t iteration_ns = 1;
  uint64_t iterations = 0;
  uint64_t work_ns = 0;  // iterations x iteration_ns: GPU time to finish
  Estimate estimate = Estimate::kIters;
  uint64_t persistent_bytes = 0;
  uint64_t ephemeral_bytes = 0;
};

// One launch token: the GPU's only one, or under pack one per lane.
struct Token {
  int holder = -1;
  uint64_t runs_from_ns = 0;          // the holder's handover ends here
  uint64_t slice_end_ns = kForever;
  bool run_is_open = false;           // the holder's current slice has a Run
  bool preempted = false;             // an admission takes it from the holder now
};

class Simulator {
 public:
  Simulator(const Trace& trace, Policy policy, const SimOptions& options)
      : policy_(policy),
        options_(options),
        capacity_bytes_(mib_to_bytes(options.capacity_mib)),
        memory_modelled_(options.capacity_mib > 0) {
    size_t count = trace.jobs.size();
    jobs_.resize(count);
    workloads_.resize(count);
    lanes_.assign(count, rules::kNoLane);
    open_runs_.resize(count);
    result_.jobs.resize(count);
    result_.memory_modelled = memory_modelled_;
    for (size_t i = 0; i < count; ++i) load_job(trace.jobs[i], int(i));
    arrival_order_.resize(count);
    std::iota(arrival_order_.begin(), arrival_order_.end(), 0);
    std::stable_sort(arrival_order_.begin(), arrival_order_.end(),
                     [&](int a, int b) { return jobs_[a].arrival_ns < jobs_[b].arrival_ns; });
    // Without lanes pack has the one token, as a live job without a lane.
    bool per_lane = memory_modelled_ && rules::tokens_per_lane(policy);
    tokens_.resize(per_lane ? shm::kMaxLanes : 1);
  }

  SimResult run() {
    while (departed_ < jobs_.size() && step()) {
    }
    summarise();
    return std::move(result_);
  }

 private:
  void load_job(const TraceJob& source, int index) {
    rules::Job& job = jobs_[index];
    job.id = index;
    job.arrival_ns = seconds_to_ns(source.arrival_s);
    job.weight = source.weight ? source.weight : 1;
    job.priority = source.priority;
    Workload& work = workloads_[index];
    work.iteration_ns = std::max<uint64_t>(1, ms_to_ns(source.iteration_ms));
    work.iterations = source.iterations;
    work.work_ns = work.iteration_ns * work.iterations;
    work.estimate = source.estimate;
    work.persistent_bytes = mib_to_bytes(source.persistent_mib);
    work.ephemeral_bytes = mib_to_bytes(source.ephemeral_mib);
    result_.jobs[index].arrival_ns = job.arrival_ns;
  }

  // One event: the earliest of the next arrival, a holder's departure and a
  // slice end. Several at the same instant are handled together: the
  // departures first (and the lanes widened), then every arrival, then the
  // admissions, then one decision per token that needs one. False when
  // nothing can happen any more: only jobs that can never be admitted are
  // left.
  bool step() {
    uint64_t next = next_arrival_ns();
    for (size_t k = 0; k < tokens_.size(); ++k)
      next = std::min({next, holder_finish_ns(int(k)), tokens_[k].slice_end_ns});
    if (next == kForever) return false;
    advance_to(next);
    bool departed = depart_finished();
    if (departed && memory_modelled_) widen_lanes();
    // Only an arrival or a departure changes what place_jobs answers.
    if (queue_arrivals() || departed) admit_waiting();
    for (size_t k = 0; k < tokens_.size(); ++k) {
      Token& token = tokens_[k];
      bool slice_over = token.holder >= 0 && now_ == token.slice_end_ns;
      if (token.holder < 0 || slice_over || token.preempted) decide(int(k));
      token.preempted = false;
    }
    return true;
  }

  uint64_t next_arrival_ns() const {
    if (next_arrival_ == arrival_order_.size()) return kForever;
    return jobs_[arrival_order_[next_arrival_]].arrival_ns;
  }

  // A holder runs from the end of its handover.
  uint64_t runs_from(const Token& token) const { return std::max(now_, token.runs_from_ns); }

  uint64_t holder_finish_ns(int k) const {
    const Token& token = tokens_[k];
    if (token.holder < 0) return kForever;
    return runs_from(token) + (workloads_[token.holder].work_ns - jobs_[token.holder].served_ns);
  }

  // Every holder runs until `t`: charge it, note the run. The GPU is busy
  // from the earliest of their starts: every run goes on until `t`.
  void advance_to(uint64_t t) {
    uint64_t busy_from = t;
    for (Token& token : tokens_) {
      if (token.holder < 0 || t <= runs_from(token)) continue;
      uint64_t from = runs_from(token);
      rules::charge(jobs_[token.holder], t - from);
      note_run(token, from, t);
      busy_from = std::min(busy_from, from);
    }
    result_.busy_ns += t - busy_from;
    now_ = t;
  }

  void note_run(Token& token, uint64_t from, uint64_t to) {
    int holder = token.holder;
    if (jobs_[holder].served_ns == to - from) result_.jobs[holder].start_ns = from;
    if (token.run_is_open) {
      // The token's open run is the last Run of its holder.
      result_.timeline[open_runs_[holder]].end_ns = to;
    } else {
      open_runs_[holder] = result_.timeline.size();
      result_.timeline.push_back({holder, lanes_[holder], from, to});
      token.run_is_open = true;
    }
  }

  // True if a holder departed.
  bool depart_finished() {
    bool departed = false;
    for (Token& token : tokens_) {
      int holder = token.holder;
      if (holder < 0 || jobs_[holder].served_ns < workloads_[holder].work_ns) continue;
      jobs_[holder].active = false;
      JobResult& result = result_.jobs[holder];
      if (jobs_[holder].served_ns == 0) result.start_ns = now_;  // no work at all
      result.completion_ns = now_;
      result.final_lane = lanes_[holder];
      admitted_.erase(std::find(admitted_.begin(), admitted_.end(), holder));
      ++departed_;
      token.holder = -1;
      token.slice_end_ns = kForever;
      departed = true;
    }
    return departed;
  }

  // True if a job arrived.
  bool queue_arrivals() {
    bool arrived = false;
    while (next_arrival_ns() <= now_) {
      admission_queue_.push_back(arrival_order_[next_arrival_++]);
      arrived = true;
    }
    return arrived;
  }

  // Tries the admission queue in arrival order; every job that fits is
  // admitted and becomes active.
  void admit_waiting() {
    for (size_t q = 0; q < admission_queue_.size();) {
      int index = admission_queue_[q];
      if (!admits(index)) {
        ++q;
        continue;
      }
      admission_queue_.erase(admission_queue_.begin() + long(q));
      admitted_.push_back(index);
      JobResult& result = result_.jobs[index];
      result.admitted_ns = now_;
      result.admission_wait_ns = now_ - result.arrival_ns;
      result.lane = lanes_[index];
      activate(index);
    }
  }

  // Whether `index` may be admitted now, its lane (and maybe the others')
  // placed if so.
  bool admits(int index) {
    if (!memory_modelled_) return true;
    // The arbiter's slot table bounds the jobs place_jobs considers.
    if (admitted_.size() + 1 > shm::kMaxSlots) return false;
    lane_jobs_.clear();
    for (int i : admitted_) lane_jobs_.push_back(lane_job(i));
    lane_jobs_.push_back(lane_job(index));
    rules::LanePlan plan = rules::place_jobs(
        lane_jobs_.data(), int(lane_jobs_.size()), capacity_bytes_, int(shm::kMaxLanes));
    if (!plan.fits) return false;
    apply_lanes();
    return true;
  }

  rules::LaneJob lane_job(int index) const {
    rules::LaneJob job;
    job.id = index;
    job.persistent = workloads_[index].persistent_bytes;
    job.ephemeral = workloads_[index].ephemeral_bytes;
    job.lane = lanes_[index];
    return job;
  }

  // After a departure, as the live arbiter: more lanes, if more now fit.
  void widen_lanes() {
    lane_jobs_.clear();
    for (int i : admitted_) lane_jobs_.push_back(lane_job(i));
    if (lane_jobs_.empty()) return;
    rules::LanePlan plan = rules::widen_lanes(
        lane_jobs_.data(), int(lane_jobs_.size()), capacity_bytes_, int(shm::kMaxLanes));
    if (plan.fits) apply_lanes();
  }

  // Writes lane_jobs_'s lanes back. Under pack a holder moved to another
  // lane gives its old lane's token back; it waits for its new one.
  void apply_lanes() {
    for (const rules::LaneJob& job : lane_jobs_) lanes_[job.id] = job.lane;
    if (tokens_.size() == 1) return;
    rules::drop_tokens_of_moved_holders(
        int(tokens_.size()), [&](int k) { return tokens_[k].holder >= 0; },
        [&](int k) { return lanes_[tokens_[k].holder]; },
        [&](int k) {
          tokens_[k].holder = -1;
          tokens_[k].slice_end_ns = kForever;
        });
  }

  // The token a job launches under.
  int token_of(int index) const { return tokens_.size() == 1 ? 0 : lanes_[index]; }

  // What the policy sees for token `k`: every job, those of other tokens
  // made inactive. Indices stay those of jobs_.
  const rules::Job* view_of(int k) {
    if (tokens_.size() == 1) return jobs_.data();
    view_ = jobs_;
    for (size_t i = 0; i < view_.size(); ++i)
      if (token_of(int(i)) != k) view_[i].active = false;
    return view_.data();
  }

  // `index` becomes active, levelled on the fair clock with the others of
  // its token (live: the jobs gathered for that token).
  void activate(int index) {
    int k = token_of(index);
    if (tokens_.size() == 1) {
      rules::activate(policy_, jobs_.data(), int(jobs_.size()), index);
    } else {
      view_of(k);
      rules::activate(policy_, view_.data(), int(view_.size()), index);
      jobs_[index].vtime_ns = view_[index].vtime_ns;
      jobs_[index].active = true;
    }
    int holder = tokens_[k].holder;
    if (holder >= 0 && rules::preempts_now(policy_, jobs_[holder], jobs_[index]))
      tokens_[k].preempted = true;
  }

  void decide(int k) {
    Token& token = tokens_[k];
    refresh_estimates();
    int next = rules::pick_next(policy_, view_of(k), int(jobs_.size()), token.holder);
    if (next < 0) {
      token.holder = -1;
      token.slice_end_ns = kForever;
    } else if (next == token.holder) {
      start_slice(token, runs_from(token));
    } else {
      token.holder = next;
      ++result_.handovers;
      start_slice(token, now_ + options_.handover_ns);
    }
  }

  void refresh_estimates() {
    // As live (scheduler/token.cpp): the quantum among the active jobs of
    // each token, and what a turn gives; nothing is paged.
    takers_.assign(tokens_.size(), 0);
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (jobs_[i].active) ++takers_[size_t(token_of(int(i)))];
    for (size_t i = 0; i < jobs_.size(); ++i) {
      jobs_[i].quantum_ns =
          rules::quantum_among(options_.quantum_ns, options_.quantum_adapts, takers_[size_t(token_of(int(i)))]);
      if (!jobs_[i].active) continue;
      jobs_[i].remaining_ns = remaining_ns(int(i));
      jobs_[i].turn_ns = rules::slice_length(policy_, jobs_[i]);
    }
  }

  uint64_t remaining_ns(int index) const {
    const Workload& work = workloads_[index];
    uint64_t served = jobs_[index].served_ns;
    switch (work.estimate) {
      case Estimate::kIters:
        return (work.iterations - served / work.iteration_ns) * work.iteration_ns;
      case Estimate::kSeconds:
        return work.work_ns > served ? work.work_ns - served : 0;
      case Estimate::kNone:
        return kForever;
    }
    return kForever;
  }

  // The holder's slice starts when it starts to run, at `runs_from`; it ends
  // at the first iteration boundary at or after its length, at most
  // slice_max later.
  void start_slice(Token& token, uint64_t runs_from) {
    token.runs_from_ns = runs_from;
    token.run_is_open = false;
    uint64_t length = rules::slice_length(policy_, jobs_[token.holder]);
    if (length == kForever) {
      token.slice_end_ns = kForever;
      return;
    }
    uint64_t iteration = workloads_[token.holder].iteration_ns;
    uint64_t served = jobs_[token.holder].served_ns;
    uint64_t due = saturating_add(served, length);
    uint64_t boundary = saturating_add(due, iteration - 1) / iteration * iteration;
    uint64_t at_boundary = saturating_add(runs_from, boundary - served);
    uint64_t latest = saturating_add(saturating_add(runs_from, length), options_.slice_max_ns);
    token.slice_end_ns = std::min(at_boundary, latest);
  }

  void summarise() {
    uint64_t first_arrival = kForever, last_completion = 0;
    double jct_sum = 0, admission_wait_sum = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      JobResult& job = result_.jobs[i];
      job.gpu_ns = jobs_[i].served_ns;
      // A job never admitted (its P + E alone beyond the capacity) keeps 0s.
      if (job.completion_ns >= job.arrival_ns) {
        job.jct_ns = job.completion_ns - job.arrival_ns;
        job.wait_ns = job.jct_ns - job.gpu_ns;
      }
      jct_sum += double(job.jct_ns);
      admission_wait_sum += double(job.admission_wait_ns);
      if (job.admission_wait_ns > 0) ++result_.admission_waits;
      result_.max_admission_wait_ns = std::max(result_.max_admission_wait_ns, job.admission_wait_ns);
      first_arrival = std::min(first_arrival, job.arrival_ns);
      last_completion = std::max(last_completion, job.completion_ns);
    }
    if (jobs_.empty()) return;
    result_.average_jct_ns = jct_sum / double(jobs_.size());
    result_.average_admission_wait_ns = admission_wait_sum / double(jobs_.size());
    result_.makespan_ns = last_completion > first_arrival ? last_completion - first_arrival : 0;
    if (result_.makespan_ns > 0)
      result_.busy_fraction = double(result_.busy_ns) / double(result_.makespan_ns);
  }

  const Policy policy_;
  const SimOptions options_;
  const uint64_t capacity_bytes_;
  const bool memory_modelled_;
  std::vector<rules::Job> jobs_;  // what the policy sees, by trace index
  std::vector<Workload> workloads_;
  std::vector<int> lanes_;            // by trace index; kNoLane without a capacity
  std::vector<int> arrival_order_;    // trace indices by arrival, ties by index
  size_t next_arrival_ = 0;           // into arrival_order_
  std::vector<int> admission_queue_;  // arrived, not admitted; in arrival order
  std::vector<int> admitted_;         // admitted, not departed; in admission order
  size_t departed_ = 0;
  uint64_t now_ = 0;
  std::vector<Token> tokens_;         // one, or shm::kMaxLanes under pack with lanes
  std::vector<size_t> open_runs_;     // into the timeline: a holder's open Run, by trace index
  std::vector<rules::LaneJob> lane_jobs_;  // scratch for the lane planner
  std::vector<rules::Job> view_;           // scratch for view_of
  std::vector<int> takers_;                // scratch for refresh_estimates: active jobs per token
  SimResult result_;
};

}  // namespace

SimOptions options_from(const Trace& trace) {
  SimOptions options;
  options.quantum_ns = std::max<uint64_t>(1, ms_to_ns(trace.quantum_ms));
  options.quantum_adapts = trace.quantum_adapts;
  options.slice_max_ns = ms_to_ns(trace.slice_max_ms);
  options.handover_ns = ms_to_ns(trace.handover_ms);
  options.capacity_mib = trace.capacity_mib;
  return options;
}

SimResult simulate(const Trace& trace, Policy policy, const SimOptions& options) {
  SimOptions checked = options;
  checked.quantum_ns = std::max<uint64_t>(1, options.quantum_ns);  // a slice must make progress
  return Simulator(trace, policy, checked).run();
}

}  // namespace gshare::sim
