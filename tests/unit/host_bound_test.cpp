// The host-bound verdict behind shared turns (rules/host_bound.h).
#include <catch2/catch.hpp>

#include "rules/host_bound.h"
#include "rules/turn_room.h"

using gshare::rules::HostBoundState;
using gshare::rules::judge_host_bound;

namespace {
constexpr uint64_t kMs = 1'000'000;
constexpr int kStreak = int(gshare::tunables::kHostBoundStreak);

// `n` judgements of 100 ms running time with `wait_ms` of waits each, the
// job's kernels busy `busy` thousandths of its own turns (0: not measured).
HostBoundState judged(HostBoundState s, int n, uint64_t wait_ms, uint64_t waits = 20, uint32_t busy = 100) {
  for (int i = 0; i < n; ++i) REQUIRE(judge_host_bound(&s, 100 * kMs, wait_ms * kMs, waits, busy));
  return s;
}
}  // namespace

TEST_CASE("a window with too little running time says nothing") {
  HostBoundState s;
  CHECK_FALSE(judge_host_bound(&s, gshare::tunables::kHostBoundJudgeNs - 1, 0, 100, 100));
  CHECK(s.streak == 0);
}

TEST_CASE("kHostBoundStreak judgements in a row with waits under a tenth make a job host-bound") {
  CHECK_FALSE(judged({}, kStreak - 1, 5).host_bound);
  CHECK(judged({}, kStreak, 5).host_bound);
  CHECK_FALSE(judged({}, 10, 11).host_bound);
  // A judgement over the limit starts the count again.
  HostBoundState s = judged({}, kStreak - 1, 5);
  s = judged(s, 1, 30);
  CHECK(s.streak == 0);
  CHECK_FALSE(judged(s, kStreak - 1, 5).host_bound);
}

TEST_CASE("a host-bound job stays so until its waits pass half its running time") {
  const HostBoundState s = judged({}, kStreak, 5);
  CHECK(judged(s, 1, 40).host_bound);
  CHECK_FALSE(judged(s, 1, 51).host_bound);
  CHECK(judged(s, 1, 51).streak == 0);
}

TEST_CASE("a window with too few waits goes on; still short of them, the job is not host-bound") {
  using gshare::tunables::kHostBoundFewWaitsNs;
  // Nine waits in 100 ms (steps of a little over 10 ms): no judgement yet,
  // and its streak stands.
  HostBoundState s = judged({}, kStreak - 1, 5);
  CHECK_FALSE(judge_host_bound(&s, 100 * kMs, 5 * kMs, 9, 100));
  CHECK(s.streak == uint32_t(kStreak - 1));
  // With a tenth, the window is judged and completes the streak.
  CHECK(judge_host_bound(&s, 110 * kMs, 5 * kMs, 10, 100));
  CHECK(s.host_bound);
  // Nine waits in all of the longest window: a job that hardly syncs may
  // keep the GPU full through queued launches, host-bound or not before.
  HostBoundState few = judged({}, kStreak - 1, 5);
  REQUIRE(judge_host_bound(&few, kHostBoundFewWaitsNs, 0, 9, 100));
  CHECK(few.streak == 0);
  CHECK_FALSE(few.host_bound);
  HostBoundState was = judged({}, kStreak, 5);
  REQUIRE(judge_host_bound(&was, kHostBoundFewWaitsNs, 0, 0, 100));
  CHECK_FALSE(was.host_bound);
  CHECK(judged({}, kStreak, 0, 10).host_bound);
}

TEST_CASE("a job whose kernels keep the GPU busy is not host-bound, however little it waits") {
  // Its launches keep pace with its kernels: its syncs find them nearly
  // done (an H200's 3 ms training steps waited as little as 9%).
  CHECK_FALSE(judged({}, 10, 5, 20, 900).host_bound);
  CHECK_FALSE(judged({}, 10, 5, 20, 300).host_bound);
  CHECK(judged({}, kStreak, 5, 20, 299).host_bound);
}

TEST_CASE("one judgement makes a job host-bound where both measures are far under their limits") {
  using gshare::tunables::kHostBoundSureBusy;
  // Waits of 1% of its running time, its kernels busy a tenth of its turns.
  CHECK(judged({}, 1, 1, 20, 100).host_bound);
  // Either measure only under its limit, not far under: the streak decides.
  CHECK_FALSE(judged({}, 1, 5, 20, 100).host_bound);
  CHECK_FALSE(judged({}, 1, 1, 20, kHostBoundSureBusy).host_bound);
  CHECK(judged({}, kStreak, 1, 20, kHostBoundSureBusy).host_bound);
  // Nor without a GPU measure, or with too few waits to say.
  CHECK_FALSE(judged({}, 1, 1, 20, 0).host_bound);
  HostBoundState few;
  REQUIRE(judge_host_bound(&few, gshare::tunables::kHostBoundFewWaitsNs, kMs, 9, 100));
  CHECK_FALSE(few.host_bound);
}

