// The verdict that seats busy jobs two to a turn by default
// (rules/leaves_gaps.h).
#include <catch2/catch.hpp>

#include "rules/leaves_gaps.h"

using gshare::rules::GapsState;
using gshare::rules::note_gpu_share;
using gshare::rules::shares_in_pairs;
using namespace gshare::tunables;

namespace {
constexpr uint64_t kSecond = 1'000'000'000;

// Readings a second apart from `at` seconds on, none host-bound.
GapsState read(GapsState s, std::initializer_list<uint32_t> permilles, uint64_t at = 1) {
  for (uint32_t p : permilles) note_gpu_share(&s, p, false, at++ * kSecond);
  return s;
}
}  // namespace

TEST_CASE("a busy job whose kernels leave gaps pairs after kGapsMinReadings readings under kGapsBusy") {
  // PyTorch steps of 3 ms on an H200 read about 0.85.
  GapsState one = read({}, {850});
  CHECK_FALSE(one.leaves_gaps);
  GapsState two = read(one, {850}, 2);
  CHECK(two.leaves_gaps);
  CHECK(shares_in_pairs(&two, 2 * kSecond));
}

TEST_CASE("a job that keeps the GPU full never pairs") {
  // GPU-bound steps of 8.5 ms read 0.95 to 1.0.
  GapsState s = read({}, {1000, 952, 1000, 974, 1000, 1000});
  CHECK_FALSE(s.leaves_gaps);
  CHECK_FALSE(shares_in_pairs(&s, 7 * kSecond));
}

TEST_CASE("one full reading does not end a verdict; a mean past kGapsLeaveBusy does") {
  GapsState s = read({}, {800, 820});
  REQUIRE(s.leaves_gaps);
  s = read(s, {1000}, 3);  // mean 0.905: still under the limit to leave
  CHECK(s.leaves_gaps);
  s = read(s, {1000, 1000, 1000}, 4);
  CHECK(s.mean_permille >= kGapsLeaveBusy);
  CHECK_FALSE(s.leaves_gaps);
}

TEST_CASE("between the two limits the verdict stays as it was") {
  const uint32_t between = (kGapsBusy + kGapsLeaveBusy) / 2;
  CHECK_FALSE(read({}, {between, between, between, between}).leaves_gaps);
  GapsState paired = read({}, {800, 800});
  REQUIRE(paired.leaves_gaps);
  CHECK(read(paired, {between, between, between, between, between, between, between, between}, 3).leaves_gaps);
}

TEST_CASE("an idle GPU is the host-bound rule's: no pair, and the mean starts over") {
  GapsState s = read({}, {800, 800});
  REQUIRE(s.leaves_gaps);
  s = read(s, {kHostBoundLeaveBusy - 1}, 3);
  CHECK_FALSE(s.leaves_gaps);
  CHECK(s.readings == 0);
  CHECK_FALSE(read(s, {800}, 4).leaves_gaps);  // one reading again is not enough
  GapsState hb = read({}, {800, 800});
  note_gpu_share(&hb, 800, true, 3 * kSecond);
  CHECK_FALSE(hb.leaves_gaps);
}

TEST_CASE("no reading for kGapsRecheckNs puts the verdict aside until the next") {
  GapsState s = read({}, {800, 800});  // last reading at 2 s
  const uint64_t last = 2 * kSecond;
  CHECK(shares_in_pairs(&s, last + kGapsRecheckNs - 1));
  CHECK_FALSE(shares_in_pairs(&s, last + kGapsRecheckNs));
  CHECK(s.leaves_gaps);  // the verdict is kept, only put aside
  CHECK_FALSE(shares_in_pairs(&s, last + kGapsRecheckNs + 1));
  note_gpu_share(&s, 820, false, last + kGapsRecheckNs + kSecond);
  CHECK(shares_in_pairs(&s, last + kGapsRecheckNs + kSecond));
  // A zero reading is none.
  GapsState z = read({}, {800, 800});
  note_gpu_share(&z, 0, false, last + kGapsRecheckNs);
  CHECK_FALSE(shares_in_pairs(&z, last + kGapsRecheckNs));
}
