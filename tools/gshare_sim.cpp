// gshare-sim: replays a job trace through gshare's scheduling policies under
// a virtual clock and compares them (average job completion time, makespan,
// GPU busy fraction, handovers). The engine is tools/sim_engine.h; this file
// is the command line and the two renderings of a result.
//
//   gshare-sim [--policy fifo|fair|srtf|priority|pack|prefetch|all] [--json]
//              [--quantum-ms N] [--slice-max-ms N] [--handover-ms N]
//              [--capacity-mib N] [--paging GBPS] TRACE.json
//
// --json prints one object:
//   {"trace": "path", "description": "...",
//    "quantum_ms": X, "slice_max_ms": X, "handover_ms": X,
//    "capacity_mib": N or null,            null: memory not modelled
//    "policies": {"fifo": {"jobs": [{"name", "arrival_s", "start_s",
//                                    "completion_s", "jct_s", "gpu_s",
//                                    "wait_s", "admission_wait_s", "lane",
//                                    "final_lane", "memory_mib",
//                                    "persistent_mib", "ephemeral_mib"}, ...],
//                          "summary": {"average_jct_s", "makespan_s",
//                                      "busy_fraction", "handovers",
//                                      "admission_waits",
//                                      "average_admission_wait_s",
//                                      "max_admission_wait_s"}},
//                 ...},                    in the order fifo, fair, srtf, priority, pack, prefetch
//    "ratios": {"fair_to_fifo": X, ...}}  average JCT over fifo's; {} without fifo

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/version.h"
#include "tools/sim_engine.h"
#include "tools/sim_paging.h"