TEST_CASE("a job not yet measured on the GPU is not host-bound; once measured idle, it is") {
  const HostBoundState unmeasured = judged({}, 10, 5, 20, 0);
  CHECK_FALSE(unmeasured.host_bound);
  CHECK(judged(unmeasured, 1, 5, 20, 100).host_bound);  // its streak of waits stands
}

TEST_CASE("a verdict rests on a GPU share read within the streak that gives it") {
  // Read idle in its first steps (lazy set-up), then busy steps whose
  // syncs hardly wait (a 3 ms training step): no new reading yet, it is
  // not host-bound on the old one.
  HostBoundState s = judged({}, 1, 30, 20, 100);  // waits of 30%: no streak
  CHECK(s.streak == 0);
  CHECK(s.busy_permille == 0);
  s = judged(s, 10, 1, 20, 0);
  CHECK_FALSE(s.host_bound);
  CHECK(s.streak == 10);
  // A reading within the streak: one window says it.
  CHECK(judged(s, 1, 1, 20, 100).host_bound);
  CHECK_FALSE(judged(s, 1, 1, 20, 700).host_bound);
  // A reading in the window that breaks a streak is of the work before.
  HostBoundState broken = judged({}, 2, 5, 20, 0);
  broken = judged(broken, 1, 30, 20, 100);
  CHECK_FALSE(judged(broken, 10, 1, 20, 0).host_bound);
  // One in the streak counts however long ago it came.
  HostBoundState early = judged({}, 1, 5, 20, 100);
  CHECK(judged(early, kStreak - 1, 5, 20, 0).host_bound);
  // A pause with too few waits to say ends the streak, and its reading.
  HostBoundState paused = judged({}, kStreak - 1, 5, 20, 100);
  REQUIRE(judge_host_bound(&paused, gshare::tunables::kHostBoundFewWaitsNs, 0, 0, 0));
  CHECK_FALSE(judged(paused, 10, 1, 20, 0).host_bound);
}

TEST_CASE("a new reading past the higher limit ends a verdict in a shared window too") {
  const HostBoundState s = judged({}, kStreak, 5);
  auto shared = [](HostBoundState st, uint32_t read) {
    REQUIRE(judge_host_bound(&st, 100 * kMs, 30 * kMs, 20, read, true));
    return st;
  };
  CHECK(shared(s, 0).host_bound);
  CHECK(shared(s, gshare::tunables::kHostBoundLeaveBusy).host_bound);
  CHECK_FALSE(shared(s, gshare::tunables::kHostBoundLeaveBusy + 1).host_bound);
  // A low one is kept: an own window later judges on it.
  CHECK(shared(s, 250).busy_permille == 250);
  HostBoundState later = shared(s, 650);
  CHECK(later.busy_permille == 0);
}

TEST_CASE("a host-bound job stays so until its GPU share passes the higher limit") {
  const HostBoundState s = judged({}, kStreak, 5);
  CHECK(judged(s, 1, 5, 20, 600).host_bound);
  CHECK_FALSE(judged(s, 1, 5, 20, 601).host_bound);
}

TEST_CASE("a window in a shared turn says only whether the job has turned busy, at a higher limit") {
  const HostBoundState s = judged({}, kStreak, 5);
  auto shared = [](HostBoundState st, uint64_t wait_ms, uint64_t waits = 20) {
    REQUIRE(judge_host_bound(&st, 100 * kMs, wait_ms * kMs, waits, 100, true));
    return st;
  };
  // Beside eleven others, waits of 47% (the others' kernels): it stays.
  CHECK(shared(s, 47).host_bound);
  CHECK(shared(s, 89).host_bound);
  // Nearly all its time waiting on the GPU: busy, it leaves.
  CHECK_FALSE(shared(s, 90).host_bound);
  HostBoundState few_waits = s;  // too few waits yet to say: no judgement
  CHECK_FALSE(judge_host_bound(&few_waits, 100 * kMs, 95 * kMs, 9, 100, true));
  CHECK(few_waits.host_bound);
  // A job not host-bound gains no streak in shared windows, however little
  // it waits, and loses the one it had.
  CHECK_FALSE(shared(judged({}, kStreak - 1, 5), 1).host_bound);
  CHECK(shared(judged({}, kStreak - 1, 5), 1).streak == 0);
}

