#include "allocator/framework_classes.h"

#include "allocator/class_state.h"
#include "allocator/framework_caches.h"
#include "allocator/framework_counts.h"
#include "allocator/in_use_window.h"
#include "allocator/pools.h"
#include "allocator/tracked_memory.h"
#include "base/log.h"
#include "base/saturating.h"

namespace gshare::allocator {

using namespace classes;

namespace {

// A framework has answered at all, cached or not: its figures will give P
// once it caches, so no emptying is needed to measure it (one mid-step
// would make a step's live memory persistent).
std::atomic<bool> g_framework_answered{false};
// The last answers' in-use figures per device, under g_boundary_mutex.
InUseWindow g_in_use[kMaxDevices];

// Marks the frees that follow as a cache being emptied: their sites learn
// "ephemeral" (allocator/classifier.cpp, note_death). Scoped.
struct EmptyingCache {
  EmptyingCache() { ++t_emptying_cache; }
  ~EmptyingCache() { --t_emptying_cache; }
};

// The framework emptied its cache to be measured: what is still alive is
// persistent, and memory born from now on is not promoted by age. After the
// emptying, from the thread that did it.
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
// Has the frameworks empty their caches (if this thread can) and, if that
// freed anything, notes it (note_cache_emptied). Returns the bytes freed.
// Only this measuring emptying may promote: anywhere else, what survives
// may be a live iteration's memory.
uint64_t empty_framework_caches_and_measure() {
  bool emptied = false;
  uint64_t freed = empty_and_count(&emptied);
  // Nothing freed: no framework cache here, and age still classifies.
  if (freed > 0) note_cache_emptied();
  return freed;
}

}  // namespace

void measure_framework_cache_if_due() {
  if (g_framework_answered.load(std::memory_order_relaxed)) return;
  if (!g_measure_due.exchange(false, std::memory_order_relaxed)) return;
  // Each classified boundary tries once, until one frees something or
  // kMeasureTries have not: then the lifetime classification stands.
  g_measure_tries.fetch_add(1);
  if (can_empty_framework_caches()) empty_framework_caches_and_measure();
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

void forget_framework_classes_after_fork() {
  g_framework_answered.store(false);
  for (InUseWindow& w : g_in_use) w = InUseWindow{};
  forget_framework_counts_after_fork();
}

}  // namespace gshare::allocator
