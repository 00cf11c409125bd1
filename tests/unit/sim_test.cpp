// gshare-sim's engine (tools/sim_engine.h): the policies replayed over small
// traces under the virtual clock, and the trace parser's errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/sim_engine.h"

using gshare::sim::Estimate;
using gshare::sim::JobResult;
using gshare::sim::parse_trace;
using gshare::Policy;
using gshare::sim::Run;
using gshare::sim::SimOptions;
using gshare::sim::SimResult;
using gshare::sim::simulate;
using gshare::sim::Trace;
using gshare::sim::TraceJob;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000 * kMs;

TraceJob job(const char* name, double arrival_s, double iteration_ms, uint64_t iterations) {
  TraceJob j;
  j.name = name;
  j.arrival_s = arrival_s;
  j.iteration_ms = iteration_ms;
  j.iterations = iterations;
  return j;
}

// Quantum 50 ms, slice_max 200 ms, and handovers that cost `handover_ms`.
SimOptions options(double handover_ms = 0) {
  SimOptions o;
  o.quantum_ns = 50 * kMs;
  o.slice_max_ns = 200 * kMs;
  o.handover_ns = uint64_t(handover_ms * double(kMs));
  return o;
}

uint64_t run_length(const Run& run) { return run.end_ns - run.start_ns; }

// GPU time `job` received before `until`, from the timeline.
uint64_t gpu_time_before(const SimResult& result, int job, uint64_t until) {
  uint64_t total = 0;
  for (const Run& run : result.timeline) {
    if (run.job != job || run.start_ns >= until) continue;
    total += std::min(run.end_ns, until) - run.start_ns;
  }
  return total;
}

uint64_t first_completion(const SimResult& result) {
  uint64_t first = UINT64_MAX;
  for (const JobResult& job : result.jobs) first = std::min(first, job.completion_ns);
  return first;
}

// Between `from` and `until` the GPU goes from one job to another at every
// slice end: no job gets two slices in a row. (A holder picked again at its
// slice end starts a new Run, so a job that monopolises the GPU shows as a
// series of runs of that job.)
void check_alternate(const SimResult& result, uint64_t from, uint64_t until) {
  int runs = 0;
  for (size_t i = 1; i < result.timeline.size(); ++i) {
    const Run& run = result.timeline[i];
    if (run.start_ns < from || run.start_ns >= until) continue;
    CHECK(run.job != result.timeline[i - 1].job);
    ++runs;
  }
  CHECK(runs > 1);
}

// The runs never overlap and go forward in time: one job at a time.
void check_one_job_at_a_time(const SimResult& result) {
  for (size_t i = 1; i < result.timeline.size(); ++i)
    CHECK(result.timeline[i].start_ns >= result.timeline[i - 1].end_ns);
}

