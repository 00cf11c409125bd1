// The scheduling policies as pure functions (rules/policy.h): who is
// picked, how long a slice lasts, who preempts, what charge and activate do.
#include <catch2/catch.hpp>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "rules/policy.h"

using gshare::rules::activate;
using gshare::rules::bounds_in_flight;
using gshare::rules::charge;
using gshare::rules::Job;
using gshare::rules::kForever;
using gshare::rules::keeps_vtime_floor;
using gshare::rules::least_active_vtime;
using gshare::rules::paging_weight;
using gshare::parse_policy;
using gshare::rules::pick_next;
using gshare::Policy;
using gshare::policy_is_known;
using gshare::policy_name;
using gshare::rules::preempts_now;
using gshare::rules::quantum_among;
using gshare::rules::slice_length;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kQuantum = 50 * kMs;

// An active job; ids follow the index in the vectors below.
Job active_job(int id, uint64_t arrival_ns) {
  Job job;
  job.id = id;
  job.active = true;
  job.arrival_ns = arrival_ns;
  return job;
}

// Jobs 0..count-1, all active, arrived 0, 1, 2 ... ms in id order.
std::vector<Job> active_jobs(int count) {
  std::vector<Job> jobs;
  for (int i = 0; i < count; ++i) jobs.push_back(active_job(i, uint64_t(i) * kMs));
  return jobs;
}

// The slice `job` gets with `quantum_ns` as its quantum.
uint64_t slice_with(Policy policy, Job job, uint64_t quantum_ns) {
  job.quantum_ns = quantum_ns;
  return slice_length(policy, job);
}

int pick(Policy policy, const std::vector<Job>& jobs, int holder) {
  return pick_next(policy, jobs.data(), int(jobs.size()), holder);
}

}  // namespace

// ---------------------------------------------------------------------------
// Every policy

TEST_CASE("no policy picks a job when none is active") {
  std::vector<Job> jobs = active_jobs(3);
  for (Job& job : jobs) job.active = false;
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf, Policy::kPriority, Policy::kPrefetch}) {
    CHECK(pick(policy, jobs, -1) == -1);
    CHECK(pick_next(policy, nullptr, 0, -1) == -1);
  }
}

TEST_CASE("no policy picks an inactive job, however good it looks") {
  std::vector<Job> jobs = active_jobs(2);
  jobs[0].active = false;  // earliest, least vtime, shortest, highest priority
  jobs[0].priority = 9;
  jobs[1].vtime_ns = 1000;
  jobs[1].remaining_ns = 1000;
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf, Policy::kPriority})
    CHECK(pick(policy, jobs, -1) == 1);
}

// ---------------------------------------------------------------------------
// fifo

TEST_CASE("under fifo the holder keeps the GPU while it is active") {
  std::vector<Job> jobs = active_jobs(3);
  CHECK(pick(Policy::kFifo, jobs, 2) == 2);  // though jobs 0 and 1 arrived earlier
  CHECK(pick(Policy::kFifo, jobs, 1) == 1);
}

TEST_CASE("under fifo the earliest arrival runs next") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].arrival_ns = 30 * kMs;
  jobs[1].arrival_ns = 10 * kMs;
  jobs[2].arrival_ns = 20 * kMs;
  CHECK(pick(Policy::kFifo, jobs, -1) == 1);
  jobs[1].active = false;  // it departed
  CHECK(pick(Policy::kFifo, jobs, -1) == 2);
}

TEST_CASE("under fifo jobs that arrived together run in id order") {
  std::vector<Job> jobs = active_jobs(3);
  for (Job& job : jobs) job.arrival_ns = 5 * kMs;
  CHECK(pick(Policy::kFifo, jobs, -1) == 0);
  jobs[0].active = false;
  CHECK(pick(Policy::kFifo, jobs, -1) == 1);
}

TEST_CASE("under fifo vtime, estimates and priorities do not matter") {
  std::vector<Job> jobs = active_jobs(2);
  jobs[0].vtime_ns = 1'000 * kMs;
  jobs[0].remaining_ns = kForever;
  jobs[1].priority = 5;
  jobs[1].remaining_ns = 1;
  CHECK(pick(Policy::kFifo, jobs, -1) == 0);
}

