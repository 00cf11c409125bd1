// gshare-top's Prometheus exposition, rendered from snapshots written by
// hand: the families and their units, exact values, label escaping, a region
// that cannot be read, no region at all; and the Grafana dashboard, whose
// queries may only name metrics the exporter emits.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shm/snapshot.h"
#include "tools/top_cli.h"
#include "tools/top_prometheus.h"

using namespace gshare;
using gshare::top::prometheus_label_value;
using gshare::top::prometheus_sample_names;
using gshare::top::render_prometheus;
using gshare::top::short_command;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMs = 1000000;
constexpr const char* kUuid = "GPU-6d3ae12c-1111-2222-3333-444444444444";
constexpr const char* kDir = "/dev/shm";

shm::ProcessSnapshot process(int32_t pid, uint32_t slot, const std::string& command) {
  shm::ProcessSnapshot p;
  p.pid = pid;
  p.slot = slot;
  p.command = command;
  return p;
}

// A GPU with every figure set, two processes on it, one of them after a
// switch and an iteration (the figures absent before those).
shm::GpuSnapshot busy_gpu() {
  shm::GpuSnapshot gpu;
  gpu.path = std::string(kDir) + "/gshare-" + kUuid;
  gpu.uuid = kUuid;
  gpu.capacity_bytes = 8 * kGiB;
  gpu.reserved_bytes = 3 * kGiB;
  gpu.safety_bytes = 9 * kGiB;
  gpu.policy = "fair";
  gpu.handovers = 7;
  gpu.switches = 3;
  gpu.switch_ns_total = 1500 * 1000;  // 1.5 ms
  gpu.switch_ns_max = 1 * kMs;
  gpu.admission_timeouts = 2;
  gpu.admission_waits = 7;
  gpu.memory_waiters = 1;
  gpu.lanes.resize(2);

  shm::ProcessSnapshot trainer = process(1234, 0, "/usr/bin/python3 train.py --epochs 3");
  trainer.used_bytes = 576 * kMiB;
  trainer.quota_bytes = 2 * kGiB;
  trainer.persistent_bytes = 320 * kMiB;
  trainer.ephemeral_bytes = 256 * kMiB;
  trainer.memory_provisional = false;
  trainer.job_state = shm::kJobRunning;
  trainer.holds_token = true;
  trainer.share_10s = 0.75;
  trainer.gpu_busy_share = 0.2;
  trainer.waiting_ns = 2500 * kMs;  // 2.5 s
  trainer.served_ns = 1;            // 1 ns: nine decimals
  trainer.switches = 2;
  trainer.switch_ns = 1200 * 1000;
  trainer.launches = 5000;
  trainer.iterations = 40;
  trainer.iteration_ns = 125 * kMs;
  trainer.admission_waits = 3;
  trainer.admission_timeouts = 1;
  gpu.processes.push_back(trainer);

  shm::ProcessSnapshot server = process(1300, 1, "server");
  server.used_bytes = 64 * kMiB;
  server.quota_bytes = 8 * kGiB;
  server.job_state = shm::kJobWaiting;
  gpu.processes.push_back(server);
  return gpu;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines_of(text))
    if (l == line) return true;
  return false;
}

// The metric name of a sample line.
std::string sample_name(const std::string& line) { return line.substr(0, line.find_first_of("{ ")); }

// The exposition's shape, as Prometheus's parser wants it: every family
// has one HELP and one TYPE line, then only its own samples, and comes
// once; a counter ends in _total, a summary has only _sum and _count.
void check_shape(const std::string& text) {
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  std::set<std::string> seen;
  std::string family, type;
  std::vector<std::string> lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    INFO(line);
    if (line.rfind("# HELP ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      CHECK(seen.insert(family).second);
      REQUIRE(i + 1 < lines.size());
      CHECK(lines[i + 1].rfind("# TYPE " + family + " ", 0) == 0);
      type = lines[i + 1].substr(8 + family.size());
      CHECK(family.rfind("gshare_", 0) == 0);
      if (type == "counter") CHECK(family.size() > 6);
      if (type == "counter") CHECK(family.substr(family.size() - 6) == "_total");
      ++i;
      continue;
    }
    REQUIRE(!family.empty());
    std::string name = sample_name(line);
    if (type == "summary")
      CHECK((name == family + "_sum" || name == family + "_count"));
    else
      CHECK(name == family);
  }
}

}  // namespace

