#include "allocator/admission.h"

#include <algorithm>
#include <atomic>

#include "allocator/classifier.h"
#include "allocator/devices.h"
#include "allocator/framework_caches.h"
#include "allocator/pools.h"
#include "allocator/python_api.h"
#include "intercept/driver_api.h"
#include "intercept/log.h"
#include "scheduler/launch_gate.h"
#include "scheduler/token.h"
#include "shm/futex.h"
#include "shm/region.h"

namespace gshare::allocator {

using shm::Arbiter;
using shm::kMaxSlots;
using shm::MemoryClass;
using shm::Region;
using shm::ReserveResult;
using shm::ReserveStatus;
using shm::Slot;

namespace {

double g_timeout_s = 600;
std::atomic<bool> g_told_admission{false};
std::atomic<bool> g_told_turn{false};

constexpr uint64_t kPollNs = 50'000'000;          // re-check at least this often
constexpr uint64_t kAskAgainNs = 1'000'000'000;   // repeat release requests while short
constexpr double MiB = 1024.0 * 1024.0;

uint64_t saturating_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// Ephemeral memory belongs to the running job: one that does not hold its
// token takes its turn first, even alone on the GPU (a job that comes
// later then finds the one mid-iteration holding the token). Two jobs that
// take turns then never each hold part of the same ephemeral space while
// waiting for the rest.
void take_turn(Arbiter& arbiter, MemoryClass kind) {
  if (kind != MemoryClass::kEphemeral) return;
  // Its iteration's first ephemeral allocation is where a holder asked to
  // yield may hand over: its last iteration's memory is free.
  if (scheduler::holds_token(arbiter)) scheduler::end_slice_between_iterations(arbiter);
  if (scheduler::holds_token(arbiter)) return;
  scheduler::wait_for_token(arbiter, answer_release_requests);
}

shm::AdmissionState state_of(ReserveStatus status) {
  return status == ReserveStatus::kInadmissible ? shm::kWaitingForAdmission : shm::kWaitingForMemory;
}

uint64_t short_of(const ReserveResult& r, uint64_t bytes) {
  if (r.status == ReserveStatus::kInadmissible) return saturating_sub(r.in_use_bytes, r.limit_bytes);
  return saturating_sub(r.in_use_bytes + bytes, r.limit_bytes);
}

// Jobs asked to give back cache, and the request number each must answer.
struct Requests {
  uint32_t wanted[kMaxSlots];
  bool asked[kMaxSlots];
  uint64_t at_ns = 0;
  bool any = false;
};

// Asks every live job that is not running and holds ephemeral memory.
void ask_for_releases_locked(Arbiter& arbiter, Requests& q, uint64_t now) {
  Region& r = *arbiter.region();
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = r.slots[i];
    q.asked[i] = false;
    if (int(i) == arbiter.own_slot() || s.state != shm::kSlotLive) continue;
    if (s.job_state == shm::kJobRunning || shm::ephemeral_now(s) == 0) continue;
    q.wanted[i] = ++s.release_requests;
    q.asked[i] = true;
  }
  q.at_ns = now;
  q.any = true;
  r.header.token_futex.fetch_add(1, std::memory_order_release);
  shm::futex_wake_all(&r.header.token_futex);
}

// Whether the waiter may step aside: only while it holds no ephemeral
// memory of its own. Otherwise another job given its turn could take part
// of what the waiter still needs, and each would wait for the other's part.
bool stepping_aside_helps(const Arbiter& arbiter) {
  return shm::ephemeral_now(arbiter.region()->slots[arbiter.own_slot()]) == 0;
}

bool releases_answered(const Arbiter& arbiter, const Requests& q) {
  const Region& r = *arbiter.region();
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    if (!q.asked[i]) continue;
    const Slot& s = r.slots[i];
    if (s.state != shm::kSlotLive) continue;
    if (int32_t(s.release_acks - q.wanted[i]) < 0 && arbiter.slot_is_live(int(i))) return false;
  }
  return true;
}