namespace gshare::sim {
namespace {

using Json = nlohmann::ordered_json;

constexpr Policy kAllPolicies[] = {Policy::kFifo, Policy::kFair, Policy::kSrtf, Policy::kPriority,
                                   Policy::kPack, Policy::kPrefetch};

struct CommandLine {
  std::vector<Policy> policies{std::begin(kAllPolicies), std::end(kAllPolicies)};
  bool json = false;
  bool help = false;
  bool version = false;  // --version: "gshare-sim 0.9.0"
  // Overrides of the trace's own values; negative when not given.
  double quantum_ms = -1;
  double slice_max_ms = -1;
  double handover_ms = -1;
  int64_t capacity_mib = -1;  // 0 turns the trace's capacity off
  double paging_gb_per_s = 0;  // > 0: also the paging model (tools/sim_paging.h), text only
  double pin_gb_per_s = 0;     // --pin: the paging model's pinning rate; 0: pinning is free
  int64_t host_limit_mib = 0;  // --host-limit-mib: the paging model's host limit; 0: none
  std::string trace_path;
};

struct PolicyResult {
  Policy policy;
  SimResult result;
};

std::string usage_text() {
  return "usage: gshare-sim [--policy fifo|fair|srtf|priority|pack|prefetch|all] [--json]\n"
         "                  [--quantum-ms N] [--slice-max-ms N] [--handover-ms N]\n"
         "                  [--capacity-mib N] [--paging GBPS [--pin GBPS] [--host-limit-mib N]]\n"
         "                  TRACE.json\n"
         "\n"
         "Replays a job trace through gshare's scheduling policies on one simulated GPU\n"
         "(virtual clock) and prints, per policy, each job's arrival, start, completion,\n"
         "job completion time (JCT), GPU time and waiting time, then a summary: average\n"
         "JCT, makespan, GPU busy fraction, handovers and average JCT relative to fifo.\n"
         "With a GPU capacity, jobs must be admitted (persistent memory + one ephemeral\n"
         "space per lane must fit): each job's admission wait and lane, and the waits\n"
         "in the summary, are shown too.\n"
         "\n"
         "  --policy P        fifo, fair, srtf, priority, pack, prefetch, or all (default: all)\n"
         "  --json            one JSON object instead of tables\n"
         "  --quantum-ms N    slice length (fair: times the job's weight);\n"
         "                    default: the trace's, else 50\n"
         "  --slice-max-ms N  how far past its length a slice may run to reach an iteration\n"
         "                    boundary; default: the trace's, else 200\n"
         "  --handover-ms N   idle GPU time of each handover; default: the trace's, else 0.05\n"
         "  --capacity-mib N  the GPU's memory, MiB; 0: memory not modelled;\n"
         "                    default: the trace's capacity_mib, else not modelled\n"
         "  --paging GBPS     also the paging model at GBPS GB/s each way: every policy's\n"
         "                    schedule and a searched one, without and with prefetch\n"
         "  --pin GBPS        with --paging: pinning host memory for a page-out costs its\n"
         "                    bytes at GBPS (a job pins at its first page-out, and again\n"
         "                    after giving its kept copy up; once jobs take turns through\n"
         "                    host memory, it pins ahead while it runs, at a quarter of\n"
         "                    GBPS, as live); default: free\n"
         "  --host-limit-mib N  with --paging: GSHARE_HOST_MEM_LIMIT; past it a page-out\n"
         "                    makes resident jobs give kept copies up; default: no limit\n"
         "  -h, --help        this text\n"
         "  --version         the version of gshare-sim\n"
         "\n"
         "Trace (JSON): quantum_ms, slice_max_ms, handover_ms, capacity_mib, description,\n"
         "  exit_ms (with --paging) (all optional), jobs: [{name, arrival_s,\n"
         "  iteration_ms, iterations (required), weight (1), priority (0),\n"
         "  persistent_mib (0, or memory_mib), ephemeral_mib (0), memory_mib (0),\n"
         "  estimate: iters (default), seconds, none; with --paging paged_mib (P + E:\n"
         "  what a page-out moves), at_start: new (default), resident,\n"
         "  resident_with_copy, paged_out}]\n"
         "Exit status: 0; 2 with one line on stderr for a bad option, file or trace;\n"
         "1 if the output cannot be written.\n";
}

// A number >= 0 (> 0 when `positive`), or false with the reason in `error`.
bool parse_ms(const std::string& option, const char* text, bool positive, double* out,
              std::string* error) {
  char* end = nullptr;
  errno = 0;
  double value = strtod(text, &end);
  bool valid = end != text && *end == '\0' && errno == 0 && std::isfinite(value) &&
               (positive ? value > 0 : value >= 0) && value <= 1e10;
  if (!valid) {
    *error = option + " takes a number of milliseconds " + (positive ? "> 0" : ">= 0") +
             " (got '" + text + "')";
    return false;
  }
  *out = value;
  return true;
}

// A whole number of MiB >= 0, or false with the reason in `error`.
bool parse_mib(const std::string& option, const char* text, int64_t* out, std::string* error) {
  char* end = nullptr;
  errno = 0;
  long long value = strtoll(text, &end, 10);
  bool valid = end != text && *end == '\0' && errno == 0 && value >= 0 && value <= 1'000'000'000;
  if (!valid) {
    *error = option + " takes a whole number of MiB >= 0 and <= 1e9 (got '" + text + "')";
    return false;
  }
  *out = value;
  return true;
}

bool parse_policies(const char* text, std::vector<Policy>* out, std::string* error) {
  if (strcmp(text, "all") == 0) {
    out->assign(std::begin(kAllPolicies), std::end(kAllPolicies));
    return true;
  }
  Policy policy;
  if (!parse_policy(text, &policy)) {
    *error = std::string("--policy takes fifo, fair, srtf, priority, pack, prefetch or all (got '") + text +
             "')";
    return false;
  }
  *out = {policy};
  return true;
}

// One option that takes a value: "--name VALUE" or "--name=VALUE".
bool take_value(int argc, char** argv, int* i, const std::string& name, const char** value,
                std::string* error) {
  std::string argument = argv[*i];
  if (argument.rfind(name + "=", 0) == 0) {
    *value = argv[*i] + name.size() + 1;
    return true;
  }
  if (*i + 1 >= argc) {
    *error = name + " needs a value";
    return false;
  }
  *value = argv[++*i];
  return true;
}

bool is_option(const std::string& argument, const char* name) {
  return argument == name || argument.rfind(std::string(name) + "=", 0) == 0;
}

bool parse_command_line(int argc, char** argv, CommandLine* out, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    const char* value = nullptr;
    bool ok = true;
    if (argument == "-h" || argument == "--help") {
      out->help = true;
    } else if (argument == "--version") {
      out->version = true;
    } else if (argument == "--json") {
      out->json = true;
    } else if (is_option(argument, "--policy")) {
      ok = take_value(argc, argv, &i, "--policy", &value, error) &&
           parse_policies(value, &out->policies, error);
    } else if (is_option(argument, "--quantum-ms")) {
      ok = take_value(argc, argv, &i, "--quantum-ms", &value, error) &&
           parse_ms("--quantum-ms", value, true, &out->quantum_ms, error);
    } else if (is_option(argument, "--slice-max-ms")) {
      ok = take_value(argc, argv, &i, "--slice-max-ms", &value, error) &&
           parse_ms("--slice-max-ms", value, false, &out->slice_max_ms, error);
    } else if (is_option(argument, "--handover-ms")) {
      ok = take_value(argc, argv, &i, "--handover-ms", &value, error) &&
           parse_ms("--handover-ms", value, false, &out->handover_ms, error);
    } else if (is_option(argument, "--paging")) {
      ok = take_value(argc, argv, &i, "--paging", &value, error) &&
           parse_ms("--paging", value, true, &out->paging_gb_per_s, error);
      if (!ok) *error = std::string("--paging takes a copy rate in GB/s > 0 (got '") + value + "')";
    } else if (is_option(argument, "--pin")) {
      ok = take_value(argc, argv, &i, "--pin", &value, error) &&
           parse_ms("--pin", value, true, &out->pin_gb_per_s, error);
      if (!ok) *error = std::string("--pin takes a pinning rate in GB/s > 0 (got '") + value + "')";
    } else if (is_option(argument, "--host-limit-mib")) {
      ok = take_value(argc, argv, &i, "--host-limit-mib", &value, error) &&
           parse_mib("--host-limit-mib", value, &out->host_limit_mib, error);
    } else if (is_option(argument, "--capacity-mib")) {
      ok = take_value(argc, argv, &i, "--capacity-mib", &value, error) &&
           parse_mib("--capacity-mib", value, &out->capacity_mib, error);
    } else if (argument.size() > 1 && argument[0] == '-') {
      *error = "unknown option '" + argument + "' (see --help)";
      ok = false;
    } else if (!out->trace_path.empty()) {
      *error = "one trace file only (got '" + out->trace_path + "' and '" + argument + "')";
      ok = false;
    } else {
      out->trace_path = argument;
    }
    if (!ok) return false;
  }
  if (out->trace_path.empty() && !out->help && !out->version) {
    *error = "no trace file given (usage: gshare-sim [options] TRACE.json; see --help)";
    return false;
  }
  return true;
}

bool read_file(const std::string& path, std::string* text, std::string* error) {
  FILE* file = fopen(path.c_str(), "r");
  if (file) {
    char buffer[65536];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, file)) > 0) text->append(buffer, n);
    bool failed = ferror(file);
    int saved = errno;
    fclose(file);
    if (!failed) return true;
    errno = saved;
  }
  *error = "cannot read " + path + ": " + strerror(errno);
  return false;
}

