#include "allocator/classifier.h"

#include <pthread.h>

#include <atomic>

#include "allocator/devices.h"
#include "allocator/framework_caches.h"
#include "allocator/framework_counts.h"
#include "allocator/in_use_window.h"
#include "allocator/pools.h"
#include "allocator/site_classes.h"
#include "allocator/tracked_memory.h"
#include "base/log.h"
#include "base/saturating.h"
#include "base/tunables.h"

namespace gshare::allocator {

namespace {

// Boundaries seen so far: births are stamped with it. It only grows,
// whereas the scheduler's count may start again from 0 when it changes how
// it finds iterations (syncs or launches, scheduler/iterations.h).
std::atomic<uint64_t> g_iterations{0};
pthread_mutex_t g_boundary_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<uint64_t> g_raw_seen{0};    // the scheduler's count last seen

// Release points so far (classifier.h): births are stamped with it, and
// promotion counts them.
std::atomic<uint64_t> g_release_points{0};
// Bytes freed since the last boundary. Only kReleaseBytes or more make a
// release point: a loop that reads values back mid-iteration frees small
// temporaries (a sum's output) at each such sync, and those do not end
// its iteration.
std::atomic<uint64_t> g_freed_since_boundary{0};
using tunables::kReleaseBytes;
// Bytes allocated since the last boundary: a boundary by which the process
// grew is no quiet one (a forward pass that reads values back syncs while
// it builds its activations, freeing nothing).
std::atomic<uint64_t> g_born_since_boundary{0};
uint64_t g_boundaries_without_free = 0;  // under g_boundary_mutex
using tunables::kQuietBoundaries;

// Births at or after this iteration are never promoted by age: the process
// has a framework cache, emptied then (UINT64_MAX: never emptied).
std::atomic<uint64_t> g_cache_emptied_at{UINT64_MAX};
// The measuring emptying is due (set at the second classified boundary).
std::atomic<bool> g_measure_due{false};
std::atomic<int> g_measure_tries{0};
using tunables::kMeasureTries;
__thread int t_emptying_cache = 0;

// A framework answers with its allocator's figures: P comes from them
// (classifier.h), not from lifetimes.
std::atomic<bool> g_counted{false};
// A framework has answered at all, cached or not: its figures will give P
// once it caches, so no emptying is needed to measure it (one mid-step
// would make a step's live memory persistent).
std::atomic<bool> g_framework_answered{false};
// The last answers' in-use figures per device, under g_boundary_mutex.
InUseWindow g_in_use[kMaxDevices];

using tunables::kPeakHistory;
struct Peaks {
  uint64_t peaks[kPeakHistory];
  int count;
  int next;
};
Peaks g_peaks[kMaxDevices];

bool classifiable(const Allocation& a) {
  switch (a.kind) {
    case AllocationKind::kDevice:
    case AllocationKind::kPitch:
    case AllocationKind::kManaged:
    case AllocationKind::kPhysical: return a.bytes > 0;
    default: return false;
  }
}


// Under the region's lock: this device's share of `boundaries` new
// boundaries, with `promoted` bytes moved from ephemeral to persistent.
void publish_locked(Device& device, uint64_t promoted, uint64_t boundaries) {
  if (boundaries == 0) {  // an emptying: P changed, no iteration ended
    shm::Slot& s = *device.account.slot();
    s.persistent_bytes += promoted;
    s.iteration_peak_bytes = saturating_sub(s.iteration_peak_bytes, promoted);
    if (s.class_iterations < 2) s.ephemeral_bytes = saturating_sub(s.ephemeral_bytes, promoted);
    return;
  }
  shm::Slot& s = *device.account.slot();
  uint64_t p_before = s.persistent_bytes, e_before = s.ephemeral_bytes;
  uint32_t classified_before = s.class_iterations;
  s.persistent_bytes += promoted;
  shm::keep_persistent_within_held(s);
  // What was promoted lived through the whole iteration just ended (born
  // before its start, alive at its end), so it sat in that iteration's peak.
  uint64_t completed = saturating_sub(s.iteration_peak_bytes, promoted);
  uint64_t classified = s.class_iterations + boundaries;
  s.class_iterations = uint32_t(classified > UINT32_MAX ? UINT32_MAX : classified);
  if (s.class_iterations >= 2) {
    Peaks& h = g_peaks[device.ordinal];
    h.peaks[h.next] = completed;
    h.next = (h.next + 1) % kPeakHistory;
    if (h.count < kPeakHistory) h.count++;
    uint64_t e = 0;
    for (int i = 0; i < h.count; ++i) e = h.peaks[i] > e ? h.peaks[i] : e;
    s.ephemeral_bytes = e;
  } else {
    s.ephemeral_bytes = saturating_sub(s.ephemeral_bytes, promoted);
  }
  s.iteration_peak_bytes = shm::ephemeral_now(s);
  // Smaller figures, or a job leaving the provisional lane, may let jobs
  // spread into more lanes; larger ones may need the lanes re-formed.
  bool classified_now = classified_before < 2 && s.class_iterations >= 2;
  if (s.persistent_bytes != p_before || s.ephemeral_bytes != e_before || classified_now)
    device.account.arbiter().place_lanes_locked(s.ephemeral_bytes < e_before || classified_now, nullptr);
}

}  // namespace

Birth classify_birth(uint64_t bytes) {
  Birth b;
  g_born_since_boundary.fetch_add(bytes, std::memory_order_relaxed);
  uint64_t n = g_release_points.load(std::memory_order_relaxed);
  b.iteration = uint32_t(n > UINT32_MAX ? UINT32_MAX : n);
  // Counted by the framework: no class at birth, so no site to take.
  if (g_counted.load(std::memory_order_relaxed)) return b;
  b.site = bytes >= kSiteMinBytes ? stack_site() : 0;
  if (site_is_persistent(b.site)) b.kind = shm::MemoryClass::kPersistent;
  return b;
}

void note_death(const Allocation& entry) {
  if (!classifiable(entry)) return;
  note_process_frees();
  g_freed_since_boundary.fetch_add(entry.bytes, std::memory_order_relaxed);
  if (entry.site == 0) return;
  if (t_emptying_cache) {
    count_site(entry.site, false);
    return;
  }
  if (entry.persistent) return;  // counted when promoted
  // Only a death seen against known boundaries says "ephemeral".
  if (g_iterations.load(std::memory_order_relaxed) == 0) return;
  count_site(entry.site, false);
}

void note_iterations(uint64_t raw) {
  if (raw == g_raw_seen.load(std::memory_order_relaxed)) return;
  pthread_mutex_lock(&g_boundary_mutex);
  uint64_t seen = g_raw_seen.load(std::memory_order_relaxed);
  g_raw_seen.store(raw, std::memory_order_relaxed);
  if (raw <= seen) {  // the same, or a count started again
    pthread_mutex_unlock(&g_boundary_mutex);
    return;
  }
  uint64_t boundaries = raw - seen;
  uint64_t iterations = g_iterations.load(std::memory_order_relaxed) + boundaries;
  g_iterations.store(iterations, std::memory_order_relaxed);
  const uint64_t before = g_release_points.load(std::memory_order_relaxed);
  uint64_t releases = before;
  const bool grew = g_born_since_boundary.exchange(0, std::memory_order_relaxed) >= kReleaseBytes;
  if (g_freed_since_boundary.exchange(0, std::memory_order_relaxed) >= kReleaseBytes) {
    releases++;
    g_boundaries_without_free = 0;
  } else if (grew) {
    g_boundaries_without_free = 0;
  } else if ((g_boundaries_without_free += boundaries) >= kQuietBoundaries) {
    releases += boundaries;
  }
  g_release_points.store(releases, std::memory_order_relaxed);
  // A boundary that is no release point may fall mid-iteration: it neither
  // promotes nor ends an iteration's peak (E is a whole iteration's).
  const uint64_t released = releases - before;
  if (released == 0) {
    pthread_mutex_unlock(&g_boundary_mutex);
    return;
  }
  uint64_t promoted[kMaxDevices] = {};
  uint32_t promoted_sites[64];
  int site_count = 0;
  const uint64_t emptied_at = g_cache_emptied_at.load(std::memory_order_relaxed);
  const bool by_age = !g_counted.load(std::memory_order_relaxed);
  ledger().for_each([&](Allocation& a) {
    if (!by_age || a.persistent || !classifiable(a) || uint64_t(a.birth_iteration) + 2 > releases) return;
    if (uint64_t(a.birth_iteration) >= emptied_at) return;  // a framework's cache
    a.persistent = 1;
    if (a.device >= 0 && a.device < kMaxDevices) promoted[a.device] += a.bytes;
    if (a.site != 0 && site_count < 64) promoted_sites[site_count++] = a.site;
  });
  for (int i = 0; i < site_count; ++i) count_site(promoted_sites[i], true);
  bool classified = false;
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot()) return;
    device.account.arbiter().update([&] {
      publish_locked(device, promoted[device.ordinal], released);
      classified = classified || device.account.slot()->class_iterations >= 2;
    });
  });
  if (classified && g_cache_emptied_at.load() == UINT64_MAX &&
      g_measure_tries.load() < kMeasureTries)
    g_measure_due.store(true);
  pthread_mutex_unlock(&g_boundary_mutex);
}