void tell_wait_begins(const Device& device, const char* call, uint64_t bytes,
                      const ReserveResult& r) {
  if (r.status == ReserveStatus::kInadmissible) {
    if (g_told_admission.exchange(true)) return;
    GSHARE_WARN("%s of %.1f MiB on GPU %s waits for admission: sum(P) + sum over lanes of "
                "max(E) would be %.1f MiB of %.1f MiB (short by %.1f MiB); waiting up to "
                "%g s (GSHARE_ADMIT_TIMEOUT_S) for other jobs to shrink or end",
                call, double(bytes) / MiB, device.uuid, double(r.in_use_bytes) / MiB,
                double(r.limit_bytes) / MiB, double(short_of(r, bytes)) / MiB, g_timeout_s);
  } else {
    if (g_told_turn.exchange(true)) return;
    GSHARE_INFO("%s of %.1f MiB on GPU %s waits for memory held by other jobs (%.1f MiB of "
                "%.1f MiB reserved): jobs in one lane take turns with their ephemeral memory",
                call, double(bytes) / MiB, device.uuid, double(r.in_use_bytes) / MiB,
                double(r.limit_bytes) / MiB);
  }
}

}  // namespace

void configure_admission(const Options& options) { g_timeout_s = options.admit_timeout_s; }

void take_turn_without_memory(Device& device) {
  if (device.account.shared()) take_turn(device.account.arbiter(), MemoryClass::kEphemeral);
}

bool wait_after_driver_refused(Device& device, const char* call, uint64_t bytes,
                               uint64_t* started_ns) {
  DeviceAccount& account = device.account;
  if (!account.shared() || g_timeout_s <= 0 || !driver().mem_get_info) return false;
  uint64_t now = shm::mono_now_ns();
  if (*started_ns == 0) {
    *started_ns = now;
    GSHARE_INFO("%s of %.1f MiB on GPU %s: the driver is out of memory that gshare had "
                "admitted (memory outside gshare's view is in use); waiting for it",
                call, double(bytes) / MiB, device.uuid);
  }
  const uint64_t deadline = *started_ns + uint64_t(g_timeout_s * 1e9);
  Arbiter& arbiter = account.arbiter();
  Region& r = *arbiter.region();
  Slot& me = *account.slot();
  Requests requests;
  arbiter.update([&] { ask_for_releases_locked(arbiter, requests, now); });
  if (scheduler::holds_token(arbiter) && stepping_aside_helps(arbiter)) scheduler::step_aside(arbiter);
  // Busy, not idle, while waiting: a holder mid-iteration that lost its
  // token here would leave its memory split with the next job's.
  me.gpu_waits.fetch_add(1, std::memory_order_relaxed);
  bool freed = false;
  while (now < deadline && !freed) {
    uint32_t seen = r.header.token_futex.load(std::memory_order_acquire);
    answer_release_requests();
    size_t free_bytes = 0, total = 0;
    freed = driver().mem_get_info(&free_bytes, &total) == CUDA_SUCCESS && free_bytes >= bytes;
    if (!freed) shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
    now = shm::mono_now_ns();
  }
  me.gpu_waits.fetch_sub(1, std::memory_order_relaxed);
  return freed;
}

