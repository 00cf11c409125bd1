// The resource order under stress: random mixes of training-like jobs
// started together, under every policy, over the fake driver. Each job
// keeps P and builds E in pieces each iteration; whatever the policy, the
// iteration length or the way it syncs, every job must finish every
// iteration, no allocation may fail, and the GPU never holds more than C.
// Some jobs stand still on the host inside their first iteration, as a
// first training step does while libraries set up.
// A job that does not finish in time fails the test with every job's
// state from gshare-top and its stderr, not a CI timeout.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

struct StressJob {
  uint64_t persistent = 0;
  uint64_t ephemeral = 0;
  int pieces = 1;
  int iterations = 2;
  long kernel_us = 50;
  const char* sync_mode = "";  // "" (a sync per iteration), "chunksync" or "nosync"
  bool first_gap = false;      // host gaps of 300 ms in the first iteration

  std::string command() const {
    std::ostringstream c;
    c << "memtrain " << iterations << " " << persistent / kMiB << "M " << ephemeral / kMiB << "M "
      << pieces << " 1 " << kernel_us << " 0";
    if (*sync_mode) c << " " << sync_mode;
    if (first_gap) c << " firstgap";
    return c.str();
  }
  double work_s() const { return double(iterations) * pieces * kernel_us / 1e6 + (first_gap ? 0.3 * pieces : 0); }
};

// A mix with sum(P) + max(E) <= C: P and E random, iterations from 1 ms to
// 2 s in 1 to 20 pieces, each job about `work_s` of GPU time.
std::vector<StressJob> random_mix(std::mt19937_64& rng, uint64_t capacity, int count, double work_s) {
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  // Context memory and the fake driver's rounding leave this much aside.
  const double budget = double(capacity - uint64_t(count) * kFakeContextBytes - 512 * kMiB);
  const double max_e = budget * uniform(0.2, 0.6);
  const double all_p = (budget - max_e) * uniform(0.3, 0.95);
  std::vector<double> shares(static_cast<size_t>(count));
  for (double& s : shares) s = uniform(0.2, 1.0);
  double share_sum = 0;
  for (double s : shares) share_sum += s;
  static const char* modes[] = {"", "chunksync", "nosync"};
  std::vector<StressJob> jobs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    StressJob& j = jobs[size_t(i)];
    j.persistent = std::max<uint64_t>(kMiB, uint64_t(all_p * shares[size_t(i)] / share_sum) / kMiB * kMiB);
    double e = i == 0 ? max_e : max_e * uniform(0.1, 1.0);
    j.pieces = int(uniform(1, 21));
    j.ephemeral = std::max<uint64_t>(uint64_t(j.pieces) * kMiB, uint64_t(e) / kMiB * kMiB);
    double iteration_s = std::exp(uniform(std::log(0.001), std::log(2.0)));
    j.kernel_us = std::max(20L, long(iteration_s * 1e6 / j.pieces));
    j.iterations = std::clamp(int(work_s / iteration_s), 2, 40);
    j.sync_mode = modes[std::uniform_int_distribution<int>(0, 2)(rng)];
    // Host gaps between kernels, as in a first step; a job that stands
    // still before it has launched anything is one that allocates and
    // holds, whose lane-mates go on without it.
    j.first_gap = *j.sync_mode && j.pieces <= 6 && std::uniform_int_distribution<int>(0, 2)(rng) == 0;
  }
  std::shuffle(jobs.begin(), jobs.end(), rng);
  return jobs;
}

std::string describe(const std::vector<StressJob>& jobs) {
  std::ostringstream d;
  for (const StressJob& j : jobs) d << "  " << j.command() << "\n";
  return d.str();
}

