#include "tools/sim_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>

#include <nlohmann/json.hpp>

namespace gshare::sim {

using scheduler::kForever;

namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// The trace file

// Far beyond any real trace, and small enough that every sum of
// nanoseconds in the simulation stays well inside 64 bits.
constexpr double kMaxSeconds = 1e7;
constexpr double kMaxMs = kMaxSeconds * 1e3;
constexpr double kMaxIterations = 1e12;
constexpr int64_t kMaxWeight = 1000;  // quantum x weight must not overflow (slice_length)

struct Estimated {
  Estimate estimate;
  const char* name;
};
constexpr Estimated kEstimates[] = {
    {Estimate::kIters, "iters"}, {Estimate::kSeconds, "seconds"}, {Estimate::kNone, "none"}};

// Reads fields of one JSON object and remembers the first problem, naming
// the field by its path ("jobs[3].iteration_ms").
class FieldReader {
 public:
  FieldReader(const Json& object, std::string path, std::string* error)
      : object_(object), path_(std::move(path)), error_(error) {}

  bool ok() const { return error_->empty(); }

  // A number in [min, max] (or (min, max] when `min_is_open`); `fallback`
  // when absent and not required.
  double number(const char* field, bool required, double fallback, double min, bool min_is_open,
                double max) {
    const Json* value = find(field, required, "a number");
    if (!value) return fallback;
    if (!value->is_number()) {
      fail(field, "must be a number", *value);
      return fallback;
    }
    double x = value->get<double>();
    bool too_small = min_is_open ? !(x > min) : !(x >= min);
    if (too_small || !(x <= max)) {
      fail(field, std::string("must be ") + (min_is_open ? "> " : ">= ") + format_number(min) +
                      " and <= " + format_number(max),
           *value);
      return fallback;
    }
    return x;
  }

  // A whole number in [min, max] (500 and 500.0 both are).
  int64_t whole(const char* field, bool required, int64_t fallback, double min, double max) {
    const Json* value = find(field, required, "a whole number");
    if (!value) return fallback;
    bool integral = value->is_number_integer() ||
                    (value->is_number_float() && std::isfinite(value->get<double>()) &&
                     value->get<double>() == std::floor(value->get<double>()));
    if (!integral) {
      fail(field, "must be a whole number", *value);
      return fallback;
    }
    double x = value->get<double>();
    if (x < min || x > max) {
      fail(field,
           "must be a whole number >= " + format_number(min) + " and <= " + format_number(max),
           *value);
      return fallback;
    }
    return value->is_number_unsigned() ? int64_t(value->get<uint64_t>()) : value->get<int64_t>();
  }

  std::string text(const char* field, bool required, std::string fallback) {
    const Json* value = find(field, required, "a string");
    if (!value) return fallback;
    if (!value->is_string()) {
      fail(field, "must be a string", *value);
      return fallback;
    }
    return value->get<std::string>();
  }

  Estimate estimate(const char* field) {
    std::string name = text(field, false, "iters");
    for (const Estimated& e : kEstimates)
      if (name == e.name) return e.estimate;
    if (ok()) fail(field, "must be \"iters\", \"seconds\" or \"none\"", Json(name));
    return Estimate::kIters;
  }

 private:
  static std::string format_number(double x) {
    char buffer[32];
    snprintf(buffer, sizeof buffer, "%g", x);
    return buffer;
  }

  // The field's value, or null: absent (an error if required) or an
  // earlier field already failed.
  const Json* find(const char* field, bool required, const char* what) {
    if (!ok()) return nullptr;
    auto it = object_.find(field);
    if (it != object_.end() && !it->is_null()) return &*it;
    if (required) *error_ = name(field) + " is missing (" + what + ")";
    return nullptr;
  }

  void fail(const char* field, const std::string& why, const Json& value) {
    *error_ = name(field) + " " + why + " (got " + value.dump() + ")";
  }

  std::string name(const char* field) const {
    return path_.empty() ? std::string(field) : path_ + "." + field;
  }

  const Json& object_;
  std::string path_;
  std::string* error_;
};

bool parse_job(const Json& value, size_t index, TraceJob* job, std::string* error) {
  std::string path = "jobs[" + std::to_string(index) + "]";
  if (!value.is_object()) {
    *error = path + " must be an object (got " + value.dump() + ")";
    return false;
  }
  FieldReader read(value, path, error);
  job->name = read.text("name", true, "");
  if (read.ok() && job->name.empty()) *error = path + ".name is empty";
  job->arrival_s = read.number("arrival_s", true, 0, 0, false, kMaxSeconds);
  job->iteration_ms = read.number("iteration_ms", true, 0, 0, true, kMaxMs);
  job->iterations = uint64_t(read.whole("iterations", true, 0, 1, kMaxIterations));
  job->weight = uint32_t(read.whole("weight", false, 1, 1, kMaxWeight));
  job->priority = int32_t(read.whole("priority", false, 0, INT32_MIN, INT32_MAX));
  job->memory_mib = uint64_t(read.whole("memory_mib", false, 0, 0, 1e12));
  job->estimate = read.estimate("estimate");
  if (read.ok() && job->iteration_ms * 1e-3 * double(job->iterations) > kMaxSeconds) {
    *error = path + ": iterations x iteration_ms is more than " +
             std::to_string(int64_t(kMaxSeconds)) + " s";
  }
  return read.ok();
}

// ---------------------------------------------------------------------------
// The simulation

uint64_t seconds_to_ns(double seconds) { return uint64_t(std::llround(seconds * 1e9)); }
uint64_t ms_to_ns(double ms) { return uint64_t(std::llround(ms * 1e6)); }

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kForever - b ? kForever : a + b; }