TEST_CASE("the exposition has a family per metric, in base units, with the regions' figures") {
  std::string text = render_prometheus({busy_gpu()}, kDir, "");
  INFO(text);
  check_shape(text);
  const std::string gpu = std::string("gpu=\"") + kUuid + "\"";
  const std::string trainer = gpu + ",pid=\"1234\",slot=\"0\",command=\"python3\"";
  const std::string server = gpu + ",pid=\"1300\",slot=\"1\",command=\"server\"";

  CHECK(has_line(text, "gshare_directory_readable{dir=\"/dev/shm\"} 1"));
  CHECK(has_line(text, "gshare_gpu_region_readable{" + gpu + ",path=\"/dev/shm/gshare-" + kUuid +
                           "\"} 1"));
  CHECK(has_line(text, "gshare_gpu_info{" + gpu + ",policy=\"fair\"} 1"));
  CHECK(has_line(text, "gshare_gpu_memory_capacity_bytes{" + gpu + "} 8589934592"));
  CHECK(has_line(text, "gshare_gpu_memory_reserved_bytes{" + gpu + "} 3221225472"));
  CHECK(has_line(text, "gshare_gpu_safety_bytes{" + gpu + "} 9663676416"));
  CHECK(has_line(text, "gshare_gpu_processes{" + gpu + "} 2"));
  CHECK(has_line(text, "gshare_gpu_lanes{" + gpu + "} 2"));
  CHECK(has_line(text, "gshare_gpu_memory_waiters{" + gpu + "} 1"));
  CHECK(has_line(text, "gshare_gpu_handovers_total{" + gpu + "} 7"));
  CHECK(has_line(text, "gshare_gpu_switch_seconds_sum{" + gpu + "} 0.0015"));
  CHECK(has_line(text, "gshare_gpu_switch_seconds_count{" + gpu + "} 3"));
  CHECK(has_line(text, "gshare_gpu_switch_max_seconds{" + gpu + "} 0.001"));
  CHECK(has_line(text, "gshare_gpu_admission_timeouts_total{" + gpu + "} 2"));
  CHECK(has_line(text, "gshare_gpu_admission_waits_total{" + gpu + "} 7"));
  CHECK(text.find("gshare_gpu_region_error_info{") == std::string::npos);

  CHECK(has_line(text, "gshare_process_memory_used_bytes{" + trainer + "} 603979776"));
  CHECK(has_line(text, "gshare_process_memory_quota_bytes{" + trainer + "} 2147483648"));
  CHECK(has_line(text, "gshare_process_memory_persistent_bytes{" + trainer + "} 335544320"));
  CHECK(has_line(text, "gshare_process_memory_ephemeral_bytes{" + trainer + "} 268435456"));
  CHECK(has_line(text, "gshare_process_memory_provisional{" + trainer + "} 0"));
  CHECK(has_line(text, "gshare_process_memory_provisional{" + server + "} 1"));
  // The enum pattern: every state a sample, the current one 1.
  CHECK(has_line(text, "gshare_process_state{" + trainer + ",state=\"running\"} 1"));
  CHECK(has_line(text, "gshare_process_state{" + trainer + ",state=\"waiting\"} 0"));
  CHECK(has_line(text, "gshare_process_state{" + trainer + ",state=\"idle\"} 0"));
  CHECK(has_line(text, "gshare_process_state{" + server + ",state=\"waiting\"} 1"));
  CHECK(has_line(text, "gshare_process_holds_token{" + trainer + "} 1"));
  CHECK(has_line(text, "gshare_process_gpu_share_ratio{" + trainer + "} 0.75"));
  // Measured only for a job that asks to share turns: none for the server.
  CHECK(has_line(text, "gshare_process_gpu_busy_ratio{" + trainer + "} 0.2"));
  CHECK(text.find("gshare_process_gpu_busy_ratio{" + server) == std::string::npos);
  CHECK(has_line(text, "gshare_process_token_wait_seconds_total{" + trainer + "} 2.5"));
  CHECK(has_line(text, "gshare_process_token_held_seconds_total{" + trainer + "} 0.000000001"));
  CHECK(has_line(text, "gshare_process_token_held_seconds_total{" + server + "} 0"));
  CHECK(has_line(text, "gshare_process_switch_seconds_sum{" + trainer + "} 0.0012"));
  CHECK(has_line(text, "gshare_process_switch_seconds_count{" + trainer + "} 2"));
  CHECK(has_line(text, "gshare_process_launches_total{" + trainer + "} 5000"));
  CHECK(has_line(text, "gshare_process_iterations_total{" + trainer + "} 40"));
  CHECK(has_line(text, "gshare_process_iteration_seconds{" + trainer + "} 0.125"));
  CHECK(has_line(text, "gshare_process_admission_waits_total{" + trainer + "} 3"));
  CHECK(has_line(text, "gshare_process_admission_timeouts_total{" + trainer + "} 1"));
  // No iteration detected yet: no sample, rather than a measured 0.
  CHECK(text.find("gshare_process_iteration_seconds{" + server) == std::string::npos);
}