EmptyingCache::EmptyingCache() { ++t_emptying_cache; }
EmptyingCache::~EmptyingCache() { --t_emptying_cache; }

void note_cache_emptied() {
  pthread_mutex_lock(&g_boundary_mutex);
  g_cache_emptied_at.store(g_release_points.load());
  if (g_counted.load()) {  // P comes from the framework's figures
    pthread_mutex_unlock(&g_boundary_mutex);
    return;
  }
  uint64_t promoted[kMaxDevices] = {};
  ledger().for_each([&](Allocation& a) {
    if (a.persistent || !classifiable(a)) return;
    a.persistent = 1;
    if (a.device >= 0 && a.device < kMaxDevices) promoted[a.device] += a.bytes;
  });
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot()) return;
    GSHARE_DEBUG("GPU %s: framework cache emptied to measure P: %.1f MiB survived it, now persistent",
                 device.uuid, promoted[device.ordinal] / 1048576.0);
    device.account.arbiter().update([&] { publish_locked(device, promoted[device.ordinal], 0); });
  });
  pthread_mutex_unlock(&g_boundary_mutex);
}

void measure_framework_cache_if_due() {
  if (g_framework_answered.load(std::memory_order_relaxed)) return;
  if (!g_measure_due.exchange(false, std::memory_order_relaxed)) return;
  // Each classified boundary tries once, until one frees something or
  // kMeasureTries have not: then the lifetime classification stands.
  g_measure_tries.fetch_add(1);
  if (can_empty_framework_caches()) empty_framework_caches_and_measure();
}