ReserveResult admit(Device& device, const char* call, uint64_t bytes, uint32_t allocations,
                    MemoryClass kind) {
  DeviceAccount& account = device.account;
  auto reserve = [&] {
    return allocations ? account.reserve_allocation(bytes, kind) : account.reserve(bytes, kind);
  };
  if (!account.shared()) return reserve();
  Arbiter& arbiter = account.arbiter();
  Region& r = *arbiter.region();
  Slot& me = *account.slot();
  take_turn(arbiter, kind);
  ReserveResult result = reserve();
  if (result.status != ReserveStatus::kInadmissible && result.status != ReserveStatus::kOverCapacity)
    return result;
  if (g_timeout_s <= 0) return result;

  const uint64_t start = shm::mono_now_ns();
  const uint64_t deadline = start + uint64_t(g_timeout_s * 1e9);
  tell_wait_begins(device, call, bytes, result);
  arbiter.update([&] {
    me.admission = state_of(result.status);
    me.admission_since_mono_ns = start;
    me.admission_bytes = bytes;
    me.admission_short_bytes = short_of(result, bytes);
    me.admission_waits++;
    r.header.memory_waiters++;
  });
  // Busy, not idle, while waiting: a holder waiting for cache to come back
  // keeps its turn (scheduler/token.h's idle rule).
  me.gpu_waits.fetch_add(1, std::memory_order_relaxed);
  Requests requests;
  bool aside = false;
  uint64_t now = start;
  for (;;) {
    uint32_t seen = r.header.token_futex.load(std::memory_order_acquire);
    answer_release_requests();
    if (result.status == ReserveStatus::kInadmissible) {
      // Not mid-iteration (shm::Arbiter::holds_unsettled_memory): the
      // others may run, and shrink or end, meanwhile.
      if (!aside && !arbiter.holds_unsettled_memory(arbiter.own_slot())) {
        scheduler::step_aside(arbiter);
        aside = true;
      }
    } else if (!requests.any || now - requests.at_ns >= kAskAgainNs) {
      // Asked first, even a lane-mate that goes first: what it holds may be
      // cache (a pool's, a framework's), not an iteration's live memory.
      arbiter.update([&] { ask_for_releases_locked(arbiter, requests, now); });
    } else if (!aside && arbiter.lane_mate_goes_first()) {
      // A lane-mate is mid-iteration: it needs the token to finish and
      // free the lane's space, whatever this job holds meanwhile.
      scheduler::step_aside(arbiter);
      aside = true;
    } else if (!aside && releases_answered(arbiter, requests) && scheduler::holds_token(arbiter) &&
               stepping_aside_helps(arbiter)) {
      // What is short is in real use by jobs that are not running: let
      // them run and free it. Otherwise it keeps its turn: a job switched
      // out at an iteration boundary frees its part without the token.
      scheduler::step_aside(arbiter);
      aside = true;
    }
    if (now >= deadline) break;
    shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
    if (arbiter.has_dead_slots()) arbiter.reclaim_dead_slots();
    now = shm::mono_now_ns();
    if (aside && result.status == ReserveStatus::kOverCapacity) {
      // Compete for the token again only once the bytes could fit.
      if (r.header.reserved_bytes + bytes > r.header.capacity_bytes) continue;
      me.gpu_waits.fetch_sub(1, std::memory_order_relaxed);
      take_turn(arbiter, kind);
      me.gpu_waits.fetch_add(1, std::memory_order_relaxed);
      aside = false;
      requests.any = false;
    }
    result = reserve();
    if (result.status != ReserveStatus::kInadmissible && result.status != ReserveStatus::kOverCapacity)
      break;
    arbiter.update([&] {
      me.admission = state_of(result.status);
      me.admission_short_bytes = short_of(result, bytes);
    });
  }
  me.gpu_waits.fetch_sub(1, std::memory_order_relaxed);
  arbiter.update([&] {
    me.admission = shm::kAdmitted;
    me.admission_since_mono_ns = 0;
    me.admission_bytes = me.admission_short_bytes = 0;
    if (r.header.memory_waiters > 0) r.header.memory_waiters--;
  });
  double waited_s = double(shm::mono_now_ns() - start) / 1e9;
  if (result.status == ReserveStatus::kGranted) {
    if (waited_s >= 1) GSHARE_INFO("%s on GPU %s admitted after %.1f s", call, device.uuid, waited_s);
  } else if (result.status == ReserveStatus::kInadmissible ||
             result.status == ReserveStatus::kOverCapacity) {
    GSHARE_WARN("%s on GPU %s gave up waiting after %.1f s (GSHARE_ADMIT_TIMEOUT_S=%g)", call,
                device.uuid, waited_s, g_timeout_s);
  }
  return result;
}

