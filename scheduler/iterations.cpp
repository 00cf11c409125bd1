#include "scheduler/iterations.h"

#include <pthread.h>

#include <atomic>

#include "scheduler/launch_gate.h"

namespace gshare::scheduler::iterations {

namespace {

// --- syncs ---
constexpr int kGapHistory = 64;
constexpr int kMaxSyncPeriod = 8;
constexpr int kRepeats = 3;  // a period counts once seen three times in a row

// Launch counts of one loop can differ by a kernel or two (an allocator's
// occasional memset): equal within 1%.
bool same_gap(uint64_t a, uint64_t b) {
  uint64_t d = a > b ? a - b : b - a;
  uint64_t larger = a > b ? a : b;
  return d * 100 <= larger;
}

struct SyncPattern {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  uint64_t last_launches = 0;
  uint64_t gaps[kGapHistory] = {};
  uint64_t count = 0;  // gaps seen
  std::atomic<int> period{0};  // syncs per iteration; 0: none (read without the mutex)
  int phase = 0;       // syncs since the last iteration boundary
  uint64_t boundary_ns = 0;
  uint64_t iterations = 0;
  uint64_t iteration_ns = 0;
  uint64_t launches_per_iteration = 0;
  bool last_was_boundary = true;

  uint64_t gap(uint64_t back) const { return gaps[(count - 1 - back) % kGapHistory]; }

