#include "tools/sim_trace.h"

#include <cstdint>

#include <nlohmann/json.hpp>

namespace gshare::sim {

namespace {

using Json = nlohmann::json;

// Far beyond any real trace, and small enough that every sum of
// nanoseconds in the simulation stays well inside 64 bits.
constexpr double kMaxSeconds = 1e7;
constexpr double kMaxMs = kMaxSeconds * 1e3;
constexpr double kMaxIterations = 1e12;
constexpr int64_t kMaxWeight = 1000;  // quantum x weight must not overflow (slice_length)
// A petabyte: in bytes, P + E summed over every job stays inside 64 bits.
constexpr double kMaxMib = 1e9;

struct Estimated {
  Estimate estimate;
  const char* name;
};
constexpr Estimated kEstimates[] = {
    {Estimate::kIters, "iters"}, {Estimate::kSeconds, "seconds"}, {Estimate::kNone, "none"}};

// Reads fields of one JSON object and remembers the first problem, naming
// the field by its path ("jobs[3].iteration_ms").
class FieldReader {
 public:
  FieldReader(const Json& object, std::string path, std::string* error)
      : object_(object), path_(std::move(path)), error_(error) {}

  bool ok() const { return error_->empty(); }

  // A number in [min, max] (or (min, max] when `min_is_open`); `fallback`
  // when absent and not required.
  double number(const char* field, bool required, double fallback, double min, bool min_is_open,
                double max) {
    const Json* value = find(field, required, "a number");
    if (!value) return fallback;
    if (!value->is_number()) {
      fail(field, "must be a number", *value);
      return fallback;
    }
    double x = value->get<double>();
    bool too_small = min_is_open ? !(x > min) : !(x >= min);
    if (too_small || !(x <= max)) {
      fail(field, std::string("must be ") + (min_is_open ? "> " : ">= ") + format_number(min) +
                      " and <= " + format_number(max),
           *value);
      return fallback;
    }
    return x;
  }

  // A whole number in [min, max] (500 and 500.0 both are).
  int64_t whole(const char* field, bool required, int64_t fallback, double min, double max) {
    const Json* value = find(field, required, "a whole number");
    if (!value) return fallback;
    bool integral = value->is_number_integer() ||
                    (value->is_number_float() && std::isfinite(value->get<double>()) &&
                     value->get<double>() == std::floor(value->get<double>()));
    if (!integral) {
      fail(field, "must be a whole number", *value);
      return fallback;
    }
    double x = value->get<double>();
    if (x < min || x > max) {
      fail(field,
           "must be a whole number >= " + format_number(min) + " and <= " + format_number(max),
           *value);
      return fallback;
    }
    return value->is_number_unsigned() ? int64_t(value->get<uint64_t>()) : value->get<int64_t>();
  }

  std::string text(const char* field, bool required, std::string fallback) {
    const Json* value = find(field, required, "a string");
    if (!value) return fallback;
    if (!value->is_string()) {
      fail(field, "must be a string", *value);
      return fallback;
    }
    return value->get<std::string>();
  }

  bool flag(const char* field, bool fallback) {
    const Json* value = find(field, false, "true or false");
    if (!value) return fallback;
    if (!value->is_boolean()) {
      fail(field, "must be true or false", *value);
      return fallback;
    }
    return value->get<bool>();
  }

  Estimate estimate(const char* field) {
    std::string name = text(field, false, "iters");
    for (const Estimated& e : kEstimates)
      if (name == e.name) return e.estimate;
    if (ok()) fail(field, "must be \"iters\", \"seconds\" or \"none\"", Json(name));
    return Estimate::kIters;
  }

 private:
  static std::string format_number(double x) {
    char buffer[32];
    snprintf(buffer, sizeof buffer, "%g", x);
    return buffer;
  }

  // The field's value, or null: absent (an error if required) or an
  // earlier field already failed.
  const Json* find(const char* field, bool required, const char* what) {
    if (!ok()) return nullptr;
    auto it = object_.find(field);
    if (it != object_.end() && !it->is_null()) return &*it;
    if (required) *error_ = name(field) + " is missing (" + what + ")";
    return nullptr;
  }

  void fail(const char* field, const std::string& why, const Json& value) {
    *error_ = name(field) + " " + why + " (got " + value.dump() + ")";
  }

  std::string name(const char* field) const {
    return path_.empty() ? std::string(field) : path_ + "." + field;
  }

