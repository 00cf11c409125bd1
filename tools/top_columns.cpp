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

// A quota of the whole GPU (the default) is no limit at all: say so.
std::string quota(const ProcessView& r) {
  if (r.process.quota_bytes >= r.gpu_capacity_bytes) return "-";
  return format_bytes(r.process.quota_bytes);
}

const Column kColumns[] = {
    {"PID", "process id, in the process's own PID namespace", 7, Align::kRight, pid},
    {"COMMAND", "command line, cut to fit the terminal", 0, Align::kLeft, command},
    {"USED", "device memory held: allocations plus the driver's context", 10, Align::kRight,
     used},
    {"QUOTA", "the process's memory limit on this GPU; - for the whole GPU", 10, Align::kRight,
     quota},
    {"CONTEXT", "the driver's context memory (estimated), included in USED", 10, Align::kRight,
     context},
    {"ALLOCS", "live device allocations", 7, Align::kRight, allocations},
    {"LAUNCH/S", "kernel and graph launches per second over the last refresh", 9, Align::kRight,
     launch_rate},
    {"STATE", "active: launched during the last refresh; idle: did not", 6, Align::kLeft, state},
};

}  // namespace

std::span<const Column> process_columns() { return kColumns; }

}  // namespace gshare::top