TEST_CASE("a figure with no value yet has no sample, and a family without samples no lines") {
  shm::GpuSnapshot gpu = busy_gpu();
  gpu.switches = 0;
  gpu.switch_ns_total = 0;
  gpu.processes.clear();
  std::string text = render_prometheus({gpu}, kDir, "");
  INFO(text);
  check_shape(text);
  CHECK(text.find("gshare_gpu_switch_max_seconds") == std::string::npos);
  CHECK(text.find("gshare_process_") == std::string::npos);
  CHECK(has_line(text, std::string("gshare_gpu_switch_seconds_count{gpu=\"") + kUuid + "\"} 0"));
}

TEST_CASE("label values escape backslash, quote and newline, and are valid UTF-8") {
  CHECK(prometheus_label_value("plain") == "plain");
  CHECK(prometheus_label_value("a\"b") == "a\\\"b");
  CHECK(prometheus_label_value("a\\b") == "a\\\\b");
  CHECK(prometheus_label_value("a\nb") == "a\\nb");
  CHECK(prometheus_label_value("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80") ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80");
  // A stray byte, a truncated sequence, an overlong '/', a surrogate.
  CHECK(prometheus_label_value("a\xFFz") == "a\xEF\xBF\xBDz");
  CHECK(prometheus_label_value("a\xC3") == "a\xEF\xBF\xBD");
  CHECK(prometheus_label_value("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(prometheus_label_value("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");

  shm::GpuSnapshot gpu = busy_gpu();
  gpu.processes.resize(1);
  gpu.processes[0].command = "/opt/we\"ird\\na\nme\xFF --flag";
  std::string text = render_prometheus({gpu}, "/tmp/a \"dir\"", "");
  INFO(text);
  check_shape(text);
  CHECK(text.find("command=\"we\\\"ird\\\\na\\nme\xEF\xBF\xBD\"") != std::string::npos);
  CHECK(has_line(text, "gshare_directory_readable{dir=\"/tmp/a \\\"dir\\\"\"} 1"));
}

TEST_CASE("a command line's program name is the last part of its first word") {
  CHECK(short_command("/usr/bin/python3 train.py --lr 0.1") == "python3");
  CHECK(short_command("server") == "server");
  CHECK(short_command("./a.out") == "a.out");
  CHECK(short_command("") == "");
  CHECK(short_command("/") == "/");
}

TEST_CASE("a region that cannot be read is a metric with its error, next to a readable one") {
  shm::GpuSnapshot broken;
  broken.path = "/dev/shm/gshare-GPU-broken";
  broken.error = "/dev/shm/gshare-GPU-broken: not a gshare region (\"bad\" magic)";
  std::string text = render_prometheus({broken, busy_gpu()}, kDir, "");
  INFO(text);
  check_shape(text);
  CHECK(has_line(text,
                 "gshare_gpu_region_readable{gpu=\"GPU-broken\",path=\"/dev/shm/gshare-GPU-broken\"} 0"));
  CHECK(has_line(text,
                 "gshare_gpu_region_error_info{gpu=\"GPU-broken\",path=\"/dev/shm/gshare-GPU-broken\","
                 "error=\"not a gshare region (\\\"bad\\\" magic)\"} 1"));
  CHECK(has_line(text, std::string("gshare_gpu_region_readable{gpu=\"") + kUuid +
                           "\",path=\"/dev/shm/gshare-" + kUuid + "\"} 1"));
  // No figures for the broken one: they would be zeros, not readings.
  CHECK(text.find("gshare_gpu_memory_capacity_bytes{gpu=\"GPU-broken\"") == std::string::npos);
  CHECK(text.find("gshare_gpu_info{gpu=\"GPU-broken\"") == std::string::npos);
}

TEST_CASE("no region: only the directory's line, and 0 for a directory that cannot be read") {
  std::string text = render_prometheus({}, kDir, "");
  CHECK(text ==
        "# HELP gshare_directory_readable 1 if the directory of the regions could be read; 0 (no "
        "regions seen) if not.\n"
        "# TYPE gshare_directory_readable gauge\n"
        "gshare_directory_readable{dir=\"/dev/shm\"} 1\n");
  std::string missing = render_prometheus({}, "/nonexistent", "No such file or directory");
  CHECK(has_line(missing, "gshare_directory_readable{dir=\"/nonexistent\"} 0"));
  check_shape(missing);
}

TEST_CASE("the sample names listed are exactly those a full exposition carries") {
  shm::GpuSnapshot broken;
  broken.path = "/dev/shm/gshare-GPU-broken";
  broken.error = "unreadable";
  std::string text = render_prometheus({busy_gpu(), broken}, kDir, "");
  std::set<std::string> emitted;
  for (const std::string& line : lines_of(text))
    if (line.rfind("#", 0) != 0) emitted.insert(sample_name(line));
  std::vector<std::string> listed = prometheus_sample_names();
  CHECK(std::set<std::string>(listed.begin(), listed.end()) == emitted);
  CHECK(listed.size() == emitted.size());
}

TEST_CASE("promtool accepts the exposition, escapes and an unreadable region included") {
  // Prometheus's own parser and linter, where the machine has it (the
  // prometheus_exposition entry checks gshare-top's real output).
  if (system("command -v promtool >/dev/null 2>&1") != 0) {
    WARN("promtool not found (Debian package prometheus): not checked here");
    return;
  }
  shm::GpuSnapshot gpu = busy_gpu();
  gpu.processes[1].command = "/opt/we\"ird\\na\nme\xFF --flag";
  shm::GpuSnapshot broken;
  broken.path = "/dev/shm/gshare-GPU-broken";
  broken.error = "line one\nline \"two\"";
  std::string text = render_prometheus({gpu, broken}, kDir, "");
  FILE* promtool = popen("promtool check metrics 2>&1", "w");
  REQUIRE(promtool);
  fwrite(text.data(), 1, text.size(), promtool);
  int status = pclose(promtool);
  INFO(text);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the Grafana dashboard queries only metrics the exporter emits", "[grafana]") {
  std::ifstream file(std::string(GSHARE_SOURCE_DIR) + "/tools/grafana/gshare-dashboard.json");
  REQUIRE(file);
  nlohmann::json dashboard = nlohmann::json::parse(file);  // throws on invalid JSON
  std::vector<std::string> listed = prometheus_sample_names();
  std::set<std::string> names(listed.begin(), listed.end());
  // Every panel's queries ("expr"), and the template variables' queries.
  std::vector<std::string> exprs;
  std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& node) {
    if (node.is_object()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (it.key() == "expr" && it.value().is_string()) exprs.push_back(it.value().get<std::string>());
        else collect(it.value());
      }
    } else if (node.is_array()) {
      for (const nlohmann::json& child : node) collect(child);
    }
  };
  collect(dashboard["panels"]);
  for (const nlohmann::json& variable : dashboard["templating"]["list"]) {
    if (variable.value("type", "") != "query") continue;
    const nlohmann::json& query = variable["query"];
    exprs.push_back(query.is_object() ? query.value("query", "") : query.get<std::string>());
  }
  REQUIRE(exprs.size() >= 8);
  const std::regex metric("gshare_[a-z0-9_]+");
  size_t named = 0;
  for (const std::string& expr : exprs) {
    INFO(expr);
    bool names_one = false;
    for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric); it != std::sregex_iterator();
         ++it) {
      INFO(it->str());
      CHECK(names.count(it->str()) == 1);
      names_one = true;
    }
    CHECK(names_one);
    named += names_one;
  }
  CHECK(named == exprs.size());
}

