// gshare-top's Prometheus metrics over real jobs on the fake driver:
// --prometheus checked by Prometheus's promtool, --serve over HTTP, and a
// real Prometheus server, started by the test, that scrapes --serve and
// answers for a job's memory exactly what gshare-top's JSON says.
//
// promtool and prometheus come from Debian's prometheus package. The cases
// that need one are ctest entries of their own (prometheus_exposition,
// prometheus_server) that exit 77, skipped, with one line saying so where
// it is missing.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

constexpr double kWaitSeconds = 30;

// The executable `name` on PATH (without one, /usr/bin:/bin), or "".
std::string find_program(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path && *path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A case that needs a program the machine lacks is skipped, not passed:
// exit 77, ctest's SKIP_RETURN_CODE of its entry (one case per entry).
std::string require_program(const std::string& name) {
  std::string found = find_program(name);
  if (found.empty()) {
    printf("skipped: %s not found (Debian package prometheus)\n", name.c_str());
    fflush(stdout);
    std::exit(77);
  }
  return found;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A program of the test's in the background, its stdout and stderr in one
// file; stopped (SIGTERM, then SIGKILL after 5 s) at the end of the test,
// failed or not, and killed with the test if the test is killed.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // Opened here, not in the child: a reader never sees an earlier run's log.
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int nothing = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || nothing < 0) throw std::runtime_error("cannot open " + log);
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      // Dies with the test even when the test is killed (a ctest timeout)
      // and no destructor runs.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(nothing, 0);
      dup2(out, 1);
      dup2(out, 2);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out);
    close(nothing);
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }
  ~Background() { stop(SIGTERM, 5); }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  // The exit status (128 + signal if a signal ended it), after sending
  // `signal` and waiting up to `timeout_s`; then SIGKILL. -1: it had to be
  // killed.
  int stop(int signal, double timeout_s) {
    if (status_) return *status_;
    kill(pid_, signal);
    if (!poll_until([&] { return exited(); }, timeout_s)) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      status_ = -1;
    }
    return *status_;
  }
  // Whether it has exited (and then its status is kept).
  bool exited() {
    if (status_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }
  std::string output() const { return read_file(log_); }
  pid_t pid() const { return pid_; }

 private:
  std::string log_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// gshare-top --serve on a port the system picks, read from its first line.
struct Exporter {
  Exporter(const TestGpu& gpu, const std::string& log)
      : process({gshare_top(), "--serve", "127.0.0.1:0", "--dir", gpu.dir()}, log) {
    const std::regex serving("serving http://127\\.0\\.0\\.1:([0-9]+)/metrics");
    std::smatch match;
    std::string text;
    bool up = poll_until(
        [&] {
          text = process.output();
          return std::regex_search(text, match, serving) || process.exited();
        },
        kWaitSeconds);
    if (!up || !std::regex_search(text, match, serving))
      FAIL("gshare-top --serve did not start within " << kWaitSeconds << " s:\n" << text);
    port = std::stoi(match[1]);
  }
  Background process;
  int port = 0;
};

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

// GET http://127.0.0.1:port/path; nothing if there was no answer.
std::optional<Reply> http_get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  httplib::Result result = client.Get(path.c_str());
  if (!result) return std::nullopt;
  return Reply{result->status, result->body, result->get_header_value("Content-Type")};
}

std::string percent_encoded(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      char hex[4];
      snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// A loopback port nobody listens on now (Prometheus takes no port 0).
int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error("cannot find a free port");
  close(s);
  return ntohs(address.sin_port);
}

// The line of `metric` for `pid` in an exposition, or "".
std::string sample_line(const std::string& exposition, const std::string& metric, pid_t pid) {
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(metric + "{", 0) == 0 && line.find("pid=\"" + std::to_string(pid) + "\"") != std::string::npos)
      return line;
  return "";
}

