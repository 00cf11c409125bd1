#include "tools/top_columns.h"

#include "tools/top_format.h"

namespace gshare::top {

namespace {

std::string pid(const ProcessView& r) { return std::to_string(r.process.pid); }
std::string command(const ProcessView& r) { return r.process.command; }
std::string used(const ProcessView& r) { return format_bytes(r.process.used_bytes); }
std::string context(const ProcessView& r) { return format_bytes(r.process.context_bytes); }
std::string allocations(const ProcessView& r) { return std::to_string(r.process.allocation_count); }
std::string launch_rate(const ProcessView& r) { return format_rate(r.launches_per_second); }
std::string state(const ProcessView& r) { return state_name(r.state); }
std::string token(const ProcessView& r) { return r.process.holds_token ? "*" : ""; }
std::string gpu_share(const ProcessView& r) { return format_percent(r.process.share_10s); }
std::string iterations(const ProcessView& r) { return std::to_string(r.process.iterations); }
std::string waiting(const ProcessView& r) { return format_duration(r.process.waiting_ns); }

// A quota of the whole GPU (the default) is no limit at all: say so.
std::string quota(const ProcessView& r) {
  if (r.process.quota_bytes >= r.gpu_capacity_bytes) return "-";
  return format_bytes(r.process.quota_bytes);
}

// 0 means no iteration was detected yet, not an instant one.
std::string iteration(const ProcessView& r) {
  if (r.process.iteration_ns == 0) return "-";
  return format_duration(r.process.iteration_ns);
}

// What the GPU's policy looks at: the weight under fair, the priority under
// priority (with the weight when it is not 1, since equal priorities share
// as fair does), both under any other policy.
std::string weight_priority(const ProcessView& r) {
  std::string weight = "w" + std::to_string(r.process.weight);
  std::string priority = "p" + std::to_string(r.process.priority);
  if (r.gpu_policy == "fair") return weight;
  if (r.gpu_policy == "priority") return r.process.weight == 1 ? priority : priority + " " + weight;
  return weight + " " + priority;
}

const Column kColumns[] = {
    {"PID", "process id, in the process's own PID namespace", 7, Align::kRight, pid, 0},
    {"COMMAND", "command line, cut to fit the terminal", 0, Align::kLeft, command, 0},
    {"USED", "device memory held: allocations plus the driver's context", 10, Align::kRight,
     used, 0},
    {"QUOTA", "the process's memory limit on this GPU; - for the whole GPU", 10, Align::kRight,
     quota, 4},
    {"CONTEXT", "the driver's context memory (estimated), included in USED", 10, Align::kRight,
     context, 9},
    {"ALLOCS", "live device allocations", 7, Align::kRight, allocations, 8},
    {"LAUNCH/S", "kernel and graph launches per second over the last refresh", 9, Align::kRight,
     launch_rate, 5},
    {"STATE",
     "running (holds the token or launched lately), waiting (for it) or idle",
     7, Align::kLeft, state, 0},
    {"TOKEN", "* on the process that holds the GPU's launch token", 5, Align::kLeft, token, 0},
    {"GPU%", "share of the last 10 s it held the token (of its life if younger)", 5,
     Align::kRight, gpu_share, 0},
    {"W/P", "weight w3 under fair, priority p10 under priority, both otherwise", 7,
     Align::kLeft, weight_priority, 6},
    {"ITER", "length of its latest iteration; - when none was detected", 7, Align::kRight,
     iteration, 3},
    {"ITERS", "iterations detected", 7, Align::kRight, iterations, 7},
    {"WAIT", "time spent waiting for the token, the current wait included", 7, Align::kRight,
     waiting, 2},
};

}  // namespace

std::span<const Column> process_columns() { return kColumns; }

}  // namespace gshare::top
