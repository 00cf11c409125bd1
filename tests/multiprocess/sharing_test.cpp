// Processes share one GPU's capacity through the arbiter, and a process
// that dies in any state gives its bytes back to the others.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
std::vector<std::string> region_files(const TestGpu& gpu) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(gpu.dir()))
    if (entry.path().filename().string().rfind("gshare-", 0) == 0) paths.push_back(entry.path());
  return paths;
}
}  // namespace

TEST_CASE("two processes share the capacity") {
  TestGpu gpu(8 * kGiB);
  // b is refused at once rather than waiting to be admitted (admission_test.cpp).
  Client a(gpu), b(gpu, {{"GSHARE_ADMIT_TIMEOUT_S", "0"}});
  REQUIRE(a.send("init") == "init ok");
  REQUIRE(b.send("init") == "init ok");
  CHECK(a.send("alloc 5G big") == "alloc ok big");
  CHECK(b.send("alloc 3G x") == "alloc err 2");  // 5G + 3G + two contexts > 8G
  CHECK(b.stderr_text().find("the GPU is full") != std::string::npos);  // gshare said no, not the driver
  auto info = words(b.send("meminfo"));
  REQUIRE(info.size() == 3);
  CHECK(std::stoull(info[1]) == 8 * kGiB - 5 * kGiB - 2 * kFakeContextBytes);
  CHECK(b.send("alloc 2G y") == "alloc ok y");
  CHECK(a.send("free big") == "free ok");
  CHECK(b.send("alloc 3G z") == "alloc ok z");
}

