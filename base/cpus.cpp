#include "base/cpus.h"

#include <sched.h>

#include <atomic>

namespace gshare {

unsigned usable_cpus() {
  static std::atomic<unsigned> cached{0};
  unsigned n = cached.load(std::memory_order_relaxed);
  if (n != 0) return n;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int counted = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  n = counted > 0 ? unsigned(counted) : 1;
  cached.store(n, std::memory_order_relaxed);
  return n;
}

}  // namespace gshare