// Every job got exactly its work, whatever the policy did.
void check_all_work_done(const Trace& trace, const SimResult& result) {
  REQUIRE(result.jobs.size() == trace.jobs.size());
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    uint64_t work = uint64_t(trace.jobs[i].iteration_ms * double(kMs)) * trace.jobs[i].iterations;
    CHECK(result.jobs[i].gpu_ns == work);
    CHECK(gpu_time_before(result, int(i), UINT64_MAX) == work);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// fair

TEST_CASE("two equal jobs under fair get equal GPU time and alternate") {
  Trace trace;
  trace.jobs = {job("a", 0, 10, 100), job("b", 0, 10, 100)};  // 1 s each
  SimResult result = simulate(trace, Policy::kFair, options());
  check_one_job_at_a_time(result);
  check_all_work_done(trace, result);
  uint64_t both_active_until = first_completion(result);
  check_alternate(result, 0, both_active_until);
  for (const Run& run : result.timeline)
    if (run.end_ns <= both_active_until) CHECK(run_length(run) == 50 * kMs);
  uint64_t a = gpu_time_before(result, 0, both_active_until);
  uint64_t b = gpu_time_before(result, 1, both_active_until);
  CHECK(std::max(a, b) - std::min(a, b) <= 50 * kMs);  // at most one slice apart
  CHECK(a + b == both_active_until);                   // no handover cost here
}

TEST_CASE("weights 3:1 give 75% and 25% of the GPU under fair while both are active") {
  Trace trace;
  trace.jobs = {job("heavy", 0, 10, 1000), job("light", 0, 10, 1000)};  // 10 s each
  trace.jobs[0].weight = 3;
  SimResult result = simulate(trace, Policy::kFair, options(0.05));
  check_all_work_done(trace, result);
  uint64_t until = first_completion(result);
  double heavy = double(gpu_time_before(result, 0, until));
  double light = double(gpu_time_before(result, 1, until));
  CHECK(heavy / (heavy + light) == Approx(0.75).margin(0.01));
  CHECK(result.jobs[0].completion_ns < result.jobs[1].completion_ns);
}

TEST_CASE("a job that arrives late under fair shares from then on instead of catching up") {
  Trace trace;
  trace.jobs = {job("early", 0, 10, 1000), job("late", 5, 10, 200)};
  SimResult result = simulate(trace, Policy::kFair, options());
  check_all_work_done(trace, result);
  // From the late job's arrival on they take turns: the late job is not
  // owed the 5 s the early one ran alone.
  uint64_t until = result.jobs[1].completion_ns;
  check_alternate(result, 5 * kSecond, until);
  CHECK(gpu_time_before(result, 0, until) - 5 * kSecond ==
        Approx(double(gpu_time_before(result, 1, until))).margin(double(50 * kMs)));
}

// ---------------------------------------------------------------------------
// fifo

TEST_CASE("fifo runs jobs to completion in arrival order") {
  Trace trace;
  // Listed out of arrival order, so that the order can only come from arrivals.
  trace.jobs = {job("third", 0.2, 10, 30), job("first", 0, 20, 50), job("second", 0.1, 5, 40)};
  SimResult result = simulate(trace, Policy::kFifo, options(0.05));
  check_all_work_done(trace, result);
  CHECK(result.jobs[1].start_ns == 50'000);  // at its arrival, after one handover
  REQUIRE(result.timeline.size() == 3);  // one uninterrupted run each
  CHECK(result.timeline[0].job == 1);
  CHECK(result.timeline[1].job == 2);
  CHECK(result.timeline[2].job == 0);
  CHECK(result.jobs[1].completion_ns < result.jobs[2].completion_ns);
  CHECK(result.jobs[2].completion_ns < result.jobs[0].completion_ns);
  CHECK(result.handovers == 3);
}

TEST_CASE("a departure hands the GPU to the next job after one handover") {
  Trace trace;
  trace.jobs = {job("a", 0, 100, 10), job("b", 0.5, 100, 10)};
  const double handover_ms = 2;
  SimResult result = simulate(trace, Policy::kFifo, options(handover_ms));
  uint64_t handover = uint64_t(handover_ms * double(kMs));
  CHECK(result.jobs[0].start_ns == handover);
  CHECK(result.jobs[0].completion_ns == handover + kSecond);
  CHECK(result.jobs[1].start_ns == result.jobs[0].completion_ns + handover);
  CHECK(result.jobs[1].completion_ns == result.jobs[1].start_ns + kSecond);
  CHECK(result.handovers == 2);
}

// ---------------------------------------------------------------------------
// srtf

TEST_CASE("srtf runs a short late arrival before a long job at the next slice end") {
  Trace trace;
  // The long job's slices end at its 100 ms iteration boundaries.
  trace.jobs = {job("long", 0, 100, 100), job("short", 1.02, 10, 100)};  // 10 s and 1 s
  SimResult result = simulate(trace, Policy::kSrtf, options());
  check_all_work_done(trace, result);
  CHECK(result.jobs[1].start_ns == 1100 * kMs);  // the slice end after 1.02 s
  CHECK(gpu_time_before(result, 0, 1100 * kMs) == 1100 * kMs);  // not preempted at arrival
  CHECK(result.jobs[1].completion_ns == 2100 * kMs);
  CHECK(result.jobs[0].completion_ns == 11 * kSecond);
}

TEST_CASE("srtf lets the holder keep the GPU while a newcomer is longer") {
  Trace trace;
  trace.jobs = {job("short", 0, 10, 100), job("long", 0.2, 10, 1000)};
  SimResult result = simulate(trace, Policy::kSrtf, options());
  REQUIRE(result.timeline.size() >= 2);
  CHECK(result.jobs[0].completion_ns == kSecond);
  CHECK(result.jobs[1].start_ns == kSecond);
}

TEST_CASE("srtf replays a job with no estimate last, after the jobs that gave iters or seconds") {
  Trace trace;
  trace.jobs = {job("unknown", 0, 10, 50),  // the shortest, but it says nothing
                job("iters", 0, 10, 200), job("seconds", 0, 10, 100)};
  trace.jobs[0].estimate = Estimate::kNone;
  trace.jobs[2].estimate = Estimate::kSeconds;
  SimResult result = simulate(trace, Policy::kSrtf, options());
  check_all_work_done(trace, result);
  CHECK(result.jobs[2].completion_ns < result.jobs[1].completion_ns);
  CHECK(result.jobs[1].completion_ns < result.jobs[0].completion_ns);
  CHECK(result.jobs[0].start_ns == result.jobs[1].completion_ns);
}

TEST_CASE("under srtf a job's estimate shrinks as it is served, whichever way it gave it") {
  // The holder has 2 s of work and 1 s left when a 1.5 s job arrives: it
  // keeps the GPU only if its remaining time, not its length, is compared.
  for (Estimate estimate : {Estimate::kIters, Estimate::kSeconds}) {
    Trace trace;
    trace.jobs = {job("holder", 0, 10, 200), job("newcomer", 1, 10, 150)};
    trace.jobs[0].estimate = estimate;
    SimResult result = simulate(trace, Policy::kSrtf, options());
    INFO(gshare::sim::estimate_name(estimate));
    CHECK(result.jobs[0].completion_ns == 2 * kSecond);
    CHECK(result.jobs[1].start_ns == 2 * kSecond);
  }
}

// ---------------------------------------------------------------------------
// priority

TEST_CASE("a higher priority preempts at once, mid-iteration, and the low job still finishes") {
  Trace trace;
  trace.jobs = {job("low", 0, 100, 20), job("high", 0.55, 10, 50)};  // 2 s and 0.5 s
  trace.jobs[1].priority = 1;
  const double handover_ms = 1;
  uint64_t handover = uint64_t(handover_ms * double(kMs));
  SimResult result = simulate(trace, Policy::kPriority, options(handover_ms));
  check_all_work_done(trace, result);
  CHECK(result.jobs[1].start_ns == 550 * kMs + handover);
  // The low job's run ends at the arrival, in the middle of its 100 ms
  // iteration, and it gets nothing more while the high one runs.
  CHECK(gpu_time_before(result, 0, 550 * kMs) == 550 * kMs - handover);
  CHECK(gpu_time_before(result, 0, result.jobs[1].completion_ns) == 550 * kMs - handover);
  CHECK(result.jobs[1].completion_ns == result.jobs[1].start_ns + 500 * kMs);
  CHECK(result.jobs[0].completion_ns == 3 * handover + 2500 * kMs);
}

TEST_CASE("an equal priority does not preempt under priority") {
  Trace trace;
  trace.jobs = {job("first", 0, 100, 20), job("second", 0.55, 10, 50)};
  SimResult result = simulate(trace, Policy::kPriority, options());
  CHECK(result.jobs[1].start_ns == 600 * kMs);  // the first's slice end, at its boundary
}

// Under priority a newcomer is levelled with the jobs of its own priority:
// a starved lower-priority job (vtime 0) is no reference, or the newcomer
// would run alone until it caught up with the running job of its level.
TEST_CASE("a newcomer of equal priority shares at once even when a lower-priority job is starved") {
  Trace trace;
  trace.jobs = {job("high-1", 0, 10, 2000), job("low", 0, 10, 100), job("high-2", 5, 10, 1000)};
  trace.jobs[0].priority = trace.jobs[2].priority = 1;
  SimResult result = simulate(trace, Policy::kPriority, options());
  check_alternate(result, 5 * kSecond, result.jobs[2].completion_ns);
}

// ---------------------------------------------------------------------------
// Slices

TEST_CASE("slices end at the first iteration boundary after the quantum") {
  Trace trace;
  trace.jobs = {job("a", 0, 30, 40), job("b", 0, 30, 40)};
  SimResult result = simulate(trace, Policy::kFair, options());
  check_all_work_done(trace, result);
  for (const Run& run : result.timeline) {
    CHECK(run_length(run) % (30 * kMs) == 0);
    if (run.end_ns < first_completion(result)) CHECK(run_length(run) == 60 * kMs);
  }
}

TEST_CASE("a slice ends mid-iteration at slice_max past its length, and the work is kept") {
  Trace trace;
  trace.jobs = {job("slow-a", 0, 1000, 2), job("slow-b", 0, 1000, 2)};  // 1 s iterations
  SimResult result = simulate(trace, Policy::kFair, options());
  check_all_work_done(trace, result);
  REQUIRE(result.timeline.size() > 2);
  CHECK(run_length(result.timeline[0]) == 250 * kMs);  // 50 ms quantum + 200 ms slice_max
  CHECK(run_length(result.timeline[1]) == 250 * kMs);
  CHECK(result.timeline[0].job != result.timeline[1].job);
  CHECK(result.makespan_ns == 4 * kSecond);
}

TEST_CASE("a holder picked again at its slice end goes on without a handover") {
  Trace trace;
  trace.jobs = {job("alone", 0, 10, 100)};
  SimResult result = simulate(trace, Policy::kFair, options(5));
  CHECK(result.handovers == 1);  // the first grant only
  CHECK(result.timeline.size() == 20);  // one run per 50 ms slice
  CHECK(result.jobs[0].completion_ns == 5 * kMs + kSecond);
}

// ---------------------------------------------------------------------------
// Summary

TEST_CASE("makespan, busy fraction and average JCT on a hand-computed trace") {
  Trace trace;
  // a arrives at 1 s and runs 1.1-2.1 s; the GPU idles; b arrives at 3 s
  // and runs 3.1-5.1 s. Handovers of 100 ms.
  trace.jobs = {job("a", 1, 100, 10), job("b", 3, 200, 10)};
  SimResult result = simulate(trace, Policy::kFifo, options(100));
  CHECK(result.jobs[0].start_ns == 1100 * kMs);
  CHECK(result.jobs[0].jct_ns == 1100 * kMs);
  CHECK(result.jobs[1].jct_ns == 2100 * kMs);
  CHECK(result.jobs[1].wait_ns == 100 * kMs);
  CHECK(result.average_jct_ns == Approx(1600.0 * kMs));
  CHECK(result.makespan_ns == 4100 * kMs);  // from the first arrival
  CHECK(result.busy_ns == 3000 * kMs);
  CHECK(result.busy_fraction == Approx(3.0 / 4.1));
  CHECK(result.handovers == 2);
}

TEST_CASE("the same trace and policy always give the same schedule") {
  Trace trace;
  trace.jobs = {job("a", 0, 7, 300), job("b", 0.01, 13, 100), job("c", 0.3, 3, 500)};
  trace.jobs[1].weight = 2;
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf, Policy::kPriority}) {
    SimResult first = simulate(trace, policy, options(0.05));
    SimResult second = simulate(trace, policy, options(0.05));
    REQUIRE(first.timeline.size() == second.timeline.size());
    for (size_t i = 0; i < first.timeline.size(); ++i) {
      CHECK(first.timeline[i].job == second.timeline[i].job);
      CHECK(first.timeline[i].start_ns == second.timeline[i].start_ns);
      CHECK(first.timeline[i].end_ns == second.timeline[i].end_ns);
    }
    check_one_job_at_a_time(first);
    check_all_work_done(trace, first);
  }
}

