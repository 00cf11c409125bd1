// gshare-sim's engine: replays a job trace through the scheduling policies
// (scheduler/policy.h) under a virtual clock. No real time, no threads:
// the same trace and policy always give the same result.
//
// The model
//   - One GPU. Exactly one job runs at a time: the token holder. It
//     progresses at rate 1, so each of its iterations takes iteration_ms.
//   - A job is active from its arrival until it has done all its
//     iterations; then it departs.
//   - Every grant of the GPU to a job other than the one that just ran
//     (the first grant on an idle GPU included) is a handover: handover_ms
//     of idle GPU time before the new holder runs. A holder that is picked
//     again at its slice end goes on at once, no handover.
//   - Decisions: on an arrival when no job holds the GPU, or when the
//     newcomer preempts the holder (priority only: preempts_now, at once,
//     mid-iteration); when the holder departs; at a slice end.
//   - A slice starts when its holder starts to run, at time t, and has
//     length L = slice_length(). It ends at the holder's first iteration
//     boundary at or after t + L (Salus switches between iterations), but
//     never later than t + L + slice_max: then it ends mid-iteration. Work
//     done is never lost: a job cut mid-iteration goes on from there.
//   - Before every decision each job's remaining_ns (srtf) is recomputed
//     from its estimate, as the live job would tell it:
//       iters    GSHARE_EXPECTED_ITERS: (iterations - iterations done) x
//                iteration time; a partly done iteration still counts whole.
//       seconds  GSHARE_EXPECTED_SECONDS: iterations x iteration time, set
//                at the start, minus the GPU time served so far.
//       none     no estimate: kForever, so it counts as the longest.
//
// Time is in integer nanoseconds inside; the trace and the results use
// seconds and milliseconds as doubles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace gshare::sim {

using scheduler::Policy;

// How a job tells the scheduler how long it has left (srtf).
enum class Estimate { kIters, kSeconds, kNone };

const char* estimate_name(Estimate estimate);

struct TraceJob {
  std::string name;
  double arrival_s = 0;
  double iteration_ms = 0;
  uint64_t iterations = 0;
  uint32_t weight = 1;        // fair: share of GPU time, >= 1
  int32_t priority = 0;       // priority: larger runs first
  uint64_t memory_mib = 0;    // carried to the output; unused by these policies
  Estimate estimate = Estimate::kIters;
};

struct Trace {
  std::string description;
  double quantum_ms = 50;
  double slice_max_ms = 200;
  double handover_ms = 0.05;
  std::vector<TraceJob> jobs;
};

// False with one line in `error` that names the bad field (for a job:
// "jobs[3].iteration_ms ..."). Unknown fields are ignored, so the trace can
// carry notes for other readers (the GPU benchmark reads the same files).
bool parse_trace(const std::string& json_text, Trace* out, std::string* error);

struct SimOptions {
  uint64_t quantum_ns = 50'000'000;     // > 0
  uint64_t slice_max_ns = 200'000'000;  // how far past its length a slice may run
  uint64_t handover_ns = 50'000;        // idle GPU time of each handover
};

// The trace's own quantum, slice_max and handover.
SimOptions options_from(const Trace& trace);

// One slice, or the part of it in which its job ran: from the end of the
// handover (if any) to the slice end, the job's departure or a preemption.
// A holder picked again at its slice end starts a new Run.
struct Run {
  int job = -1;  // index into the trace's jobs
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

struct JobResult {
  uint64_t arrival_ns = 0;
  uint64_t start_ns = 0;       // when it first ran
  uint64_t completion_ns = 0;
  uint64_t jct_ns = 0;         // completion - arrival
  uint64_t gpu_ns = 0;         // GPU time received
  uint64_t wait_ns = 0;        // jct - gpu: waiting, handovers included
};

struct SimResult {
  std::vector<JobResult> jobs;  // in trace order
  std::vector<Run> timeline;    // in time order
  double average_jct_ns = 0;
  uint64_t makespan_ns = 0;     // last completion - first arrival
  uint64_t busy_ns = 0;         // time some job ran
  double busy_fraction = 0;     // busy / makespan
  uint64_t handovers = 0;
};

// Replays a trace accepted by parse_trace (or built the same way: every
// job with iteration_ms > 0 and iterations >= 1).
SimResult simulate(const Trace& trace, Policy policy, const SimOptions& options);

}  // namespace gshare::sim