// ---------------------------------------------------------------------------
// fair

TEST_CASE("under fair the job furthest behind on the fair clock runs") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].vtime_ns = 300;
  jobs[1].vtime_ns = 100;
  jobs[2].vtime_ns = 200;
  CHECK(pick(Policy::kFair, jobs, 0) == 1);
  CHECK(pick(Policy::kFair, jobs, 1) == 1);  // still the furthest behind: it keeps the GPU
}

TEST_CASE("under fair a tie on the fair clock goes to a job other than the holder") {
  std::vector<Job> jobs = active_jobs(2);
  jobs[0].vtime_ns = jobs[1].vtime_ns = 700;
  CHECK(pick(Policy::kFair, jobs, 0) == 1);
  CHECK(pick(Policy::kFair, jobs, 1) == 0);
  CHECK(pick(Policy::kFair, jobs, -1) == 0);  // no holder: the earlier arrival
}

TEST_CASE("under fair a tie among non-holders goes to the earlier arrival") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[1].arrival_ns = 0;
  jobs[2].arrival_ns = 0;
  jobs[1].id = 7;  // same arrival: the lower id wins
  for (Job& job : jobs) job.vtime_ns = 50;
  CHECK(pick(Policy::kFair, jobs, 0) == 2);
}

TEST_CASE("charge moves the fair clock by served time over weight") {
  Job light = active_job(0, 0);
  Job heavy = active_job(1, 0);
  heavy.weight = 3;
  charge(light, 300 * kMs);
  charge(heavy, 300 * kMs);
  CHECK(light.served_ns == 300 * kMs);
  CHECK(heavy.served_ns == 300 * kMs);
  CHECK(light.vtime_ns == 300 * kMs);
  CHECK(heavy.vtime_ns == 100 * kMs);
}

TEST_CASE("under fair a job of weight 3 stays even with a job of weight 1 that gets a third") {
  std::vector<Job> jobs = active_jobs(2);
  jobs[0].weight = 3;
  charge(jobs[0], 3 * kQuantum);
  charge(jobs[1], kQuantum);
  CHECK(jobs[0].vtime_ns == jobs[1].vtime_ns);
  charge(jobs[1], 1);  // now job 1 is ahead: job 0 runs
  CHECK(pick(Policy::kFair, jobs, 1) == 0);
}

TEST_CASE("charge treats a weight of 0 as 1") {
  Job job = active_job(0, 0);
  job.weight = 0;
  charge(job, 42);
  CHECK(job.vtime_ns == 42);
}

TEST_CASE("charge counts down a known remaining time and never below 0") {
  Job job = active_job(0, 0);
  job.remaining_ns = 100;
  charge(job, 30);
  CHECK(job.remaining_ns == 70);
  charge(job, 500);
  CHECK(job.remaining_ns == 0);
  Job unknown = active_job(1, 0);
  charge(unknown, 500);
  CHECK(unknown.remaining_ns == kForever);
}

TEST_CASE("a newly active job starts level with the least vtime of the active jobs") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].vtime_ns = 900;
  jobs[1].vtime_ns = 400;
  jobs[2].active = false;  // arrives now, vtime 0: it must not run until it has caught up
  activate(Policy::kFair, jobs.data(), 3, 2);
  CHECK(jobs[2].active);
  CHECK(jobs[2].vtime_ns == 400);
  // Level with job 1, so job 1 (if it holds the GPU) hands it over at once,
  // and then they alternate rather than job 2 running for 400 ns alone.
  CHECK(pick(Policy::kFair, jobs, 1) == 2);
}