// ---------------------------------------------------------------------------
// The trace file

TEST_CASE("a trace parses with its fields and the documented defaults") {
  Trace trace;
  std::string error;
  REQUIRE(parse_trace(R"({"description": "two jobs", "slice_max_ms": 120,
      "jobs": [{"name": "a", "arrival_s": 1.5, "iteration_ms": 80, "iterations": 500,
                "weight": 2, "priority": -1, "memory_mib": 4000, "estimate": "seconds"},
               {"name": "b", "arrival_s": 0, "iteration_ms": 20.5, "iterations": 7.0}]})",
                      &trace, &error));
  CHECK(error.empty());
  CHECK(trace.description == "two jobs");
  CHECK(trace.quantum_ms == 50);
  CHECK(trace.slice_max_ms == 120);
  CHECK(trace.handover_ms == 0.05);
  REQUIRE(trace.jobs.size() == 2);
  CHECK(trace.jobs[0].name == "a");
  CHECK(trace.jobs[0].arrival_s == 1.5);
  CHECK(trace.jobs[0].iteration_ms == 80);
  CHECK(trace.jobs[0].iterations == 500);
  CHECK(trace.jobs[0].weight == 2);
  CHECK(trace.jobs[0].priority == -1);
  CHECK(trace.jobs[0].memory_mib == 4000);
  CHECK(trace.jobs[0].estimate == Estimate::kSeconds);
  CHECK(trace.jobs[1].iteration_ms == 20.5);
  CHECK(trace.jobs[1].iterations == 7);
  CHECK(trace.jobs[1].weight == 1);
  CHECK(trace.jobs[1].priority == 0);
  CHECK(trace.jobs[1].memory_mib == 0);
  CHECK(trace.jobs[1].estimate == Estimate::kIters);
}

