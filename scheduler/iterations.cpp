#include "scheduler/iterations.h"

#include <pthread.h>

#include <atomic>

#include "base/log.h"
#include "base/tunables.h"
#include "scheduler/launch_detours.h"

namespace gshare::scheduler {
// One for the first observation window, open from the first launch.
std::atomic<int> g_launch_detours{1};
}  // namespace gshare::scheduler

namespace gshare::scheduler::iterations {

namespace {

// --- syncs ---
using tunables::kMaxSyncPeriod;
constexpr int kGapHistory = 4 * kMaxSyncPeriod;
using tunables::kBoundaryBytesSlack;
using tunables::kStaleIterations;
using tunables::kStaleMinLaunches;
using tunables::kProbation;

// Launch counts of one loop can differ by a kernel or two (an allocator's
// occasional memset): equal within 1%.
bool same_gap(uint64_t a, uint64_t b) {
  uint64_t d = a > b ? a - b : b - a;
  uint64_t larger = a > b ? a : b;
  return d * 100 <= larger;
}

uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

struct SyncPattern {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  uint64_t last_launches = 0;
  uint64_t gaps[kGapHistory] = {};   // launches between consecutive syncs
  uint64_t bytes[kGapHistory] = {};  // the process's device memory at each sync
  uint64_t count = 0;                // gaps seen
  std::atomic<int> period{0};  // syncs per iteration; 0: none (read without the mutex)
  int phase = 0;       // syncs since the last iteration boundary
  uint64_t boundary_ns = 0;
  uint64_t iterations = 0;
  uint64_t iteration_ns = 0;
  uint64_t launches_per_iteration = 0;
  bool last_was_boundary = true;
  // Where a known period was lost (a logging or evaluation step): if the
  // same loop comes back (same period, same launches), the iterations in
  // between are counted.
  int lost_period = 0;
  uint64_t lost_at_count = 0;
  uint64_t lost_launches_per_iteration = 0;
  // A pattern that ends within kProbation iterations was a burst (a model's
  // set-up syncing after each of a few equal launches), not a loop: its
  // iterations are taken back, and given back should the same loop return.
  uint64_t iterations_at_found = 0;
  uint64_t revoked = 0;

  // As at start: no gap seen, no pattern (under the caller's reset of the
  // mutex).
  void reset() {
    last_launches = 0;
    count = 0;
    period.store(0);
    phase = 0;
    boundary_ns = 0;
    iterations = 0;
    iteration_ns = 0;
    launches_per_iteration = 0;
    last_was_boundary = true;
    lost_period = 0;
    lost_at_count = 0;
    lost_launches_per_iteration = 0;
    iterations_at_found = 0;
    revoked = 0;
  }

  void end_pattern() {
    uint64_t counted = iterations - iterations_at_found;
    revoked = counted < kProbation ? counted : 0;
    iterations -= revoked;
  }

  uint64_t at(const uint64_t* ring, uint64_t back) const { return ring[(count - 1 - back) % kGapHistory]; }
  uint64_t gap(uint64_t back) const { return at(gaps, back); }

  // How many of the latest gaps, newest first, equal the gap k before them.
  uint64_t run(int k) const {
    uint64_t usable = count < uint64_t(kGapHistory) ? count : uint64_t(kGapHistory);
    uint64_t j = 0;
    while (j + uint64_t(k) < usable && same_gap(gap(j), gap(j + uint64_t(k)))) ++j;
    return j;
  }

  // The period is the k whose pattern explains the longest stretch of
  // recent history, once it has repeated three times. Taking the longest
  // (not the smallest k that repeats) keeps a run of equal pieces inside
  // one step from passing for steps once a step's end has been seen: the
  // step's period then explains more, and until it has repeated three
  // times nothing is found. The boundary is the sync of the period with
  // the least memory (a step's activations are gone at its end), and the
  // memory there must not grow from period to period: where every piece
  // of a step has as many launches, only the memory tells the pieces
  // (which grow it) from steps. Returns the period and, in
  // *since_boundary, how many syncs ago the latest boundary was.
  int find_period(int* since_boundary) const {
    uint64_t runs[kMaxSyncPeriod + 1] = {};
    for (int k = 1; k <= kMaxSyncPeriod; ++k) runs[k] = run(k);
    bool tried[kMaxSyncPeriod + 1] = {};
    for (;;) {
      int k = 0;  // the untried period with the longest run
      for (int c = 1; c <= kMaxSyncPeriod; ++c)
        if (!tried[c] && runs[c] > 0 && (k == 0 || runs[c] > runs[k])) k = c;
      if (k == 0 || runs[k] < uint64_t(2 * k)) return 0;
      tried[k] = true;
      if (int since = boundary_by_memory(uint64_t(k)); since >= 0) {
        *since_boundary = since;
        return k;
      }
    }
  }

