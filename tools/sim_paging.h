// gshare-sim's paging model (GSHARE_PAGING=on, allocator/pager.h): jobs
// whose memory together exceeds the GPU take turns, the memory of a job that
// is not running waiting in host memory. Deterministic, virtual clock.
//
// The model
//   - One GPU of capacity C (the trace's capacity_mib). A job needs its
//     footprint F = P + E on the GPU while it runs, and keeps it there
//     until it is paged out: live paging moves all of a job's movable
//     memory, and a job switched out mid-way keeps its step's memory.
//   - A schedule is an order of the jobs and a mode. By turns: the jobs
//     take turns in that order, cyclically, each turn running a job for the
//     trace's quantum, or as live kTurnPerSwitchCost times what its switch
//     cost (up to kMaxTurnNs) if longer, rounded up to whole iterations, or
//     until it finishes. Once any job has been paged out, a switch costs at
//     least the time to copy the job's footprint, as live: turns stay long
//     enough for copies to finish behind them even when prefetch hides them.
//     To completion: each job runs until it finishes, in that order. Either
//     way a job that has not arrived yet is skipped, and the GPU idles until
//     the next arrival when no job can run.
//   - Before a turn the job's memory must be on the GPU. A job that ran
//     before and was paged out is paged in (F over the bandwidth); room is
//     made by paging out the jobs that ran least recently (their F over the
//     bandwidth), never the one about to run. A job's first turn allocates
//     anew: nothing to page in. Each switch to another job also costs the
//     trace's handover.
//   - Pinning (PagingModel::pin_gb_per_s): a page-out of a job that keeps
//     no pinned copy pins its footprint first. Jobs keep their copies when
//     paged back in; past PagingModel::host_limit_bytes, a page-out makes
//     resident jobs give theirs up, largest first, as live. Once jobs take
//     turns through host memory, a job pins its copy ahead while it runs
//     (PagingModel::copies_ahead), within the limit, at the rate of the
//     fewer threads live uses for that: its page-out then only copies.
//   - Without prefetch the copies happen between turns: the GPU idles for
//     all of them, and a paged-out job is passed over, as live, while
//     another job than the one that just ran is on the GPU (or has yet to
//     allocate) and wants it. With prefetch they start as the previous turn
//     starts, overlapping its compute, where their room was there during
//     that turn (the previous job's memory stays, and fits beside this
//     job's) and the page-outs making it pin nothing past the host limit:
//     the GPU idles only for what the copies take beyond that turn.
//     Otherwise nothing overlaps, and a job whose room would pass the host
//     limit is passed over as without prefetch.
//   - A job set up before time 0 (TraceJob::at_start) starts on the GPU or
//     paged out. An ended job's memory stays for the trace's exit_ms (its
//     process exiting); a job needing that room waits, unhidden.
//   - Makespan: from time 0 to the last job's end.
//   - By weight (the prefetch policy): the same turns, but each goes to the
//     job rules::pick_next picks, live's own code: the jobs due in this
//     round, alternating high and low weight (turn minus page-in time).
//
// The search (search_schedule) is a genetic algorithm over schedules, as in
// the thesis gshare's paging follows: a population of orders (seeded with
// the fixed policies' schedules and random ones), each simulated for its
// makespan (swapped bytes break ties), tournament selection, order
// crossover (a slice of one parent, the rest in the other parent's order),
// mutation by swapping two jobs (an order stays a permutation), and the
// best kept from one generation to the next: it never returns a schedule
// worse than its seeds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/sim_trace.h"

namespace gshare::sim {

struct PagingModel {
  double gb_per_s = 25;  // each copy's rate, host to device and back (GB = 1e9 bytes)
  bool prefetch = false;
  // Pinning host memory for a page-out, GB/s; 0: free. Live, a job keeps
  // its pinned copy when it comes back, so only its first page-out pins,
  // unless the host limit made it give the copy up meanwhile.
  double pin_gb_per_s = 0;
  // GSHARE_HOST_MEM_LIMIT: host memory for all jobs' copies; 0: no limit.
  // A page-out past it frees copies that resident jobs keep, the largest
  // first, as live: each pins again at its own next page-out.
  uint64_t host_limit_bytes = 0;
  // With pinning: a running job pins its copy ahead, as live's pager does
  // while jobs take turns through host memory (allocator/pager.cpp,
  // prepare_host_copy), at kPrepareTouchers / kPageOutTouchers of the rate.
  bool copies_ahead = true;
};

struct Schedule {
  std::vector<int> order;  // a permutation of the trace's jobs
  bool by_turns = true;    // false: each job to completion, in order
  // By turns, each turn to the job the live prefetch policy picks
  // (rules::pick_next, Policy::kPrefetch) from what the model knows then:
  // each job's turn, and what its page-in would take (0 while resident).
  // `order` is then unused.
  bool by_weight = false;
};

struct PagingResult {
  uint64_t makespan_ns = 0;
  uint64_t swapped_bytes = 0;  // paged out and in, together
  uint64_t stall_ns = 0;       // GPU idle for copies
  uint64_t page_ins = 0;
};

PagingResult simulate_paging(const Trace& trace, const Schedule& schedule, const PagingModel& model);

// The fixed policies' schedules: fifo (arrival order, to completion), srtf
// (least work first, to completion), priority (highest first, to
// completion), fair and pack (arrival order, by turns), prefetch (by
// weight).
Schedule policy_schedule(const Trace& trace, const std::string& policy);

struct SearchOptions {
  int population = 32;
  int generations = 60;
  double mutation = 0.2;
  uint64_t seed = 1;
};

// The best schedule found; `result` gets its simulation.
Schedule search_schedule(const Trace& trace, const PagingModel& model, const SearchOptions& options,
                         PagingResult* result);

}  // namespace gshare::sim
