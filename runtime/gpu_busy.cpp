#include "runtime/gpu_busy.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>

#include "base/clock.h"
#include "base/driver_api.h"
#include "base/log.h"
#include "base/tunables.h"
#include "scheduler/launch_detours.h"

namespace gshare::runtime {

namespace {

constexpr uint32_t kPairs = tunables::kGpuBusyPairs;

enum class Stage { kIdle, kArmed, kDone };

// One stretch at a time, per process. The mutex is taken only on the slow
// path while a stretch is armed, and by the upkeep thread.
struct Sampler {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<bool> armed{false};  // stage == kArmed, read without the lock
  Stage stage = Stage::kIdle;
  bool unavailable = false;  // no timed events from this driver: never again
  CUcontext context = nullptr;  // where the events were made
  CUevent begin[kPairs] = {};
  CUevent end[kPairs] = {};
  bool timed[kPairs] = {};  // both events recorded around a launch made
  CUstream stream[kPairs] = {};
  // Host clock when the begin event was recorded and when the launch
  // returned: how long after its begin event the kernel reached the GPU.
  uint64_t begun_ns[kPairs] = {}, launched_ns[kPairs] = {};
  uint32_t started = 0, ended = 0;
  bool closing = false;  // no new pair; done once the started ones end
  uint64_t armed_ns = 0, first_ns = 0, last_ns = 0;
  uint64_t collected_first_ns = 0;  // first_ns of the stretch collected last
};
Sampler g;

struct Locked {
  Locked() { pthread_mutex_lock(&g.mutex); }
  ~Locked() { pthread_mutex_unlock(&g.mutex); }
};

void stop_detour_locked(Stage next) {
  g.stage = next;
  g.armed.store(false, std::memory_order_relaxed);
  scheduler::g_launch_detours.fetch_sub(1, std::memory_order_relaxed);
}

// A stretch asked to close ends once no launch of it is in flight: kept if
// it timed enough launches, dropped otherwise.
void finish_if_quiet_locked() {
  if (!g.closing || g.ended != g.started) return;
  g.closing = false;
  stop_detour_locked(g.started >= tunables::kGpuBusyMinPairs ? Stage::kDone : Stage::kIdle);
}

// A stretch is complete with kGpuBusyPairs launches, or once it has lasted
// kGpuBusyStretchNs with kGpuBusyMinPairs at least (a job that launches
// every few milliseconds needs longer); a turn's end cuts it shorter.
bool long_enough_locked(uint64_t now_ns) {
  return g.started >= kPairs ||
         (now_ns - g.first_ns >= tunables::kGpuBusyStretchNs && g.started >= tunables::kGpuBusyMinPairs);
}

// Events of a context that is no longer current are left, not destroyed:
// it may be gone (the driver frees its events with it), and a destroy
// through a dead context's handle is not safe. A process changes contexts
// rarely; each change while it asks to share turns leaves 512 events.
void forget_events_locked() {
  for (uint32_t i = 0; i < kPairs; ++i) g.begin[i] = g.end[i] = nullptr;
  g.context = nullptr;
}

// Timed events of the current context, made at a stretch's first launch.
bool events_ready_locked() {
  CUcontext current = nullptr;
  if (driver().ctx_get_current(&current) != CUDA_SUCCESS || current == nullptr) return false;
  if (current == g.context) return true;
  if (g.started != 0) return false;  // mid-stretch, another context: not this launch
  forget_events_locked();
  for (uint32_t i = 0; i < kPairs; ++i) {
    if (driver().event_create(&g.begin[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        driver().event_create(&g.end[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      GSHARE_INFO("timed CUDA events could not be made: this job's GPU time is not measured, and it "
                  "takes its turns alone");
      forget_events_locked();
      g.unavailable = true;
      return false;
    }
  }
  g.context = current;
  return true;
}

// The part of pair i's time that was the host's: where the GPU had gone
// idle on its stream before the begin event (a gap after the previous
// pair's end), that event ran as it arrived, and the kernel only arrived
// as the launch returned. A job that launches small kernels one by one
// would otherwise count its own launch latency (and any preemption between
// the two calls) as kernel time: on an H200, about twice NVML's figure.
// Where the stream was still busy, the kernel was queued behind its begin
// event and nothing is taken off.
uint64_t host_part_ns_locked(uint32_t i) {
  if (!g.timed[i - 1] || g.stream[i - 1] != g.stream[i]) return 0;
  float gap_ms = 0;
  if (driver().event_elapsed_time(&gap_ms, g.end[i - 1], g.begin[i]) != CUDA_SUCCESS ||
      double(gap_ms) * 1e6 < double(tunables::kGpuBusyIdleGapNs))
    return 0;
  return g.launched_ns[i] > g.begun_ns[i] ? g.launched_ns[i] - g.begun_ns[i] : 0;
}

}  // namespace

void arm_gpu_busy_sample(uint64_t now_ns) {
  if (!driver().event_create || !driver().event_record || !driver().event_query ||
      !driver().event_elapsed_time || !driver().ctx_get_current ||
      !driver().ctx_push_current || !driver().ctx_pop_current)
    return;
  Locked locked;
  if (g.stage == Stage::kArmed) {
    // Nothing timed since it was armed a stretch's period ago (the job
    // stopped launching, or launched outside its own turns): stop detouring
    // its launches; the stretch is armed again from the next tick. A job
    // among many waits that long for its turn: a stretch given up sooner
    // would miss most of its turns (among 64, one in 320 ms).
    if (g.started == 0 && now_ns - g.armed_ns >= tunables::kGpuBusyEveryNs) stop_detour_locked(Stage::kIdle);
    // Launches stopped mid-stretch: it ends with what it has.
    if (g.started != 0 && g.ended == g.started && now_ns - g.last_ns >= tunables::kGpuBusyStretchNs) {
      g.closing = true;
      finish_if_quiet_locked();
    }
    return;
  }
  if (g.stage != Stage::kIdle || g.unavailable) return;
  if (g.armed_ns != 0 && now_ns - g.armed_ns < tunables::kGpuBusyEveryNs) return;
  g.stage = Stage::kArmed;
  g.started = g.ended = 0;
  g.closing = false;
  g.armed_ns = now_ns;
  g.first_ns = g.last_ns = 0;
  scheduler::g_launch_detours.fetch_add(1, std::memory_order_relaxed);
  g.armed.store(true, std::memory_order_relaxed);
}

bool collect_gpu_busy(uint32_t* permille) {
  Locked locked;
  if (g.stage != Stage::kDone) return false;
  if (driver().ctx_push_current(g.context) != CUDA_SUCCESS) {
    forget_events_locked();  // its context is gone, and its events with it
    g.stage = Stage::kIdle;
    return false;
  }
  uint64_t busy_ns = 0, raw_ns = 0;
  bool complete = true;
  // Pair 0 marks where the stretch begins: the kernels counted are those
  // launched after it, up to the last, over the time from its launch to the
  // last's. (Counting pair 0 too would count one launch more than the
  // intervals between them, and its host part is not known.) On the host's
  // clock, a job that keeps kernels queued ahead of the GPU reads as its
  // queue stood at the two ends (GPU-bound jobs of 8.5 ms steps read 0.73
  // to 1.0 on an H200). The GPU's own clock, from the first pair's end to
  // the last's, was tried and read worse: 3 ms training jobs 0.001 and
  // 0.075 (judged host-bound), GPU-bound ones 0.52; likely because a
  // stretch cut short by its turn's end has its last kernels finish among
  // the next holder's.
  for (uint32_t i = 1; i < g.started && complete; ++i) {
    if (!g.timed[i]) continue;
    const CUresult done = driver().event_query(g.end[i]);
    if (done == CUDA_ERROR_NOT_READY) complete = false;
    float ms = 0;
    if (done != CUDA_SUCCESS || driver().event_elapsed_time(&ms, g.begin[i], g.end[i]) != CUDA_SUCCESS || ms <= 0)
      continue;
    const uint64_t pair_ns = uint64_t(double(ms) * 1e6);
    raw_ns += pair_ns;
    busy_ns += pair_ns - std::min(pair_ns, host_part_ns_locked(i));
  }
  CUcontext popped = nullptr;
  driver().ctx_pop_current(&popped);
  if (!complete) return false;  // kernels still queued: at a later tick
  g.stage = Stage::kIdle;
  g.collected_first_ns = g.first_ns;
  const uint64_t wall = std::max<uint64_t>(1, g.begun_ns[g.started - 1] - g.begun_ns[0]);
  *permille = uint32_t(std::clamp<uint64_t>(busy_ns * 1000 / wall, 1, 1000));
  GSHARE_DEBUG("GPU busy %.3f of its own turn (%.3f with the host's part): %u launches timed over %.2f ms",
               *permille / 1000.0, std::min(1.0, double(raw_ns) / double(wall)), g.started, double(wall) / 1e6);
  return true;
}

uint64_t collected_gpu_busy_began_ns() {
  Locked locked;
  return g.collected_first_ns;
}

bool gpu_busy_armed() { return g.armed.load(std::memory_order_relaxed); }

int gpu_busy_before_launch(CUstream stream, bool own_turn, bool shared) {
  const uint64_t now_ns = mono_now_ns();
  Locked locked;
  if (g.stage != Stage::kArmed || g.closing) return -1;
  // In a shared turn before anything was timed: the job may share turns
  // from now on, its launches detoured for nothing; armed again at a tick
  // that finds it beside nobody.
  if (g.started == 0 && shared) {
    stop_detour_locked(Stage::kIdle);
    return -1;
  }
  if (g.started != 0 && (!own_turn || long_enough_locked(now_ns))) {
    g.closing = true;
    finish_if_quiet_locked();
    return -1;
  }
  if (!own_turn) return -1;
  if (!events_ready_locked()) return -1;
  const uint32_t pair = g.started;
  if (driver().event_record(g.begin[pair], stream) != CUDA_SUCCESS) return -1;
  if (pair == 0) g.first_ns = now_ns;
  g.timed[pair] = false;
  g.stream[pair] = stream;
  g.begun_ns[pair] = mono_now_ns();
  g.started++;
  return int(pair);
}

void gpu_busy_after_launch(int pair, CUstream stream, bool launched) {
  if (pair < 0) return;
  const uint64_t now_ns = mono_now_ns();
  Locked locked;
  g.launched_ns[pair] = now_ns;
  if (launched && driver().event_record(g.end[pair], stream) == CUDA_SUCCESS) g.timed[pair] = true;
  g.ended++;
  g.last_ns = std::max(g.last_ns, now_ns);
  if (long_enough_locked(now_ns)) g.closing = true;
  finish_if_quiet_locked();
}

void forget_gpu_busy_after_fork() {
  // The child has none of the parent's CUDA state; its detours start at 0
  // (runtime/launch_gate.h, forget_launch_state_after_fork).
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g.mutex = fresh;
  g.armed.store(false);
  g.stage = Stage::kIdle;
  forget_events_locked();
  g.started = g.ended = 0;
  g.closing = false;
  g.armed_ns = g.first_ns = g.last_ns = g.collected_first_ns = 0;
}

}  // namespace gshare::runtime