namespace {
// The bytes an emptying of the framework caches freed; `emptied` tells
// whether a framework emptied its cache at all.
uint64_t empty_and_count(bool* emptied) {
  auto held = [] {
    uint64_t total = 0;
    for_each_attached_device([&](Device& d) { total += d.account.reserved_bytes(); });
    return total;
  };
  uint64_t before = held();
  {
    EmptyingCache emptying;
    *emptied = empty_framework_caches();
    if (!*emptied) return 0;
  }
  // A framework over a stream-ordered pool (PyTorch's cudaMallocAsync
  // backend) empties by trimming it: charge the pools as they are now.
  for_each_attached_device([](Device& d) { refresh_pool_charges(d); });
  uint64_t after = held();
  return before > after ? before - after : 0;
}

// After an emptying that gave memory back: what survived it is in use, not
// cache, and what has also lived two release points is persistent, even if
// born after the measuring emptying (a model built, or state created,
// after it). Without this such memory would count as ephemeral for good.
void promote_survivors_of_emptying() {
  if (g_counted.load()) return;  // P comes from the framework's figures
  pthread_mutex_lock(&g_boundary_mutex);
  const uint64_t releases = g_release_points.load(std::memory_order_relaxed);
  uint64_t promoted[kMaxDevices] = {};
  bool any = false;
  ledger().for_each([&](Allocation& a) {
    if (a.persistent || !classifiable(a) || uint64_t(a.birth_iteration) + 2 > releases) return;
    a.persistent = 1;
    if (a.device >= 0 && a.device < kMaxDevices) promoted[a.device] += a.bytes;
    any = true;
  });
  if (any) {
    for_each_attached_device([&](Device& device) {
      if (!device.account.slot() || promoted[device.ordinal] == 0) return;
      device.account.arbiter().update([&] { publish_locked(device, promoted[device.ordinal], 0); });
    });
  }
  pthread_mutex_unlock(&g_boundary_mutex);
}
}  // namespace

uint64_t empty_framework_caches_and_measure() {
  bool emptied = false;
  uint64_t freed = empty_and_count(&emptied);
  // Nothing freed: no framework cache here, and age still classifies.
  if (freed > 0) note_cache_emptied();
  return freed;
}

uint64_t give_back_framework_caches() {
  bool emptied = false;
  uint64_t freed = empty_and_count(&emptied);
  if (emptied && has_framework_cache()) promote_survivors_of_emptying();
  return freed;
}

bool has_framework_cache() {
  return g_counted.load(std::memory_order_relaxed) ||
         g_cache_emptied_at.load(std::memory_order_relaxed) != UINT64_MAX;
}