TEST_CASE("a job that becomes active keeps up to one of its turns of credit on the fair clock") {
  // A job idle only between two of its iterations (its own sync after a
  // hand-over, or late to get a CPU among many processes) must not lose its
  // place at each such wake. One idle for long still comes back no more
  // than a turn behind.
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].vtime_ns = 900;
  jobs[1].vtime_ns = 400;
  jobs[2].active = false;
  jobs[2].turn_ns = 100;
  jobs[2].away_ns = 200'000'000;  // idle between two of its iterations
  jobs[2].vtime_ns = 350;  // within a turn of the least: kept
  activate(Policy::kFair, jobs.data(), 3, 2);
  CHECK(jobs[2].vtime_ns == 350);
  jobs[2].active = false;
  jobs[2].vtime_ns = 0;  // far behind: one turn behind the least
  activate(Policy::kFair, jobs.data(), 3, 2);
  CHECK(jobs[2].vtime_ns == 300);
  jobs[2].active = false;
  jobs[2].weight = 4;  // a turn of 100 ns is 25 ns on its clock
  jobs[2].vtime_ns = 0;
  activate(Policy::kFair, jobs.data(), 3, 2);
  CHECK(jobs[2].vtime_ns == 375);
  jobs[2].active = false;
  jobs[2].away_ns = 1'000'000'000;  // away for long: level, no credit
  jobs[2].vtime_ns = 0;
  activate(Policy::kFair, jobs.data(), 3, 2);
  CHECK(jobs[2].vtime_ns == 400);
}

TEST_CASE("a job that ran ahead while the others were away comes back no more than a turn ahead") {
  // Job 1 warmed up while job 0 idled at a start barrier: the time it ran
  // took nothing from job 0, and kept as a lead it would cost job 1 its
  // turns at the common start until job 0 caught up.
  std::vector<Job> jobs = active_jobs(2);
  jobs[0].vtime_ns = 400;
  jobs[1].active = false;
  jobs[1].turn_ns = 100;
  jobs[1].away_ns = 200'000'000;
  jobs[1].vtime_ns = 1000;
  activate(Policy::kFair, jobs.data(), 2, 1);
  CHECK(jobs[1].vtime_ns == 500);
  jobs[1].active = false;
  jobs[1].vtime_ns = 450;  // within a turn ahead: kept
  activate(Policy::kFair, jobs.data(), 2, 1);
  CHECK(jobs[1].vtime_ns == 450);
  jobs[1].active = false;
  jobs[1].away_ns = 5'000'000'000;  // away for long (at a start barrier): level
  activate(Policy::kFair, jobs.data(), 2, 1);
  CHECK(jobs[1].vtime_ns == 400);
}

TEST_CASE("activate ignores inactive jobs and keeps the vtime of a job that is alone") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].active = false;
  jobs[0].vtime_ns = 5000;  // departed: not a reference
  jobs[1].active = false;
  jobs[1].vtime_ns = 20;
  jobs[2].active = false;
  jobs[2].vtime_ns = 10;
  for (Job& j : jobs) {
    j.turn_ns = 50;
    j.away_ns = 200'000'000;
  }
  activate(Policy::kFair, jobs.data(), 3, 2);
  CHECK(jobs[2].vtime_ns == 10);
  activate(Policy::kFair, jobs.data(), 3, 1);
  CHECK(jobs[1].vtime_ns == 20);  // within a turn ahead of job 2
  jobs[0].vtime_ns = 0;
  jobs[0].turn_ns = 0;
  activate(Policy::kFair, jobs.data(), 3, 0);
  CHECK(jobs[0].vtime_ns == 10);
}

TEST_CASE("a job that becomes active when none is starts no further behind than the vtime floor") {
  // Job 0 set up first and ran alone to vtime 630 ms, which the floor
  // remembers; it now waits at a start barrier, idle. Jobs 1 and 2 arrive
  // after it with vtime 0 while nobody is active: level with the floor, so
  // at the common start job 0 does not wait until both have run 630 ms.
  constexpr uint64_t kMs = 1'000'000;
  std::vector<Job> jobs = active_jobs(3);
  for (Job& j : jobs) {
    j.active = false;
    j.turn_ns = 20 * kMs;
  }
  jobs[0].vtime_ns = 630 * kMs;
  const uint64_t floor = 630 * kMs;
  activate(Policy::kFair, jobs.data(), 3, 1, floor);
  CHECK(jobs[1].vtime_ns == 630 * kMs);
  jobs[2].away_ns = 200 * kMs;  // one idle only briefly keeps a turn of credit
  activate(Policy::kFair, jobs.data(), 3, 2, floor);
  CHECK(jobs[2].vtime_ns == 610 * kMs);
  CHECK(least_active_vtime(jobs.data(), 3) == 610 * kMs);
  // A floor below the active jobs changes nothing.
  jobs[0].vtime_ns = 0;
  jobs[0].away_ns = 200 * kMs;
  activate(Policy::kFair, jobs.data(), 3, 0, 100 * kMs);
  CHECK(jobs[0].vtime_ns == 590 * kMs);
  CHECK(keeps_vtime_floor(Policy::kFair));
  CHECK_FALSE(keeps_vtime_floor(Policy::kPack));
  CHECK_FALSE(keeps_vtime_floor(Policy::kPriority));
}

