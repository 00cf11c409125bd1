#include "allocator/framework_counts.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "allocator/framework_classes.h"
#include "allocator/devices.h"
#include "allocator/python_api.h"
#include "base/log.h"
#include "base/tunables.h"
#include "shm/region.h"

namespace gshare::allocator {

namespace {

// The module `_gshare_counts`, with counts(ordinals) -> bytes: one
// little-endian (int64 ordinal, uint64 allocated, uint64 reserved) per
// framework and device. Each framework guarded: nothing escapes.
constexpr const char* kCountsModule =
    "import sys, struct\n"
    "def counts(listed):\n"
    "    ordinals = [int(d) for d in listed.split(',')]\n"
    "    out = []\n"
    "    t = sys.modules.get('torch')\n"
    "    try:\n"
    "        if t is not None and t.cuda.is_initialized():\n"
    "            stats = getattr(getattr(t, '_C', None), '_cuda_memoryStats', None)\n"
    "            for d in ordinals:\n"
    "                if stats is not None:\n"
    "                    s = stats(d)\n"
    "                    out.append((d, s['allocated_bytes']['all']['current'],\n"
    "                                s['reserved_bytes']['all']['current']))\n"
    "                else:\n"
    "                    out.append((d, t.cuda.memory_allocated(d), t.cuda.memory_reserved(d)))\n"
    "    except Exception: pass\n"
    "    c = sys.modules.get('cupy')\n"
    "    try:\n"
    "        if c is not None:\n"
    "            pool = c.get_default_memory_pool()\n"
    "            out.append((c.cuda.runtime.getDevice(), pool.used_bytes(), pool.total_bytes()))\n"
    "    except Exception: pass\n"
    "    xb = sys.modules.get('jax._src.xla_bridge')\n"
    "    try:\n"
    "        if xb is not None and getattr(xb, '_backends', None):\n"
    "            for dev in sys.modules['jax'].local_devices():\n"
    "                s = dev.memory_stats() if dev.platform == 'gpu' else None\n"
    "                if s and 'bytes_in_use' in s:\n"
    "                    out.append((dev.local_hardware_id, s['bytes_in_use'],\n"
    "                                s.get('pool_bytes', s['bytes_in_use'])))\n"
    "    except Exception: pass\n"
    "    return b''.join(struct.pack('<qQQ', d, a, r) for d, a, r in out)\n";

using tunables::kDutyDivisor;
using tunables::kQuietIntervalNs;
using tunables::kBurstNs;

std::atomic<bool> g_outstanding{false};
std::atomic<uint64_t> g_next_ns{0};
// The next question of a job asked rarely (kRareQuestionIntervalNs): one
// alone on its GPUs, or whose answers have stopped moving.
std::atomic<uint64_t> g_next_rare_ns{0};
// The host syncs seen, and the count from which the next rare question may
// come (kRareQuestionSyncs after the last answer); the latest time it may
// wait for that count (kRareQuestionMaxIntervalNs).
std::atomic<uint64_t> g_syncs{0};
std::atomic<uint64_t> g_rare_from_sync{0};
std::atomic<uint64_t> g_rare_latest_ns{0};
std::atomic<bool> g_steady{false};
void* g_counts_function = nullptr;  // a new reference, kept; main thread only
uint64_t g_answers = 0;              // main thread only
uint64_t g_answered = 0;             // answers with figures; main thread only

void* counts_function(const PythonApi& py) {
  if (!g_counts_function) g_counts_function = python_function(py, kCountsModule, "_gshare_counts", "counts");
  return g_counts_function;
}

// The previous answer, and how many answers running have repeated the
// one before them: main thread only.
FrameworkCount g_previous[2 * kMaxDevices + 8];
int g_previous_count = 0;
int g_steady_answers = 0;

// Whether an answer repeats the previous one: the same figures, each
// framework's memory in use within what would move P (kPersistentStepBytes
// or 1%).
void note_steadiness(const FrameworkCount* counts, int n) {
  bool same = n == g_previous_count;
  for (int i = 0; same && i < n; ++i) {
    const uint64_t a = counts[i].allocated, b = g_previous[i].allocated;
    const uint64_t moved = a > b ? a - b : b - a;
    same = counts[i].ordinal == g_previous[i].ordinal &&
           moved <= std::max(tunables::kPersistentStepBytes, std::max(a, b) / 100);
  }
  g_steady_answers = same ? g_steady_answers + 1 : 0;
  std::memcpy(g_previous, counts, sizeof(FrameworkCount) * size_t(n));
  g_previous_count = n;
}

// Asks and hands the answer on; returns how many figures came back.
int ask_now(const PythonApi& py) {
  char ordinals[kMaxDevices * 4] = "";  // "0,1,...": a C string passes any Python's format
  size_t length = 0;
  for_each_attached_device([&](Device& d) {
    if (length + 4 < sizeof ordinals)
      length += size_t(snprintf(ordinals + length, sizeof ordinals - length, "%s%d", length ? "," : "", d.ordinal));
  });
  if (length == 0) return 0;
  void* function = counts_function(py);
  if (!function) return 0;
  void* answer = py.call_function(function, "(s)", ordinals);
  if (!answer) return 0;
  char* bytes = nullptr;
  ssize_t size = 0;
  int n = 0;
  FrameworkCount counts[2 * kMaxDevices + 8];
  if (py.bytes_as_string_and_size(answer, &bytes, &size) == 0) {
    constexpr ssize_t kRecord = 24;
    for (ssize_t at = 0; at + kRecord <= size && n < int(sizeof counts / sizeof counts[0]); at += kRecord) {
      std::memcpy(&counts[n].ordinal, bytes + at, 8);
      std::memcpy(&counts[n].allocated, bytes + at + 8, 8);
      std::memcpy(&counts[n].reserved, bytes + at + 16, 8);
      ++n;
    }
  }
  py.dec_ref(answer);
  if (n > 0) {
    note_framework_counts(counts, n);
    note_steadiness(counts, n);
  }
  return n;
}

// Runs on Python's main thread, holding the GIL, between two bytecodes.
int answer_on_main_thread(void*) {
  const PythonApi* py = python_api();
  uint64_t start = mono_now_ns();
  int answered = 0;
  PythonCall call;
  if (!call.allowed()) {
    // Run inside gshare's own call into Python (a cache being emptied for
    // another job, at the sync that asked): not an answer. The next sync
    // asks again, with no wait, so a loss read's question is not lost.
    g_outstanding.store(false, std::memory_order_release);
    return 0;
  }
  if (py && python_running()) {
    void *type = nullptr, *value = nullptr, *traceback = nullptr;
    py->err_fetch(&type, &value, &traceback);
    answered = ask_now(*py);
    py->err_clear();  // an error of ours stays ours
    py->err_restore(type, value, traceback);
  }
  uint64_t end = mono_now_ns();
  GSHARE_DEBUG("the framework answered with %d figure(s) in %.0f us", answered, double(end - start) / 1e3);
  // The first answer also defines the module: its cost does not repeat.
  uint64_t cost = g_answers++ == 0 ? 0 : end - start;
  uint64_t wait = cost * (kDutyDivisor - 1);
  if (wait > kQuietIntervalNs || answered == 0) wait = kQuietIntervalNs;
  // Time not spent asking is saved up, to kBurstNs: the syncs that matter
  // may come right after others (a loss read just after a value read), and
  // an even spacing would miss them every iteration.
  uint64_t base = g_next_ns.load(std::memory_order_relaxed);
  if (base + kBurstNs < end) base = end - kBurstNs;
  g_next_ns.store(base + wait, std::memory_order_relaxed);
  // Alone or not, a job is asked at the rate above until its answers have
  // filled P's window once (allocator/in_use_window.h): its figures are
  // right from the start, also in gshare-top.
  if (answered > 0 && ++g_answered > uint64_t(tunables::kInUseWindow)) {
    g_next_rare_ns.store(end + tunables::kRareQuestionIntervalNs, std::memory_order_relaxed);
    g_rare_from_sync.store(g_syncs.load(std::memory_order_relaxed) + tunables::kRareQuestionSyncs,
                           std::memory_order_relaxed);
    g_rare_latest_ns.store(end + tunables::kRareQuestionMaxIntervalNs, std::memory_order_relaxed);
  }
  // Answers that only repeat themselves teach nothing: then the job is
  // asked rarely, shared or not, until one differs.
  g_steady.store(g_steady_answers >= tunables::kSteadyAnswersBeforeRare, std::memory_order_relaxed);
  g_outstanding.store(false, std::memory_order_release);
  return 0;
}

// No other job on any of this process's GPUs (or no region to share).
bool alone_on_its_gpus() {
  bool alone = true;
  for_each_attached_device([&](Device& d) {
    if (d.account.slot() && !d.account.arbiter().alone()) alone = false;
  });
  return alone;
}

// Whether a job asked rarely has waited long enough: a second, and
// kRareQuestionSyncs syncs or kRareQuestionMaxIntervalNs.
bool rare_question_due(uint64_t now, uint64_t syncs) {
  if (now < g_next_rare_ns.load(std::memory_order_relaxed)) return false;
  return syncs >= g_rare_from_sync.load(std::memory_order_relaxed) ||
         now >= g_rare_latest_ns.load(std::memory_order_relaxed);
}

}  // namespace

void ask_framework_counts() {
  // Not a read-modify-write: a count that two threads' syncs race on may
  // lose one, which only moves a rare question by a sync.
  const uint64_t syncs = g_syncs.load(std::memory_order_relaxed) + 1;
  g_syncs.store(syncs, std::memory_order_relaxed);
  if (g_outstanding.load(std::memory_order_relaxed)) return;
  const uint64_t now = mono_now_ns();
  if (now < g_next_ns.load(std::memory_order_relaxed)) return;
  if (!rare_question_due(now, syncs) && (g_steady.load(std::memory_order_relaxed) || alone_on_its_gpus()))
    return;
  if (!python_running()) return;
  if (g_outstanding.exchange(true, std::memory_order_acquire)) return;
  if (!run_on_python_main_thread(answer_on_main_thread)) g_outstanding.store(false, std::memory_order_release);
}

void forget_framework_counts_after_fork() {
  // The child's pending calls are its own; an outstanding question was the
  // parent's and may never run here.
  g_outstanding.store(false);
  g_next_ns.store(0);
  g_next_rare_ns.store(0);
  g_syncs.store(0);
  g_rare_from_sync.store(0);
  g_rare_latest_ns.store(0);
  g_steady.store(false);
}

}  // namespace gshare::allocator
