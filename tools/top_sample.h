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

// What a process did during the sample window. Later states (running,
// waiting) come from the scheduler; add them here and to state_name.
enum class ProcessState { kIdle, kActive };
const char* state_name(ProcessState state);

// One process as the views show it: its snapshot plus what only two samples
// tell.
struct ProcessView {
  shm::ProcessSnapshot process;
  uint64_t gpu_capacity_bytes = 0;  // of its GPU, to show a whole-GPU quota as "-"
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