  int find_period() const {
    for (int k = 1; k <= kMaxSyncPeriod; ++k) {
      if (count < uint64_t(k * kRepeats)) return 0;
      bool repeats = true;
      for (int j = 0; j < k * (kRepeats - 1) && repeats; ++j) repeats = same_gap(gap(j), gap(j + k));
      if (repeats) return k;
    }
    return 0;
  }
};
SyncPattern g_syncs;

// --- launches ---
constexpr uint32_t kWindowLaunches = 8192;
constexpr uint64_t kWindowNs = 500'000'000;
constexpr uint64_t kSearchEveryNs = 1'000'000'000;   // while no pattern is known
constexpr uint64_t kRecheckEveryNs = 5'000'000'000;  // to refresh a known one
constexpr uint32_t kMinPeriod = 2;  // one function repeated is no structure

struct Sample {
  const void* function;
  uint64_t number;
  uint64_t ns;
};
// Static zeroed storage: untouched pages until a window first opens.
Sample g_samples[kWindowLaunches];
std::atomic<uint32_t> g_filled{0};
std::atomic<bool> g_window_open{false};
bool g_window_pending = false;  // closed, not yet analysed (upkeep thread only)
uint64_t g_window_opened_ns = 0;
uint64_t g_window_closed_ns = 0;

struct LaunchPattern {
  std::atomic<uint32_t> period{0};  // launches per iteration; 0: none
  std::atomic<const void*> anchor_function{nullptr};
  std::atomic<uint64_t> anchor_number{0};
  std::atomic<uint64_t> iteration_ns{0};
};
LaunchPattern g_launches;

void close_window(uint64_t now_ns) {
  if (!g_window_open.exchange(false)) return;
  g_launch_detours.fetch_sub(1, std::memory_order_relaxed);
  g_window_closed_ns = now_ns;
  g_window_pending = true;
}

// Smallest p such that the last 2p samples repeat the p before them.
uint32_t find_launch_period(const Sample* s, uint32_t n) {
  for (uint32_t p = 1; p * 3 <= n; ++p) {
    bool repeats = true;
    for (uint32_t i = n - 2 * p; i < n && repeats; ++i) repeats = s[i].function == s[i - p].function;
    if (repeats) return p;
  }
  return 0;
}

void analyse_window() {
  uint32_t n = g_filled.load(std::memory_order_relaxed);
  if (n > kWindowLaunches) n = kWindowLaunches;
  uint32_t p = find_launch_period(g_samples, n);
  if (p < kMinPeriod) {
    g_launches.period.store(0, std::memory_order_relaxed);
    return;
  }
  // The iteration starts where the host paused longest before a launch.
  uint32_t first = n - 3 * p;
  uint32_t best = 0;
  uint64_t best_gap = 0;
  for (uint32_t r = 0; r < p; ++r) {
    uint64_t gap = 0;
    for (uint32_t i = first + r; i < n; i += p)
      if (i > 0 && g_samples[i].ns > g_samples[i - 1].ns) gap += g_samples[i].ns - g_samples[i - 1].ns;
    if (gap > best_gap) best_gap = gap, best = r;
  }
  uint32_t anchor = n - p + best;
  g_launches.anchor_function.store(g_samples[anchor].function, std::memory_order_relaxed);
  g_launches.anchor_number.store(g_samples[anchor].number, std::memory_order_relaxed);
  g_launches.iteration_ns.store(g_samples[anchor].ns - g_samples[anchor - p].ns,
                                std::memory_order_relaxed);
  g_launches.period.store(p, std::memory_order_release);
}

}  // namespace

bool on_sync(uint64_t launches, uint64_t now_ns) {
  SyncPattern& s = g_syncs;
  pthread_mutex_lock(&s.mutex);
  uint64_t gap = launches - s.last_launches;
  s.last_launches = launches;
  if (gap != 0) {  // a sync with nothing launched since the last one adds nothing
    s.gaps[s.count % kGapHistory] = gap;
    s.count++;
    if (s.period > 0 && !same_gap(gap, s.gap(uint64_t(s.period.load())))) s.period = 0;  // the loop changed
    if (s.period > 0) {
      s.phase = (s.phase + 1) % s.period;
      s.last_was_boundary = s.phase == 0;
    } else if (int period = s.find_period(); period > 0) {
      s.period = period;
      s.phase = 0;
      s.last_was_boundary = true;
      s.boundary_ns = 0;
    } else {
      s.last_was_boundary = true;
    }
    if (s.period > 0 && s.phase == 0) {
      if (s.boundary_ns != 0) {
        s.iterations++;
        s.iteration_ns = now_ns - s.boundary_ns;
      }
      s.boundary_ns = now_ns;
      uint64_t total = 0;
      for (int k = 0; k < s.period.load(); ++k) total += s.gap(uint64_t(k));
      s.launches_per_iteration = total;
    }
  }
  bool boundary = s.last_was_boundary;
  pthread_mutex_unlock(&s.mutex);
  return boundary;
}

bool sync_would_end_iteration(uint64_t launches) {
  SyncPattern& s = g_syncs;
  pthread_mutex_lock(&s.mutex);
  uint64_t gap = launches - s.last_launches;
  bool boundary = s.last_was_boundary;
  if (gap != 0) {
    int period = s.period.load();
    // The gap it would compare with is one period back once this one is in.
    boundary = period == 0 || ((s.phase + 1) % period == 0 &&
                               same_gap(gap, s.gap(uint64_t(period - 1))));
  }
  pthread_mutex_unlock(&s.mutex);
  return boundary;
}

bool launch_is_boundary(const void* function, uint64_t launch_number) {
  if (g_syncs.period > 0) return false;  // racy read: a hint; the sync decides
  uint32_t p = g_launches.period.load(std::memory_order_acquire);
  if (p == 0) return true;
  uint64_t since = launch_number - g_launches.anchor_number.load(std::memory_order_relaxed);
  if (since % p != 0) return false;
  if (function != g_launches.anchor_function.load(std::memory_order_relaxed))
    g_launches.period.store(0, std::memory_order_relaxed);  // out of step: look again
  return true;
}

bool observing() { return g_window_open.load(std::memory_order_relaxed); }

void record_launch(const void* function, uint64_t launch_number, uint64_t now_ns) {
  uint32_t i = g_filled.fetch_add(1, std::memory_order_relaxed);
  if (i < kWindowLaunches) g_samples[i] = {function, launch_number, now_ns};
  if (i + 1 >= kWindowLaunches) close_window(now_ns);
}

void tick(uint64_t launches, uint64_t now_ns) {
  static uint64_t launches_at_last_tick = 0;
  bool launching = launches != launches_at_last_tick;
  launches_at_last_tick = launches;
  if (g_window_open.load() && now_ns - g_window_opened_ns >= kWindowNs) close_window(now_ns);
  if (g_window_pending && !g_window_open.load()) {
    // Analysed a tick after closing, so launches that raced the close are done writing.
    if (now_ns - g_window_closed_ns >= 100'000'000) {
      analyse_window();
      g_window_pending = false;
    }
    return;
  }
  if (g_window_open.load() || !launching || g_syncs.period > 0) return;
  uint64_t every = g_launches.period.load() ? kRecheckEveryNs : kSearchEveryNs;
  if (g_window_closed_ns != 0 && now_ns - g_window_closed_ns < every) return;
  g_filled.store(0, std::memory_order_relaxed);
  g_window_opened_ns = now_ns;
  g_window_open.store(true);
  g_launch_detours.fetch_add(1, std::memory_order_relaxed);
}

Estimate current(uint64_t launches) {
  Estimate e;
  if (g_syncs.period > 0 && g_syncs.iteration_ns > 0) {
    pthread_mutex_lock(&g_syncs.mutex);
    e.source = shm::kIterationsFromSyncs;
    e.iterations = g_syncs.iterations;
    e.iteration_ns = g_syncs.iteration_ns;
    e.launches_per_iteration = uint32_t(g_syncs.launches_per_iteration);
    pthread_mutex_unlock(&g_syncs.mutex);
    return e;
  }
  if (uint32_t p = g_launches.period.load(std::memory_order_acquire); p > 0) {
    e.source = shm::kIterationsFromLaunches;
    e.iterations = launches / p;
    e.iteration_ns = g_launches.iteration_ns.load(std::memory_order_relaxed);
    e.launches_per_iteration = p;
  }
  return e;
}

void forget_after_fork() {
  g_syncs.mutex = PTHREAD_MUTEX_INITIALIZER;
  g_syncs.period.store(0);
  g_syncs.count = 0;
  g_window_open.store(false);
  g_window_pending = false;
  g_launches.period.store(0);
}

}  // namespace gshare::scheduler::iterations
