// P from a caching framework's answers (allocator/in_use_window.h): the
// least in use over the recent answers, rising only once the answers show
// that the loop has been seen at rest.
#include "allocator/in_use_window.h"

#include <catch2/catch.hpp>

using gshare::allocator::InUseWindow;
using gshare::tunables::kInUseIterations;

namespace {
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kHeld = 64 * kGiB;  // what the process holds: never the limit here
}  // namespace

TEST_CASE("P falls with any answer that shows less in use") {
  InUseWindow w;
  uint64_t p = 0;
  REQUIRE(w.record(3 * kGiB, kHeld, 5 * kGiB, 0, &p));
  CHECK(p == 3 * kGiB);
  REQUIRE(w.record(1 * kGiB, kHeld, p, 0, &p));
  CHECK(p == 1 * kGiB);
  // A later answer from mid-iteration does not raise it again.
  CHECK_FALSE(w.record(4 * kGiB, kHeld, p, 0, &p));
  CHECK(p == 1 * kGiB);
}

TEST_CASE("P rises only once three answers running agree, not on the first answers from mid-iteration") {
  InUseWindow w;
  uint64_t p = 1 * kGiB;
  CHECK_FALSE(w.record(2 * kGiB, kHeld, p, 0, &p));
  CHECK_FALSE(w.record(2 * kGiB + 8 * kMiB, kHeld, p, 0, &p));
  REQUIRE(w.record(2 * kGiB, kHeld, p, 0, &p));  // the third that agrees
  CHECK(p == 2 * kGiB);
}

TEST_CASE("an answer that falls by the release bytes shows an iteration's end, and P may rise after it") {
  InUseWindow w;
  uint64_t p = 1 * kGiB;
  CHECK_FALSE(w.record(6 * kGiB, kHeld, p, 0, &p));  // mid-iteration: nothing known
  // The loss read after the step: 4 GiB freed. P is the least, 2 GiB.
  REQUIRE(w.record(2 * kGiB, kHeld, p, 0, &p));
  CHECK(p == 2 * kGiB);
}

TEST_CASE("P moves only by more than 16 MiB or 1%, each move may re-form lanes") {
  InUseWindow w;
  uint64_t p = 10 * kGiB;
  CHECK_FALSE(w.record(10 * kGiB, kHeld, p, 0, &p));  // the first answer agrees: nothing to move
  CHECK_FALSE(w.record(10 * kGiB - 50 * kMiB, kHeld, p, 0, &p));  // within 1% of 10 GiB
  CHECK(p == 10 * kGiB);
  REQUIRE(w.record(9 * kGiB, kHeld, p, 0, &p));
  CHECK(p == 9 * kGiB);
}

TEST_CASE("P never exceeds what the process holds") {
  InUseWindow w;
  uint64_t p = 0;
  for (int i = 0; i < 3; ++i) w.record(5 * kGiB, 4 * kGiB, p, 0, &p);
  CHECK(p == 4 * kGiB);
}

TEST_CASE("answers from a model's set-up age out after two iterations, later ones after eight") {
  // The first answers come before the weights, the optimizer's state and
  // a frozen bank exist: 0.6 GiB in use. The loop then rests at 4.8 GiB,
  // with one answer an iteration, far fewer than the window holds.
  InUseWindow w;
  uint64_t p = 1 * kGiB;  // from lifetimes, before the framework answered
  REQUIRE(w.record(600 * kMiB, kHeld, p, 0, &p));
  CHECK(p == 600 * kMiB);
  CHECK_FALSE(w.record(4800 * kMiB, kHeld, p, 1, &p));
  CHECK_FALSE(w.record(4800 * kMiB, kHeld, p, 2, &p));  // aged out, but two answers are no loop yet
  REQUIRE(w.record(4800 * kMiB, kHeld, p, 3, &p));      // the third that agrees
  CHECK(p == 4800 * kMiB);
  // An answer from the loop at rest counts for eight iterations: the
  // mid-iteration answers of those do not raise P.
  REQUIRE(w.record(4000 * kMiB, kHeld, p, 4, &p));
  for (uint64_t iteration = 5; iteration <= 12; ++iteration) {
    INFO(iteration);
    CHECK_FALSE(w.record(40 * kGiB, kHeld, p, iteration, &p));
    CHECK(p == 4000 * kMiB);
  }
}

TEST_CASE("without known iterations, the set-up's answers stay in the window") {
  InUseWindow w;
  uint64_t p = 1 * kGiB;
  REQUIRE(w.record(600 * kMiB, kHeld, p, 0, &p));
  for (int i = 0; i < 10; ++i) CHECK_FALSE(w.record(4800 * kMiB, kHeld, p, 0, &p));
  CHECK(p == 600 * kMiB);
}

TEST_CASE("what a job holds at a boundary, its cache just emptied, is its P at once") {
  // Set-up answers put P at 0.6 GiB; the loop's first emptied boundary
  // shows 4.8 GiB held: P rises to it, and the stale answers no longer
  // pull it back down.
  InUseWindow w;
  uint64_t p = 1 * kGiB;
  REQUIRE(w.record(600 * kMiB, kHeld, p, 0, &p));
  REQUIRE(w.record_rest(4800 * kMiB, p, 1, &p));
  CHECK(p == 4800 * kMiB);
  CHECK_FALSE(w.record(40 * kGiB, kHeld, p, 1, &p));  // mid-iteration
  CHECK(p == 4800 * kMiB);
  // Answers with less in use (blocks the framework counts as cached, kept
  // by a live block in their segment) do not lower it while the rest is
  // recent: the emptying could not give those back.
  CHECK_FALSE(w.record(4000 * kMiB, kHeld, p, 2, &p));
  CHECK(p == 4800 * kMiB);
  // A later rest with less held lowers it at once.
  REQUIRE(w.record_rest(4200 * kMiB, p, 3, &p));
  CHECK(p == 4200 * kMiB);
  // Once the rest is kInUseIterations iterations old, the answers rule.
  REQUIRE(w.record(4000 * kMiB, kHeld, p, 3 + kInUseIterations + 1, &p));
  CHECK(p == 4000 * kMiB);
}
