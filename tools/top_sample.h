// Sampling for gshare-top: snapshots of the regions, and a frame made of two
// of them with the rates between. Nothing here draws; the text, JSON and live
// views all render a Frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "shm/snapshot.h"

namespace gshare::top {

// The window of the first rate when there is no earlier sample: `--once`,
// `--json` and the first live frame take two samples this far apart.
inline constexpr std::chrono::milliseconds kFirstSampleWindow{250};

struct Sample {
  std::vector<shm::GpuSnapshot> gpus;
  std::chrono::steady_clock::time_point taken;  // for rates: never jumps
  uint64_t taken_unix_ns = 0;                   // for display and JSON
  std::string dir_error;  // non-empty: `dir` itself could not be read
};

// Reads every region in `dir`. Never writes to a region.
Sample take_sample(const std::string& dir);

// What a process is doing with the GPU: the scheduler's job state, except
// that a job it calls idle which launched during the sample window shows as
// running. It ran: the scheduler marks a job idle only after GSHARE_IDLE_MS
// without a launch, and a process that launches without the token (no
// policy set yet) is never marked at all.
enum class ProcessState { kIdle, kWaiting, kRunning };
const char* state_name(ProcessState state);  // "idle", "waiting", "running"
ProcessState process_state(shm::JobState job_state, bool launched_in_window);

// One process as the views show it: its snapshot plus what only two samples
// tell.
struct ProcessView {
  shm::ProcessSnapshot process;
  uint64_t gpu_capacity_bytes = 0;  // of its GPU, to show a whole-GPU quota as "-"
  std::string gpu_policy;           // of its GPU, to show what that policy looks at
  double launches_per_second = 0;
  ProcessState state = ProcessState::kIdle;
};

struct GpuView {
  shm::GpuSnapshot gpu;                 // gpu.processes is left empty: see `processes`
  std::vector<ProcessView> processes;   // sorted by pid
};

struct Frame {
  std::string dir;
  std::string dir_error;
  uint64_t timestamp_unix_ns = 0;  // when the later sample was taken
  double sample_seconds = 0;       // the time between the two samples
  std::vector<GpuView> gpus;       // as snapshot_regions orders them (by path)

  size_t process_count() const;
};

// Pairs each process of `after` with itself in `before` by (GPU path, slot,
// generation), so a reused slot is never mistaken for its previous owner.
Frame make_frame(const std::string& dir, const Sample& before, const Sample& after);

}  // namespace gshare::top
