// The state shared by the two ways a job's memory is classified:
// lifetimes (allocator/classifier.h) and a caching framework's figures and
// emptied cache (allocator/framework_classes.h). Only those two include
// it.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "allocator/devices.h"
#include "allocator/ledger.h"
#include "base/tunables.h"

namespace gshare::allocator::classes {

// Held by whatever walks the ledger or publishes P and E: a boundary, an
// emptying, a framework's answer. Taken before the region's lock.
extern pthread_mutex_t g_boundary_mutex;
// Boundaries seen so far. It only grows, whereas the scheduler's count may
// start again from 0 when it changes how it finds iterations
// (scheduler/iterations.h).
extern std::atomic<uint64_t> g_iterations;
// Release points so far (allocator/classifier.h): births are stamped with
// it, and promotion by age counts them.
extern std::atomic<uint64_t> g_release_points;
// Births at or after this release point are never promoted by age: the
// process has a framework cache, emptied then (UINT64_MAX: never emptied).
extern std::atomic<uint64_t> g_cache_emptied_at;
// The measuring emptying is due (set at the second classified boundary),
// and how many boundaries have tried it.
extern std::atomic<bool> g_measure_due;
extern std::atomic<int> g_measure_tries;
// A framework answers with its allocator's figures: P comes from them, not
// from lifetimes.
extern std::atomic<bool> g_counted;
// Inside a framework's emptying of its cache, on this thread: the frees
// that follow teach their sites "ephemeral".
extern __thread int t_emptying_cache;

// Each device's last iterations' peaks beyond P: E is their largest.
using tunables::kPeakHistory;
struct Peaks {
  uint64_t peaks[kPeakHistory];
  int count;
  int next;
};
extern Peaks g_peaks[kMaxDevices];

// Whether an allocation's bytes take a class (device memory of any kind).
bool classifiable(const Allocation& a);

// Under the region's lock: this device's share of `boundaries` new
// boundaries (0: an emptying, no iteration ended), with `promoted` bytes
// moved from ephemeral to persistent.
void publish_locked(Device& device, uint64_t promoted, uint64_t boundaries);

}  // namespace gshare::allocator::classes
