// P from a caching framework's answers (allocator/in_use_window.h): the
// least in use over the recent answers, rising only once the answers show
// that the loop has been seen at rest.
#include "allocator/in_use_window.h"

#include <catch2/catch.hpp>

using gshare::allocator::InUseWindow;

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

TEST_CASE("answers from a model's set-up age out after eight iterations, and P rises to the loop's rest") {
  // The first answers come before the weights, the optimizer's state and
  // a frozen bank exist: 0.6 GiB in use. The loop then rests at 4.8 GiB,
  // with one answer an iteration, far fewer than the window holds.
  InUseWindow w;
  uint64_t p = 1 * kGiB;  // from lifetimes, before the framework answered
  REQUIRE(w.record(600 * kMiB, kHeld, p, 0, &p));
  CHECK(p == 600 * kMiB);
  for (uint64_t iteration = 1; iteration <= 8; ++iteration) {
    INFO(iteration);
    CHECK_FALSE(w.record(4800 * kMiB, kHeld, p, iteration, &p));
    CHECK(p == 600 * kMiB);
  }
  REQUIRE(w.record(4800 * kMiB, kHeld, p, 9, &p));
  CHECK(p == 4800 * kMiB);
  // Mid-iteration answers of the iterations since do not raise it further.
  CHECK_FALSE(w.record(40 * kGiB, kHeld, p, 10, &p));
  CHECK(p == 4800 * kMiB);
}