// ---------------------------------------------------------------------------
// srtf

TEST_CASE("under srtf the job with the least remaining time runs") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].remaining_ns = 900 * kMs;
  jobs[1].remaining_ns = 300 * kMs;
  jobs[2].remaining_ns = 600 * kMs;
  CHECK(pick(Policy::kSrtf, jobs, 0) == 1);
  CHECK(pick(Policy::kSrtf, jobs, -1) == 1);
}

TEST_CASE("a job with no estimate runs after every job with one under srtf") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].remaining_ns = kForever;  // earliest and holder, but unknown
  jobs[1].remaining_ns = 3'600'000 * kMs;
  jobs[2].remaining_ns = kForever;
  CHECK(pick(Policy::kSrtf, jobs, 0) == 1);
  jobs[1].active = false;
  CHECK(pick(Policy::kSrtf, jobs, 2) == 2);  // only unknowns left: the holder keeps it
}

TEST_CASE("under srtf a tie on remaining time keeps the holder") {
  std::vector<Job> jobs = active_jobs(3);
  for (Job& job : jobs) job.remaining_ns = 100 * kMs;
  CHECK(pick(Policy::kSrtf, jobs, 2) == 2);
  CHECK(pick(Policy::kSrtf, jobs, -1) == 0);  // no holder: the earliest arrival
}

// ---------------------------------------------------------------------------
// priority

TEST_CASE("under priority the highest priority runs, however far ahead it is") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].priority = 0;
  jobs[1].priority = 2;
  jobs[1].vtime_ns = 1'000'000 * kMs;
  jobs[2].priority = -1;
  CHECK(pick(Policy::kPriority, jobs, 0) == 1);
  CHECK(pick(Policy::kPriority, jobs, 1) == 1);
}

TEST_CASE("under priority jobs of equal priority share as under fair") {
  std::vector<Job> jobs = active_jobs(3);
  jobs[0].priority = jobs[1].priority = 1;
  jobs[2].priority = 0;
  jobs[2].vtime_ns = 0;  // least vtime, but lower priority
  jobs[0].vtime_ns = 500;
  jobs[1].vtime_ns = 200;
  CHECK(pick(Policy::kPriority, jobs, 0) == 1);
  jobs[1].vtime_ns = 500;  // a tie: the job that is not the holder
  CHECK(pick(Policy::kPriority, jobs, 0) == 1);
  CHECK(pick(Policy::kPriority, jobs, 1) == 0);
}

TEST_CASE("under priority only a strictly higher priority preempts at once") {
  Job holder = active_job(0, 0);
  holder.priority = 1;
  Job higher = active_job(1, 0);
  higher.priority = 2;
  Job equal = active_job(2, 0);
  equal.priority = 1;
  Job lower = active_job(3, 0);
  lower.priority = 0;
  CHECK(preempts_now(Policy::kPriority, holder, higher));
  CHECK_FALSE(preempts_now(Policy::kPriority, holder, equal));
  CHECK_FALSE(preempts_now(Policy::kPriority, holder, lower));
}

TEST_CASE("no policy but priority preempts at once") {
  Job holder = active_job(0, 0);
  Job higher = active_job(1, 0);
  higher.priority = 100;
  higher.remaining_ns = 1;
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf})
    CHECK_FALSE(preempts_now(policy, holder, higher));
}