// Runs one mix on a fresh 8 GiB GPU under `policy`; every job must finish.
void run_mix(const char* policy, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t capacity = 8 * kGiB;
  const int count = std::uniform_int_distribution<int>(2, 8)(rng);
  std::vector<StressJob> mix = random_mix(rng, capacity, count, 0.4);
  TestGpu gpu(capacity);
  const std::string trace = gpu.dir() + "/memory.trace";
  const Env env{{"FAKE_CUDA_MEM_TRACE", trace},
                {"GSHARE_POLICY", policy},
                {"GSHARE_ADMIT_TIMEOUT_S", "300"}};
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < count; ++i) {
    Env job_env = env;
    // Under priority, some jobs outrank others; under fair, weights differ.
    if (std::string(policy) == "priority")
      job_env["GSHARE_PRIORITY"] = std::to_string(std::uniform_int_distribution<int>(-2, 2)(rng));
    if (std::string(policy) == "fair")
      job_env["GSHARE_WEIGHT"] = std::to_string(std::uniform_int_distribution<int>(1, 3)(rng));
    clients.push_back(std::make_unique<Client>(gpu, job_env));
  }
  for (auto& c : clients) REQUIRE(c->send("init") == "init ok");
  // Started within a few milliseconds of each other.
  for (int i = 0; i < count; ++i) clients[size_t(i)]->post(mix[size_t(i)].command());
  double total_work = 0;
  for (const StressJob& j : mix) total_work += j.work_s();
  const double allowed_s = 30 + 4 * total_work;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> replies(static_cast<size_t>(count));
  bool hung = false;
  for (int i = 0; i < count; ++i) {
    double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    replies[size_t(i)] = clients[size_t(i)]->reply(std::max(0.1, allowed_s - spent));
    if (replies[size_t(i)].empty()) hung = true;
  }
  INFO("policy " << policy << ", seed " << seed << ", " << count << " jobs:\n" << describe(mix));
  if (hung) FAIL("a job did not finish within " << allowed_s << " s; " << gpu.state());
  for (int i = 0; i < count; ++i) {
    INFO("job " << i << ": " << mix[size_t(i)].command() << "\n" << clients[size_t(i)]->stderr_text());
    CHECK(replies[size_t(i)].rfind("memtrain ok " + std::to_string(mix[size_t(i)].iterations), 0) == 0);
  }
  std::vector<uint64_t> used = read_memory_trace(trace);
  REQUIRE_FALSE(used.empty());
  CHECK(*std::max_element(used.begin(), used.end()) <= capacity);
}

// Five seeds a policy; GSHARE_STRESS_SEED moves them all (CI may set it
// per run, so that each run tries other mixes).
uint64_t base_seed() {
  const char* text = getenv("GSHARE_STRESS_SEED");
  return text && *text ? std::strtoull(text, nullptr, 10) : 20261126;
}

void run_policy(const char* policy) {
  for (uint64_t k = 0; k < 5; ++k) {
    DYNAMIC_SECTION(policy << " seed " << base_seed() + k) { run_mix(policy, base_seed() + k); }
  }
}

}  // namespace

TEST_CASE("random mixes that fit one lane all finish under fifo", "[stress][fifo]") { run_policy("fifo"); }
TEST_CASE("random mixes that fit one lane all finish under fair", "[stress][fair]") { run_policy("fair"); }
TEST_CASE("random mixes that fit one lane all finish under srtf", "[stress][srtf]") { run_policy("srtf"); }
TEST_CASE("random mixes that fit one lane all finish under priority", "[stress][priority]") {
  run_policy("priority");
}
TEST_CASE("random mixes that fit one lane all finish under pack", "[stress][pack]") { run_policy("pack"); }

TEST_CASE("mixes that do not fit one lane finish one after another, or fail with the condition named",
          "[stress][infeasible]") {
  // sum(P) + max(E) = 3 x 2.5 + 2 GiB > 8 GiB: at most two of these jobs
  // fit at once. None may hang: each finishes once another has ended, or
  // its allocation fails after GSHARE_ADMIT_TIMEOUT_S naming what failed.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "40"}};
  std::vector<std::unique_ptr<Client>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(std::make_unique<Client>(gpu, env));
  for (auto& j : jobs) REQUIRE(j->send("init") == "init ok");
  for (auto& j : jobs) j->post("memtrain 8 2560M 2G 4 1 20000 0 chunksync");
  int finished = 0;
  for (auto& j : jobs) {
    std::string reply = j->reply(120);
    INFO(reply << "\n" << j->stderr_text());
    REQUIRE_FALSE(reply.empty());  // no job hangs
    if (reply.rfind("memtrain ok 8", 0) == 0) {
      ++finished;
    } else {
      CHECK(reply.rfind("memtrain err 2", 0) == 0);
      CHECK(j->stderr_text().find("gave up waiting") != std::string::npos);
    }
  }
  CHECK(finished >= 2);
}

