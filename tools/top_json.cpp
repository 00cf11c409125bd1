#include "tools/top_json.h"

#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace gshare::top {

namespace {

// Ordered, so the output reads in the documented order.
using Json = nlohmann::ordered_json;

// Dividing by a power of ten (exact) rather than multiplying by its inverse
// (inexact) makes 0.250165 print as 0.250165, not 0.25016499999999997.
double rounded(double value, double per_unit) { return std::round(value * per_unit) / per_unit; }

// Milliseconds to the microsecond: enough for iteration and slice lengths.
double milliseconds(uint64_t ns) { return rounded(double(ns) / 1e6, 1000); }

// null where the region says "not known" or "not given" with a 0, so that a
// script cannot mistake it for a measured 0.
Json milliseconds_or_null(uint64_t ns) { return ns == 0 ? Json(nullptr) : Json(milliseconds(ns)); }
Json count_or_null(uint64_t count) { return count == 0 ? Json(nullptr) : Json(count); }
// A figure of the switches so far that has no value before the first one
// (the latest, the largest): null then, not a measured 0.
Json after_a_switch(uint64_t switches, uint64_t ns) { return switches == 0 ? Json(nullptr) : Json(ns); }

const shm::ProcessSnapshot* find_slot(const GpuView& view, int32_t slot) {
  for (const ProcessView& row : view.processes)
    if (int32_t(row.process.slot) == slot) return &row.process;
  return nullptr;
}

// How far the holder's slice has run, and how long until the policy looks
// again: null without a holder, and the remainder null for a slice without
// an end (fifo). A slice past its end (waiting for an iteration boundary)
// has 0 left.
void add_slice(const shm::GpuSnapshot& gpu, Json* out) {
  Json elapsed = nullptr, remaining = nullptr;
  if (gpu.holder_slot >= 0) {
    uint64_t now = gpu.sampled_mono_ns;
    if (gpu.slice_start_mono_ns != 0 && gpu.slice_start_mono_ns <= now)
      elapsed = milliseconds(now - gpu.slice_start_mono_ns);
    if (gpu.slice_end_mono_ns != UINT64_MAX && gpu.slice_end_mono_ns != 0)
      remaining = milliseconds(gpu.slice_end_mono_ns > now ? gpu.slice_end_mono_ns - now : 0);
  }
  (*out)["slice_elapsed_ms"] = elapsed;
  (*out)["slice_remaining_ms"] = remaining;
}

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
      {"job_state", shm::job_state_name(p.job_state)},
      {"holds_token", p.holds_token},
      {"beside", p.beside},
      {"host_bound", p.host_bound},
      {"leaves_gaps", p.leaves_gaps},
      {"gpu_wait_share", rounded(p.gpu_wait_share, 1e3)},
      {"gpu_busy_share", rounded(p.gpu_busy_share, 1e3)},
      {"gpu_share_10s", rounded(p.share_10s, 1e4)},
      {"served_ms", milliseconds(p.served_ns)},
      {"vtime_ms", milliseconds(p.vtime_ns)},
      {"wait_ms", milliseconds(p.waiting_ns)},
      {"granted", p.granted},
      {"switches", p.switches},
      {"switch_ns", p.switch_ns},
      {"last_switch_ns", after_a_switch(p.switches, p.last_switch_ns)},
      {"switch_cost_ns", p.switch_cost_ns},
      {"switch_memory_ns", p.switch_memory_ns},
      {"weight", p.weight},
      {"priority", p.priority},
      {"handover", p.handover_mode},
      {"shared_turns", p.shared_turns},
      {"expected_seconds",
       p.expected_ns == 0 ? Json(nullptr) : Json(rounded(double(p.expected_ns) / 1e9, 1e6))},
      {"expected_iterations", count_or_null(p.expected_iters)},
      {"iterations", p.iterations},
      {"iteration_ms", milliseconds_or_null(p.iteration_ns)},
      {"iteration_launches", count_or_null(p.iteration_launches)},
      {"iteration_source", p.iteration_source},
      {"persistent_bytes", p.persistent_bytes},
      {"ephemeral_bytes", p.ephemeral_bytes},
      {"memory_provisional", p.memory_provisional},
      {"classified_iterations", p.class_iterations},
      {"lane", p.lane >= 0 ? Json(p.lane) : Json(nullptr)},
      {"admission", p.admission},
      {"admission_wait_ms", milliseconds(p.admission_wait_ns)},
      {"admission_bytes", p.admission_bytes},
      {"admission_short_bytes", p.admission_short_bytes},
      {"admission_waits", p.admission_waits},
      {"admission_timeouts", p.admission_timeouts},
      {"blocked_by_pid", p.blocked_by_pid >= 0 ? Json(p.blocked_by_pid) : Json(nullptr)},
      {"released_bytes", p.released_bytes},
      {"residency", p.residency},
      {"paged_out_bytes", p.paged_out_bytes},
      {"host_paging_bytes", p.host_paging_bytes},
      {"page_outs", p.page_outs},
      {"page_ins", p.page_ins},
      {"paging_ms", milliseconds(p.paging_ns)},
      {"page_in_wait_ms", milliseconds(p.page_in_wait_ns)},
      {"prefetches", p.prefetches},
      {"page_in_gbps", p.page_in_copy_ns ? double(p.paged_in_bytes) / double(p.page_in_copy_ns) : 0.0},
      {"slot", p.slot},
      {"generation", p.generation},
  };
}