// A valid one-job trace with one field of the job (or of the trace, for
// `top`) set to `value`, or removed when `value` is null.
std::string trace_with(const char* field, const nlohmann::json& value, bool top = false) {
  nlohmann::json job = {{"name", "a"}, {"arrival_s", 0}, {"iteration_ms", 1}, {"iterations", 1}};
  nlohmann::json trace = {{"jobs", {job}}};
  nlohmann::json& target = top ? trace : trace["jobs"][0];
  if (value.is_null()) {
    target.erase(field);
  } else {
    target[field] = value;
  }
  return trace.dump();
}

TEST_CASE("a bad trace is rejected with an error that names the field") {
  using nlohmann::json;
  struct Case {
    std::string trace;
    const char* error;
  };
  const Case cases[] = {
      {R"({"quantum_ms": 50})", "jobs is missing"},
      {R"({"jobs": []})", "jobs must be a non-empty array"},
      {R"({"jobs": {"name": "a"}})", "jobs must be a non-empty array"},
      {R"([1, 2])", "JSON object"},
      {R"({"jobs": [)", "not valid JSON"},
      {trace_with("quantum_ms", 0, true), "quantum_ms must be > 0"},
      {trace_with("slice_max_ms", "long", true), "slice_max_ms must be a number"},
      {trace_with("handover_ms", -1, true), "handover_ms must be >= 0"},
      {trace_with("description", 5, true), "description must be a string"},
      {R"({"jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1, "iterations": 1}, 7]})",
       "jobs[1] must be an object"},
      {R"({"jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1, "iterations": 1},
                    {"name": "b", "arrival_s": 0, "iteration_ms": -80, "iterations": 1}]})",
       "jobs[1].iteration_ms must be > 0"},
      {trace_with("name", json()), "jobs[0].name is missing"},
      {trace_with("name", ""), "jobs[0].name is empty"},
      {trace_with("arrival_s", json()), "jobs[0].arrival_s is missing"},
      {trace_with("arrival_s", -2), "jobs[0].arrival_s must be >= 0"},
      {trace_with("iteration_ms", json()), "jobs[0].iteration_ms is missing"},
      {trace_with("iteration_ms", 0), "jobs[0].iteration_ms must be > 0"},
      {trace_with("iteration_ms", "80"), "jobs[0].iteration_ms must be a number"},
      {trace_with("iterations", json()), "jobs[0].iterations is missing"},
      {trace_with("iterations", 2.5), "jobs[0].iterations must be a whole number"},
      {trace_with("iterations", 0), "jobs[0].iterations must be a whole number >= 1"},
      {trace_with("weight", 0), "jobs[0].weight must be a whole number >= 1"},
      {trace_with("priority", "high"), "jobs[0].priority must be a whole number"},
      {trace_with("memory_mib", -1), "jobs[0].memory_mib must be a whole number >= 0"},
      {trace_with("paged_mib", 10), "jobs[0].paged_mib is 10, more than its P + E (0 MiB)"},
      {trace_with("paged_mib", -1), "jobs[0].paged_mib must be a whole number >= 0"},
      {trace_with("estimate", "guess"), R"(jobs[0].estimate must be "iters", "seconds" or "none")"},
      {trace_with("estimate", 3), "jobs[0].estimate must be a string"},
  };
  for (const Case& c : cases) {
    Trace trace;
    std::string error;
    INFO(c.trace);
    CHECK_FALSE(parse_trace(c.trace, &trace, &error));
    CHECK_THAT(error, Catch::Matchers::Contains(c.error));
  }
  std::string error;
  Trace trace;
  CHECK(parse_trace(trace_with("estimate", "none"), &trace, &error));  // the helper is sound
}