// What the simulator knows of a job beyond what the policy sees.
struct Workload {
  uint64_t iteration_ns = 1;
  uint64_t iterations = 0;
  uint64_t work_ns = 0;  // iterations x iteration_ns: GPU time to finish
  Estimate estimate = Estimate::kIters;
};

class Simulator {
 public:
  Simulator(const Trace& trace, Policy policy, const SimOptions& options)
      : policy_(policy), options_(options) {
    size_t count = trace.jobs.size();
    jobs_.resize(count);
    workloads_.resize(count);
    result_.jobs.resize(count);
    for (size_t i = 0; i < count; ++i) load_job(trace.jobs[i], int(i));
    arrival_order_.resize(count);
    std::iota(arrival_order_.begin(), arrival_order_.end(), 0);
    std::stable_sort(arrival_order_.begin(), arrival_order_.end(),
                     [&](int a, int b) { return jobs_[a].arrival_ns < jobs_[b].arrival_ns; });
  }

  SimResult run() {
    while (departed_ < jobs_.size()) step();
    summarise();
    return std::move(result_);
  }

 private:
  void load_job(const TraceJob& source, int index) {
    scheduler::Job& job = jobs_[index];
    job.id = index;
    job.arrival_ns = seconds_to_ns(source.arrival_s);
    job.weight = source.weight ? source.weight : 1;
    job.priority = source.priority;
    Workload& work = workloads_[index];
    work.iteration_ns = std::max<uint64_t>(1, ms_to_ns(source.iteration_ms));
    work.iterations = source.iterations;
    work.work_ns = work.iteration_ns * work.iterations;
    work.estimate = source.estimate;
    result_.jobs[index].arrival_ns = job.arrival_ns;
  }

  // One event: the earliest of the next arrival, the holder's departure
  // and its slice end. Several at the same instant are handled together:
  // the departure first, then every arrival, then one decision.
  void step() {
    advance_to(std::min({next_arrival_ns(), holder_finish_ns(), slice_end_ns_}));
    depart_if_done();
    bool slice_over = holder_ >= 0 && now_ == slice_end_ns_;
    bool preempted = admit_arrivals();
    if (holder_ < 0 || slice_over || preempted) decide();
  }

  uint64_t next_arrival_ns() const {
    if (next_arrival_ == arrival_order_.size()) return kForever;
    return jobs_[arrival_order_[next_arrival_]].arrival_ns;
  }

  // The holder runs from the end of its handover.
  uint64_t holder_runs_from() const { return std::max(now_, runs_from_ns_); }

  uint64_t holder_finish_ns() const {
    if (holder_ < 0) return kForever;
    return holder_runs_from() + (workloads_[holder_].work_ns - jobs_[holder_].served_ns);
  }

  // The holder runs until `t`: charge it, note the run.
  void advance_to(uint64_t t) {
    if (holder_ >= 0 && t > holder_runs_from()) {
      uint64_t from = holder_runs_from();
      scheduler::charge(jobs_[holder_], t - from);
      result_.busy_ns += t - from;
      note_run(from, t);
    }
    now_ = t;
  }

  void note_run(uint64_t from, uint64_t to) {
    if (jobs_[holder_].served_ns == to - from) result_.jobs[holder_].start_ns = from;
    if (run_is_open_) {
      result_.timeline.back().end_ns = to;
    } else {
      result_.timeline.push_back({holder_, from, to});
      run_is_open_ = true;
    }
  }

  void depart_if_done() {
    if (holder_ < 0 || jobs_[holder_].served_ns < workloads_[holder_].work_ns) return;
    jobs_[holder_].active = false;
    if (jobs_[holder_].served_ns == 0) result_.jobs[holder_].start_ns = now_;  // no work at all
    result_.jobs[holder_].completion_ns = now_;
    ++departed_;
    holder_ = -1;
    slice_end_ns_ = kForever;
  }

  // Activates every job that has arrived by now; true if one of them takes
  // the GPU from the holder at once.
  bool admit_arrivals() {
    bool preempts = false;
    while (next_arrival_ns() <= now_) {
      int index = arrival_order_[next_arrival_++];
      scheduler::activate(policy_, jobs_.data(), int(jobs_.size()), index);
      if (holder_ >= 0 && scheduler::preempts_now(policy_, jobs_[holder_], jobs_[index]))
        preempts = true;
    }
    return preempts;
  }