TEST_CASE("--serve takes HOST:PORT, an IPv6 address in brackets, and refuses the rest") {
  using gshare::top::ListenAddress;
  using gshare::top::parse_listen_address;
  ListenAddress address;
  std::string error;
  REQUIRE(parse_listen_address("127.0.0.1:9400", &address, &error));
  CHECK(address.host == "127.0.0.1");
  CHECK(address.port == 9400);
  REQUIRE(parse_listen_address("[::1]:0", &address, &error));
  CHECK(address.host == "::1");
  CHECK(address.port == 0);
  REQUIRE(parse_listen_address("localhost:65535", &address, &error));
  CHECK(address.host == "localhost");
  CHECK(address.port == 65535);
  for (const char* bad : {"9400", "127.0.0.1", "127.0.0.1:", ":9400", "127.0.0.1:65536",
                          "127.0.0.1:-1", "127.0.0.1:94x0", "127.0.0.1:1234567", "::1:9400",
                          "[::1]9400", "[::1", "[]:9400", "[1.2.3.4]:9400", "a b:9400", ""}) {
    INFO(bad);
    error.clear();
    CHECK_FALSE(parse_listen_address(bad, &address, &error));
    CHECK(error.rfind(std::string("--serve ") + bad + " is not valid (", 0) == 0);
    CHECK(error.find('\n') == std::string::npos);
  }
}
