#include "tools/top_json.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace gshare::top {

namespace {

// Ordered, so the output reads in the documented order.
using Json = nlohmann::ordered_json;

// Dividing by a power of ten (exact) rather than multiplying by its inverse
// (inexact) makes 0.250165 print as 0.250165, not 0.25016499999999997.
double rounded(double value, double per_unit) { return std::round(value * per_unit) / per_unit; }

Json process_json(const ProcessView& row) {
  const shm::ProcessSnapshot& p = row.process;
  return Json{
      {"pid", p.pid},
      {"command", p.command},
      {"uid", p.uid},
      {"attach_unix_ns", p.attach_unix_ns},
      {"used_bytes", p.used_bytes},
      {"quota_bytes", p.quota_bytes},
      {"allocated_bytes", p.allocated_bytes},
      {"context_bytes", p.context_bytes},
      {"reserved_bytes", p.reserved_bytes},
      {"peak_reserved_bytes", p.peak_reserved_bytes},
      {"allocations", p.allocation_count},
      {"denied", p.denied_count},
      {"launches", p.launches},
      {"launches_per_second", rounded(row.launches_per_second, 100)},
      {"syncs", p.syncs},
      {"state", state_name(row.state)},
      {"slot", p.slot},
      {"generation", p.generation},
  };
}

Json gpu_json(const GpuView& view) {
  const shm::GpuSnapshot& gpu = view.gpu;
  if (!gpu.error.empty()) return Json{{"path", gpu.path}, {"error", gpu.error}};
  Json processes = Json::array();
  for (const ProcessView& row : view.processes) processes.push_back(process_json(row));
  return Json{
      {"uuid", gpu.uuid},
      {"path", gpu.path},
      {"total_bytes", gpu.capacity_bytes},
      {"reserved_bytes", gpu.reserved_bytes},
      {"repairs", gpu.repairs},
      {"reclaimed_slots", gpu.reclaimed_slots},
      {"processes", std::move(processes)},
  };
}

}  // namespace

std::string render_json(const Frame& frame) {
  Json gpus = Json::array();
  for (const GpuView& view : frame.gpus) gpus.push_back(gpu_json(view));
  Json root{
      {"version", kJsonVersion},
      {"dir", frame.dir},
      {"timestamp_unix_ns", frame.timestamp_unix_ns},
      {"sample_seconds", rounded(frame.sample_seconds, 1e6)},
      {"gpus", std::move(gpus)},
  };
  if (!frame.dir_error.empty()) root["dir_error"] = frame.dir_error;
  // Commands come from other processes and may not be valid UTF-8: replace
  // bad bytes (U+FFFD) rather than throw.
  return root.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gshare::top