namespace {
bool release_requested() {
  bool requested = false;
  for_each_attached_device([&](Device& device) {
    Slot* slot = device.account.slot();
    if (slot && __atomic_load_n(&slot->release_requests, __ATOMIC_RELAXED) !=
                    __atomic_load_n(&slot->release_acks, __ATOMIC_RELAXED))
      requested = true;
  });
  return requested;
}

// Trims `device`'s stream-ordered pools and counts what they and `emptied`
// (a framework's cache, counted on one device only) gave back, waking the
// jobs that wait for memory; with `ack`, also answers the requests up to
// it. Returns the bytes given back.
uint64_t give_back_on(Device& device, uint64_t emptied, const uint32_t* ack) {
  uint64_t freed = trim_pools(device) + emptied;
  if (freed == 0 && !ack) return 0;
  Slot* slot = device.account.slot();
  Arbiter& arbiter = device.account.arbiter();
  arbiter.update([&] {
    if (ack) slot->release_acks = *ack;
    slot->released_bytes += freed;
    arbiter.wake_memory_waiters_locked();
  });
  return freed;
}

void answer(bool from_hook);

// An answer queued for Python's main thread (at most one at a time).
std::atomic<bool> g_answer_queued{false};

int answer_on_python_main_thread(void*) {
  g_answer_queued.store(false);
  answer(true);
  return 0;
}

void answer(bool from_hook) {
  if (!release_requested()) return;
  bool framework = from_hook && can_empty_framework_caches();
  // A framework cache only a thread that may call into Python can empty: a
  // hook thread, or Python's main thread at its next bytecode (a job idle
  // in Python code reaches no hook).
  if (!framework && has_framework_cache()) {
    if (!g_answer_queued.exchange(true) && !run_on_python_main_thread(answer_on_python_main_thread))
      g_answer_queued.store(false);
    return;
  }
  uint64_t emptied = framework ? give_back_framework_caches() : 0;
  for_each_attached_device([&](Device& device) {
    Slot* slot = device.account.slot();
    if (!slot) return;
    uint32_t wanted = __atomic_load_n(&slot->release_requests, __ATOMIC_RELAXED);
    if (wanted == __atomic_load_n(&slot->release_acks, __ATOMIC_RELAXED)) return;
    uint64_t freed = give_back_on(device, emptied, &wanted);
    emptied = 0;  // counted once, on the first device
    if (freed > 0)
      GSHARE_DEBUG("GPU %s: gave back %.1f MiB of cached memory on request", device.uuid,
                   double(freed) / MiB);
  });
}
}  // namespace

void answer_release_requests() { answer(false); }

void answer_release_requests_from_hook() { answer(true); }

namespace {
// Empties the framework caches and the stream-ordered pools' free memory,
// and counts what they gave back (the frameworks' once, on the first
// device).
void give_back_and_count(bool framework) {
  uint64_t emptied = framework ? give_back_framework_caches() : 0;
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot()) return;
    give_back_on(device, emptied, nullptr);
    emptied = 0;
  });
}
}  // namespace

void give_back_cache_when_switched_out() {
  bool switched_out = false;
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot()) return;
    const Arbiter& arbiter = device.account.arbiter();
    if (!scheduler::holds_token(arbiter) && arbiter.lane_is_shared()) switched_out = true;
  });
  if (switched_out) give_back_and_count(has_framework_cache() && can_empty_framework_caches());
}

void give_back_cache_before_switch() { give_back_and_count(can_empty_framework_caches()); }

void give_back_cache_to_waiters() {
  bool others_wait = false;
  for_each_attached_device([&](Device& device) {
    const Slot* slot = device.account.slot();
    if (slot && slot->admission == shm::kAdmitted && device.account.arbiter().region()->header.memory_waiters > 0)
      others_wait = true;
  });
  if (others_wait) give_back_and_count(can_empty_framework_caches());
}

}  // namespace gshare::allocator