TEST_CASE("a failed parse leaves the trace untouched") {
  Trace trace;
  trace.description = "before";
  std::string error;
  CHECK_FALSE(parse_trace(R"({"description": "after", "jobs": [{"name": "a"}]})", &trace, &error));
  CHECK(trace.description == "before");
  CHECK(trace.jobs.empty());
}

TEST_CASE("the trace's quantum, slice_max and handover become the simulation's options") {
  Trace trace;
  trace.quantum_ms = 20;
  trace.slice_max_ms = 0;
  trace.handover_ms = 0.25;
  SimOptions o = gshare::sim::options_from(trace);
  CHECK(o.quantum_ns == 20 * kMs);
  CHECK(o.slice_max_ns == 0);
  CHECK(o.handover_ns == 250'000);
}

TEST_CASE("with quantum_adapts the quantum shrinks among many jobs, as live's default does") {
  // 32 jobs of 1 ms iterations: a round of 320 ms gives each 10 ms turns,
  // where the quantum alone gives 20; as jobs finish, turns grow back.
  Trace trace;
  for (int i = 0; i < 32; ++i) trace.jobs.push_back(job("j", 0, 1, 200));
  SimOptions o = options();
  o.quantum_ns = 20 * kMs;
  for (bool adapts : {false, true}) {
    o.quantum_adapts = adapts;
    SimResult result = simulate(trace, Policy::kFair, o);
    check_all_work_done(trace, result);
    check_one_job_at_a_time(result);
    for (const Run& run : result.timeline)
      if (run.end_ns < first_completion(result)) CHECK(run_length(run) == (adapts ? 10 : 20) * kMs);
  }
  std::string error;
  CHECK(parse_trace(R"({"quantum_ms": 20, "quantum_adapts": true,
      "jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1, "iterations": 5}]})", &trace, &error));
  CHECK(error == "");
  CHECK(gshare::sim::options_from(trace).quantum_adapts);
  CHECK_FALSE(parse_trace(R"({"quantum_adapts": 1, "jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1, "iterations": 5}]})",
                          &trace, &error));
  CHECK(error == "quantum_adapts must be true or false (got 1)");
}

// ---------------------------------------------------------------------------
// Memory: admission and lanes