bool load_trace(const std::string& path, Trace* trace, std::string* error) {
  std::string text;
  if (!read_file(path, &text, error)) return false;
  if (!parse_trace(text, trace, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

// The trace's values, with the command line's overrides.
void apply_overrides(const CommandLine& command_line, Trace* trace) {
  if (command_line.quantum_ms >= 0) {
    trace->quantum_ms = command_line.quantum_ms;
    trace->quantum_adapts = false;  // chosen, as GSHARE_QUANTUM_MS live
  }
  if (command_line.slice_max_ms >= 0) trace->slice_max_ms = command_line.slice_max_ms;
  if (command_line.handover_ms >= 0) trace->handover_ms = command_line.handover_ms;
  if (command_line.capacity_mib >= 0) trace->capacity_mib = uint64_t(command_line.capacity_mib);
}

// Divided, not multiplied by 1e-9, so that 76000350000 ns prints as 76.00035.
double seconds(uint64_t ns) { return double(ns) / 1e9; }

const PolicyResult* find_result(const std::vector<PolicyResult>& results, Policy policy) {
  for (const PolicyResult& r : results)
    if (r.policy == policy) return &r;
  return nullptr;
}

// Average JCT over fifo's, or NAN when fifo was not run.
double ratio_to_fifo(const std::vector<PolicyResult>& results, const SimResult& result) {
  const PolicyResult* fifo = find_result(results, Policy::kFifo);
  if (!fifo || fifo->result.average_jct_ns <= 0) return NAN;
  return result.average_jct_ns / fifo->result.average_jct_ns;
}

// ---------------------------------------------------------------------------
// Text

std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
  char buffer[512];
  va_list args;
  va_start(args, pattern);
  vsnprintf(buffer, sizeof buffer, pattern, args);
  va_end(args);
  return buffer;
}

int name_width(const Trace& trace) {
  size_t width = 4;  // "JOB"
  for (const TraceJob& job : trace.jobs) width = std::max(width, job.name.size());
  return int(std::min<size_t>(width, 40));
}

// "2", "2>0" for a job that was moved from lane 2 to lane 0 while it ran,
// "-" without lanes.
std::string lane_text(const JobResult& job) {
  if (job.lane == rules::kNoLane) return "-";
  if (job.final_lane == job.lane || job.final_lane == rules::kNoLane)
    return format("%d", job.lane);
  return format("%d>%d", job.lane, job.final_lane);
}

// The memory columns appear only with a capacity, so that a trace without
// one reads as before.
std::string job_table(const Trace& trace, const PolicyResult& run) {
  int width = name_width(trace);
  bool memory = run.result.memory_modelled;
  std::string text = format("== %s\n%-*s %12s %12s %12s %12s %12s %12s",
                            policy_name(run.policy), width, "JOB", "ARRIVAL s",
                            "START s", "COMPLETION s", "JCT s", "GPU s", "WAIT s");
  text += memory ? format(" %12s %5s\n", "ADMIT WAIT s", "LANE") : "\n";
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const JobResult& job = run.result.jobs[i];
    text += format("%-*.*s %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f", width, width,
                   trace.jobs[i].name.c_str(), seconds(job.arrival_ns), seconds(job.start_ns),
                   seconds(job.completion_ns), seconds(job.jct_ns), seconds(job.gpu_ns),
                   seconds(job.wait_ns));
    text += memory ? format(" %12.3f %5s\n", seconds(job.admission_wait_ns), lane_text(job).c_str())
                   : "\n";
  }
  return text + "\n";
}

std::string summary_table(const std::vector<PolicyResult>& results) {
  bool memory = !results.empty() && results[0].result.memory_modelled;
  std::string text = format("== summary\n%-9s %14s %14s %6s %10s %9s", "POLICY", "AVG JCT s",
                            "MAKESPAN s", "BUSY", "HANDOVERS", "JCT/FIFO");
  text += memory ? format(" %7s %12s %12s\n", "WAITED", "AVG ADMIT s", "MAX ADMIT s") : "\n";
  for (const PolicyResult& run : results) {
    const SimResult& r = run.result;
    double ratio = ratio_to_fifo(results, r);
    std::string ratio_text = std::isnan(ratio) ? "-" : format("%.3f", ratio);
    text += format("%-9s %14.3f %14.3f %5.1f%% %10llu %9s", policy_name(run.policy),
                   r.average_jct_ns / 1e9, seconds(r.makespan_ns), r.busy_fraction * 100,
                   static_cast<unsigned long long>(r.handovers), ratio_text.c_str());
    text += memory ? format(" %7llu %12.3f %12.3f\n",
                            static_cast<unsigned long long>(r.admission_waits),
                            r.average_admission_wait_ns / 1e9, seconds(r.max_admission_wait_ns))
                   : "\n";
  }
  return text;
}

std::string render_text(const CommandLine& command_line, const Trace& trace,
                        const std::vector<PolicyResult>& results) {
  std::string text = format("%s: %zu jobs, quantum %g ms%s, slice max %g ms, handover %g ms",
                            command_line.trace_path.c_str(), trace.jobs.size(), trace.quantum_ms,
                            trace.quantum_adapts ? " (adapts)" : "", trace.slice_max_ms, trace.handover_ms);
  text += trace.capacity_mib > 0
              ? format(", capacity %llu MiB\n", static_cast<unsigned long long>(trace.capacity_mib))
              : "\n";
  if (!trace.description.empty()) text += trace.description + "\n";
  text += "\n";
  for (const PolicyResult& run : results) text += job_table(trace, run);
  return text + summary_table(results);
}

// ---------------------------------------------------------------------------
// JSON

// A lane number, or null without lanes.
Json lane_json(int lane) { return lane == rules::kNoLane ? Json() : Json(lane); }

Json job_json(const TraceJob& source, const JobResult& job) {
  return {{"name", source.name},
          {"arrival_s", seconds(job.arrival_ns)},
          {"start_s", seconds(job.start_ns)},
          {"completion_s", seconds(job.completion_ns)},
          {"jct_s", seconds(job.jct_ns)},
          {"gpu_s", seconds(job.gpu_ns)},
          {"wait_s", seconds(job.wait_ns)},
          {"admission_wait_s", seconds(job.admission_wait_ns)},
          {"lane", lane_json(job.lane)},
          {"final_lane", lane_json(job.final_lane)},
          {"memory_mib", source.memory_mib},
          {"persistent_mib", source.persistent_mib},
          {"ephemeral_mib", source.ephemeral_mib}};
}

Json policy_json(const Trace& trace, const SimResult& result) {
  Json jobs = Json::array();
  for (size_t i = 0; i < trace.jobs.size(); ++i)
    jobs.push_back(job_json(trace.jobs[i], result.jobs[i]));
  Json summary = {{"average_jct_s", result.average_jct_ns / 1e9},
                  {"makespan_s", seconds(result.makespan_ns)},
                  {"busy_fraction", result.busy_fraction},
                  {"handovers", result.handovers},
                  {"admission_waits", result.admission_waits},
                  {"average_admission_wait_s", result.average_admission_wait_ns / 1e9},
                  {"max_admission_wait_s", seconds(result.max_admission_wait_ns)}};
  return {{"jobs", std::move(jobs)}, {"summary", std::move(summary)}};
}

std::string render_json(const CommandLine& command_line, const Trace& trace,
                        const std::vector<PolicyResult>& results) {
  Json policies = Json::object();
  Json ratios = Json::object();
  for (const PolicyResult& run : results) {
    policies[policy_name(run.policy)] = policy_json(trace, run.result);
    double ratio = ratio_to_fifo(results, run.result);
    if (run.policy != Policy::kFifo && !std::isnan(ratio))
      ratios[std::string(policy_name(run.policy)) + "_to_fifo"] = ratio;
  }
  Json root = {{"trace", command_line.trace_path},
               {"description", trace.description},
               {"quantum_ms", trace.quantum_ms},
               {"quantum_adapts", trace.quantum_adapts},
               {"slice_max_ms", trace.slice_max_ms},
               {"handover_ms", trace.handover_ms},
               {"capacity_mib", trace.capacity_mib > 0 ? Json(trace.capacity_mib) : Json()},
               {"policies", std::move(policies)},
               {"ratios", std::move(ratios)}};
  return root.dump(2) + "\n";
}

// ---------------------------------------------------------------------------

bool write_stdout(const std::string& text) {
  fwrite(text.data(), 1, text.size(), stdout);
  if (fflush(stdout) == 0 && !ferror(stdout)) return true;
  fprintf(stderr, "gshare-sim: cannot write the output: %s\n", strerror(errno));
  return false;
}

// The paging model: every fixed policy's schedule and the searched one,
// without and with prefetch.
std::string render_paging(const Trace& trace, const PagingModel& base) {
  const double gb_per_s = base.gb_per_s;
  PagingModel plain_model = base, fetched_model = base;
  plain_model.prefetch = false;
  fetched_model.prefetch = true;
  std::string out = format("\nPaging (GSHARE_PAGING=on), copies at %.1f GB/s each way", gb_per_s);
  if (base.pin_gb_per_s > 0) out += format(", pinning at %.1f GB/s", base.pin_gb_per_s);
  if (base.host_limit_bytes) out += format(", host limit %.1f GiB", double(base.host_limit_bytes) / double(1ull << 30));
  out += ":\n";
  out += format("  %-10s %16s %16s %14s %14s\n", "schedule", "makespan (s)", "with prefetch",
                "swapped GiB", "stall (s)");
  auto row = [&](const std::string& name, const Schedule& plain, const Schedule& fetched) {
    PagingResult a = simulate_paging(trace, plain, plain_model);
    PagingResult b = simulate_paging(trace, fetched, fetched_model);
    out += format("  %-10s %16.3f %16.3f %14.1f %14.3f\n", name.c_str(), seconds(a.makespan_ns),
                  seconds(b.makespan_ns), double(b.swapped_bytes) / double(1ull << 30),
                  seconds(b.stall_ns));
  };
  for (const char* policy : {"fifo", "fair", "srtf", "priority", "pack", "prefetch"}) {
    Schedule s = policy_schedule(trace, policy);
    row(policy, s, s);
  }
  SearchOptions options;
  PagingResult plain_best, fetched_best;
  Schedule plain = search_schedule(trace, plain_model, options, &plain_best);
  Schedule fetched = search_schedule(trace, fetched_model, options, &fetched_best);
  row("search", plain, fetched);
  std::string order;
  for (int j : fetched.order) order += (order.empty() ? "" : ", ") + trace.jobs[j].name;
  if (fetched.by_weight)
    out += "  searched (with prefetch): the prefetch policy's own turns\n";
  else
    out += format("  searched (with prefetch): %s, %s\n", fetched.by_turns ? "by turns" : "each to completion",
                  order.c_str());
  return out;
}

int run(const CommandLine& command_line) {
  if (command_line.help) return write_stdout(usage_text()) ? 0 : 1;
  if (command_line.version) return write_stdout(std::string("gshare-sim ") + kVersion + "\n") ? 0 : 1;
  Trace trace;
  std::string error;
  if (!load_trace(command_line.trace_path, &trace, &error)) {
    fprintf(stderr, "gshare-sim: %s\n", error.c_str());
    return 2;
  }
  apply_overrides(command_line, &trace);
  if (!check_capacity(trace, &error)) {
    fprintf(stderr, "gshare-sim: %s: %s\n", command_line.trace_path.c_str(), error.c_str());
    return 2;
  }
  std::vector<PolicyResult> results;
  for (Policy policy : command_line.policies)
    results.push_back({policy, simulate(trace, policy, options_from(trace))});
  std::string text = command_line.json ? render_json(command_line, trace, results)
                                       : render_text(command_line, trace, results);
  if (command_line.paging_gb_per_s > 0 && !command_line.json) {
    if (trace.capacity_mib == 0) {
      fprintf(stderr, "gshare-sim: --paging needs a capacity (the trace's capacity_mib, or --capacity-mib)\n");
      return 2;
    }
    PagingModel model;
    model.gb_per_s = command_line.paging_gb_per_s;
    model.pin_gb_per_s = command_line.pin_gb_per_s;
    model.host_limit_bytes = uint64_t(command_line.host_limit_mib) << 20;
    text += render_paging(trace, model);
  }
  return write_stdout(text) ? 0 : 1;
}

}  // namespace
}  // namespace gshare::sim

int main(int argc, char** argv) {
  gshare::sim::CommandLine command_line;
  std::string error;
  if (!gshare::sim::parse_command_line(argc, argv, &command_line, &error)) {
    fprintf(stderr, "gshare-sim: %s\n", error.c_str());
    return 2;
  }
  return gshare::sim::run(command_line);
}
