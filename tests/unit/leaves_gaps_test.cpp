// The verdict that seats busy jobs that leave the GPU gaps two to a turn
// under GSHARE_SHARED_TURNS=gaps (rules/leaves_gaps.h).
#include <catch2/catch.hpp>

#include "rules/leaves_gaps.h"

using gshare::rules::GapsState;
using gshare::rules::kNoWaitShare;
using gshare::rules::note_gpu_share;
using gshare::rules::shares_in_pairs;
using namespace gshare::tunables;

namespace {
constexpr uint64_t kSecond = 1'000'000'000;

// A job whose kernels are done before it syncs: it waits a tenth of its
// own turns at most (3 ms PyTorch steps on an H200: 0.04 to 0.16).
constexpr uint32_t kShortWaits = 100;

// Readings a second apart from `at` seconds on, none host-bound, the job
// waiting `wait` of its own turns.
GapsState read(GapsState s, std::initializer_list<uint32_t> permilles, uint64_t at = 1,
               uint32_t wait = kShortWaits) {
  for (uint32_t p : permilles) note_gpu_share(&s, p, wait, false, at++ * kSecond);
  return s;
}
}  // namespace

TEST_CASE("one reading far under the limit pairs a busy job at once") {
  // PyTorch steps of 3 ms on an H200 read 0.6 to 1.0.
  GapsState s = read({}, {kGapsSureBusy - 1});
  CHECK(s.leaves_gaps);
  CHECK(shares_in_pairs(&s, 1 * kSecond));
  CHECK(read({}, {kGapsLeastBusy}).leaves_gaps);
}

TEST_CASE("a reading nearer the limit needs a mean of kGapsMinReadings under kGapsBusy") {
  GapsState one = read({}, {900});
  CHECK_FALSE(one.leaves_gaps);
  CHECK(read(one, {900}, 2).leaves_gaps);
  // A first reading that looked full, then one with gaps: the mean says it.
  CHECK(read({}, {1000, 855}).leaves_gaps);
  CHECK_FALSE(read({}, {1000, 900}).leaves_gaps);
}

TEST_CASE("a job that keeps the GPU full never pairs") {
  // GPU-bound steps of 8.5 ms read 0.95 to 1.0.
  GapsState s = read({}, {1000, 952, 1000, 974, 1000, 1000});
  CHECK_FALSE(s.leaves_gaps);
  CHECK_FALSE(shares_in_pairs(&s, 7 * kSecond));
}

TEST_CASE("a job that waits for the GPU at its syncs pairs only where its share is far under the limit") {
  // GPU-bound jobs of 8.5 ms steps on an H200 read 0.73 to 1.0 and waited
  // 0.34 to 0.79 of single windows in their own turns, most over 0.45.
  CHECK_FALSE(read({}, {729, 776, 832, 862, 889}, 1, 450).leaves_gaps);
  CHECK_FALSE(read({}, {kGapsClearBusy, kGapsClearBusy}, 1, kGapsMostWait).leaves_gaps);
  // Its waits not yet known: as if long.
  CHECK_FALSE(read({}, {776, 832}, 1, kNoWaitShare).leaves_gaps);
  // Short waits, the same shares: gaps its host leaves.
  CHECK(read({}, {776}, 1, kGapsMostWait - 1).leaves_gaps);
  // A share far under the limit says it whatever the waits (a job whose
  // steps are half host work, half kernels it waits for).
  CHECK(read({}, {kGapsClearBusy - 1}, 1, 700).leaves_gaps);
  CHECK(read({}, {kGapsLeastBusy}, 1, kNoWaitShare).leaves_gaps);
}

TEST_CASE("one full reading does not end a verdict; a mean past kGapsLeaveBusy does") {
  GapsState s = read({}, {800});
  REQUIRE(s.leaves_gaps);
  s = read(s, {1000}, 2);  // mean 0.9: under the limit to leave
  CHECK(s.leaves_gaps);
  s = read(s, {1000, 1000}, 3);  // 0.95, 0.975
  CHECK(s.mean_permille >= kGapsLeaveBusy);
  CHECK_FALSE(s.leaves_gaps);
}

TEST_CASE("between the two limits the verdict stays as it was") {
  const uint32_t between = (kGapsBusy + kGapsLeaveBusy) / 2;
  CHECK_FALSE(read({}, {between, between, between, between}).leaves_gaps);
  GapsState paired = read({}, {800});
  REQUIRE(paired.leaves_gaps);
  CHECK(read(paired, {between, between, between, between, between, between, between, between}, 2).leaves_gaps);
}

TEST_CASE("an idle GPU is the host-bound rule's: no pair, and the mean starts over") {
  GapsState s = read({}, {800});
  REQUIRE(s.leaves_gaps);
  s = read(s, {kGapsLeastBusy - 1}, 2);
  CHECK_FALSE(s.leaves_gaps);
  CHECK(s.readings == 0);
  // 64 small host-bound PyTorch jobs read up to 0.4.
  CHECK_FALSE(read({}, {150, 398, 120}).leaves_gaps);
  GapsState hb = read({}, {800});
  note_gpu_share(&hb, 800, kShortWaits, true, 2 * kSecond);
  CHECK_FALSE(hb.leaves_gaps);
}

TEST_CASE("kGapsRecheckNs after its verdict a job is judged anew") {
  GapsState s = read({}, {900, 900});  // paired at 2 s
  const uint64_t judged = 2 * kSecond;
  REQUIRE(s.leaves_gaps);
  // Readings while paired (a turn it happened to run alone) keep it so,
  // and do not move the recheck.
  s = read(s, {880}, 3);
  CHECK(shares_in_pairs(&s, judged + kGapsRecheckNs - 1));
  CHECK_FALSE(shares_in_pairs(&s, judged + kGapsRecheckNs));
  CHECK(s.readings == 0);  // forgotten: the next readings decide alone
  note_gpu_share(&s, 1000, kShortWaits, false, judged + kGapsRecheckNs + kSecond);
  CHECK_FALSE(shares_in_pairs(&s, judged + kGapsRecheckNs + kSecond));
  note_gpu_share(&s, 1000, kShortWaits, false, judged + kGapsRecheckNs + 2 * kSecond);
  CHECK_FALSE(shares_in_pairs(&s, judged + kGapsRecheckNs + 2 * kSecond));
  // A zero reading is none.
  GapsState z = read({}, {800});
  note_gpu_share(&z, 0, kShortWaits, false, 5 * kSecond);
  CHECK(z.leaves_gaps);
}

TEST_CASE("waits in a job's own turns are a running mean, each window an eighth of it") {
  using gshare::rules::mean_wait_permille;
  CHECK(mean_wait_permille(kNoWaitShare, 350) == 350);
  CHECK(mean_wait_permille(200, 200) == 200);
  // A 3 ms job's windows swing from 0.22 to 0.35: its mean stays under the
  // limit where one window would not.
  uint32_t mean = kNoWaitShare;
  for (int i = 0; i < 40; ++i) mean = mean_wait_permille(mean, i % 2 ? 220 : 350);
  CHECK(mean < kGapsMostWait);
  CHECK(mean > 220);
  // Waits that stay long reach it within a few windows.
  for (int i = 0; i < 8; ++i) mean = mean_wait_permille(mean, 700);
  CHECK(mean >= kGapsMostWait);
}