TEST_CASE("a job bounds its in-flight work only while a higher-priority live job exists") {
  std::vector<Job> live = active_jobs(3);
  live[0].priority = 1;
  live[1].priority = 1;
  live[2].priority = 0;
  // Job 0: the others are equal or lower.
  CHECK_FALSE(bounds_in_flight(Policy::kPriority, live[0], live.data(), 3));
  // Job 2: jobs 0 and 1 are higher, idle ones included.
  live[0].active = live[1].active = false;
  CHECK(bounds_in_flight(Policy::kPriority, live[2], live.data(), 3));
  // Alone: nothing to make room for.
  CHECK_FALSE(bounds_in_flight(Policy::kPriority, live[2], live.data() + 2, 1));
}

TEST_CASE("a job never bounds its in-flight work against itself or under other policies") {
  std::vector<Job> live = active_jobs(2);
  live[1].priority = 3;
  Job self_copy = live[0];
  self_copy.priority = -5;  // its own row says 0: the same id is skipped
  CHECK_FALSE(bounds_in_flight(Policy::kPriority, live[1], live.data(), 2));
  CHECK(bounds_in_flight(Policy::kPriority, self_copy, live.data(), 2));  // job 1 is higher
  live[1].priority = 0;
  CHECK_FALSE(bounds_in_flight(Policy::kPriority, self_copy, live.data(), 1));
  live[1].priority = 3;
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf})
    CHECK_FALSE(bounds_in_flight(policy, live[0], live.data(), 2));
}

// ---------------------------------------------------------------------------
// Slices

TEST_CASE("a fifo slice never ends") {
  CHECK(slice_with(Policy::kFifo, active_job(0, 0), kQuantum) == kForever);
}

TEST_CASE("the default quantum shrinks among many jobs so that rounds stay short; a chosen one stays") {
  constexpr uint64_t k20 = 20 * kMs;
  CHECK(quantum_among(k20, true, 1) == k20);
  CHECK(quantum_among(k20, true, 16) == k20);   // a round of 16 turns is 320 ms
  CHECK(quantum_among(k20, true, 32) == 10 * kMs);
  CHECK(quantum_among(k20, true, 64) == 5 * kMs);
  CHECK(quantum_among(k20, true, 200) == 5 * kMs);  // never below the least
  CHECK(quantum_among(k20, true, 0) == k20);
  CHECK(quantum_among(k20, false, 64) == k20);       // GSHARE_QUANTUM_MS given
  CHECK(quantum_among(2 * kMs, true, 64) == 2 * kMs);  // never lengthened
  CHECK(quantum_among(3 * kForever / 4, true, 1000) == 5 * kMs);
}

TEST_CASE("a fair slice is the quantum times the job's weight") {
  Job job = active_job(0, 0);
  CHECK(slice_with(Policy::kFair, job, kQuantum) == kQuantum);
  job.weight = 4;
  CHECK(slice_with(Policy::kFair, job, kQuantum) == 4 * kQuantum);
  job.weight = 0;
  CHECK(slice_with(Policy::kFair, job, kQuantum) == kQuantum);
}

TEST_CASE("srtf and priority slices are one quantum, whatever the weight") {
  Job job = active_job(0, 0);
  job.weight = 4;
  job.priority = 7;
  CHECK(slice_with(Policy::kSrtf, job, kQuantum) == kQuantum);
  CHECK(slice_with(Policy::kPriority, job, kQuantum) == kQuantum);
  CHECK(slice_with(Policy::kSrtf, job, 3 * kMs) == 3 * kMs);
}