namespace {
// From now on P comes from the framework's figures: what lifetimes
// promoted goes back to ephemeral (so its frees leave P alone) and E's
// history, measured against the old P, starts again.
void start_counting_locked() {
  ledger().for_each([&](Allocation& a) { a.persistent = 0; });
  for (Peaks& p : g_peaks) p = Peaks{};
  g_counted.store(true);
  GSHARE_DEBUG("a framework answered with its allocator's figures: P comes from them from now on");
}

// Under the region's lock: P becomes `p`, and E's figures, peaks of what
// the job held beyond P, move the other way.
void set_persistent_locked(Device& device, uint64_t p) {
  shm::Slot& s = *device.account.slot();
  const uint64_t old = s.persistent_bytes, e_before = s.ephemeral_bytes;
  auto shifted = [&](uint64_t e) { return saturating_sub(e + old, p); };
  s.persistent_bytes = p;
  GSHARE_DEBUG("GPU %s: P %.1f -> %.1f MiB from the framework's figures", device.uuid, old / 1048576.0,
               p / 1048576.0);
  s.iteration_peak_bytes = shifted(s.iteration_peak_bytes);
  Peaks& h = g_peaks[device.ordinal];
  uint64_t e = 0;
  for (int i = 0; i < h.count; ++i) {
    h.peaks[i] = shifted(h.peaks[i]);
    e = h.peaks[i] > e ? h.peaks[i] : e;
  }
  s.ephemeral_bytes = s.class_iterations >= 2 && h.count > 0 ? e : shifted(s.ephemeral_bytes);
  device.account.arbiter().place_lanes_locked(p < old || s.ephemeral_bytes < e_before, nullptr);
}
}  // namespace

namespace {
// Under the region's lock: the device's window of in-use figures takes an
// observation, `observe(window, slot, held, iteration, &p)` (held: what
// the process holds beyond its context), and P moves where it says so.
template <class Observe>
void observe_in_use(Device& device, Observe&& observe) {
  device.account.arbiter().update([&] {
    shm::Slot& s = *device.account.slot();
    uint64_t held = saturating_sub(s.reserved_bytes, s.context_bytes);
    uint64_t p = 0;
    if (observe(g_in_use[device.ordinal], s, held, g_iterations.load(std::memory_order_relaxed), &p))
      set_persistent_locked(device, p);
  });
}
}  // namespace

void note_framework_counts(const FrameworkCount* counts, int n) {
  pthread_mutex_lock(&g_boundary_mutex);
  g_framework_answered.store(true, std::memory_order_relaxed);
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot() || device.ordinal >= kMaxDevices) return;
    uint64_t allocated = 0, reserved = 0;
    for (int i = 0; i < n; ++i) {
      if (counts[i].ordinal != device.ordinal) continue;
      allocated += counts[i].allocated;
      reserved += counts[i].reserved;
    }
    // Counted only once the framework has cached something: one that
    // caches nothing (PyTorch with PYTORCH_NO_CUDA_MEMORY_CACHING) frees to
    // the driver, and lifetimes classify it.
    if (reserved <= allocated && !g_counted.load()) return;
    if (!g_counted.load()) start_counting_locked();
    observe_in_use(device, [&](InUseWindow& w, const shm::Slot& s, uint64_t held, uint64_t iteration,
                               uint64_t* p) {
      // Figures from a moment gshare has not caught up with (a block the
      // framework counts before its allocation returned here) say nothing.
      if (held < allocated) return false;
      uint64_t in_use = saturating_sub(held, saturating_sub(reserved, allocated));
      return w.record(in_use, held, s.persistent_bytes, iteration, p);
    });
  });
  pthread_mutex_unlock(&g_boundary_mutex);
}

void note_cache_emptied_at_boundary() {
  if (!g_counted.load()) return;
  pthread_mutex_lock(&g_boundary_mutex);
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot() || device.ordinal >= kMaxDevices) return;
    observe_in_use(device, [](InUseWindow& w, const shm::Slot& s, uint64_t held, uint64_t iteration,
                              uint64_t* p) { return w.record_rest(held, s.persistent_bytes, iteration, p); });
  });
  pthread_mutex_unlock(&g_boundary_mutex);
}

void forget_classes_after_fork() {
  g_iterations.store(0);
  g_cache_emptied_at.store(UINT64_MAX);
  g_measure_due.store(false);
  g_measure_tries.store(0);
  g_raw_seen.store(0);
  g_release_points.store(0);
  g_freed_since_boundary.store(0);
  g_born_since_boundary.store(0);
  g_boundaries_without_free = 0;
  g_counted.store(false);
  g_framework_answered.store(false);
  for (InUseWindow& w : g_in_use) w = InUseWindow{};
  forget_framework_counts_after_fork();
  g_boundary_mutex = PTHREAD_MUTEX_INITIALIZER;
  forget_sites_after_fork();
  for (Peaks& p : g_peaks) p = Peaks{};
}

}  // namespace gshare::allocator
