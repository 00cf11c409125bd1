// gshare-sim's input: a JSON trace of jobs (arrival, iteration time and
// count, weight, priority, memory, how it estimates what it has left), and
// the GPU's settings. tools/traces/ holds examples; tools/README.md the format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gshare::sim {

// How a job tells the scheduler how long it has left (srtf).
enum class Estimate { kIters, kSeconds, kNone };

const char* estimate_name(Estimate estimate);

// A job's memory at time 0: not allocated yet (its first turn allocates
// it); on the GPU; on the GPU with a pinned host copy kept from an earlier
// page-in; paged out to pinned host memory.
enum class StartState { kNew, kResident, kResidentWithCopy, kPagedOut };

struct TraceJob {
  std::string name;
  double arrival_s = 0;
  double iteration_ms = 0;
  uint64_t iterations = 0;
  uint32_t weight = 1;        // fair: share of GPU time, >= 1
  int32_t priority = 0;       // priority: larger runs first
  uint64_t memory_mib = 0;    // carried to the output; parse_trace takes it as P when
                              // the trace gives neither persistent_mib nor ephemeral_mib
  uint64_t persistent_mib = 0;  // P: resident while the job lives (with a capacity only)
  uint64_t ephemeral_mib = 0;   // E: its peak within one iteration (with a capacity only)
  // The paging model only: what a page-out of the job moves to host memory
  // and its page-in brings back, its pinned copy's size. 0: P + E. Less
  // where the job gives memory back as it is switched out (a framework's
  // cache handed over, an iteration's temporaries freed at its boundary).
  uint64_t paged_mib = 0;
  Estimate estimate = Estimate::kIters;
  // Where its memory is at time 0 (the paging model only): a job set up
  // before the measured start, as in a benchmark that starts its jobs'
  // steps together once each has built its model, may already be on the
  // GPU or paged out to host memory.
  StartState at_start = StartState::kNew;
};

struct Trace {
  std::string description;
  double quantum_ms = 50;
  // As live where GSHARE_QUANTUM_MS is not set: the quantum shrinks among
  // many jobs (rules::quantum_among).
  bool quantum_adapts = false;
  double slice_max_ms = 200;
  double handover_ms = 0.05;
  // The paging model only: after a job's last iteration its memory stays
  // on the GPU this long (its process exits, its context goes), and a job
  // that needs that room waits for it.
  double exit_ms = 0;
  uint64_t capacity_mib = 0;  // the GPU's memory C; 0: memory is not modelled
  std::vector<TraceJob> jobs;
};

// False with one line in `error` that names the bad field (for a job:
// "jobs[3].iteration_ms ..."). Unknown fields are ignored, so the trace can
// carry notes for other readers (the GPU benchmark reads the same files).
// A trace with a capacity is also checked as check_capacity() does.
bool parse_trace(const std::string& json_text, Trace* out, std::string* error);

// False with one line in `error` when a job needs more than the capacity on
// its own (P + E > capacity_mib): it could never be admitted; or when the
// jobs on the GPU at time 0 need more than it together. True without a
// capacity.
bool check_capacity(const Trace& trace, std::string* error);

}  // namespace gshare::sim
