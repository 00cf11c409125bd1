#include "tools/top_prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>

namespace gshare::top {

namespace {

// A sample's value, kept exact where the region's figure is exact: bytes
// and counts as integers, nanoseconds as decimal seconds (no rounding
// through a double), only ratios as doubles.
struct Number {
  enum class Kind { kInteger, kNanoseconds, kReal } kind = Kind::kInteger;
  uint64_t integer = 0;
  double real = 0;
};
Number integer(uint64_t value) { return {Number::Kind::kInteger, value, 0}; }
Number seconds(uint64_t ns) { return {Number::Kind::kNanoseconds, ns, 0}; }
Number real(double value) { return {Number::Kind::kReal, 0, value}; }
Number flag(bool value) { return integer(value ? 1 : 0); }

std::string format_number(const Number& number) {
  switch (number.kind) {
    case Number::Kind::kInteger:
      return std::to_string(number.integer);
    case Number::Kind::kNanoseconds: {
      std::string text = std::to_string(number.integer / 1000000000);
      uint64_t fraction = number.integer % 1000000000;
      if (fraction == 0) return text;
      std::string digits = std::to_string(fraction);
      digits.insert(0, 9 - digits.size(), '0');
      while (digits.back() == '0') digits.pop_back();
      return text + "." + digits;
    }
    case Number::Kind::kReal: {
      if (std::isnan(number.real)) return "NaN";
      if (std::isinf(number.real)) return number.real > 0 ? "+Inf" : "-Inf";
      char buffer[64];
      auto result = std::to_chars(buffer, buffer + sizeof buffer, number.real);
      return std::string(buffer, result.ptr);
    }
  }
  return "NaN";
}

// --- the metric tables: name, type, help, and how to read the value ---

// A summary without quantiles: `value` is its _sum, `count` its _count;
// rate(_sum) / rate(_count) is the mean over any window.
constexpr const char* kGauge = "gauge";
constexpr const char* kCounter = "counter";
constexpr const char* kSummary = "summary";

using shm::GpuSnapshot;
using shm::ProcessSnapshot;

// std::nullopt: no sample (a figure that has no value yet, not a measured 0).
template <typename Of>
struct Metric {
  const char* name;
  const char* type;
  const char* help;
  std::optional<Number> (*value)(const Of&);
  uint64_t (*count)(const Of&) = nullptr;  // summaries only
};

// Per readable GPU, labelled gpu="<UUID>".
const Metric<GpuSnapshot> kGpuMetrics[] = {
    {"gshare_gpu_memory_capacity_bytes", kGauge, "Device memory of the GPU.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.capacity_bytes); }},
    {"gshare_gpu_memory_reserved_bytes", kGauge,
     "Device memory reserved by the live gshare processes on the GPU.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.reserved_bytes); }},
    {"gshare_gpu_safety_bytes", kGauge,
     "Safety condition sum: persistent memory of every live process plus each lane's largest "
     "ephemeral memory; above the capacity the jobs may not all fit at once.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.safety_bytes); }},
    {"gshare_gpu_processes", kGauge, "Live gshare processes on the GPU.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.processes.size()); }},
    {"gshare_gpu_lanes", kGauge, "Lanes (jobs taking turns with one ephemeral space) with live members.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.lanes.size()); }},
    {"gshare_gpu_memory_waiters", kGauge, "Processes blocked in an allocation now.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.memory_waiters); }},
    {"gshare_gpu_handovers_total", kCounter,
     "Times the launch token changed hands (a grant when nobody held it counts too).",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.handovers); }},
    {"gshare_gpu_loans_total", kCounter,
     "Times a token holder whose GPU sat idle while it worked on the host lent the token until its next launch.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.loans); }},
    {"gshare_gpu_switch_seconds", kSummary,
     "Switches that reached the new holder's first launch: their cost from the grant to that "
     "launch (_sum) and their number (_count), ended jobs included.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return seconds(g.switch_ns_total); },
     [](const GpuSnapshot& g) -> uint64_t { return g.switches; }},
    {"gshare_gpu_switch_max_seconds", kGauge, "The costliest switch so far; absent before the first.",
     [](const GpuSnapshot& g) -> std::optional<Number> {
       if (g.switches == 0) return std::nullopt;
       return seconds(g.switch_ns_max);
     }},
    {"gshare_gpu_admission_waits_total", kCounter,
     "Allocations that had to wait for admission, memory or their lane's space, ended jobs included.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.admission_waits); }},
    {"gshare_gpu_admission_timeouts_total", kCounter,
     "Allocations that gave up waiting for admission (GSHARE_ADMIT_TIMEOUT_S), ended jobs included.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.admission_timeouts); }},
    {"gshare_gpu_repairs_total", kCounter,
     "Times a process died inside an update of the region and its state was repaired.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.repairs); }},
    {"gshare_gpu_reclaimed_slots_total", kCounter, "Slots of dead processes cleaned up.",
     [](const GpuSnapshot& g) -> std::optional<Number> { return integer(g.reclaimed_slots); }},
};

// Per live process, labelled gpu, pid, slot and command.
const Metric<ProcessSnapshot> kProcessMetrics[] = {
    {"gshare_process_memory_used_bytes", kGauge,
     "Device memory the process holds: its allocations plus the driver's context memory.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.used_bytes); }},
    {"gshare_process_memory_quota_bytes", kGauge,
     "The process's memory limit on the GPU (the GPU's capacity when unlimited).",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.quota_bytes); }},
    {"gshare_process_memory_reserved_bytes", kGauge,
     "Device memory used plus reservations in flight.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.reserved_bytes); }},
    {"gshare_process_memory_context_bytes", kGauge,
     "The driver's context memory (estimated), included in used.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.context_bytes); }},
    {"gshare_process_memory_persistent_bytes", kGauge,
     "P: context plus allocations classified persistent.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.persistent_bytes); }},
    {"gshare_process_memory_ephemeral_bytes", kGauge, "E: peak ephemeral memory per iteration.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.ephemeral_bytes); }},
    {"gshare_process_memory_provisional", kGauge,
     "1 while fewer than two iterations were classified: P and E may still move.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return flag(p.memory_provisional); }},
    {"gshare_process_memory_paged_out_bytes", kGauge,
     "Device memory of the process now paged out to host memory (GSHARE_PAGING).",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.paged_out_bytes); }},
    {"gshare_process_allocations", kGauge, "Live device allocations.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.allocation_count); }},
    {"gshare_process_allocations_denied_total", kCounter,
     "Allocations refused (quota or capacity).",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.denied_count); }},
    {"gshare_process_holds_token", kGauge, "1 while the process holds a launch token.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return flag(p.holds_token); }},
    {"gshare_process_beside_holder", kGauge,
     "1 while the process runs beside the token's holder, in its turn (shared turns).",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return flag(p.beside); }},
    {"gshare_process_gpu_busy_ratio", kGauge,
     "How busy its kernels kept the GPU in its own turns, 0 to 1, timed on the GPU (shared turns); "
     "absent until measured.",
     [](const ProcessSnapshot& p) -> std::optional<Number> {
       if (p.gpu_busy_share <= 0) return std::nullopt;
       return real(p.gpu_busy_share);
     }},
    {"gshare_process_gpu_share_ratio", kGauge,
     "Share of the last 10 s the process held the launch token, 0 to 1.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return real(p.share_10s); }},
    {"gshare_process_token_held_seconds_total", kCounter, "Time the process held the launch token.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return seconds(p.served_ns); }},
    {"gshare_process_token_wait_seconds_total", kCounter,
     "Time the process waited for the launch token, the current wait included.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return seconds(p.waiting_ns); }},
    {"gshare_process_token_grants_total", kCounter, "Times the process was given the launch token.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.granted); }},
    {"gshare_process_switch_seconds", kSummary,
     "Switches to the process that reached its first launch: their cost from the grant to that "
     "launch (_sum) and their number (_count).",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return seconds(p.switch_ns); },
     [](const ProcessSnapshot& p) -> uint64_t { return p.switches; }},
    {"gshare_process_launches_total", kCounter, "Kernel and graph launches.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.launches); }},
    {"gshare_process_syncs_total", kCounter, "Host synchronisations.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.syncs); }},
    {"gshare_process_iterations_total", kCounter, "Training iterations detected.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.iterations); }},
    {"gshare_process_iteration_seconds", kGauge,
     "Length of the latest iteration; absent before one was detected.",
     [](const ProcessSnapshot& p) -> std::optional<Number> {
       if (p.iteration_ns == 0) return std::nullopt;
       return seconds(p.iteration_ns);
     }},
    {"gshare_process_admission_waits_total", kCounter,
     "Times an allocation of the process waited for admission.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.admission_waits); }},
    {"gshare_process_admission_timeouts_total", kCounter,
     "Admission waits that gave up (GSHARE_ADMIT_TIMEOUT_S).",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.admission_timeouts); }},
    {"gshare_process_admission_wait_seconds", kGauge,
     "How long the current admission wait has lasted; 0 when admitted.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return seconds(p.admission_wait_ns); }},
    {"gshare_process_page_outs_total", kCounter, "Times the process's memory was paged out.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.page_outs); }},
    {"gshare_process_page_ins_total", kCounter, "Times the process's memory was paged back in.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return integer(p.page_ins); }},
    {"gshare_process_paging_seconds_total", kCounter, "Time spent copying and mapping memory, both ways.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return seconds(p.paging_ns); }},
    {"gshare_process_page_in_wait_seconds_total", kCounter,
     "Time its page-ins waited for its turn and for room before copying.",
     [](const ProcessSnapshot& p) -> std::optional<Number> { return seconds(p.page_in_wait_ns); }},
};

// The families that are not one value per GPU or process.
constexpr const char* kDirectoryReadable = "gshare_directory_readable";
constexpr const char* kRegionReadable = "gshare_gpu_region_readable";
constexpr const char* kRegionErrorInfo = "gshare_gpu_region_error_info";
constexpr const char* kGpuInfo = "gshare_gpu_info";
constexpr const char* kProcessState = "gshare_process_state";
// The states of the enum, each a sample; the current one is 1.
constexpr shm::JobState kJobStates[] = {shm::kJobIdle, shm::kJobWaiting, shm::kJobRunning};

// --- writing the exposition ---

std::string escape_help(const char* help) {
  std::string out;
  for (const char* c = help; *c; ++c) {
    if (*c == '\\') out += "\\\\";
    else if (*c == '\n') out += "\\n";
    else out += *c;
  }
  return out;
}

// Length of the valid UTF-8 sequence at `s[i]`, or 0 if there is none
// (overlong forms, surrogates and code points past U+10FFFF included, as Go,
// which parses the exposition, rejects them too).
size_t utf8_sequence_length(const std::string& s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t code;
  if (lead >= 0xC2 && lead <= 0xDF) length = 2, code = lead & 0x1F;
  else if (lead >= 0xE0 && lead <= 0xEF) length = 3, code = lead & 0x0F;
  else if (lead >= 0xF0 && lead <= 0xF4) length = 4, code = lead & 0x07;
  else return 0;
  if (i + length > s.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (length == 3 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) return 0;
  if (length == 4 && (code < 0x10000 || code > 0x10FFFF)) return 0;
  return length;
}

// One family: its HELP and TYPE lines, then its samples. Families without
// a sample are left out.
class Exposition {
 public:
  void begin(const char* name, const char* type, const char* help) {
    close_family();
    header_ = std::string("# HELP ") + name + " " + escape_help(help) + "\n# TYPE " + name + " " +
              type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, const Number& value) {
    samples_ += name;
    if (!labels.empty()) samples_ += "{" + labels + "}";
    samples_ += " " + format_number(value) + "\n";
  }
  std::string finish() {
    close_family();
    return std::move(out_);
  }

 private:
  void close_family() {
    if (!samples_.empty()) out_ += header_ + samples_;
    samples_.clear();
  }
  std::string header_, samples_, out_;
};

std::string label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + prometheus_label_value(value) + "\"";
}

// The file's name after "gshare-": its GPU's UUID, for a region that could
// not be read far enough to learn it.
std::string gpu_label_value(const GpuSnapshot& gpu) {
  if (!gpu.uuid.empty()) return gpu.uuid;
  std::string file = gpu.path.substr(gpu.path.rfind('/') + 1);
  const std::string prefix = "gshare-";
  return file.compare(0, prefix.size(), prefix) == 0 ? file.substr(prefix.size()) : file;
}

// Region errors often begin with the region's path, which is a label of its own.
std::string without_path_prefix(const std::string& error, const std::string& path) {
  std::string prefix = path + ": ";
  if (error.compare(0, prefix.size(), prefix) == 0) return error.substr(prefix.size());
  return error;
}

std::string gpu_labels(const GpuSnapshot& gpu) { return label("gpu", gpu_label_value(gpu)); }

std::string process_labels(const GpuSnapshot& gpu, const ProcessSnapshot& p) {
  // The slot keeps two processes apart that share a pid from different PID
  // namespaces: the same series twice would fail the scrape.
  return gpu_labels(gpu) + "," + label("pid", std::to_string(p.pid)) + "," +
         label("slot", std::to_string(p.slot)) + "," + label("command", short_command(p.command));
}

template <typename Of>
void add_metric(Exposition& out, const Metric<Of>& metric, const std::string& labels, const Of& of) {
  std::optional<Number> value = metric.value(of);
  if (!value) return;
  if (metric.count) {
    out.sample(std::string(metric.name) + "_sum", labels, *value);
    out.sample(std::string(metric.name) + "_count", labels, integer(metric.count(of)));
  } else {
    out.sample(metric.name, labels, *value);
  }
}

}  // namespace

std::string prometheus_label_value(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    if (text[i] == '\\') out += "\\\\";
    else if (text[i] == '"') out += "\\\"";
    else if (text[i] == '\n') out += "\\n";
    else out.append(text, i, length);
    i += length;
  }
  return out;
}

std::string short_command(const std::string& command_line) {
  std::string first = command_line.substr(0, command_line.find(' '));
  size_t slash = first.rfind('/');
  if (slash != std::string::npos && slash + 1 < first.size()) first = first.substr(slash + 1);
  return first;
}

std::vector<std::string> prometheus_sample_names() {
  std::vector<std::string> names = {kDirectoryReadable, kRegionReadable, kRegionErrorInfo, kGpuInfo};
  auto add = [&](const char* name, bool summary) {
    if (summary) {
      names.push_back(std::string(name) + "_sum");
      names.push_back(std::string(name) + "_count");
    } else {
      names.push_back(name);
    }
  };
  for (const auto& metric : kGpuMetrics) add(metric.name, metric.count != nullptr);
  names.push_back(kProcessState);
  for (const auto& metric : kProcessMetrics) add(metric.name, metric.count != nullptr);
  return names;
}

std::string render_prometheus(const std::vector<GpuSnapshot>& gpus, const std::string& dir,
                              const std::string& dir_error) {
  Exposition out;
  out.begin(kDirectoryReadable, kGauge,
            "1 if the directory of the regions could be read; 0 (no regions seen) if not.");
  out.sample(kDirectoryReadable, label("dir", dir), flag(dir_error.empty()));

  out.begin(kRegionReadable, kGauge,
            "1 for a region gshare-<UUID> that could be read; 0 for one that could not (see "
            "gshare_gpu_region_error_info).");
  for (const GpuSnapshot& gpu : gpus)
    out.sample(kRegionReadable, gpu_labels(gpu) + "," + label("path", gpu.path),
               flag(gpu.error.empty()));

  out.begin(kRegionErrorInfo, kGauge, "Why a region could not be read, in the error label.");
  for (const GpuSnapshot& gpu : gpus)
    if (!gpu.error.empty())
      out.sample(kRegionErrorInfo,
                 gpu_labels(gpu) + "," + label("path", gpu.path) + "," +
                     label("error", without_path_prefix(gpu.error, gpu.path)),
                 integer(1));

  out.begin(kGpuInfo, kGauge,
            "The GPU's scheduling policy in the policy label (unknown until a process sets one).");
  for (const GpuSnapshot& gpu : gpus)
    if (gpu.error.empty())
      out.sample(kGpuInfo, gpu_labels(gpu) + "," + label("policy", gpu.policy), integer(1));

  for (const auto& metric : kGpuMetrics) {
    out.begin(metric.name, metric.type, metric.help);
    for (const GpuSnapshot& gpu : gpus)
      if (gpu.error.empty()) add_metric(out, metric, gpu_labels(gpu), gpu);
  }

  out.begin(kProcessState, kGauge,
            "The scheduler's state of the process, one sample per state: 1 for the current one "
            "(running: holds the launch token; waiting: waits for it; idle: neither).");
  for (const GpuSnapshot& gpu : gpus)
    for (const ProcessSnapshot& p : gpu.processes)
      for (shm::JobState state : kJobStates)
        out.sample(kProcessState,
                   process_labels(gpu, p) + "," + label("state", shm::job_state_name(state)),
                   flag(p.job_state == state));

  for (const auto& metric : kProcessMetrics) {
    out.begin(metric.name, metric.type, metric.help);
    for (const GpuSnapshot& gpu : gpus)
      for (const ProcessSnapshot& p : gpu.processes) add_metric(out, metric, process_labels(gpu, p), p);
  }
  return out.finish();
}

}  // namespace gshare::top