  const Json& object_;
  std::string path_;
  std::string* error_;
};

bool parse_job(const Json& value, size_t index, TraceJob* job, std::string* error) {
  std::string path = "jobs[" + std::to_string(index) + "]";
  if (!value.is_object()) {
    *error = path + " must be an object (got " + value.dump() + ")";
    return false;
  }
  FieldReader read(value, path, error);
  job->name = read.text("name", true, "");
  if (read.ok() && job->name.empty()) *error = path + ".name is empty";
  job->arrival_s = read.number("arrival_s", true, 0, 0, false, kMaxSeconds);
  job->iteration_ms = read.number("iteration_ms", true, 0, 0, true, kMaxMs);
  job->iterations = uint64_t(read.whole("iterations", true, 0, 1, kMaxIterations));
  job->weight = uint32_t(read.whole("weight", false, 1, 1, kMaxWeight));
  job->priority = int32_t(read.whole("priority", false, 0, INT32_MIN, INT32_MAX));
  job->memory_mib = uint64_t(read.whole("memory_mib", false, 0, 0, kMaxMib));
  job->persistent_mib = uint64_t(read.whole("persistent_mib", false, 0, 0, kMaxMib));
  job->ephemeral_mib = uint64_t(read.whole("ephemeral_mib", false, 0, 0, kMaxMib));
  job->paged_mib = uint64_t(read.whole("paged_mib", false, 0, 0, kMaxMib));
  // Without a split the whole footprint stays resident: nothing of it can
  // share a lane's ephemeral space.
  auto given = [&](const char* field) { return value.contains(field) && !value[field].is_null(); };
  if (!given("persistent_mib") && !given("ephemeral_mib")) job->persistent_mib = job->memory_mib;
  if (read.ok() && job->paged_mib > job->persistent_mib + job->ephemeral_mib)
    *error = path + ".paged_mib is " + std::to_string(job->paged_mib) + ", more than its P + E (" +
             std::to_string(job->persistent_mib + job->ephemeral_mib) + " MiB): a page-out moves only what the job holds";
  job->estimate = read.estimate("estimate");
  const std::string start = read.text("at_start", false, "new");
  if (start == "new") job->at_start = StartState::kNew;
  else if (start == "resident") job->at_start = StartState::kResident;
  else if (start == "resident_with_copy") job->at_start = StartState::kResidentWithCopy;
  else if (start == "paged_out") job->at_start = StartState::kPagedOut;
  else if (read.ok())
    *error = path + ".at_start must be new, resident, resident_with_copy or paged_out (got \"" + start + "\")";
  if (read.ok() && job->iteration_ms * 1e-3 * double(job->iterations) > kMaxSeconds) {
    *error = path + ": iterations x iteration_ms is more than " +
             std::to_string(int64_t(kMaxSeconds)) + " s";
  }
  return read.ok();
}

}  // namespace

const char* estimate_name(Estimate estimate) {
  for (const Estimated& e : kEstimates)
    if (e.estimate == estimate) return e.name;
  return "unknown";
}

bool parse_trace(const std::string& json_text, Trace* out, std::string* error) {
  error->clear();
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, ...".
    std::string what = e.what();
    size_t message = what.find("] ");
    *error = "not valid JSON: " + (message == std::string::npos ? what : what.substr(message + 2));
    return false;
  }
  if (!root.is_object()) {
    *error = "the trace must be a JSON object with a \"jobs\" array";
    return false;
  }
  Trace trace;
  FieldReader read(root, "", error);
  trace.description = read.text("description", false, "");
  trace.quantum_ms = read.number("quantum_ms", false, trace.quantum_ms, 0, true, kMaxMs);
  trace.quantum_adapts = read.flag("quantum_adapts", trace.quantum_adapts);
  trace.slice_max_ms = read.number("slice_max_ms", false, trace.slice_max_ms, 0, false, kMaxMs);
  trace.handover_ms = read.number("handover_ms", false, trace.handover_ms, 0, false, kMaxMs);
  trace.exit_ms = read.number("exit_ms", false, trace.exit_ms, 0, false, kMaxMs);
  trace.capacity_mib = uint64_t(read.whole("capacity_mib", false, 0, 1, kMaxMib));
  if (!read.ok()) return false;
  auto jobs = root.find("jobs");
  if (jobs == root.end()) {
    *error = "jobs is missing (an array of jobs)";
    return false;
  }
  if (!jobs->is_array() || jobs->empty()) {
    *error = "jobs must be a non-empty array (got " + jobs->dump().substr(0, 40) + ")";
    return false;
  }
  trace.jobs.resize(jobs->size());
  for (size_t i = 0; i < jobs->size(); ++i)
    if (!parse_job((*jobs)[i], i, &trace.jobs[i], error)) return false;
  if (!check_capacity(trace, error)) return false;
  *out = std::move(trace);
  return true;
}

bool check_capacity(const Trace& trace, std::string* error) {
  if (trace.capacity_mib == 0) return true;
  uint64_t on_gpu = 0;
  for (const TraceJob& job : trace.jobs)
    if (job.at_start == StartState::kResident || job.at_start == StartState::kResidentWithCopy)
      on_gpu += job.persistent_mib + job.ephemeral_mib;
  if (on_gpu > trace.capacity_mib) {
    *error = "the jobs on the GPU at time 0 (at_start resident) need " + std::to_string(on_gpu) +
             " MiB together, more than capacity_mib " + std::to_string(trace.capacity_mib);
    return false;
  }
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& job = trace.jobs[i];
    uint64_t peak = job.persistent_mib + job.ephemeral_mib;
    if (peak <= trace.capacity_mib) continue;
    *error = "jobs[" + std::to_string(i) + "] (" + job.name + ") needs P + E = " +
             std::to_string(peak) + " MiB, more than capacity_mib " +
             std::to_string(trace.capacity_mib) + ": it could never be admitted";
    return false;
  }
  return true;
}

}  // namespace gshare::sim