TEST_CASE("a turn lasts forty times what a switch to its job costs in memory, up to 10 s, under every policy but "
          "fifo") {
  Job job = active_job(0, 0);
  for (Policy policy : {Policy::kFair, Policy::kSrtf, Policy::kPriority, Policy::kPack}) {
    INFO(policy_name(policy));
    job.weight = 1;
    auto memory = [&](uint64_t ns) { job.switch_cost_ns = job.switch_memory_ns = ns; };
    memory(1 * kMs);  // cheap: the quantum stays
    CHECK(slice_with(policy, job, kQuantum) == kQuantum);
    memory(30 * kMs);  // memory handed over: 1.2 s turns
    CHECK(slice_with(policy, job, kQuantum) == 1200 * kMs);
    memory(240 * kMs);  // 78 GB allocated again on an H200: 9.6 s turns
    CHECK(slice_with(policy, job, kQuantum) == 9600 * kMs);
    memory(400 * kMs);  // capped
    CHECK(slice_with(policy, job, kQuantum) == 10000 * kMs);
    memory(UINT64_MAX);  // a figure from a corrupt region: no overflow
    CHECK(slice_with(policy, job, kQuantum) == 10000 * kMs);
    memory(400 * kMs);
    CHECK(slice_with(policy, job, 12000 * kMs) == 12000 * kMs);  // a longer quantum wins
  }
  job.switch_cost_ns = job.switch_memory_ns = 30 * kMs;
  CHECK(slice_with(Policy::kFifo, job, kQuantum) == kForever);
}

TEST_CASE("a switch's cost beyond memory (the job waking) lengthens a turn to twice its base at most") {
  // 64 small jobs on a busy CPU: the grant to the first launch reads 1-2
  // ms, and turns of forty times that would be every job's share's grain.
  Job job = active_job(0, 0);
  job.switch_cost_ns = 2 * kMs;
  CHECK(slice_with(Policy::kFair, job, 20 * kMs) == 40 * kMs);
  job.switch_cost_ns = 250 * kMs;
  CHECK(slice_with(Policy::kFair, job, 20 * kMs) == 40 * kMs);
  CHECK(slice_with(Policy::kPriority, job, 20 * kMs) == 40 * kMs);
  job.switch_memory_ns = 100 * kMs;  // its memory part still counts in full
  CHECK(slice_with(Policy::kFair, job, 20 * kMs) == 4000 * kMs);
  job.switch_memory_ns = 0;
  job.switch_cost_ns = 200 * kMs;
  job.weight = 3;  // the base is the weighted quantum
  CHECK(slice_with(Policy::kFair, job, 20 * kMs) == 120 * kMs);
  job.switch_cost_ns = 100 * kMs;
  CHECK(slice_with(Policy::kFair, job, 20000 * kMs) == 60000 * kMs);  // a quantum past 10 s wins
}


// ---------------------------------------------------------------------------
// prefetch: by turns, alternating high and low weight

namespace {

// Jobs with one quantum's turn each and `bring_back_ms` to page back in.
std::vector<Job> paging_jobs(std::initializer_list<uint64_t> bring_back_ms) {
  std::vector<Job> jobs;
  int id = 0;
  for (uint64_t ms : bring_back_ms) {
    Job job = active_job(id, uint64_t(id) * kMs);
    job.turn_ns = kQuantum;
    job.bring_back_ns = ms * kMs;
    jobs.push_back(job);
    ++id;
  }
  return jobs;
}

// Runs `turns` turns from `first` under prefetch, each a quantum; the order.
std::vector<int> rounds(std::vector<Job> jobs, int first, int turns) {
  std::vector<int> order;
  int holder = first;
  for (int k = 0; k < turns; ++k) {
    order.push_back(holder);
    charge(jobs[size_t(holder)], kQuantum);
    holder = pick(Policy::kPrefetch, jobs, holder);
  }
  return order;
}

}  // namespace

TEST_CASE("prefetch weighs a job by its turn less the time its memory takes to come back") {
  Job job = active_job(0, 0);
  job.turn_ns = 50 * kMs;
  job.bring_back_ns = 20 * kMs;
  CHECK(paging_weight(job) == int64_t(30 * kMs));
  job.bring_back_ns = 80 * kMs;
  CHECK(paging_weight(job) == -int64_t(30 * kMs));
  job.turn_ns = UINT64_MAX;  // capped: no overflow
  job.bring_back_ns = 0;
  CHECK(paging_weight(job) > 0);
}