  // For period k: how many syncs ago its boundary was (the sync of least
  // memory), or -1 if the memory there grows from period to period.
  int boundary_by_memory(uint64_t k) const {
    uint64_t low = 0;
    for (uint64_t j = 1; j < k; ++j)
      if (at(bytes, j) < at(bytes, low)) low = j;
    uint64_t newest = at(bytes, low), one = at(bytes, low + k), two = at(bytes, low + 2 * k);
    if (distance(newest, one) > kBoundaryBytesSlack || distance(one, two) > kBoundaryBytesSlack) return -1;
    return int(low);
  }
};
SyncPattern g_syncs;

// --- launches ---
// A window records launches, and the allocations, frees and syncs between
// them (they mark where a step's pieces begin and end), until it holds
// kWindowSamples or has lasted kMaxWindowNs. It is analysed at 0.5 s, then
// each time its age doubles (every 4 s from 4 s on), and closes at the
// first period found: a step of 5 s shows two periods at 12 s.
using tunables::kWindowSamples;
using tunables::kFirstAnalysisNs;
using tunables::kMaxWindowNs;
using tunables::kMaxAnalysisStepNs;
using tunables::kSearchEveryNs;
using tunables::kRecheckEveryNs;
constexpr uint32_t kMinPeriod = 2;  // one launch repeated is no structure
using tunables::kMismatchesPer;
// Samples a launch may still be writing when an open window is analysed.
constexpr uint32_t kInFlightSamples = 64;

// Symbols that are not launches: never a function's address (aligned).
constexpr uintptr_t kAllocationSymbol = 1, kFreeSymbol = 3, kSyncSymbol = 5;
bool is_launch(const void* symbol) { return (uintptr_t(symbol) & 1) == 0; }

struct Sample {
  const void* symbol;
  uint64_t number;  // the launch count before it: a launch's own number
  uint64_t ns;
};
// Static zeroed storage: untouched pages until a window first opens.
Sample g_samples[kWindowSamples];
std::atomic<uint32_t> g_filled{0};
// The first window is open from the first launch (g_launch_detours starts
// at one for it), so that a loop's first iterations are seen and counted.
std::atomic<bool> g_window_open{true};
// Upkeep thread only:
uint64_t g_window_opened_ns = 0;
uint64_t g_window_closed_ns = 0;
uint64_t g_next_analysis_ns = 0;  // age of the window at its next analysis
uint64_t g_launches_at_last_tick = 0;

struct LaunchPattern {
  std::atomic<uint32_t> period{0};  // launches per iteration; 0: none
  std::atomic<const void*> anchor_function{nullptr};
  std::atomic<uint64_t> anchor_number{0};
  std::atomic<uint64_t> iteration_ns{0};
  // Iterations counted before anchor_number (upkeep thread writes).
  std::atomic<uint64_t> iterations_before{0};
};
LaunchPattern g_launches;
// The launch count where counting stopped: the last sync of a pattern gone
// stale, or where a launch pattern was lost (upkeep thread and hot path).
std::atomic<uint64_t> g_uncounted_from{0};

void close_window(uint64_t now_ns) {
  if (!g_window_open.exchange(false)) return;
  g_launch_detours.fetch_sub(1, std::memory_order_relaxed);
  g_window_closed_ns = now_ns;
}

void record(const void* symbol, uint64_t number, uint64_t now_ns) {
  uint32_t i = g_filled.fetch_add(1, std::memory_order_relaxed);
  if (i < kWindowSamples) g_samples[i] = {symbol, number, now_ns};
}

// How many of the window's n latest samples must repeat with period p:
// two periods, and half the window.
uint32_t repeating_stretch(uint32_t n, uint32_t p) { return 2 * p > (n + 1) / 2 ? 2 * p : (n + 1) / 2; }

// The samples in [start, n) repeat with period p, allowing one mismatch
// in kMismatchesPer.
bool repeats(const Sample* s, uint32_t n, uint32_t p, uint32_t start) {
  uint32_t compared = n - start - p;
  uint32_t allowed = compared / kMismatchesPer, mismatches = 0;
  for (uint32_t i = n - 1; i >= start + p && mismatches <= allowed; --i)
    mismatches += s[i].symbol != s[i - p].symbol;
  return mismatches <= allowed;
}

// A step frees what it allocates: a stretch of a forward pass that
// allocates as it goes is not a step, however regularly it repeats.
bool balanced(const Sample* s, uint32_t n, uint32_t p) {
  int64_t net = 0;
  for (uint32_t i = n - p; i < n; ++i) {
    if (s[i].symbol == reinterpret_cast<const void*>(kAllocationSymbol)) net++;
    if (s[i].symbol == reinterpret_cast<const void*>(kFreeSymbol)) net--;
  }
  return net == 0;
}

// The smallest period p of the window's latest samples. The stretch that
// repeats must hold two periods and half the window: a loop inside a step
// (a model's layers) repeats over a shorter stretch than the step once the
// window holds two steps, and a set-up before the first step may fill the
// window's first half.
uint32_t find_period(const Sample* s, uint32_t n) {
  for (uint32_t p = kMinPeriod; 2 * p <= n; ++p) {
    uint32_t covered = repeating_stretch(n, p);
    if (repeats(s, n, p, n - covered) && balanced(s, n, p)) return p;
  }
  return 0;
}

void forget_stale_sync_pattern(uint64_t launches) {
  SyncPattern& s = g_syncs;
  pthread_mutex_lock(&s.mutex);
  uint64_t limit = kStaleIterations * s.launches_per_iteration;
  if (limit < kStaleMinLaunches) limit = kStaleMinLaunches;
  if (s.period > 0 && launches - s.last_launches > limit) {
    GSHARE_LOG(LogLevel::kDebug, "iterations: sync period %d stale: %llu launches without a sync",
               s.period.load(), (unsigned long long)(launches - s.last_launches));
    s.lost_period = 0;  // not the same loop coming back: nothing to make up
    s.end_pattern();
    g_uncounted_from.store(s.last_launches, std::memory_order_relaxed);
    s.period = 0;
    s.last_was_boundary = true;
  }
  pthread_mutex_unlock(&s.mutex);
}

// The loop changed: what was counted stays counted.
void forget_launch_pattern(uint64_t launches) {
  uint32_t p = g_launches.period.load(std::memory_order_relaxed);
  if (p == 0) return;
  uint64_t anchor = g_launches.anchor_number.load(std::memory_order_relaxed);
  g_launches.iterations_before.fetch_add(launches > anchor ? (launches - anchor) / p : 0,
                                         std::memory_order_relaxed);
  g_uncounted_from.store(launches, std::memory_order_relaxed);
  g_launches.period.store(0, std::memory_order_relaxed);
}

// Finds the pattern in the first n samples; true if one was found.
bool analyse_window(uint32_t n) {
  uint32_t p = find_period(g_samples, n);
  if (p == 0) return false;
  uint32_t launches_per_period = uint32_t(g_samples[n - 1].number - g_samples[n - 1 - p].number);
  if (launches_per_period < kMinPeriod) return false;
  // The iteration starts where the host paused longest, at the first launch
  // from there on: where a loop does its data loading and bookkeeping.
  uint32_t first = n - (n / p) * p;
  uint32_t best = 0;
  uint64_t best_gap = 0;
  for (uint32_t r = 0; r < p; ++r) {
    uint64_t gap = 0;
    for (uint32_t i = first + r; i < n; i += p)
      if (i > 0 && g_samples[i].ns > g_samples[i - 1].ns) gap += g_samples[i].ns - g_samples[i - 1].ns;
    if (gap > best_gap) best_gap = gap, best = r;
  }
  uint32_t anchor = n - p + best;
  for (uint32_t tries = 0; tries < p && !is_launch(g_samples[anchor].symbol); ++tries)
    anchor = anchor + 1 < n ? anchor + 1 : anchor + 1 - p;
  // Iterations so far: those of a pattern that held before, or the whole
  // iterations of the stretch that repeats before the anchor.
  uint64_t before;
  uint32_t old = g_launches.period.load(std::memory_order_relaxed);
  if (old > 0) {
    uint64_t old_anchor = g_launches.anchor_number.load(std::memory_order_relaxed);
    before = g_launches.iterations_before.load(std::memory_order_relaxed) +
             (g_samples[anchor].number > old_anchor ? (g_samples[anchor].number - old_anchor) / old : 0);
  } else {
    // The first sample compared with one a period before it, moved back
    // while the two still agree: the stretch starts a period earlier.
    uint32_t from = n + p - repeating_stretch(n, p);
    while (from > p && g_samples[from - 1].symbol == g_samples[from - 1 - p].symbol) --from;
    before = g_launches.iterations_before.load(std::memory_order_relaxed) + (anchor - (from - p)) / p;
    // A loop that repeats from the window's first sample ran before it too,
    // since counting stopped (a sync pattern went stale).
    uint64_t stopped = g_uncounted_from.load(std::memory_order_relaxed);
    if (from == p && g_samples[0].number > stopped)
      before += (g_samples[0].number - stopped) / launches_per_period;
  }
  g_launches.iterations_before.store(before, std::memory_order_relaxed);
  g_launches.anchor_function.store(g_samples[anchor].symbol, std::memory_order_relaxed);
  g_launches.anchor_number.store(g_samples[anchor].number, std::memory_order_relaxed);
  g_launches.iteration_ns.store(g_samples[anchor].ns - g_samples[anchor - p].ns, std::memory_order_relaxed);
  g_launches.period.store(launches_per_period, std::memory_order_release);
  GSHARE_LOG(LogLevel::kDebug, "iterations: launch period %u (%u samples) found in %u samples, %llu before",
             launches_per_period, p, n, (unsigned long long)before);
  return true;
}

}  // namespace

bool on_sync(uint64_t launches, uint64_t process_bytes, uint64_t now_ns) {
  if (observing()) record(reinterpret_cast<const void*>(kSyncSymbol), launches, now_ns);
  SyncPattern& s = g_syncs;
  pthread_mutex_lock(&s.mutex);
  uint64_t gap = launches - s.last_launches;
  s.last_launches = launches;
  if (gap != 0) {  // a sync with nothing launched since the last one adds nothing
    s.gaps[s.count % kGapHistory] = gap;
    s.bytes[s.count % kGapHistory] = process_bytes;
    s.count++;
    int period = s.period.load();
    if (period > 0 && !same_gap(gap, s.gap(uint64_t(period)))) {  // the loop changed
      GSHARE_LOG(LogLevel::kDebug, "iterations: sync period %d lost after %llu iterations (gap %llu, was %llu)",
                 period, (unsigned long long)s.iterations, (unsigned long long)gap,
                 (unsigned long long)s.gap(uint64_t(period)));
      s.lost_period = period;
      s.lost_at_count = s.count - 1 - uint64_t(s.phase);
      s.lost_launches_per_iteration = s.launches_per_iteration;
      s.end_pattern();
      s.period = period = 0;
    }
    if (period > 0) {
      s.phase = (s.phase + 1) % period;
      s.last_was_boundary = s.phase == 0;
    } else if (int since = 0; (period = s.find_period(&since)) > 0) {
      s.period = period;
      s.phase = since;
      s.last_was_boundary = since == 0;
      s.boundary_ns = 0;
      uint64_t latest = s.count - uint64_t(since);  // the count at the latest boundary
      uint64_t launches_now = 0;
      for (int k = 0; k < period; ++k) launches_now += s.gap(uint64_t(since + k));
      if (period == s.lost_period && same_gap(launches_now, s.lost_launches_per_iteration) &&
          latest > s.lost_at_count)
        s.iterations += s.revoked + (latest - s.lost_at_count) / uint64_t(period);
      s.lost_period = 0;
      s.revoked = 0;
      s.iterations_at_found = s.iterations;
      GSHARE_LOG(LogLevel::kDebug,
                 "iterations: sync period %d found at sync %llu (gap %llu, %llu bytes, boundary %d syncs ago, "
                 "%llu iterations)",
                 period, (unsigned long long)s.count, (unsigned long long)gap,
                 (unsigned long long)process_bytes, since, (unsigned long long)s.iterations);
    } else {
      s.last_was_boundary = true;
    }
    if (period > 0 && s.phase == 0) {
      if (s.boundary_ns != 0) {
        s.iterations++;
        s.iteration_ns = now_ns - s.boundary_ns;
      }
      s.boundary_ns = now_ns;
      uint64_t total = 0;
      for (int k = 0; k < period; ++k) total += s.gap(uint64_t(k));
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
  uint64_t anchor = g_launches.anchor_number.load(std::memory_order_relaxed);
  if (launch_number < anchor) return false;
  if ((launch_number - anchor) % p != 0) return false;
  if (function != g_launches.anchor_function.load(std::memory_order_relaxed))
    forget_launch_pattern(launch_number);  // out of step: look again
  return true;
}

bool between_iterations(uint64_t launches) {
  SyncPattern& s = g_syncs;
  uint32_t p = g_launches.period.load(std::memory_order_acquire);
  if (s.period.load() == 0 && p > 0) {
    uint64_t anchor = g_launches.anchor_number.load(std::memory_order_relaxed);
    return launches >= anchor && (launches - anchor) % p == 0;
  }
  pthread_mutex_lock(&s.mutex);
  bool between = s.last_was_boundary && launches == s.last_launches;
  pthread_mutex_unlock(&s.mutex);
  return between;
}

bool observing() { return g_window_open.load(std::memory_order_relaxed); }

void record_launch(const void* function, uint64_t launch_number, uint64_t now_ns) {
  record(function, launch_number, now_ns);
}

void record_memory_event(bool allocation, uint64_t launches, uint64_t now_ns) {
  record(reinterpret_cast<const void*>(allocation ? kAllocationSymbol : kFreeSymbol), launches, now_ns);
}

void tick(uint64_t launches, uint64_t now_ns) {
  bool launching = launches != g_launches_at_last_tick;
  g_launches_at_last_tick = launches;
  if (g_syncs.period > 0) forget_stale_sync_pattern(launches);
  if (g_window_open.load() && g_syncs.period > 0) {
    close_window(now_ns);  // iterations come from syncs
    return;
  }
  if (g_window_open.load()) {
    if (g_window_opened_ns == 0) {
      if (!launching) return;  // the first window: its age counts from the first launches
      g_window_opened_ns = now_ns;
      g_next_analysis_ns = kFirstAnalysisNs;
    }
    uint64_t age = now_ns - g_window_opened_ns;
    uint32_t filled = g_filled.load(std::memory_order_relaxed);
    bool full = filled >= kWindowSamples;
    if (!full && age < g_next_analysis_ns && age < kMaxWindowNs) return;
    uint32_t n = full ? kWindowSamples : filled;
    n = n > kInFlightSamples ? n - kInFlightSamples : 0;
    if (analyse_window(n) || full || age >= kMaxWindowNs) {
      if (full || age >= kMaxWindowNs) forget_launch_pattern(launches);
      close_window(now_ns);
    } else {
      g_next_analysis_ns = age + (age < kMaxAnalysisStepNs ? age : kMaxAnalysisStepNs);
    }
    return;
  }
  if (!launching || g_syncs.period > 0) return;
  uint64_t every = g_launches.period.load() ? kRecheckEveryNs : kSearchEveryNs;
  if (g_window_closed_ns != 0 && now_ns - g_window_closed_ns < every) return;
  g_filled.store(0, std::memory_order_relaxed);
  g_window_opened_ns = now_ns;
  g_next_analysis_ns = kFirstAnalysisNs;
  if (uint64_t known = g_launches.iteration_ns.load(); g_launches.period.load() && 2 * known > g_next_analysis_ns)
    g_next_analysis_ns = 2 * known + known / 2;
  g_window_open.store(true);
  g_launch_detours.fetch_add(1, std::memory_order_relaxed);
}

Estimate current(uint64_t launches) {
  Estimate e;
  pthread_mutex_lock(&g_syncs.mutex);
  bool from_syncs = g_syncs.period > 0 && g_syncs.iteration_ns > 0;
  uint64_t sync_iterations = g_syncs.iterations;
  if (from_syncs || sync_iterations > 0) {
    e.source = shm::kIterationsFromSyncs;
    e.iterations = sync_iterations;
    e.iteration_ns = g_syncs.iteration_ns;
    e.launches_per_iteration = uint32_t(g_syncs.launches_per_iteration);
  }
  pthread_mutex_unlock(&g_syncs.mutex);
  if (from_syncs) return e;
  // Iterations counted from syncs (before the loop stopped syncing) stay
  // counted under a launch pattern, and also while a changed loop is
  // looked at again.
  if (uint32_t p = g_launches.period.load(std::memory_order_acquire); p > 0) {
    uint64_t anchor = g_launches.anchor_number.load(std::memory_order_relaxed);
    e.source = shm::kIterationsFromLaunches;
    e.iterations = sync_iterations + g_launches.iterations_before.load(std::memory_order_relaxed) +
                   (launches > anchor ? (launches - anchor) / p : 0);
    e.iteration_ns = g_launches.iteration_ns.load(std::memory_order_relaxed);
    e.launches_per_iteration = p;
  }
  return e;
}

void forget_after_fork() {
  // The child's launch count starts again from zero: a gap measured from
  // the parent's count would wrap.
  g_syncs.mutex = PTHREAD_MUTEX_INITIALIZER;
  g_syncs.reset();
  g_window_open.store(false);
  g_filled.store(0);
  g_window_opened_ns = 0;
  g_window_closed_ns = 0;
  g_next_analysis_ns = 0;
  g_launches_at_last_tick = 0;
  g_launches.period.store(0);
  g_launches.anchor_function.store(nullptr);
  g_launches.anchor_number.store(0);
  g_launches.iteration_ns.store(0);
  g_launches.iterations_before.store(0);
  g_uncounted_from.store(0);
}

}  // namespace gshare::scheduler::iterations