  void decide() {
    refresh_estimates();
    int next = scheduler::pick_next(policy_, jobs_.data(), int(jobs_.size()), holder_);
    if (next < 0) {
      holder_ = -1;
      slice_end_ns_ = kForever;
    } else if (next == holder_) {
      start_slice(holder_runs_from());
    } else {
      holder_ = next;
      ++result_.handovers;
      start_slice(now_ + options_.handover_ns);
    }
  }

  void refresh_estimates() {
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (jobs_[i].active) jobs_[i].remaining_ns = remaining_ns(int(i));
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
  void start_slice(uint64_t runs_from) {
    runs_from_ns_ = runs_from;
    run_is_open_ = false;
    uint64_t length = scheduler::slice_length(policy_, jobs_[holder_], options_.quantum_ns);
    if (length == kForever) {
      slice_end_ns_ = kForever;
      return;
    }
    uint64_t iteration = workloads_[holder_].iteration_ns;
    uint64_t served = jobs_[holder_].served_ns;
    uint64_t due = saturating_add(served, length);
    uint64_t boundary = saturating_add(due, iteration - 1) / iteration * iteration;
    uint64_t at_boundary = saturating_add(runs_from, boundary - served);
    uint64_t latest = saturating_add(saturating_add(runs_from, length), options_.slice_max_ns);
    slice_end_ns_ = std::min(at_boundary, latest);
  }

  void summarise() {
    uint64_t first_arrival = kForever, last_completion = 0;
    double jct_sum = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      JobResult& job = result_.jobs[i];
      job.gpu_ns = jobs_[i].served_ns;
      job.jct_ns = job.completion_ns - job.arrival_ns;
      job.wait_ns = job.jct_ns - job.gpu_ns;
      jct_sum += double(job.jct_ns);
      first_arrival = std::min(first_arrival, job.arrival_ns);
      last_completion = std::max(last_completion, job.completion_ns);
    }
    if (jobs_.empty()) return;
    result_.average_jct_ns = jct_sum / double(jobs_.size());
    result_.makespan_ns = last_completion - first_arrival;
    if (result_.makespan_ns > 0)
      result_.busy_fraction = double(result_.busy_ns) / double(result_.makespan_ns);
  }

  const Policy policy_;
  const SimOptions options_;
  std::vector<scheduler::Job> jobs_;  // what the policy sees, by trace index
  std::vector<Workload> workloads_;
  std::vector<int> arrival_order_;    // trace indices by arrival, ties by index
  size_t next_arrival_ = 0;           // into arrival_order_
  size_t departed_ = 0;
  uint64_t now_ = 0;
  int holder_ = -1;
  uint64_t runs_from_ns_ = 0;         // the holder's handover ends here
  uint64_t slice_end_ns_ = kForever;
  bool run_is_open_ = false;          // the holder's current slice has a Run
  SimResult result_;
};

}  // namespace

const char* estimate_name(Estimate estimate) {
  for (const Estimated& e : kEstimates)
    if (e.estimate == estimate) return e.name;
  return "unknown";
}

bool parse_trace(const std::string& json_text, Trace* out, std::string* error) {
  error->clear();
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, ...".
    std::string what = e.what();
    size_t message = what.find("] ");
    *error = "not valid JSON: " + (message == std::string::npos ? what : what.substr(message + 2));
    return false;
  }
  if (!root.is_object()) {
    *error = "the trace must be a JSON object with a \"jobs\" array";
    return false;
  }
  Trace trace;
  FieldReader read(root, "", error);
  trace.description = read.text("description", false, "");
  trace.quantum_ms = read.number("quantum_ms", false, trace.quantum_ms, 0, true, kMaxMs);
  trace.slice_max_ms = read.number("slice_max_ms", false, trace.slice_max_ms, 0, false, kMaxMs);
  trace.handover_ms = read.number("handover_ms", false, trace.handover_ms, 0, false, kMaxMs);
  if (!read.ok()) return false;
  auto jobs = root.find("jobs");
  if (jobs == root.end()) {
    *error = "jobs is missing (an array of jobs)";
    return false;
  }
  if (!jobs->is_array() || jobs->empty()) {
    *error = "jobs must be a non-empty array (got " + jobs->dump().substr(0, 40) + ")";
    return false;
  }
  trace.jobs.resize(jobs->size());
  for (size_t i = 0; i < jobs->size(); ++i)
    if (!parse_job((*jobs)[i], i, &trace.jobs[i], error)) return false;
  *out = std::move(trace);
  return true;
}

SimOptions options_from(const Trace& trace) {
  SimOptions options;
  options.quantum_ns = std::max<uint64_t>(1, ms_to_ns(trace.quantum_ms));
  options.slice_max_ns = ms_to_ns(trace.slice_max_ms);
  options.handover_ns = ms_to_ns(trace.handover_ms);
  return options;
}

SimResult simulate(const Trace& trace, Policy policy, const SimOptions& options) {
  SimOptions checked = options;
  checked.quantum_ns = std::max<uint64_t>(1, options.quantum_ns);  // a slice must make progress
  return Simulator(trace, policy, checked).run();
}

}  // namespace gshare::sim