std::string sample_value(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

// Two jobs on one GPU under fair: one that holds a known amount of memory
// and stays as it is, one that trains (launches, syncs, token handovers)
// until released.
struct Jobs {
  explicit Jobs(const TestGpu& gpu)
      : steady(gpu, {{"GSHARE_MEM_LIMIT", "2GiB"}, {"GSHARE_POLICY", "fair"}}),
        busy(gpu, {{"GSHARE_POLICY", "fair"}}) {
    REQUIRE(steady.send("init") == "init ok");
    REQUIRE(steady.send("alloc 300M") == "alloc ok a0");
    REQUIRE(busy.send("init") == "init ok");
    REQUIRE(busy.send("alloc 100M") == "alloc ok a0");
    busy.post("trainfor 120 2 2000 sync 1000");
    await_process(gpu, busy.pid(), "the training job's launches",
                  [](const nlohmann::json& p) { return p["launches"].get<uint64_t>() > 0; });
  }
  ~Jobs() {
    if (!released) busy.release();
  }
  std::string release() {
    released = true;
    return busy.release();
  }
  Client steady, busy;
  bool released = false;
  static constexpr uint64_t kSteadyUsed = 300 * kMiB + kFakeContextBytes;
};

}  // namespace

TEST_CASE("promtool accepts gshare-top --prometheus while jobs run, an unreadable region included",
          "[promtool]") {
  std::string promtool = require_program("promtool");
  TestGpu gpu;
  Jobs jobs(gpu);
  // A file named like a region that is none: reported, never a crash.
  { std::ofstream(gpu.dir() + "/gshare-GPU-not-a-region") << "not a region"; }

  Finished top = run_to_end({gshare_top(), "--prometheus", "--dir", gpu.dir()}, {{"PATH", "/usr/bin:/bin"}});
  INFO("gshare-top --prometheus:\n" << top.out << top.err << "\n" << gpu.state());
  REQUIRE(top.status == 0);
  CHECK(top.err.empty());
  std::string exposition_file = gpu.dir() + "/exposition.prom";
  { std::ofstream(exposition_file) << top.out; }
  Finished check = run_to_end({"/bin/sh", "-c", "\"$0\" check metrics < \"$1\"", promtool, exposition_file},
                              {{"PATH", "/usr/bin:/bin"}});
  INFO("promtool check metrics:\n" << check.out << check.err);
  CHECK(check.status == 0);

  // The steady job's memory, as --json has it, in the exposition too.
  std::string used = sample_line(top.out, "gshare_process_memory_used_bytes", jobs.steady.pid());
  REQUIRE(!used.empty());
  CHECK(std::stoull(sample_value(used)) == Jobs::kSteadyUsed);
  CHECK(std::stoull(sample_value(used)) ==
        gpu.top_process(jobs.steady.pid())["used_bytes"].get<uint64_t>());
  CHECK(std::stoull(sample_value(sample_line(top.out, "gshare_process_memory_quota_bytes",
                                             jobs.steady.pid()))) == 2 * kGiB);
  CHECK(std::stoull(sample_value(sample_line(top.out, "gshare_process_launches_total", jobs.busy.pid()))) > 0);
  CHECK(top.out.find("gshare_gpu_info{gpu=\"GPU-") != std::string::npos);
  CHECK(top.out.find(",policy=\"fair\"} 1") != std::string::npos);
  CHECK(top.out.find("gshare_gpu_region_readable{gpu=\"GPU-not-a-region\",path=\"" + gpu.dir() +
                     "/gshare-GPU-not-a-region\"} 0") != std::string::npos);
  CHECK(top.out.find("gshare_gpu_region_error_info{gpu=\"GPU-not-a-region\"") != std::string::npos);
  CHECK(jobs.release().rfind("train ok", 0) == 0);
}