TEST_CASE("kill -9 of a process holding memory returns its bytes within a second") {
  TestGpu gpu(8 * kGiB);
  Client holder(gpu), waiter(gpu, {{"GSHARE_ADMIT_TIMEOUT_S", "0"}});
  REQUIRE(holder.send("init") == "init ok");
  REQUIRE(waiter.send("init") == "init ok");
  REQUIRE(holder.send("alloc 6G") == "alloc ok a0");
  REQUIRE(waiter.send("alloc 4G w") == "alloc err 2");
  holder.kill9();
  auto killed = std::chrono::steady_clock::now();
  // The waiter's own upkeep thread reclaims the dead slot; check through the
  // view (no allocation to trigger reclaiming on demand).
  double reclaimed_after = -1;
  while (seconds_since(killed) < 3) {
    auto info = words(waiter.send("meminfo"));
    if (info.size() == 3 && std::stoull(info[1]) >= 7 * kGiB) {
      reclaimed_after = seconds_since(killed);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  INFO("reclaimed after " << reclaimed_after << " s");
  CHECK(reclaimed_after >= 0);
  CHECK(reclaimed_after < 1.0);
  CHECK(waiter.send("alloc 4G w") == "alloc ok w");
}

TEST_CASE("a killed process's bytes are reclaimed on demand by an allocation") {
  TestGpu gpu(8 * kGiB);
  {
    Client holder(gpu);
    REQUIRE(holder.send("init") == "init ok");
    REQUIRE(holder.send("alloc 6G") == "alloc ok a0");
    holder.kill9();
  }
  Client next(gpu);
  REQUIRE(next.send("init") == "init ok");
  CHECK(next.send("alloc 6G") == "alloc ok a0");
}

TEST_CASE("200 short-lived processes, some killed, leak nothing") {
  TestGpu gpu(8 * kGiB);
  std::mt19937 random(7);
  constexpr int kProcesses = 200, kAtOnce = 10;
  // A newcomer's first allocation waits for the idle token holder (the
  // previous process) to give the GPU up: after 5 ms here, not the default
  // 100 ms, which would be most of this test's time.
  const Env env{{"GSHARE_MEM_LIMIT", "700M"}, {"GSHARE_IDLE_MS", "5"}};
  int killed = 0;
  for (int started = 0; started < kProcesses; started += kAtOnce) {
    std::vector<std::unique_ptr<Client>> batch;
    for (int i = 0; i < kAtOnce; ++i) {
      batch.push_back(std::make_unique<Client>(gpu, env));
      REQUIRE(batch.back()->send("init") == "init ok");
      batch.back()->send("alloc " + std::to_string(50 + random() % 400) + "M");
      batch.back()->send("async " + std::to_string(1 + random() % 60) + "M");
    }
    for (auto& c : batch) {
      if (random() % 3 == 0) {
        c->kill9();  // dies holding memory
        ++killed;
      } else if (random() % 2 == 0) {
        c->finish();  // exits holding memory
      } else {
        ++killed;  // destroyed below, SIGKILL
      }
    }
  }
  // Everything must be back: one process can fill the whole GPU.
  Client last(gpu);
  REQUIRE(last.send("init") == "init ok");
  auto filled = words(last.send("fill 64M"));
  REQUIRE(filled.size() == 4);
  CHECK(std::stoull(filled[1]) == 8 * kGiB - kFakeContextBytes);
  auto top = gpu.top_json();
  REQUIRE(top["gpus"].size() == 1);
  CHECK(top["gpus"][0]["processes"].size() == 1);
  // A process killed while it held the region's lock (its upkeep thread
  // reclaiming a sibling that died just before, on a loaded machine) is
  // repaired after: at most one repair a kill.
  CHECK(top["gpus"][0]["repairs"] <= killed);
}

TEST_CASE("a region of a foreign version: one message and the quota still hold while a process uses it; "
          "once none does, it is replaced") {
  TestGpu gpu;
  auto first = std::make_unique<Client>(gpu);
  REQUIRE(first->send("init") == "init ok");
  REQUIRE(first->send("alloc 1M") == "alloc ok a0");
  // Rewrite the layout version of the region the first process created and
  // still holds, as a process of another gshare version would have it.
  std::string region = region_files(gpu).at(0);
  FILE* f = fopen(region.c_str(), "r+b");
  REQUIRE(f);
  fseek(f, 8, SEEK_SET);
  uint32_t foreign = 999;
  fwrite(&foreign, sizeof foreign, 1, f);
  fclose(f);
  Client client(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("alloc 600M") == "alloc ok a0");
  CHECK(client.send("alloc 600M") == "alloc err 2");
  std::string err = client.stderr_text();
  CHECK(err.find("another gshare version") != std::string::npos);
  CHECK(err.find("a process of that version uses it") != std::string::npos);
  CHECK(err.find("runs alone") != std::string::npos);
  // Once its last process has gone, the next process removes it and
  // creates a region of its own layout, which others join.
  CHECK(first->finish() == 0);
  Client later(gpu, {{"GSHARE_LOG", "info"}}), other(gpu);
  REQUIRE(later.send("init") == "init ok");
  REQUIRE(other.send("init") == "init ok");
  CHECK(later.send("alloc 1M") == "alloc ok a0");
  CHECK(other.send("alloc 1M") == "alloc ok a0");
  CHECK(later.stderr_text().find("a region of layout 999 that no process used") != std::string::npos);
  CHECK(later.stderr_text().find("runs alone") == std::string::npos);
  CHECK(other.stderr_text().find("runs alone") == std::string::npos);
  const nlohmann::json top = gpu.top_json();
  INFO(top.dump());
  REQUIRE(top["gpus"].size() == 1);
  CHECK(top["gpus"][0]["processes"].size() == 2);  // the two new ones; the one alone is in no region
  CHECK(region_files(gpu).size() == 1);
}

TEST_CASE("processes that ended are gone from the next one's view at once") {
  TestGpu gpu(8 * kGiB);
  for (int run = 0; run < 3; ++run) {
    Client client(gpu);
    REQUIRE(client.send("init") == "init ok");
    auto info = words(client.send("meminfo"));
    REQUIRE(info.size() == 3);
    CHECK(std::stoull(info[1]) == 8 * kGiB - kFakeContextBytes);  // only its own context
    REQUIRE(client.send("alloc 1G held") == "alloc ok held");
    CHECK(client.finish() == 0);  // exits holding 1 GiB
  }
}

TEST_CASE("a forked child that exits leaves its parent's slot and bytes alone") {
  TestGpu gpu(8 * kGiB);
  Client parent(gpu);
  REQUIRE(parent.send("init") == "init ok");
  REQUIRE(parent.send("alloc 6G held") == "alloc ok held");
  // The child is reaped before the reply: whatever its exit did to the
  // parent's liveness shows now, to gshare-top and to the next allocation,
  // which reclaims a dead-looking slot on demand (as an upkeep tick would).
  REQUIRE(parent.send("fork") == "fork ok 0");
  auto top = gpu.top_json();
  REQUIRE(top["gpus"].size() == 1);
  REQUIRE(top["gpus"][0]["processes"].size() == 1);
  CHECK(top["gpus"][0]["processes"][0]["pid"] == parent.pid());
  Client other(gpu, {{"GSHARE_ADMIT_TIMEOUT_S", "0"}});
  REQUIRE(other.send("init") == "init ok");
  CHECK(other.send("alloc 4G x") == "alloc err 2");  // the parent still holds 6 GiB
}
