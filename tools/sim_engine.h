// gshare-sim's engine: replays a job trace through the scheduling policies
// (rules/policy.h) under a virtual clock. No real time, no threads:
// the same trace and policy always give the same result.
//
// The model
//   - One GPU. Under every policy but pack exactly one job runs at a time:
//     the token holder. It progresses at rate 1, so each of its iterations
//     takes iteration_ms.
//   - Memory (only with a capacity: Trace::capacity_mib, SimOptions). A
//     job has persistent memory P and ephemeral memory E (rules/lanes.h).
//     On arrival it must be admitted: rules::place_jobs must find lanes
//     for the admitted jobs and it within the capacity. A job that does not fit
//     waits in the admission queue and is not active for the policy. The
//     queue is tried in arrival order on every arrival and after every
//     departure, and each job that fits is admitted then, also past an
//     earlier one that still does not fit (as live, where an allocation
//     that fits is granted at once). A departure first re-forms the lanes
//     with rules::widen_lanes, as the live arbiter does. At most
//     shm::kMaxSlots jobs are admitted at once (the arbiter's slots). Without
//     a capacity every job is admitted on arrival and has no lane.
//   - pack: every lane has its own token; the holders of different lanes
//     run at the same time, each at rate 1 (the model assumes the GPU does
//     not slow down under concurrency, so pack's gain is an upper bound).
//     Within a lane, pick_next chooses among the lane's active jobs, with
//     slices and handovers as below, per lane. A holder moved to another
//     lane by a re-forming gives its old lane's token back at once (work
//     done is kept) and waits for its new lane's, as live (apply_lanes); its
//     fair clock is not levelled again. Without a capacity no job has a lane
//     and pack is fair: live, a job without a lane uses lane 0's token.
//   - A job is active from its admission until it has done all its
//     iterations; then it departs.
//   - Every grant of a token to a job other than the one that just ran on
//     it (the first grant on an idle token included) is a handover:
//     handover_ms of idle time on that token before the new holder runs. A
//     holder that is picked again at its slice end goes on at once, no
//     handover.
//   - Decisions, per token: on an admission when no job holds the token, or
//     when the newcomer preempts the holder (priority only: preempts_now, at
//     once, mid-iteration); when the holder departs or is moved away; at a
//     slice end.
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

#include "rules/lanes.h"
#include "rules/policy.h"
#include "tools/sim_trace.h"

namespace gshare::sim {

struct SimOptions {
  uint64_t quantum_ns = 50'000'000;     // > 0
  bool quantum_adapts = false;          // shrinks among many jobs, as live's default
  uint64_t slice_max_ns = 200'000'000;  // how far past its length a slice may run
  uint64_t handover_ns = 50'000;        // idle GPU time of each handover
  uint64_t capacity_mib = 0;            // 0: memory is not modelled
};

// The trace's own quantum, slice_max, handover and capacity.
SimOptions options_from(const Trace& trace);

// One slice, or the part of it in which its job ran: from the end of the
// handover (if any) to the slice end, the job's departure or a preemption.
// A holder picked again at its slice end starts a new Run.
struct Run {
  int job = -1;  // index into the trace's jobs
  int lane = rules::kNoLane;  // the job's lane when the run began; none without a capacity
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

struct JobResult {
  uint64_t arrival_ns = 0;
  uint64_t start_ns = 0;       // when it first ran
  uint64_t completion_ns = 0;
  uint64_t jct_ns = 0;         // completion - arrival
  uint64_t gpu_ns = 0;         // GPU time received
  uint64_t wait_ns = 0;        // jct - gpu: waiting, handovers and admission included
  uint64_t admitted_ns = 0;    // when it was admitted: its arrival without a capacity
  uint64_t admission_wait_ns = 0;  // admitted - arrival
  int lane = rules::kNoLane;        // its lane when admitted; none without a capacity
  int final_lane = rules::kNoLane;  // its lane when it departed (re-formings move jobs)
};

struct SimResult {
  std::vector<JobResult> jobs;  // in trace order
  std::vector<Run> timeline;    // in time order
  double average_jct_ns = 0;
  uint64_t makespan_ns = 0;     // last completion - first arrival
  uint64_t busy_ns = 0;         // time some job ran (under pack, one or more at once)
  double busy_fraction = 0;     // busy / makespan
  uint64_t handovers = 0;
  bool memory_modelled = false;          // there was a capacity
  uint64_t admission_waits = 0;          // jobs that waited to be admitted
  double average_admission_wait_ns = 0;  // over all jobs
  uint64_t max_admission_wait_ns = 0;
};

// Replays a trace accepted by parse_trace (or built the same way: every
// job with iteration_ms > 0 and iterations >= 1, and, with a capacity, P + E
// within it). A job that could never be admitted is left with no
// completion (0) rather than run forever.
SimResult simulate(const Trace& trace, Policy policy, const SimOptions& options);

}  // namespace gshare::sim
