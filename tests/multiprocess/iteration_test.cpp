// Iteration detection on training loops of every shape: steps of 1 ms to
// 5 s, taken in 1 to 10 pieces, syncing once a step, once a piece or never.
// One iteration is one step: the count never runs ahead of the steps taken,
// and a job still inside its first step is unclassified.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

struct Loop {
  const char* name;
  int steps;
  int pieces;
  int kernels;  // a piece's kernels (all of the step's when it syncs once)
  int micros;   // each kernel's
  const char* sync;  // "" (once a step), "chunksync" (once a piece), "nosync"
  int missed;   // steps the detection may take before it counts
};

// Each piece takes 64 MiB, more than gshare's slack between two step ends,
// as a forward pass's activations would.
std::string memtrain(const Loop& loop) {
  return "memtrain " + std::to_string(loop.steps) + " 64M " + std::to_string(64 * loop.pieces) + "M " +
         std::to_string(loop.pieces) + " " + std::to_string(loop.kernels) + " " +
         std::to_string(loop.micros) + " 2 " + loop.sync;
}

// gshare-top's view of a job whose loop has ended, once it counts at least
// `iterations` (the upkeep thread publishes the figures every 250 ms), or
// as it is after 5 s.
nlohmann::json process_of(const TestGpu& gpu, pid_t pid, int iterations) {
  nlohmann::json p;
  poll_until([&] {
    p = gpu.top_process(pid);
    return p.is_object() && p["iterations"].get<int>() >= iterations;
  }, 5);
  return p;
}

}  // namespace

TEST_CASE("one iteration per step, for steps of 1 ms to 5 s, syncing once, per piece or never",
          "[iterations]") {
  // Run side by side, each on its own GPU: the longest takes about 30 s.
  std::vector<Loop> loops = {
      {"1 ms, sync once", 400, 2, 4, 250, "", 4},
      {"1 ms, sync per piece", 400, 4, 1, 250, "chunksync", 4},
      {"1 ms, never sync", 400, 4, 1, 250, "nosync", 4},
      {"200 ms, sync once", 20, 10, 8, 25000, "", 4},
      {"200 ms, sync per piece", 20, 10, 2, 10000, "chunksync", 4},
      {"200 ms, never sync", 20, 10, 2, 10000, "nosync", 4},
      {"5 s, sync once", 6, 4, 10, 500000, "", 4},
      {"5 s, sync per piece", 6, 10, 1, 500000, "chunksync", 4},
      {"5 s, never sync", 6, 10, 1, 500000, "nosync", 4},
  };
  std::vector<std::unique_ptr<TestGpu>> gpus;
  std::vector<std::unique_ptr<Client>> jobs;
  for (const Loop& loop : loops) {
    gpus.push_back(std::make_unique<TestGpu>());
    jobs.push_back(std::make_unique<Client>(*gpus.back()));
    REQUIRE(jobs.back()->send("init") == "init ok");
    jobs.back()->post(memtrain(loop));
  }
  for (size_t i = 0; i < loops.size(); ++i) {
    const Loop& loop = loops[i];
    INFO(loop.name << ": " << memtrain(loop));
    std::string reply = jobs[i]->reply(60);
    REQUIRE(reply.rfind("memtrain ok", 0) == 0);
    nlohmann::json p = process_of(*gpus[i], jobs[i]->pid(), loop.steps - loop.missed);
    INFO(p.dump());
    REQUIRE(p.is_object());
    bool syncs = std::string(loop.sync) != "nosync";
    CHECK(p["iteration_source"] == (syncs ? "syncs" : "launches"));
    int per_step = loop.kernels * (std::string(loop.sync).empty() ? 1 : loop.pieces);
    CHECK(p["iteration_launches"] == per_step);
    int counted = p["iterations"].get<int>();
    CHECK(counted <= loop.steps);
    CHECK(counted >= loop.steps - loop.missed);
    // The latest step's time, against the last steps as the loop timed
    // them: a loaded machine stretches some steps, for both alike. A loop
    // that never syncs runs ahead of the GPU on the host, whose clock is
    // all gshare sees of it.
    if (syncs) {
      auto last = words(jobs[i]->send("lastiters"));
      REQUIRE(last.size() == 3);
      INFO("the loop's last steps took " << last[1] << " to " << last[2] << " ms");
      CHECK(p["iteration_ms"].get<double>() > std::stod(last[1]) / 2);
      CHECK(p["iteration_ms"].get<double>() < std::stod(last[2]) * 2);
    }
  }
}

TEST_CASE("a job inside its first long step is unclassified, whether it syncs per piece or never",
          "[iterations]") {
  for (const char* sync : {"chunksync", "nosync"}) {
    INFO(sync);
    TestGpu gpu;
    Client job(gpu, {{"FAKE_CUDA_TRACE", gpu.kernel_trace()}});
    REQUIRE(job.send("init") == "init ok");
    // One step of 10 pieces of 400 ms, each allocating 64 MiB: seen once
    // the GPU has run 7 of them, 2.8 s, many upkeep ticks.
    job.post(std::string("memtrain 1 64M 640M 10 1 400000 2 ") + sync);
    await(gpu, "7 pieces of the step", [&] { return read_kernel_trace(gpu.kernel_trace()).size() >= 7; });
    nlohmann::json p = gpu.top_process(job.pid());
    INFO(p.dump());
    REQUIRE(p.is_object());
    CHECK(p["iterations"] == 0);
    CHECK(p["iteration_source"] == "unknown");
    CHECK(p["memory_provisional"] == true);
    REQUIRE(job.reply(20).rfind("memtrain ok", 0) == 0);
  }
}

TEST_CASE("a loop that stops syncing is followed by its launches, and keeps its count", "[iterations]") {
  TestGpu gpu;
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  // A loop that syncs (long enough for the upkeep thread to see its
  // pattern), then one that never does, with 4 ms on the host each step.
  auto synced = words(job.send("train 300 3 300 sync 1000"));
  REQUIRE(synced.at(1) == "ok");
  REQUIRE(words(job.send("train 400 4 100 nosync 4000", 60)).at(1) == "ok");
  nlohmann::json p = process_of(gpu, job.pid(), 300 - 3 + 400 - 4);
  INFO(p.dump());
  CHECK(p["iteration_source"] == "launches");
  CHECK(p["iteration_launches"] == 4);
  CHECK(p["iterations"].get<int>() <= 300 + 400);
  CHECK(p["iterations"].get<int>() >= 300 - 3 + 400 - 4);
}

TEST_CASE("a set-up's burst of equal syncs does not count as iterations", "[iterations]") {
  TestGpu gpu;
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  // Ten syncs after one launch each, memory unchanged (a model's set-up),
  // then 40 steps that sync once.
  REQUIRE(words(job.send("train 10 1 10 sync 0")).at(1) == "ok");
  REQUIRE(job.send("memtrain 40 64M 128M 2 3 1000", 60).rfind("memtrain ok", 0) == 0);
  nlohmann::json p = process_of(gpu, job.pid(), 40 - 4);
  INFO(p.dump());
  CHECK(p["iteration_source"] == "syncs");
  CHECK(p["iteration_launches"] == 3);
  CHECK(p["iterations"].get<int>() <= 40);
  CHECK(p["iterations"].get<int>() >= 40 - 4);
}