TEST_CASE("kHostBoundDoubts shared windows with waits past its own limit, less those under it, end a verdict") {
  using gshare::tunables::kHostBoundDoubts;
  const HostBoundState s = judged({}, kStreak, 5);
  auto shared = [](HostBoundState st, int n, uint64_t wait_ms, uint64_t waits = 20) {
    for (int i = 0; i < n; ++i) REQUIRE(judge_host_bound(&st, 100 * kMs, wait_ms * kMs, waits, 100, true));
    return st;
  };
  // A busy job judged on a reading taken while it paused: beside a busy
  // job it waits 0.59 of every window.
  CHECK(shared(s, int(kHostBoundDoubts) - 1, 59).host_bound);
  const HostBoundState ended = shared(s, int(kHostBoundDoubts), 59);
  CHECK_FALSE(ended.host_bound);
  CHECK(ended.streak == 0);
  CHECK(ended.doubts == 0);
  // Each window under the limit takes a doubt away: a host-bound job's
  // waits beside others swing, mostly under it, and keep none.
  HostBoundState swinging = shared(s, int(kHostBoundDoubts) - 1, 59);
  swinging = shared(swinging, 2, 40);
  CHECK(swinging.doubts == kHostBoundDoubts - 3);
  CHECK(shared(swinging, 2, 59).host_bound);
  CHECK_FALSE(shared(swinging, 3, 59).host_bound);
  HostBoundState mostly_under = s;
  for (int i = 0; i < 100; ++i) mostly_under = shared(mostly_under, 1, i % 3 ? 30 : 54);
  CHECK(mostly_under.host_bound);
  CHECK(mostly_under.doubts <= 1);
  // Too few waits to say is no doubt; a window of its own ends the count.
  HostBoundState few = s;
  for (uint32_t i = 0; i < kHostBoundDoubts; ++i)
    REQUIRE(judge_host_bound(&few, gshare::tunables::kHostBoundFewWaitsNs, 150 * kMs, 9, 100, true));
  CHECK(few.host_bound);
  HostBoundState own = shared(s, int(kHostBoundDoubts) - 1, 59);
  REQUIRE(judge_host_bound(&own, 100 * kMs, 5 * kMs, 20, 100));
  CHECK(own.doubts == 0);
  CHECK(shared(own, int(kHostBoundDoubts) - 1, 59).host_bound);
}

TEST_CASE("a shared turn holds no more jobs than CPUs, their GPU shares within one GPU") {
  using gshare::rules::turn_has_room;
  CHECK(turn_has_room(2, 2, 200));
  CHECK_FALSE(turn_has_room(3, 2, 200));   // a third job on two CPUs
  CHECK(turn_has_room(16, 16, 1000));
  CHECK_FALSE(turn_has_room(4, 16, 1001));  // four of 0.26 each: past one GPU
}

TEST_CASE("a turn with a job that keeps the GPU busy holds two jobs, whatever their GPU shares") {
  using gshare::rules::turn_has_room;
  CHECK(turn_has_room(2, 16, 1700, true));        // two busy jobs of 0.85 each
  CHECK_FALSE(turn_has_room(3, 16, 300, true));   // a busy job with two host-bound ones
  CHECK_FALSE(turn_has_room(2, 1, 200, true));    // still one job a CPU
  CHECK_FALSE(turn_has_room(2, 16, 1700, false));  // host-bound jobs only: within one GPU
}

TEST_CASE("jobs that share turns take as many turns a round as groups of them fit in a turn") {
  using gshare::rules::turns_in_round;
  // 64 jobs of 0.08 each on 16 CPUs: twelve to a turn, six turns.
  CHECK(turns_in_round(64, 64, 64 * 80, 16) == 6);
  // On 4 CPUs: four to a turn.
  CHECK(turns_in_round(64, 64, 64 * 80, 4) == 16);
  // Two busy jobs beside 8 sharers of 0.25: two turns for the eight.
  CHECK(turns_in_round(10, 8, 8 * 250, 16) == 4);
  // None or one to share, or sharers that fill a GPU each: a turn each.
  CHECK(turns_in_round(5, 0, 0, 16) == 5);
  CHECK(turns_in_round(5, 1, 100, 16) == 5);
  CHECK(turns_in_round(5, 5, 5 * 1000, 16) == 5);
}

TEST_CASE("jobs that share turns as ones of a pair take a turn for two") {
  using gshare::rules::turns_in_round;
  CHECK(turns_in_round(4, 0, 0, 16, 4) == 2);
  CHECK(turns_in_round(5, 0, 0, 16, 5) == 3);  // the odd one has its turn alone
  // 64 host-bound jobs of 0.08 beside 8 paired busy ones: six turns and four.
  CHECK(turns_in_round(72, 64, 64 * 80, 16, 8) == 10);
  // One host-bound job among them shares with none of its kind.
  CHECK(turns_in_round(6, 1, 80, 16, 4) == 4);
}
