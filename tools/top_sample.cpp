#include "shm/region.h"
#include "tools/top_sample.h"

#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

namespace gshare::top {

namespace {

// snapshot_regions reports an unreadable directory as an empty one; say why,
// so that a mistyped --dir does not look like an idle machine.
std::string directory_error(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return strerror(errno);
  closedir(d);
  return "";
}

// Region errors often begin with the region's path, which every view already
// shows beside them.
std::string without_path_prefix(const std::string& error, const std::string& path) {
  std::string prefix = path + ": ";
  if (error.compare(0, prefix.size(), prefix) == 0) return error.substr(prefix.size());
  return error;
}

using SlotKey = std::pair<uint32_t, uint32_t>;  // (slot, generation)

std::map<SlotKey, uint64_t> launches_by_slot(const shm::GpuSnapshot& gpu) {
  std::map<SlotKey, uint64_t> launches;
  for (const shm::ProcessSnapshot& p : gpu.processes) launches[{p.slot, p.generation}] = p.launches;
  return launches;
}

// Launches of `p` since `before` was taken, or nothing if that is unknown.
// A process absent from `before` that attached after it started from zero;
// one that attached earlier was missed (its region was unreadable then).
std::optional<uint64_t> launches_in_window(const shm::ProcessSnapshot& p,
                                           const std::map<SlotKey, uint64_t>* earlier,
                                           uint64_t before_unix_ns) {
  if (earlier) {
    auto found = earlier->find({p.slot, p.generation});
    if (found != earlier->end())
      return p.launches >= found->second ? p.launches - found->second : 0;
  }
  if (p.attach_unix_ns >= before_unix_ns) return p.launches;
  return std::nullopt;
}

GpuView make_gpu_view(const shm::GpuSnapshot& gpu, const shm::GpuSnapshot* earlier_gpu,
                      const Sample& before, double seconds) {
  GpuView view;
  view.gpu = gpu;
  view.gpu.processes.clear();
  view.gpu.error = without_path_prefix(gpu.error, gpu.path);
  std::map<SlotKey, uint64_t> earlier;
  if (earlier_gpu) earlier = launches_by_slot(*earlier_gpu);
  for (const shm::ProcessSnapshot& p : gpu.processes) {
    ProcessView row;
    row.process = p;
    row.gpu_capacity_bytes = gpu.capacity_bytes;
    row.gpu_policy = gpu.policy;
    std::optional<uint64_t> launched =
        launches_in_window(p, earlier_gpu ? &earlier : nullptr, before.taken_unix_ns);
    if (launched && seconds > 0) row.launches_per_second = double(*launched) / seconds;
    row.state = process_state(p.job_state, launched && *launched > 0);
    view.processes.push_back(std::move(row));
  }
  std::sort(view.processes.begin(), view.processes.end(),
            [](const ProcessView& a, const ProcessView& b) {
              return std::pair(a.process.pid, a.process.slot) <
                     std::pair(b.process.pid, b.process.slot);
            });
  return view;
}

const shm::GpuSnapshot* find_readable_gpu(const Sample& sample, const std::string& path) {
  for (const shm::GpuSnapshot& gpu : sample.gpus)
    if (gpu.path == path && gpu.error.empty()) return &gpu;
  return nullptr;
}

}  // namespace

const char* state_name(ProcessState state) {
  switch (state) {
    case ProcessState::kIdle: return "idle";
    case ProcessState::kWaiting: return "waiting";
    case ProcessState::kRunning: return "running";
  }
  return "?";
}

ProcessState process_state(shm::JobState job_state, bool launched_in_window) {
  switch (job_state) {
    case shm::kJobRunning: return ProcessState::kRunning;
    case shm::kJobWaiting: return ProcessState::kWaiting;
    case shm::kJobIdle: break;
  }
  return launched_in_window ? ProcessState::kRunning : ProcessState::kIdle;
}

Sample take_sample(const std::string& dir) {
  Sample sample;
  // Timestamps first: a slot claimed after them counts as new in the next frame.
  sample.taken = std::chrono::steady_clock::now();
  sample.taken_unix_ns = unix_now_ns();
  sample.gpus = shm::snapshot_regions(dir);
  if (sample.gpus.empty()) sample.dir_error = directory_error(dir);
  return sample;
}

size_t Frame::process_count() const {
  size_t count = 0;
  for (const GpuView& gpu : gpus) count += gpu.processes.size();
  return count;
}

Frame make_frame(const std::string& dir, const Sample& before, const Sample& after) {
  Frame frame;
  frame.dir = dir;
  frame.dir_error = after.dir_error;
  frame.timestamp_unix_ns = after.taken_unix_ns;
  frame.sample_seconds = std::chrono::duration<double>(after.taken - before.taken).count();
  for (const shm::GpuSnapshot& gpu : after.gpus) {
    frame.gpus.push_back(
        make_gpu_view(gpu, find_readable_gpu(before, gpu.path), before, frame.sample_seconds));
  }
  return frame;
}

}  // namespace gshare::top