namespace {

using gshare::rules::kNoLane;

TraceJob memory_job(const char* name, double arrival_s, double iteration_ms, uint64_t iterations,
                    uint64_t persistent_mib, uint64_t ephemeral_mib) {
  TraceJob j = job(name, arrival_s, iteration_ms, iterations);
  j.persistent_mib = persistent_mib;
  j.ephemeral_mib = ephemeral_mib;
  return j;
}

SimOptions with_capacity(uint64_t capacity_mib, double handover_ms = 0) {
  SimOptions o = options(handover_ms);
  o.capacity_mib = capacity_mib;
  return o;
}

// How long jobs `a` and `b` ran at the same time.
uint64_t ran_together(const SimResult& result, int a, int b) {
  uint64_t total = 0;
  for (const Run& x : result.timeline) {
    if (x.job != a) continue;
    for (const Run& y : result.timeline) {
      if (y.job != b) continue;
      uint64_t from = std::max(x.start_ns, y.start_ns), to = std::min(x.end_ns, y.end_ns);
      if (to > from) total += to - from;
    }
  }
  return total;
}

// Runs in one lane never overlap: its jobs take turns.
void check_lanes_take_turns(const SimResult& result) {
  for (size_t i = 0; i < result.timeline.size(); ++i)
    for (size_t j = i + 1; j < result.timeline.size(); ++j) {
      const Run& x = result.timeline[i];
      const Run& y = result.timeline[j];
      if (x.lane != y.lane) continue;
      INFO("lane " << x.lane << ": job " << x.job << " and job " << y.job);
      CHECK((x.end_ns <= y.start_ns || y.end_ns <= x.start_ns));
    }
}

}  // namespace

TEST_CASE("a job that does not fit waits for admission exactly until a departure frees room") {
  Trace trace;
  // 600 + 600 MiB resident on a 1000 MiB GPU: b must wait for a to leave.
  trace.jobs = {memory_job("a", 0, 10, 100, 600, 0), memory_job("b", 0.2, 10, 50, 600, 0)};
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kPack}) {
    INFO(gshare::policy_name(policy));
    SimResult result = simulate(trace, policy, with_capacity(1000));
    check_all_work_done(trace, result);
    CHECK(result.memory_modelled);
    // While b waits it is not active: a runs alone, and departs at 1 s.
    CHECK(result.jobs[0].completion_ns == kSecond);
    CHECK(result.jobs[0].admission_wait_ns == 0);
    CHECK(result.jobs[1].admitted_ns == kSecond);
    CHECK(result.jobs[1].admission_wait_ns == 800 * kMs);
    CHECK(result.jobs[1].start_ns == kSecond);
    CHECK(result.jobs[1].completion_ns == 1500 * kMs);
    CHECK(result.jobs[1].wait_ns == 800 * kMs);  // the admission wait counts as waiting
    CHECK(result.jobs[0].lane == 0);
    CHECK(result.jobs[1].lane == 0);  // lane 0 is free again
    CHECK(result.admission_waits == 1);
    CHECK(result.max_admission_wait_ns == 800 * kMs);
    CHECK(result.average_admission_wait_ns == Approx(400.0 * kMs));
  }
  // Without the capacity b is admitted on arrival, and fair shares the GPU.
  SimResult unlimited = simulate(trace, Policy::kFair, options());
  CHECK(unlimited.jobs[1].admission_wait_ns == 0);
  CHECK(unlimited.jobs[0].completion_ns > kSecond);
  CHECK(unlimited.admission_waits == 0);
}

TEST_CASE("a job that fits is admitted at once, past an earlier one that still waits") {
  Trace trace;
  trace.jobs = {memory_job("a", 0, 10, 100, 500, 0), memory_job("big", 0.1, 10, 10, 600, 0),
                memory_job("small", 0.2, 10, 10, 400, 0)};
  SimResult result = simulate(trace, Policy::kFifo, with_capacity(1000));
  check_all_work_done(trace, result);
  CHECK(result.jobs[2].admission_wait_ns == 0);  // 500 + 400 fit
  // a's departure leaves 400 MiB resident: big fits beside small.
  CHECK(result.jobs[1].admitted_ns == kSecond);
  CHECK(result.jobs[1].admission_wait_ns == 900 * kMs);
  // fifo's order is arrival, not admission (live: when the process came).
  CHECK(result.jobs[1].start_ns == kSecond);
  CHECK(result.jobs[2].start_ns == result.jobs[1].completion_ns);
}

