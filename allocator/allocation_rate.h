// How long the driver takes to allocate device memory, per byte, as this
// process has seen it: what a job that gives its cache back before a
// switch will pay to allocate it again when its turn comes back
// (runtime/switch_cost.h). A GPU's driver maps tens of GB in a quarter of a
// second (78 GB on an H200: 240 ms), a cost the job's next turn must pay
// for, and one that can be known as the cache goes back, a turn before it
// is paid.
//
// Only large allocations are timed (two clock reads each): small ones are
// dominated by the call's fixed cost and say little of the rate.
#pragma once

#include <cstdint>

namespace gshare::allocator {

inline constexpr uint64_t kTimedAllocationMinBytes = 256ull << 20;

// A driver allocation of `bytes` took `ns`.
void note_driver_allocation(uint64_t bytes, uint64_t ns);

// What allocating `bytes` again would take at the rate seen so far: the
// slowest of the recent large allocations' (one at a slow moment counts
// until two faster ones wear it down). 0 before any large allocation.
uint64_t expected_allocation_ns(uint64_t bytes);

}  // namespace gshare::allocator