TEST_CASE("with nothing paged out prefetch takes turns in arrival order, like fair") {
  std::vector<Job> jobs = paging_jobs({0, 0, 0});
  CHECK(pick(Policy::kPrefetch, jobs, -1) == 0);
  CHECK(rounds(jobs, 0, 6) == std::vector<int>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("after a job of high weight prefetch runs the due job with the most to bring back") {
  // Job 0 holds (nothing out); 1 has 10 ms to bring back, 2 has 40 ms.
  std::vector<Job> jobs = paging_jobs({0, 10, 40});
  charge(jobs[0], kQuantum);
  CHECK(pick(Policy::kPrefetch, jobs, 0) == 2);
  // After the low-weight job 2, the due job of most weight: 1.
  charge(jobs[2], kQuantum);
  CHECK(pick(Policy::kPrefetch, jobs, 2) == 1);
}

TEST_CASE("with no holder prefetch starts with the job that has least to bring back") {
  std::vector<Job> jobs = paging_jobs({30, 0, 60});
  CHECK(pick(Policy::kPrefetch, jobs, -1) == 1);
}

TEST_CASE("prefetch serves every active job once a round, whatever the weights") {
  std::vector<Job> jobs = paging_jobs({0, 5, 100, 45, 0});
  std::vector<int> order = rounds(jobs, 0, 15);
  for (int round = 0; round < 3; ++round) {
    std::vector<int> seen(order.begin() + round * 5, order.begin() + round * 5 + 5);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<int>{0, 1, 2, 3, 4});
  }
}

TEST_CASE("under prefetch the holder keeps the GPU only while no other job is due") {
  std::vector<Job> jobs = paging_jobs({0, 20});
  CHECK(pick(Policy::kPrefetch, jobs, 0) == 1);  // both level: the other is due
  jobs[1].active = false;
  CHECK(pick(Policy::kPrefetch, jobs, 0) == 0);  // alone
  jobs[1].active = true;
  charge(jobs[0], 5 * kMs);  // ended its turn early (idle): 1 is due anyway
  CHECK(pick(Policy::kPrefetch, jobs, 0) == 1);
  charge(jobs[1], 3 * kQuantum);  // 1 far ahead: 0 is behind and runs
  CHECK(pick(Policy::kPrefetch, jobs, 1) == 0);
}

TEST_CASE("a prefetch slice is the quantum times the weight, like fair") {
  Job job = active_job(0, 0);
  job.weight = 3;
  CHECK(slice_with(Policy::kPrefetch, job, kQuantum) == 3 * kQuantum);
}

// ---------------------------------------------------------------------------
// Names

TEST_CASE("every policy's name parses back to it") {
  for (Policy policy : {Policy::kFifo, Policy::kFair, Policy::kSrtf, Policy::kPriority, Policy::kPack,
                        Policy::kPrefetch}) {
    Policy parsed = Policy::kFifo;
    REQUIRE(parse_policy(policy_name(policy), &parsed));
    CHECK(parsed == policy);
    CHECK(policy_is_known(uint32_t(policy)));
  }
  CHECK(std::string(policy_name(Policy::kSrtf)) == "srtf");
}

TEST_CASE("policy names parse whatever their case") {
  Policy parsed = Policy::kFifo;
  REQUIRE(parse_policy("FAIR", &parsed));
  CHECK(parsed == Policy::kFair);
  REQUIRE(parse_policy("Priority", &parsed));
  CHECK(parsed == Policy::kPriority);
  REQUIRE(parse_policy("PACK", &parsed));
  CHECK(parsed == Policy::kPack);
}

TEST_CASE("text that is not a policy name is rejected and leaves the output alone") {
  for (const char* text : {"", "fifo ", " srtf", "round-robin", "packs", "fai", "fairr", "all"}) {
    Policy parsed = Policy::kSrtf;
    CHECK_FALSE(parse_policy(text, &parsed));
    CHECK(parsed == Policy::kSrtf);
  }
  CHECK_FALSE(policy_is_known(0));
  CHECK(policy_is_known(5));  // pack
  CHECK_FALSE(policy_is_known(7));
  CHECK(std::string(policy_name(Policy(99))) == "unknown");
}