TEST_CASE("gshare-top --serve answers /metrics, points / to it, 404s the rest, stops on a signal",
          "[serve]") {
  TestGpu gpu;
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  REQUIRE(job.send("alloc 128M") == "alloc ok a0");
  for (int signal : {SIGTERM, SIGINT}) {
    INFO("stopped by signal " << signal);
    Exporter exporter(gpu, gpu.dir() + "/exporter-" + std::to_string(signal) + ".log");
    INFO("exporter's output:\n" << exporter.process.output());

    std::optional<Reply> metrics = http_get(exporter.port, "/metrics");
    REQUIRE(metrics);
    CHECK(metrics->status == 200);
    CHECK(metrics->content_type == "text/plain; version=0.0.4; charset=utf-8");
    std::string used = sample_line(metrics->body, "gshare_process_memory_used_bytes", job.pid());
    INFO(metrics->body);
    REQUIRE(!used.empty());
    CHECK(std::stoull(sample_value(used)) == 128 * kMiB + kFakeContextBytes);

    // A fresh snapshot per scrape: the next one sees the job's new memory.
    REQUIRE(job.send("alloc 64M extra") == "alloc ok extra");
    metrics = http_get(exporter.port, "/metrics");
    REQUIRE(metrics);
    CHECK(std::stoull(sample_value(sample_line(metrics->body, "gshare_process_memory_used_bytes",
                                               job.pid()))) == 192 * kMiB + kFakeContextBytes);
    REQUIRE(job.send("free extra") == "free ok");

    std::optional<Reply> index = http_get(exporter.port, "/");
    REQUIRE(index);
    CHECK(index->status == 200);
    CHECK(index->body.find("href=\"/metrics\"") != std::string::npos);
    std::optional<Reply> elsewhere = http_get(exporter.port, "/metrics/extra");
    REQUIRE(elsewhere);
    CHECK(elsewhere->status == 404);
    CHECK(elsewhere->body.find("/metrics") != std::string::npos);

    double asked = monotonic_ns() / 1e9;
    CHECK(exporter.process.stop(signal, 10) == 0);
    CHECK(monotonic_ns() / 1e9 - asked < 5);
    CHECK_FALSE(http_get(exporter.port, "/metrics").has_value());
  }
}

