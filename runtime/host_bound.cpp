#include "runtime/host_bound.h"

#include <algorithm>
#include <atomic>

#include "allocator/devices.h"
#include "base/clock.h"
#include "rules/host_bound.h"
#include "rules/leaves_gaps.h"
#include "runtime/gpu_busy.h"
#include "scheduler/token.h"

namespace gshare::runtime {

namespace {
// The process's waits for the GPU, all threads: their time and number.
std::atomic<uint64_t> g_wait_ns{0};
std::atomic<uint64_t> g_waits{0};
std::atomic<bool> g_skip_next_wait{false};
thread_local int t_depth = 0;
thread_local uint64_t t_began = 0;  // 0: this wait is not counted

// What the last judgement on each GPU started from: when, the process's
// waits for the token by then, and its waits for the GPU.
struct Window {
  const shm::Slot* slot = nullptr;  // another slot (a new attach): nothing yet
  uint64_t at_ns = 0, token_wait_ns = 0, wait_ns = 0, waits = 0;
  uint32_t shared_runs = 0;  // Slot::shared_runs then
  bool shared = false;       // in a shared turn then
  rules::HostBoundState state;  // the verdict so far
  uint32_t own_wait_permille = rules::kNoWaitShare;  // a running mean over windows not shared
  uint32_t read_permille = 0;  // the GPU share read in the window so far; 0: none
  // Where the current streak's first window began (rules/host_bound.h):
  // a reading of work begun before it is of other work, never judged on.
  uint64_t streak_from_ns = 0;
};
Window g_windows[allocator::kMaxDevices];
}  // namespace

void begin_gpu_wait() {
  if (t_depth++ != 0) return;
  t_began = g_skip_next_wait.load(std::memory_order_relaxed) && g_skip_next_wait.exchange(false) ? 0 : mono_now_ns();
}

void end_gpu_wait() {
  if (t_depth <= 0 || --t_depth != 0 || t_began == 0) return;
  g_wait_ns.fetch_add(mono_now_ns() - t_began, std::memory_order_relaxed);
  g_waits.fetch_add(1, std::memory_order_relaxed);
}

void note_switched_in() { g_skip_next_wait.store(true, std::memory_order_relaxed); }

void uncount_current_wait() {
  if (t_depth > 0) t_began = 0;
}

// The GPU share is measured only where it is used: a job that asks to
// share turns, on its only GPU, while its turns could be shared
// (`may_share`: fair, another job on the GPU; a stretch costs an inference
// request of a job alone tens of microseconds). A stretch is armed only
// while the job runs no shared turn (beside, its launches would be detoured
// for nothing: only its own turns are timed).
uint32_t measure_gpu_share(shm::Slot& slot, bool may_share) {
  if (!slot.shares_turns || allocator::only_slot() != &slot) return 0;
  uint32_t permille = 0;
  const bool read = collect_gpu_busy(&permille);
  if (read) slot.gpu_busy_permille.store(permille, std::memory_order_relaxed);
  if (may_share && !__atomic_load_n(&slot.beside, __ATOMIC_RELAXED)) arm_gpu_busy_sample(mono_now_ns());
  return read ? permille : 0;
}

void judge_host_bound(int ordinal, shm::Slot& slot, bool holds_shared_turn, uint32_t read_permille) {
  const bool was = slot.host_bound.load(std::memory_order_relaxed) != 0;
  if (ordinal < 0 || ordinal >= allocator::kMaxDevices) return;
  Window& w = g_windows[ordinal];
  if (read_permille != 0 && collected_gpu_busy_began_ns() >= w.streak_from_ns) w.read_permille = read_permille;
  const uint64_t at = mono_now_ns();
  Window now{&slot,
             at,
             scheduler::token_wait_ns_of_process(at),
             g_wait_ns.load(std::memory_order_relaxed),
             g_waits.load(std::memory_order_relaxed),
             slot.shared_runs.load(std::memory_order_relaxed),
             __atomic_load_n(&slot.beside, __ATOMIC_RELAXED) != 0 || holds_shared_turn,
             w.state,
             w.own_wait_permille,
             0,
             w.streak_from_ns};
  if (w.slot != &slot) {
    now.state = {};
    now.own_wait_permille = rules::kNoWaitShare;
    now.streak_from_ns = at;
    w = now;
    return;
  }
  // In a shared turn its waits are the others' too: their kernels and the
  // GPU's switches between their contexts lengthen them (on an H200, 16
  // jobs that waited 1% in turns of their own waited 25% to 54% beside one
  // another; judged as in turns of their own, they left their shared turns
  // one after the other, and among 64 a holder with others beside it did).
  // Shared at the window's start or end, or any run beside begun between.
  const bool shared = w.shared || now.shared || now.shared_runs != w.shared_runs;
  // Its running time: the window less what it waited for the token.
  const uint64_t elapsed = now.at_ns - w.at_ns;
  const uint64_t token_waits = now.token_wait_ns > w.token_wait_ns ? now.token_wait_ns - w.token_wait_ns : 0;
  const uint64_t ran = elapsed > token_waits ? elapsed - token_waits : 0;
  const uint64_t gpu_waits = now.wait_ns - w.wait_ns;
  if (!rules::judge_host_bound(&now.state, ran, gpu_waits, now.waits - w.waits, w.read_permille, shared)) return;
  const uint32_t wait_permille = uint32_t(std::min<uint64_t>(1000, gpu_waits * 1000 / std::max<uint64_t>(1, ran)));
  if (!shared) now.own_wait_permille = rules::mean_wait_permille(w.own_wait_permille, wait_permille);
  if (now.state.streak == 0 && !now.state.host_bound) now.streak_from_ns = at;
  // Its GPU share was read before it shared (rules/host_bound.h), unless
  // a new reading ended the verdict: judged anew, it waits for a reading
  // from its own turns.
  if (was && shared && !now.state.host_bound && w.read_permille == 0)
    slot.gpu_busy_permille.store(0, std::memory_order_relaxed);
  w = now;
  slot.gpu_wait_permille.store(wait_permille, std::memory_order_relaxed);
  if (now.state.host_bound != was) slot.host_bound.store(now.state.host_bound ? 1 : 0, std::memory_order_relaxed);
}

uint32_t own_turn_wait_permille(int ordinal) {
  if (ordinal < 0 || ordinal >= allocator::kMaxDevices) return rules::kNoWaitShare;
  return g_windows[ordinal].own_wait_permille;
}

}  // namespace gshare::runtime