TEST_CASE("kill -9 of a job that holds its lane's space lets the job waiting for it go on within a second",
          "[stress][kill]") {
  // The holder builds 5 GiB in 10 pieces with a long kernel between them;
  // its lane-mate waits for the lane's space. Killed mid-iteration, its
  // memory and its lane come back, and the waiter starts at once.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "60"}};
  Client holder(gpu, env), waiter(gpu, env);
  REQUIRE(holder.send("init") == "init ok");
  REQUIRE(waiter.send("init") == "init ok");
  holder.post("memtrain 100 512M 5G 10 1 300000 0 chunksync");
  // Mid-iteration: it holds ephemeral memory beyond the slack.
  await_process(gpu, holder.pid(), "the holder to be mid-iteration", [](const nlohmann::json& p) {
    return p["reserved_bytes"].get<uint64_t>() >= 2 * kGiB;
  });
  waiter.post("memtrain 2 512M 5G 2 1 1000");
  nlohmann::json waiting = await_process(gpu, waiter.pid(), "the waiter to wait for the holder's lane space",
                                         [&](const nlohmann::json& p) {
                                           return p["admission"] == "waiting for lane" &&
                                                  p["blocked_by_pid"] == holder.pid();
                                         });
  CHECK(waiting["reserved_bytes"].get<uint64_t>() < 2 * kGiB);  // still waiting for its turn
  holder.kill9();
  auto killed = std::chrono::steady_clock::now();
  std::string reply = waiter.reply(20);
  double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  INFO(reply << "\n" << waiter.stderr_text());
  CHECK(reply.rfind("memtrain ok 2", 0) == 0);
  CHECK(after < 1.0);
}

namespace {
// CPU seconds process `pid` has used so far (/proc/PID/stat: utime, stime).
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
}
}  // namespace

TEST_CASE("jobs waiting for their lane's space sleep, and do not pass the token among themselves",
          "[stress][waiters]") {
  // The holder builds 5 GiB in 10 pieces and spends 300 ms on the host
  // after each (a first step's set-up), standing still: it loses the
  // token, and keeps its lane's space. Two lane-mates wait for that space.
  // The token is of no use to them until the holder's iteration ends:
  // granted to them, each would fail, step aside and hand it to the other,
  // a core busy passing it.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "60"}, {"GSHARE_POLICY", "fifo"}};
  Client holder(gpu, env), first(gpu, env), second(gpu, env);
  for (Client* c : {&holder, &first, &second}) REQUIRE(c->send("init") == "init ok");
  holder.post("memtrain 1 512M 5G 10 1 1000 0 chunksync firstgap");
  await_process(gpu, holder.pid(), "the holder to be mid-iteration", [](const nlohmann::json& p) {
    return p["reserved_bytes"].get<uint64_t>() >= 2 * kGiB;
  });
  first.post("memtrain 2 512M 5G 2 1 1000");
  second.post("memtrain 2 512M 5G 2 1 1000");
  await(gpu, "both lane-mates to wait for the holder's lane space", [&] {
    int waiting = 0;
    const nlohmann::json seen = gpu.top_gpu();
    for (const nlohmann::json& p : seen["processes"])
      waiting += p["admission"] == "waiting for lane" && p["blocked_by_pid"] == holder.pid();
    return waiting == 2;
  });
  const double before = cpu_seconds(first.pid()) + cpu_seconds(second.pid());
  const auto start = std::chrono::steady_clock::now();
  std::string reply = holder.reply(60);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double used = cpu_seconds(first.pid()) + cpu_seconds(second.pid()) - before;
  INFO("the waiters used " << used << " s of CPU in " << waited << " s");
  CHECK(reply.rfind("memtrain ok 1", 0) == 0);
  CHECK(waited > 1.0);  // the holder had most of its iteration left to run
  CHECK(used < 0.1 * waited);
  for (Client* c : {&first, &second}) CHECK(c->reply(60).rfind("memtrain ok 2", 0) == 0);
}
