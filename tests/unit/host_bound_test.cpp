// The host-bound verdict behind shared turns (rules/host_bound.h).
#include <catch2/catch.hpp>

#include "rules/host_bound.h"

using gshare::rules::HostBoundState;
using gshare::rules::judge_host_bound;

namespace {
constexpr uint64_t kMs = 1'000'000;

// `n` judgements of 100 ms running time with `wait_ms` of waits each.
HostBoundState judged(HostBoundState s, int n, uint64_t wait_ms, uint64_t waits = 20) {
  for (int i = 0; i < n; ++i) REQUIRE(judge_host_bound(&s, 100 * kMs, wait_ms * kMs, waits));
  return s;
}
}  // namespace

TEST_CASE("a window with too little running time says nothing") {
  HostBoundState s;
  CHECK_FALSE(judge_host_bound(&s, 49 * kMs, 0, 100));
  CHECK(s.streak == 0);
}

TEST_CASE("four judgements in a row with waits under a tenth make a job host-bound") {
  CHECK_FALSE(judged({}, 3, 5).host_bound);
  CHECK(judged({}, 4, 5).host_bound);
  CHECK_FALSE(judged({}, 10, 11).host_bound);
  // A judgement over the limit starts the count again.
  HostBoundState s = judged({}, 3, 5);
  s = judged(s, 1, 30);
  CHECK(s.streak == 0);
  CHECK_FALSE(judged(s, 3, 5).host_bound);
}

TEST_CASE("a host-bound job stays so until its waits pass half its running time") {
  const HostBoundState s = judged({}, 4, 5);
  CHECK(judged(s, 1, 40).host_bound);
  CHECK_FALSE(judged(s, 1, 51).host_bound);
  CHECK(judged(s, 1, 51).streak == 0);
}

TEST_CASE("a job with too few waits is not host-bound: it may keep the GPU full through queued launches") {
  CHECK_FALSE(judged({}, 10, 0, 9).host_bound);
  CHECK_FALSE(judged(judged({}, 4, 5), 1, 0, 0).host_bound);
  CHECK(judged({}, 4, 0, 10).host_bound);
}