TEST_CASE("gshare-top --serve with a bad address or a taken port says so in one line", "[serve]") {
  TestGpu gpu;
  const Env env = {{"PATH", "/usr/bin:/bin"}};
  for (const char* bad : {"localhost", "127.0.0.1:99999", ":9400", "::1:9400"}) {
    Finished f = run_to_end({gshare_top(), "--serve", bad, "--dir", gpu.dir()}, env);
    INFO(bad << ": " << f.err);
    CHECK(f.status == 2);
    CHECK(f.out.empty());
    CHECK(f.err.rfind(std::string("gshare-top: --serve ") + bad + " is not valid (", 0) == 0);
    CHECK(std::count(f.err.begin(), f.err.end(), '\n') == 1);
  }
  Finished both = run_to_end({gshare_top(), "--serve", "127.0.0.1:0", "--prometheus"}, env);
  CHECK(both.status == 2);
  CHECK(both.err.find("give one") != std::string::npos);

  // A port another server holds, gshare-top's own included.
  Exporter first(gpu, gpu.dir() + "/first.log");
  std::string taken = "127.0.0.1:" + std::to_string(first.port);
  Finished second = run_to_end({gshare_top(), "--serve", taken, "--dir", gpu.dir()}, env, kWaitSeconds);
  INFO(second.err);
  CHECK(second.status == 1);
  CHECK(second.err == "gshare-top: cannot listen on " + taken + ": Address already in use\n");
  // The first one still answers.
  std::optional<Reply> metrics = http_get(first.port, "/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
}

TEST_CASE("a Prometheus server scraping gshare-top --serve reports a job's memory as gshare-top does",
          "[prometheus_server]") {
  std::string prometheus_program = require_program("prometheus");
  TestGpu gpu;
  Jobs jobs(gpu);
  std::string work = gpu.dir() + "/prometheus";
  REQUIRE(mkdir(work.c_str(), 0755) == 0);
  Exporter exporter(gpu, work + "/exporter.log");

  std::string config = work + "/prometheus.yml";
  {
    std::ofstream(config) << "global:\n"
                             "  scrape_interval: 1s\n"
                             "  scrape_timeout: 1s\n"
                             "  evaluation_interval: 1s\n"
                             "scrape_configs:\n"
                             "  - job_name: gshare\n"
                             "    static_configs:\n"
                             "      - targets: ['127.0.0.1:"
                          << exporter.port << "']\n";
  }
  // The port is free when chosen, but another program may take it before
  // Prometheus does: then another one, three times at most.
  std::optional<Background> prometheus;
  int port = 0;
  auto ready = [&] {
    std::optional<Reply> reply = http_get(port, "/-/ready");
    return reply && reply->status == 200;
  };
  for (int attempt = 0; attempt < 3 && !prometheus; ++attempt) {
    port = free_port();
    prometheus.emplace(std::vector<std::string>{prometheus_program, "--config.file=" + config,
                                                "--storage.tsdb.path=" + work + "/data",
                                                "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                       work + "/prometheus.log");
    bool up = poll_until([&] { return prometheus->exited() || ready(); }, kWaitSeconds);
    if (up && !prometheus->exited()) break;
    std::string log = prometheus->output();
    if (log.find("address already in use") == std::string::npos)
      FAIL("Prometheus did not start within " << kWaitSeconds << " s:\n" << log);
    prometheus.reset();
  }
  REQUIRE(prometheus);

  auto state = [&] {
    std::optional<Reply> metrics = http_get(exporter.port, "/metrics");
    return "--- Prometheus's log:\n" + prometheus->output() + "\n--- the exporter's output:\n" +
           exporter.process.output() + "\n--- its /metrics now:\n" +
           (metrics ? metrics->body : std::string("(no answer)")) + "\n--- " + gpu.state();
  };
  // The one value of an instant query, once Prometheus has scraped it; ""
  // before, or if the answer is not one value.
  auto query = [&](const std::string& expr) -> std::string {
    std::optional<Reply> reply = http_get(port, "/api/v1/query?query=" + percent_encoded(expr));
    if (!reply || reply->status != 200) return "";
    nlohmann::json answer = nlohmann::json::parse(reply->body, nullptr, false);
    if (answer.is_discarded() || answer["status"] != "success") return "";
    const nlohmann::json& result = answer["data"]["result"];
    if (result.size() != 1) return "";
    return result[0]["value"][1].get<std::string>();
  };

  const std::string steady = "{pid=\"" + std::to_string(jobs.steady.pid()) + "\"}";
  std::string from_prometheus;
  uint64_t from_top = 0;
  bool agreed = poll_until(
      [&] {
        from_prometheus = query("gshare_process_memory_used_bytes" + steady);
        if (from_prometheus.empty()) return false;
        nlohmann::json p = gpu.top_process(jobs.steady.pid());
        from_top = p.is_null() ? 0 : p["used_bytes"].get<uint64_t>();
        return from_prometheus == std::to_string(from_top);
      },
      kWaitSeconds);
  if (!agreed)
    FAIL("Prometheus answered '" << from_prometheus << "' for "
                                << steady << ", gshare-top --json " << from_top << ", for "
                                << kWaitSeconds << " s\n" << state());
  CHECK(from_top == Jobs::kSteadyUsed);

  // The rest of the view came through too: the target is up, the GPU's
  // capacity and the training job's counters are there.
  INFO(state());
  CHECK(query("up{job=\"gshare\"}") == "1");
  CHECK(query("gshare_process_memory_quota_bytes" + steady) == std::to_string(2 * kGiB));
  CHECK(query("gshare_gpu_memory_capacity_bytes") == std::to_string(8 * kGiB));
  std::string launches =
      query("gshare_process_launches_total{pid=\"" + std::to_string(jobs.busy.pid()) + "\"}");
  REQUIRE(!launches.empty());
  CHECK(std::stod(launches) > 0);
  CHECK(jobs.release().rfind("train ok", 0) == 0);
}
