// Kill soak: jobs in every state (allocating, waiting for memory or for
// their lane, holding the token, launching, syncing) killed with SIGKILL at
// random moments, again and again. The others go on, nothing leaks, and
// every kill is cleaned up within a second. GSHARE_KILL_SOAK sets the
// number of kills (CI runs a reduced number; a nightly run 1000).
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

int kills_wanted() {
  const char* text = getenv("GSHARE_KILL_SOAK");
  return text && *text ? std::max(1, atoi(text)) : 60;
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("jobs killed at random moments leave nothing behind and never stop the others", "[soak]") {
  TestGpu gpu(8 * kGiB);
  std::mt19937 random(20261126);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "30"}};
  static const char* work[] = {
      "memtrain 1000 512M 2G 4 1 2000 0 chunksync",  // a lane's holder, mid-iteration
      "memtrain 1000 1G 3G 2 1 5000 0",              // waits for its lane's space
      "trainfor 60 2 1000 sync 0",                   // launches and syncs
      "trainfor 60 1 500 nosync 0",                  // launches, never syncs
      "memtrain 1000 2G 1G 8 1 300 0 nosync",        // allocates in many pieces
  };
  constexpr int kRunning = 4;
  std::vector<std::unique_ptr<Client>> jobs;
  auto start_one = [&] {
    auto c = std::make_unique<Client>(gpu, env);
    REQUIRE(c->send("init") == "init ok");
    c->post(work[random() % (sizeof work / sizeof *work)]);
    jobs.push_back(std::move(c));
  };
  for (int i = 0; i < kRunning; ++i) start_one();
  const int kills = kills_wanted();
  double worst_recovery_s = 0;
  for (int k = 0; k < kills; ++k) {
    // The moment of the kill, at random (not a wait for anything).
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + random() % 200));
    size_t victim = random() % jobs.size();
    pid_t pid = jobs[victim]->pid();
    jobs[victim]->kill9();
    jobs.erase(jobs.begin() + long(victim));
    // Gone from the region's view, its bytes back, within a second.
    auto killed = std::chrono::steady_clock::now();
    await(gpu, "kill " + std::to_string(k) + " of pid " + std::to_string(pid) + " to be cleaned up", [&] {
      const nlohmann::json seen = gpu.top_gpu();  // kept: the loop reads into it
      for (const auto& p : seen["processes"])
        if (p["pid"] == pid) return false;
      return true;
    }, 3);
    worst_recovery_s = std::max(worst_recovery_s, since(killed));
    start_one();
  }
  INFO("worst recovery " << worst_recovery_s << " s over " << kills << " kills");
  CHECK(worst_recovery_s < 1.0);
  // The survivors go on: the GPU still runs their kernels.
  auto launched = [&] {
    uint64_t total = 0;
    nlohmann::json top = gpu.top_json();
    for (const auto& p : top["gpus"][0]["processes"]) total += p["launches"].get<uint64_t>();
    return total;
  };
  uint64_t before = launched();
  await(gpu, "the survivors to launch more", [&] { return launched() > before; }, 10);
  // Once they are gone too, one process can take the whole GPU: nothing leaked.
  for (auto& j : jobs) j->kill9();
  jobs.clear();
  Client last(gpu);
  REQUIRE(last.send("init") == "init ok");
  auto filled = words(last.send("fill 64M", 30));
  REQUIRE(filled.size() == 4);
  CHECK(std::stoull(filled[1]) == 8 * kGiB - kFakeContextBytes);
  nlohmann::json top = gpu.top_json();
  CHECK(top["gpus"][0]["processes"].size() == 1);
  WARN("kill soak: " << kills << " kills, worst recovery " << worst_recovery_s << " s");
}
