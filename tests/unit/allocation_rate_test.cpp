// The driver's allocation rate as a job sees it (allocator/allocation_rate.h):
// what giving a cache back before a switch will cost the job's next turn.
#include "allocator/allocation_rate.h"

#include <catch2/catch.hpp>

using namespace gshare::allocator;

TEST_CASE("allocating again takes what the slowest recent large allocation says, and small ones say nothing") {
  constexpr uint64_t kGiB = 1ull << 30;
  // Before any, nothing is expected; small allocations are not timed.
  note_driver_allocation(kTimedAllocationMinBytes - 1, 1'000'000'000);
  CHECK(expected_allocation_ns(10 * kGiB) == 0);
  // 78 GiB in 240 ms, as on an H200: 40 GiB again takes about 123 ms.
  note_driver_allocation(78 * kGiB, 240'000'000);
  CHECK(expected_allocation_ns(40 * kGiB) == Approx(240e6 * 40 / 78).epsilon(0.01));
  // A faster one halves the gap; a slower one counts at once.
  note_driver_allocation(78 * kGiB, 120'000'000);
  CHECK(expected_allocation_ns(78 * kGiB) == Approx(180e6).epsilon(0.01));
  note_driver_allocation(kGiB, 10'000'000);
  CHECK(expected_allocation_ns(kGiB) == Approx(10e6).epsilon(0.01));
  // No overflow at a GPU's sizes and slow rates.
  CHECK(expected_allocation_ns(1024 * kGiB) == Approx(10e6 * 1024).epsilon(0.01));
}