TEST_CASE("under pack two jobs of different lanes run at the same time") {
  Trace trace;
  // ΣP + both E = 800 MiB of 1000: each job leads a lane of its own.
  trace.jobs = {memory_job("a", 0, 10, 100, 100, 300), memory_job("b", 0, 10, 100, 100, 300)};
  SimResult pack = simulate(trace, Policy::kPack, with_capacity(1000));
  check_all_work_done(trace, pack);
  check_lanes_take_turns(pack);
  CHECK(pack.jobs[0].lane != pack.jobs[1].lane);
  // Each finishes in the time it takes alone.
  CHECK(pack.jobs[0].completion_ns == kSecond);
  CHECK(pack.jobs[1].completion_ns == kSecond);
  CHECK(ran_together(pack, 0, 1) == kSecond);
  CHECK(pack.busy_ns == kSecond);  // time some job ran, not the sum
  CHECK(pack.busy_fraction == Approx(1.0));
  // The same lanes under fair: one token, one job at a time.
  SimResult fair = simulate(trace, Policy::kFair, with_capacity(1000));
  check_one_job_at_a_time(fair);
  CHECK(fair.makespan_ns == 2 * kSecond);
}

TEST_CASE("under pack two jobs that memory puts in one lane take turns") {
  Trace trace;
  // Two lanes would need 200 + 500 + 500 MiB: one lane of 700 is all that fits.
  trace.jobs = {memory_job("a", 0, 10, 100, 100, 500), memory_job("b", 0, 10, 100, 100, 500)};
  SimResult one_lane = simulate(trace, Policy::kPack, with_capacity(1000));
  check_all_work_done(trace, one_lane);
  CHECK(one_lane.jobs[0].lane == 0);
  CHECK(one_lane.jobs[1].lane == 0);
  check_one_job_at_a_time(one_lane);
  check_alternate(one_lane, 0, first_completion(one_lane));
  CHECK(one_lane.makespan_ns == 2 * kSecond);
  CHECK(ran_together(one_lane, 0, 1) == 0);
  // With room for two lanes the same jobs finish in half the time.
  SimResult two_lanes = simulate(trace, Policy::kPack, with_capacity(2000));
  CHECK(two_lanes.jobs[0].lane != two_lanes.jobs[1].lane);
  CHECK(two_lanes.makespan_ns == kSecond);
}

TEST_CASE("a departure widens the lanes, and pack then runs the jobs left at once") {
  Trace trace;
  // Three jobs fit one lane only (300 + 400 MiB; two lanes need 1100).
  // When the short one leaves, two lanes fit exactly (200 + 400 + 400).
  trace.jobs = {memory_job("short", 0, 10, 50, 100, 400), memory_job("b", 0, 10, 200, 100, 400),
                memory_job("c", 0, 10, 200, 100, 400)};
  SimResult pack = simulate(trace, Policy::kPack, with_capacity(1000));
  check_all_work_done(trace, pack);
  check_lanes_take_turns(pack);
  // The three share one lane until the short job has had its 0.5 s, at
  // about 1.5 s; b and c then run side by side for their last 1.5 s.
  uint64_t widened = pack.jobs[0].completion_ns;
  CHECK(double(widened) == Approx(1.5 * kSecond).margin(double(100 * kMs)));
  for (const Run& run : pack.timeline)
    if (run.start_ns < widened) CHECK(run.lane == pack.jobs[0].lane);
  CHECK(pack.jobs[1].final_lane != pack.jobs[2].final_lane);
  CHECK(ran_together(pack, 1, 2) > 1400 * kMs);
  CHECK(ran_together(pack, 1, 2) <= pack.makespan_ns - widened);
  CHECK(double(pack.makespan_ns) == Approx(3.0 * kSecond).margin(double(100 * kMs)));
  // fair on the same memory: 4.5 s of work, one job at a time.
  SimResult fair = simulate(trace, Policy::kFair, with_capacity(1000));
  CHECK(fair.makespan_ns == 4500 * kMs);
}

TEST_CASE("without a capacity the memory fields change nothing, and pack is fair") {
  Trace plain;
  plain.jobs = {job("a", 0, 7, 300), job("b", 0.01, 13, 100), job("c", 0.3, 3, 500)};
  plain.jobs[1].weight = 2;
  Trace with_memory = plain;
  for (TraceJob& j : with_memory.jobs) {
    j.persistent_mib = 900;  // would not fit together on a 1000 MiB GPU
    j.ephemeral_mib = 100;
  }
  auto same = [](const SimResult& x, const SimResult& y) {
    REQUIRE(x.timeline.size() == y.timeline.size());
    for (size_t i = 0; i < x.timeline.size(); ++i) {
      CHECK(x.timeline[i].job == y.timeline[i].job);
      CHECK(x.timeline[i].start_ns == y.timeline[i].start_ns);
      CHECK(x.timeline[i].end_ns == y.timeline[i].end_ns);
    }
    CHECK(x.handovers == y.handovers);
  };
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf, Policy::kPriority}) {
    INFO(gshare::policy_name(policy));
    SimResult before = simulate(plain, policy, options(0.05));
    SimResult after = simulate(with_memory, policy, options(0.05));
    same(before, after);
    CHECK_FALSE(after.memory_modelled);
    CHECK(after.admission_waits == 0);
    for (const JobResult& j : after.jobs) {
      CHECK(j.admission_wait_ns == 0);
      CHECK(j.admitted_ns == j.arrival_ns);
      CHECK(j.lane == kNoLane);
    }
    for (const Run& run : after.timeline) CHECK(run.lane == kNoLane);
  }
  same(simulate(plain, Policy::kPack, options(0.05)), simulate(plain, Policy::kFair, options(0.05)));
  // The same jobs with the capacity do wait: the fields are read.
  CHECK(simulate(with_memory, Policy::kFair, with_capacity(1000)).admission_waits == 2);
}

