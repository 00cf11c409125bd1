#include "allocator/allocation_rate.h"

#include <atomic>

namespace gshare::allocator {

namespace {
// Femtoseconds per byte: 78 GB in 240 ms is about 3,000.
std::atomic<uint64_t> g_fs_per_byte{0};
}  // namespace

void note_driver_allocation(uint64_t bytes, uint64_t ns) {
  if (bytes < kTimedAllocationMinBytes) return;
  const uint64_t rate = uint64_t(double(ns) * 1e6 / double(bytes));
  uint64_t last = g_fs_per_byte.load(std::memory_order_relaxed);
  // A slower allocation counts at once; a faster one halves the gap.
  const uint64_t next = rate >= last ? rate : last - (last - rate) / 2;
  g_fs_per_byte.store(next, std::memory_order_relaxed);
}

uint64_t expected_allocation_ns(uint64_t bytes) {
  const uint64_t rate = g_fs_per_byte.load(std::memory_order_relaxed);
  return uint64_t(double(bytes) * double(rate) / 1e6);
}

}  // namespace gshare::allocator