Json gpu_json(const GpuView& view) {
  const shm::GpuSnapshot& gpu = view.gpu;
  if (!gpu.error.empty()) return Json{{"path", gpu.path}, {"error", gpu.error}};
  Json processes = Json::array();
  for (const ProcessView& row : view.processes) processes.push_back(process_json(row));
  const shm::ProcessSnapshot* holder = find_slot(view, gpu.holder_slot);
  const shm::ProcessSnapshot* watcher = find_slot(view, gpu.watcher_slot);
  Json out{
      {"uuid", gpu.uuid},
      {"path", gpu.path},
      {"total_bytes", gpu.capacity_bytes},
      {"reserved_bytes", gpu.reserved_bytes},
      {"repairs", gpu.repairs},
      {"admission_timeouts", gpu.admission_timeouts},
      {"admission_waits", gpu.admission_waits},
      {"reclaimed_slots", gpu.reclaimed_slots},
      {"policy", gpu.policy},
      {"holder_slot", holder ? Json(holder->slot) : Json(nullptr)},
      {"holder_pid", holder ? Json(holder->pid) : Json(nullptr)},
      {"watcher_pid", watcher ? Json(watcher->pid) : Json(nullptr)},
      {"handovers", gpu.handovers},
      {"loans", gpu.loans},
      {"vtime_floor_ms", milliseconds(gpu.vtime_floor_ns)},
      {"switches", gpu.switches},
      {"switch_ns_total", gpu.switch_ns_total},
      {"switch_ns_max", after_a_switch(gpu.switches, gpu.switch_ns_max)},
      {"safety_bytes", gpu.safety_bytes},
      {"safety_holds", gpu.safety_bytes <= gpu.capacity_bytes},
      {"memory_waiters", gpu.memory_waiters},
  };
  Json lanes = Json::array();
  for (const shm::LaneSnapshot& lane : gpu.lanes) {
    Json members = Json::array();
    for (uint32_t slot : lane.slots)
      if (const shm::ProcessSnapshot* p = find_slot(view, int32_t(slot))) members.push_back(p->pid);
    lanes.push_back(Json{{"lane", lane.lane},
                         {"ephemeral_bytes", lane.ephemeral_bytes},
                         {"pids", std::move(members)},
                         {"holder_slot", lane.holder_slot >= 0 ? Json(lane.holder_slot) : Json(nullptr)}});
  }
  out["lanes"] = std::move(lanes);
  add_slice(gpu, &out);
  out["processes"] = std::move(processes);
  return out;
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