TEST_CASE("a job larger than the GPU on its own is left unfinished instead of hanging") {
  Trace trace;
  trace.jobs = {memory_job("fits", 0, 10, 10, 100, 100), memory_job("too-big", 0, 10, 10, 900, 200)};
  SimResult result = simulate(trace, Policy::kFifo, with_capacity(1000));
  CHECK(result.jobs[0].completion_ns == 100 * kMs);
  CHECK(result.jobs[1].completion_ns == 0);
  CHECK(result.jobs[1].gpu_ns == 0);
  std::string error;
  trace.capacity_mib = 1000;
  CHECK_FALSE(gshare::sim::check_capacity(trace, &error));
  CHECK(error == "jobs[1] (too-big) needs P + E = 1100 MiB, more than capacity_mib 1000: it "
                 "could never be admitted");
}

TEST_CASE("a trace's memory fields parse; memory_mib stands in for P when nothing is split") {
  Trace trace;
  std::string error;
  REQUIRE(parse_trace(R"({"capacity_mib": 16384, "jobs": [
      {"name": "split", "arrival_s": 0, "iteration_ms": 1, "iterations": 1,
       "persistent_mib": 1000, "ephemeral_mib": 3000, "memory_mib": 5000},
      {"name": "whole", "arrival_s": 0, "iteration_ms": 1, "iterations": 1, "memory_mib": 7000},
      {"name": "only-e", "arrival_s": 0, "iteration_ms": 1, "iterations": 1,
       "memory_mib": 7000, "ephemeral_mib": 2000},
      {"name": "none", "arrival_s": 0, "iteration_ms": 1, "iterations": 1}]})",
                      &trace, &error));
  CHECK(error.empty());
  CHECK(trace.capacity_mib == 16384);
  CHECK(gshare::sim::options_from(trace).capacity_mib == 16384);
  REQUIRE(trace.jobs.size() == 4);
  CHECK(trace.jobs[0].persistent_mib == 1000);
  CHECK(trace.jobs[0].ephemeral_mib == 3000);
  CHECK(trace.jobs[0].memory_mib == 5000);
  CHECK(trace.jobs[1].persistent_mib == 7000);
  CHECK(trace.jobs[1].ephemeral_mib == 0);
  CHECK(trace.jobs[2].persistent_mib == 0);
  CHECK(trace.jobs[2].ephemeral_mib == 2000);
  CHECK(trace.jobs[3].persistent_mib == 0);
  CHECK(trace.jobs[3].ephemeral_mib == 0);
  REQUIRE(parse_trace(trace_with("memory_mib", 100), &trace, &error));
  CHECK(trace.capacity_mib == 0);  // absent: memory is not modelled
}

TEST_CASE("bad memory fields are rejected with an error that names the field") {
  struct Case {
    std::string trace;
    const char* error;
  };
  const Case cases[] = {
      {trace_with("capacity_mib", 0, true), "capacity_mib must be a whole number >= 1"},
      {trace_with("capacity_mib", 1.5, true), "capacity_mib must be a whole number"},
      {trace_with("persistent_mib", -1), "jobs[0].persistent_mib must be a whole number >= 0"},
      {trace_with("ephemeral_mib", "x"), "jobs[0].ephemeral_mib must be a whole number"},
      {trace_with("ephemeral_mib", 2e9), "jobs[0].ephemeral_mib must be a whole number >= 0 and <= 1e+09"},
      {R"({"capacity_mib": 1000, "jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1,
          "iterations": 1, "persistent_mib": 700, "ephemeral_mib": 400}]})",
       "jobs[0] (a) needs P + E = 1100 MiB, more than capacity_mib 1000"},
      {R"({"capacity_mib": 1000, "jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1,
          "iterations": 1, "memory_mib": 1001}]})",
       "jobs[0] (a) needs P + E = 1001 MiB"},
  };
  for (const Case& c : cases) {
    Trace trace;
    std::string error;
    INFO(c.trace);
    CHECK_FALSE(parse_trace(c.trace, &trace, &error));
    CHECK_THAT(error, Catch::Matchers::Contains(c.error));
  }
}
