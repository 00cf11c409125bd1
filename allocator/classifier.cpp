#include "allocator/classifier.h"

#include "allocator/class_state.h"
#include "allocator/framework_classes.h"
#include "allocator/site_classes.h"
#include "allocator/tracked_memory.h"
#include "base/saturating.h"

namespace gshare::allocator {

namespace classes {

pthread_mutex_t g_boundary_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<uint64_t> g_iterations{0};
std::atomic<uint64_t> g_release_points{0};
std::atomic<uint64_t> g_cache_emptied_at{UINT64_MAX};
std::atomic<bool> g_measure_due{false};
std::atomic<int> g_measure_tries{0};
std::atomic<bool> g_counted{false};
__thread int t_emptying_cache = 0;
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


}  // namespace classes

using namespace classes;

namespace {

std::atomic<uint64_t> g_raw_seen{0};  // the scheduler's count last seen
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
using tunables::kMeasureTries;

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
  // By age, unless the framework's figures give P: then the ledger is not
  // read at all.
  const bool by_age = !g_counted.load(std::memory_order_relaxed);
  if (by_age) ledger().for_each([&](Allocation& a) {
    if (a.persistent || !classifiable(a) || uint64_t(a.birth_iteration) + 2 > releases) return;
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
  g_boundary_mutex = PTHREAD_MUTEX_INITIALIZER;
  for (Peaks& p : g_peaks) p = Peaks{};
  forget_sites_after_fork();
  forget_framework_classes_after_fork();
}

}  // namespace gshare::allocator
