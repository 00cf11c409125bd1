#include "tools/top_columns.h"

#include <cstdio>

#include "tools/top_command.h"
#include "tools/top_format.h"

namespace gshare::top {

namespace {

std::string pid(const ProcessView& r) { return std::to_string(r.process.pid); }
std::string command(const ProcessView& r) { return command_summary(r.process.command); }
std::string used(const ProcessView& r) { return format_bytes(r.process.used_bytes); }
std::string context(const ProcessView& r) { return format_bytes(r.process.context_bytes); }
std::string allocations(const ProcessView& r) { return std::to_string(r.process.allocation_count); }
std::string launch_rate(const ProcessView& r) { return format_rate(r.launches_per_second); }
std::string state(const ProcessView& r) { return state_name(r.state); }
std::string token(const ProcessView& r) {
  return r.process.holds_token ? "*" : r.process.beside ? "+" : "";
}
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

// P and E: a trailing "~" while fewer than two iterations were classified
// (they may still move), a space otherwise, so that the units line up.
std::string with_provisional_mark(uint64_t bytes, const ProcessView& r) {
  return format_bytes(bytes) + (r.process.memory_provisional ? "~" : " ");
}
std::string persistent(const ProcessView& r) {
  return with_provisional_mark(r.process.persistent_bytes, r);
}
std::string ephemeral(const ProcessView& r) {
  return with_provisional_mark(r.process.ephemeral_bytes, r);
}

// The mean cost of the switches to it: from the token's grant to its first
// launch (scheduler/token.h).
std::string switch_cost(const ProcessView& r) {
  if (r.process.switches == 0) return "-";
  return format_duration(r.process.switch_ns / r.process.switches);
}

std::string lane(const ProcessView& r) {
  return r.process.lane < 0 ? "-" : std::to_string(r.process.lane);
}

bool admitted(const ProcessView& r) { return r.process.admission == "admitted"; }

// "wait 2.5s" (the safety condition would fail) or "turn 2.5s" (it holds,
// but others in its lane still hold the bytes). Seconds with one decimal
// read best for waits of seconds; from 1000 s on (a job that waits for a
// large one to finish) "16m40s" and "1h05m" keep the column's width.
std::string admission(const ProcessView& r) {
  if (admitted(r)) return "-";
  const char* what = r.process.admission == "waiting for memory" ? "turn "
                     : r.process.admission == "waiting for lane" ? "lane "
                                                                  : "wait ";
  uint64_t ns = r.process.admission_wait_ns;
  if (ns >= 999950000000ull) return what + format_duration(ns);
  char seconds[32];
  snprintf(seconds, sizeof seconds, "%.1fs", double(ns) / 1e9);
  return what + std::string(seconds);
}

std::string short_bytes(const ProcessView& r) {
  if (admitted(r)) return "-";
  return format_bytes(r.process.admission_short_bytes);
}

// Under paging: - while all its memory is on the GPU; else the bytes of it
// in host memory, "out" while it is being paged out, "in" before them while
// it is being paged back.
std::string paged(const ProcessView& r) {
  const std::string& where = r.process.residency;
  if (where == "paging out") return "out";
  if (where == "resident" || where.empty()) return r.process.paged_out_bytes ? format_bytes(r.process.paged_out_bytes) : "-";
  std::string bytes = format_bytes(r.process.paged_out_bytes);
  return where == "paging in" ? "in " + bytes : bytes;
}

// What the GPU's policy looks at: the weight under fair and pack (fair
// within a lane), the priority under priority (with the weight when it is
// not 1, since equal priorities share as fair does), both under any other
// policy.
std::string weight_priority(const ProcessView& r) {
  std::string weight = "w" + std::to_string(r.process.weight);
  std::string priority = "p" + std::to_string(r.process.priority);
  if (r.gpu_policy == "fair" || r.gpu_policy == "pack") return weight;
  if (r.gpu_policy == "priority") return r.process.weight == 1 ? priority : priority + " " + weight;
  return weight + " " + priority;
}

const Column kColumns[] = {
    {"PID", "process id, in the process's own PID namespace", 7, Align::kRight, pid, 0},
    {"COMMAND",
     "program name and first arguments (python train.py: the script's too), cut to fit", 0,
     Align::kLeft, command, 0},
    {"USED", "device memory held: allocations plus the driver's context", 10, Align::kRight,
     used, 0},
    {"P", "persistent memory (context included); ~ while still provisional", 11, Align::kRight,
     persistent, 6},
    {"E", "ephemeral memory: its peak per iteration; ~ while still provisional", 11,
     Align::kRight, ephemeral, 7},
    {"QUOTA", "the process's memory limit on this GPU; - for the whole GPU", 10, Align::kRight,
     quota, 5},
    {"CONTEXT", "the driver's context memory (estimated), included in USED", 10, Align::kRight,
     context, 13},
    {"ALLOCS", "live device allocations", 7, Align::kRight, allocations, 12},
    {"LANE", "the lane whose ephemeral space it shares; - before it is placed", 4,
     Align::kRight, lane, 10},
    {"ADMIT", "- admitted, else wait 2.5s (safety condition) or turn 2.5s (memory)", 11,
     Align::kLeft, admission, 2},
    {"SHORT", "while it waits: by how much its allocation does not fit", 10, Align::kRight,
     short_bytes, 14},
    {"PAGED", "its memory in host memory under paging (out, in: being paged); - if none", 12,
     Align::kRight, paged, 15},
    {"LAUNCH/S", "kernel and graph launches per second over the last refresh", 9, Align::kRight,
     launch_rate, 8},
    {"STATE",
     "running (holds the token or launched lately), waiting (for it) or idle",
     7, Align::kLeft, state, 0},
    {"TOKEN", "* on a process that holds a launch token (its lane's under pack), + on one that runs beside the holder in its turn (shared turns)", 5,
     Align::kLeft, token, 0},
    {"GPU%", "share of the last 10 s it held the token (of its life if younger)", 5,
     Align::kRight, gpu_share, 0},
    {"W/P", "weight w3 under fair and pack, priority p10 under priority, both otherwise", 7,
     Align::kLeft, weight_priority, 9},
    {"ITER", "length of its latest iteration; - when none was detected", 7, Align::kRight,
     iteration, 4},
    {"ITERS", "iterations detected", 7, Align::kRight, iterations, 11},
    {"WAIT", "time spent waiting for the token, the current wait included", 7, Align::kRight,
     waiting, 3},
    {"SWITCH", "mean cost of the switches to it: the token's grant to its first launch; - if none",
     7, Align::kRight, switch_cost, 16},
};

}  // namespace

std::span<const Column> process_columns() { return kColumns; }

}  // namespace gshare::top
