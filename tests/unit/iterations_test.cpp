// Iteration detection (scheduler/iterations.h) on synthetic training loops:
// one iteration per step whether a step syncs once, several times or never,
// for steps of a millisecond to several seconds, and nothing counted while
// a job is still in its first step.
#include "scheduler/iterations.h"

#include <catch2/catch.hpp>

#include <cstdint>

namespace {

using namespace gshare::scheduler;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kGiB = 1ull << 30;

// A process's launches, syncs and memory as the library would report them.
struct Loop {
  uint64_t launches = 0;
  uint64_t now_ns = 1'000 * kMs;

  Loop() { iterations::forget_after_fork(); }

  void launch(uint64_t n) { launches += n; }
  bool sync(uint64_t bytes) { return iterations::on_sync(launches, bytes, now_ns); }
  iterations::Estimate estimate() const { return iterations::current(launches); }
};

// A model's set-up: weights built layer by layer, a sync after each.
void set_up(Loop& loop) {
  for (int layer = 0; layer < 6; ++layer) {
    loop.launch(3);
    loop.now_ns += 2 * kMs;
    loop.sync(uint64_t(layer + 1) * 64 * (1ull << 20));
  }
}

// A step of four pieces of equal launches, each synced, the activations
// growing through the step and freed at its end: only the memory tells
// pieces from steps. Returns whether the step's last sync ended an
// iteration.
bool step_synced_by_pieces(Loop& loop) {
  bool ended = false;
  for (uint64_t piece = 1; piece <= 4; ++piece) {
    loop.launch(50);
    loop.now_ns += 10 * kMs;
    const bool step_end = piece == 4;
    ended = loop.sync(step_end ? 2 * kGiB : 2 * kGiB + piece * kGiB) && step_end;
  }
  return ended;
}

// Steps of 10 ms that never sync: thirty kernels a step, each its own
// function, with host time before the first (data loading); the upkeep
// thread ticks every 50 ms.
void run_steps_without_syncs(Loop& loop, uint64_t steps) {
  alignas(16) static char functions[30][16];
  uint64_t next_tick_ns = loop.now_ns;
  for (uint64_t i = 0; i < steps; ++i) {
    loop.now_ns += 4 * kMs;  // the host gap where the step begins
    for (auto& function : functions) {
      if (iterations::observing()) iterations::record_launch(function, loop.launches, loop.now_ns);
      loop.launch(1);
      loop.now_ns += 200'000;
    }
    if (loop.now_ns >= next_tick_ns) {
      iterations::tick(loop.launches, loop.now_ns);
      next_tick_ns = loop.now_ns + 50 * kMs;
    }
  }
}

}  // namespace

TEST_CASE("a loop that reads its loss once a step counts one iteration a step for steps of 1 ms and of 5 s") {
  for (uint64_t step_ns : {1 * kMs, 5'000 * kMs}) {
    INFO("step " << step_ns / kMs << " ms");
    Loop loop;
    set_up(loop);
    const uint64_t steps = 40;
    for (uint64_t i = 0; i < steps; ++i) {
      loop.launch(180);
      loop.now_ns += step_ns;
      loop.sync(2 * kGiB);  // the cache holds as much at every step's end
    }
    iterations::Estimate e = loop.estimate();
    CHECK(e.source == gshare::shm::kIterationsFromSyncs);
    // Found after a few steps, then one a step: never more than the steps.
    CHECK(e.iterations <= steps);
    CHECK(e.iterations >= steps - 5);
    CHECK(e.iteration_ns == step_ns);
    CHECK(e.launches_per_iteration == 180);
  }
}

TEST_CASE("a loop that syncs after each piece of its forward pass counts steps and not pieces") {
  // Four pieces of equal launches a step, the activations growing through
  // the step and freed at its end: only the memory tells pieces from steps.
  Loop loop;
  set_up(loop);
  const uint64_t steps = 30;
  uint64_t boundaries = 0;
  for (uint64_t i = 0; i < steps; ++i) boundaries += step_synced_by_pieces(loop);
  iterations::Estimate e = loop.estimate();
  CHECK(e.source == gshare::shm::kIterationsFromSyncs);
  CHECK(e.iterations <= steps);
  CHECK(e.iterations >= steps - 6);
  CHECK(e.iteration_ns == 40 * kMs);
  CHECK(e.launches_per_iteration == 200);
  CHECK(boundaries >= steps - 6);  // the step's last sync is its boundary
}

TEST_CASE("a job still in its first step has counted no iterations") {
  Loop loop;
  set_up(loop);
  loop.launch(180);
  loop.now_ns += 500 * kMs;
  loop.sync(2 * kGiB);
  iterations::Estimate e = loop.estimate();
  CHECK(e.iterations == 0);
  CHECK(e.iteration_ns == 0);
}

TEST_CASE("a loop that never syncs is found from its repeating launches: one iteration a step") {
  Loop loop;
  const uint64_t steps = 150;  // 1.5 s of 10 ms steps
  run_steps_without_syncs(loop, steps);
  iterations::Estimate e = loop.estimate();
  CHECK(e.source == gshare::shm::kIterationsFromLaunches);
  CHECK(e.launches_per_iteration == 30);
  CHECK(e.iterations <= steps);
  CHECK(e.iterations >= steps - 10);
  CHECK(e.iteration_ns >= 9 * kMs);
  CHECK(e.iteration_ns <= 11 * kMs);
}

TEST_CASE("a job is between iterations from a step's last sync to its next launch, and never mid-step") {
  // Four pieces a step, each synced, the activations growing through the
  // step: once the step is found, only its last sync starts a rest, and
  // the rest ends at the next launch.
  Loop loop;
  set_up(loop);
  for (uint64_t i = 0; i < 12; ++i) step_synced_by_pieces(loop);
  REQUIRE(loop.estimate().source == gshare::shm::kIterationsFromSyncs);
  CHECK(iterations::between_iterations(loop.launches));  // the step's last sync
  loop.launch(1);
  CHECK_FALSE(iterations::between_iterations(loop.launches));  // the next step began
  loop.launch(49);
  loop.sync(3 * kGiB);  // a piece's sync, mid-step
  CHECK_FALSE(iterations::between_iterations(loop.launches));
}

TEST_CASE("in a loop that never syncs, a job is between iterations where its next launch starts one") {
  Loop loop;
  run_steps_without_syncs(loop, 150);
  REQUIRE(loop.estimate().source == gshare::shm::kIterationsFromLaunches);
  CHECK(iterations::between_iterations(loop.launches));  // the next launch is a step's first
  loop.launch(1);
  CHECK_FALSE(iterations::between_iterations(loop.launches));
  loop.launch(29);
  CHECK(iterations::between_iterations(loop.launches));
}
