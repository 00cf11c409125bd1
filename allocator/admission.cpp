#include "allocator/admission.h"

#include <algorithm>
#include <atomic>

#include "allocator/classifier.h"
#include "allocator/devices.h"
#include "allocator/framework_caches.h"
#include "allocator/framework_classes.h"
#include "allocator/movable_memory.h"
#include "allocator/page_requests.h"
#include "allocator/pager.h"
#include "allocator/pools.h"
#include "allocator/python_api.h"
#include "base/driver_api.h"
#include "base/log.h"
#include "base/saturating.h"
#include "base/tunables.h"
#include "scheduler/iterations.h"
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

using tunables::kPollNs;
using tunables::kAskAgainNs;
constexpr double MiB = 1024.0 * 1024.0;


// Ephemeral memory is taken in turn: a job that does not hold its token
// waits for it first, even alone on the GPU (a job that comes later then
// finds the one mid-iteration holding the token). True once it holds it;
// false at `deadline_ns()`, asked for only when it must wait (the holder's
// allocations read no clock here).
void while_waiting_for_turn();

template <class Deadline>
bool take_turn(Arbiter& arbiter, MemoryClass kind, Deadline&& deadline_ns) {
  if (kind != MemoryClass::kEphemeral) return true;
  // Its iteration's first ephemeral allocation is where a holder asked to
  // yield may hand over: its last iteration's memory is free.
  if (scheduler::holds_token(arbiter)) scheduler::end_slice_between_iterations(arbiter, drain_current_context);
  if (scheduler::holds_token(arbiter)) return true;
  return scheduler::wait_for_token(arbiter, while_waiting_for_turn, deadline_ns());
}

bool must_wait(ReserveStatus status) {
  return status == ReserveStatus::kInadmissible || status == ReserveStatus::kOverCapacity ||
         status == ReserveStatus::kLaneBusy;
}

shm::AdmissionState state_of(ReserveStatus status) {
  if (status == ReserveStatus::kInadmissible) return shm::kWaitingForAdmission;
  return status == ReserveStatus::kLaneBusy ? shm::kWaitingForLane : shm::kWaitingForMemory;
}

uint64_t short_of(const ReserveResult& r, uint64_t bytes) {
  if (r.status == ReserveStatus::kInadmissible) return saturating_sub(r.in_use_bytes, r.limit_bytes);
  return saturating_sub(r.in_use_bytes + bytes, r.limit_bytes);
}

// The job that holds what a waiter waits for, as far as one can tell: the
// lane's holder; else the live job, not running, holding the most
// ephemeral memory (cache to give back, or an iteration to end); else the
// one holding the most memory. -1: none.
int blocker_of(const Region& r, int own, const ReserveResult& result) {
  if (result.blocked_by >= 0) return result.blocked_by;
  int best = -1;
  uint64_t most = 0;
  const bool by_ephemeral = result.status != ReserveStatus::kInadmissible;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (int(i) == own || s.state != shm::kSlotLive) continue;
    uint64_t held = by_ephemeral ? shm::ephemeral_now(s) : s.reserved_bytes;
    if (held > most) {
      most = held;
      best = int(i);
    }
  }
  return best;
}

// When the jobs holding memory were last asked to give their cache back.
struct Requests {
  uint64_t at_ns = 0;
  bool any = false;
};

// Asks every live job that holds ephemeral memory and is neither running
// nor inside a host sync. A job in a sync is mid-iteration, or about to
// end one: its cache is what its next steps reuse, and it answers at the
// sync's end anyway, where emptying would cost it its next step's
// allocations.
void ask_for_releases_locked(Arbiter& arbiter, Requests& q, uint64_t now) {
  Region& r = *arbiter.region();
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = r.slots[i];
    if (int(i) == arbiter.own_slot() || s.state != shm::kSlotLive) continue;
    if (s.job_state == shm::kJobRunning || shm::ephemeral_now(s) == 0) continue;
    if (s.gpu_waits.load(std::memory_order_relaxed) != 0) continue;
    ++s.release_requests;
  }
  q.at_ns = now;
  q.any = true;
  shm::wake_waiters(r.header);
}

// Asks again if it has not asked within kAskAgainNs (or ever).
void ask_for_releases_if_due(Arbiter& arbiter, Requests& q, uint64_t now) {
  if (q.any && now - q.at_ns < kAskAgainNs) return;
  arbiter.update([&] { ask_for_releases_locked(arbiter, q, now); });
}

// The allocation this thread is waiting in, if it waits for its lane's
// space or for memory: its arbiter and its release requests.
struct TurnWait {
  Arbiter* arbiter = nullptr;
  Requests* requests = nullptr;
};
thread_local TurnWait t_turn_wait;

// At every wake-up of a wait for the token inside an allocation: answers
// requests to give back, and, where the job waits for its lane's space or
// for memory, asks the others again every kAskAgainNs. The token does not
// come to a job whose lane's space is held (scheduler/token.cpp), so the
// asking must go on from here: a holder idle in Python gives its cache
// back only when asked.
void while_waiting_for_turn() {
  answer_release_requests();
  TurnWait& w = t_turn_wait;
  if (!w.arbiter) return;
  ask_for_releases_if_due(*w.arbiter, *w.requests, mono_now_ns());
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
    GSHARE_INFO("%s of %.1f MiB on GPU %s waits for %s (%.1f MiB of %.1f MiB reserved): jobs in "
                "one lane take turns with their ephemeral memory",
                call, double(bytes) / MiB, device.uuid,
                r.status == ReserveStatus::kLaneBusy ? "its lane-mate's iteration to end"
                                                     : "memory held by other jobs",
                double(r.in_use_bytes) / MiB, double(r.limit_bytes) / MiB);
  }
}

// The condition that was still not met when a wait gave up.
const char* why_waited(const ReserveResult& r) {
  switch (r.status) {
    case ReserveStatus::kInadmissible:
      return "the safety condition sum(P) + sum over lanes of max(E) <= capacity still failed";
    case ReserveStatus::kLaneBusy:
      return "another job of its lane still held the lane's ephemeral space";
    default: return "the memory was still held by other jobs";
  }
}

// How long an allocation waits for its turn: GSHARE_ADMIT_TIMEOUT_S, or
// with 0 (memory waits answer at once) the default, 600 s: a turn is the
// policy's to give, not a shortage, but no wait is endless.
uint64_t turn_wait_ns() { return uint64_t((g_timeout_s > 0 ? g_timeout_s : 600.0) * 1e9); }

}  // namespace

void configure_admission(const Options& options) { g_timeout_s = options.admit_timeout_s; }

void take_turn_without_memory(Device& device) {
  if (device.account.shared())
    take_turn(device.account.arbiter(), MemoryClass::kEphemeral,
              [] { return mono_now_ns() + turn_wait_ns(); });
}

bool wait_after_driver_refused(Device& device, const char* call, uint64_t bytes,
                               uint64_t* started_ns) {
  DeviceAccount& account = device.account;
  if (!account.shared() || g_timeout_s <= 0 || !driver().mem_get_info) return false;
  uint64_t now = mono_now_ns();
  if (*started_ns == 0) {
    *started_ns = now;
    GSHARE_INFO("%s of %.1f MiB on GPU %s: the driver is out of memory that gshare had "
                "admitted (memory outside gshare's view is in use); waiting for it",
                call, double(bytes) / MiB, device.uuid);
  }
  const uint64_t deadline = *started_ns + uint64_t(g_timeout_s * 1e9);
  Arbiter& arbiter = account.arbiter();
  Region& r = *arbiter.region();
  Requests requests;
  arbiter.update([&] { ask_for_releases_locked(arbiter, requests, now); });
  // The resource order: a job waiting for memory holds no token.
  if (scheduler::holds_token(arbiter)) scheduler::step_aside(arbiter);
  bool freed = false;
  uint64_t page_outs_asked_at = 0;
  while (now < deadline && !freed) {
    uint32_t seen = r.header.token_futex.load(std::memory_order_acquire);
    answer_release_requests();
    size_t free_bytes = 0, total = 0;
    freed = driver().mem_get_info(&free_bytes, &total) == CUDA_SUCCESS && free_bytes >= bytes;
    // Under paging, jobs that are not running can make the room, whoever
    // holds the memory the driver misses: without the ask, a waiter beside
    // an idle job waited for its admission timeout.
    if (!freed) ask_for_page_outs(arbiter, bytes - free_bytes, &page_outs_asked_at);
    if (!freed) shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
    now = mono_now_ns();
  }
  return freed;
}

// The resource order (README, "How it works"): lane space, then the launch
// token. A job may wait for its token while it holds its lane's space, but
// a job that waits for anything else (admission, its lane's space, memory)
// holds no token: it steps aside first, and competes again only once the
// reservation would be granted. The holder of the token therefore never
// waits on a job that needs the token, the lane's holder goes first when
// it wants the token (scheduler/token.cpp), and every wait ends by
// GSHARE_ADMIT_TIMEOUT_S.
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
  // The clock is read only once the allocation has to wait.
  uint64_t start = 0, deadline = 0;
  auto started = [&] {
    if (start == 0) {
      start = mono_now_ns();
      deadline = start + uint64_t(std::max(0.0, g_timeout_s) * 1e9);
    }
    return start;
  };
  ReserveResult result{ReserveStatus::kOverCapacity, r.header.capacity_bytes, r.header.reserved_bytes};
  bool waiting = false;
  bool turn_timed_out = false;
  Requests requests;
  uint64_t page_outs_asked_at = 0, token_kept_since = 0;
  bool kept_token = false;  // it waited with its token for page-outs
  uint64_t now = 0;
  for (;;) {
    if (!take_turn(arbiter, kind, [&] { return started() + turn_wait_ns(); })) {
      turn_timed_out = true;
      break;
    }
    // Under paging, residency comes first (allocator/pager.h), at every
    // try: a job that waits here may be paged out meanwhile.
    if (page_in_before_allocating() != CUDA_SUCCESS) {
      result = {ReserveStatus::kOverCapacity, r.header.capacity_bytes, r.header.reserved_bytes};
      break;
    }
    result = reserve();
    if (!must_wait(result.status)) break;
    started();
    now = mono_now_ns();
    if (now >= deadline) break;
    // Waiting for the lane's space or for memory, the job stays a contender
    // for the token, so that the holder ends its slice at its next boundary
    // and gives its cache back; the token, if it comes, is taken only to
    // try again. Waiting for admission (others to shrink or leave), it does
    // not compete at all, except under paging: with the token it asks the
    // jobs that then run no more to page out (below). Not competing, it
    // waited for a lone running job to end.
    const bool contends = result.status != ReserveStatus::kInadmissible || paging_enabled();
    // Counted as waiting (gshare-top, memory_waiters) from its first
    // refusal, also while it waits with its token for page-outs below: a
    // prefetch defers to it (allocator/pager.h), so that the room those
    // page-outs make is not taken back by the job paged out for it.
    auto note_waiting = [&] {
      if (!waiting) {
        tell_wait_begins(device, call, bytes, result);
        waiting = true;
      }
      arbiter.update([&] {
        if (me.admission == shm::kAdmitted) {
          me.admission_since_mono_ns = start;
          me.admission_bytes = bytes;
          me.admission_waits++;
          r.header.admission_waits++;
          r.header.memory_waiters++;
        }
        me.admission = state_of(result.status);
        me.admission_short_bytes = short_of(result, bytes);
        me.blocked_by = uint32_t(blocker_of(r, arbiter.own_slot(), result) + 1);
      });
    };
    // Under paging, jobs that are not running can make room: the holder
    // asks them and waits for them with its token (allocator/page_requests.h), busy.
    if (paging_enabled() && scheduler::holds_token(arbiter)) {
      note_waiting();
      ask_for_page_outs(arbiter, short_of(result, bytes), &page_outs_asked_at);
      if (keep_token_for_room(arbiter, &token_kept_since, now)) {
        kept_token = true;
        uint32_t seen = r.header.token_futex.load(std::memory_order_acquire);
        me.gpu_waits.fetch_add(1, std::memory_order_relaxed);
        shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
        me.gpu_waits.fetch_sub(1, std::memory_order_relaxed);
        continue;
      }
    }
    if (scheduler::holds_token(arbiter) || !contends) scheduler::step_aside(arbiter, contends);
    // After stepping aside, whose own grant must not end the wait at once.
    uint32_t seen = r.header.token_futex.load(std::memory_order_acquire);
    t_turn_wait = contends ? TurnWait{&arbiter, &requests} : TurnWait{};
    note_waiting();
    if (contends) ask_for_releases_if_due(arbiter, requests, now);
    // Under paging, jobs that are not running can make room by paging out.
    ask_for_page_outs(arbiter, short_of(result, bytes), &page_outs_asked_at);
    answer_release_requests();
    if (arbiter.has_dead_slots()) arbiter.reclaim_dead_slots();
    if (contends && paging_enabled() && result.status != ReserveStatus::kLaneBusy) {
      // Under paging the room comes with the token (the holder's branch
      // above): it waits for its turn as a contender, so that a lone
      // running job's slice ends for it. Waiting on the futex alone, it
      // asked nobody for the token and waited for that job to end.
      scheduler::wait_for_token(arbiter, while_waiting_for_turn, deadline);
      now = mono_now_ns();
      continue;
    }
    if (contends) {
      // Until something changes (a grant, memory given back), then the
      // token again: the policy decides when it comes.
      shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
      now = mono_now_ns();
      continue;
    }
    // Until the reservation would be granted.
    for (;;) {
      seen = r.header.token_futex.load(std::memory_order_acquire);
      answer_release_requests();
      if (arbiter.has_dead_slots()) arbiter.reclaim_dead_slots();
      result = arbiter.would_reserve(bytes, kind);
      now = mono_now_ns();
      if (!must_wait(result.status) || now >= deadline) break;
      ask_for_page_outs(arbiter, short_of(result, bytes), &page_outs_asked_at);
      shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
    }
    if (now >= deadline && must_wait(result.status)) break;
    requests.any = false;
  }
  t_turn_wait = {};
  const bool timed_out = turn_timed_out || must_wait(result.status);
  if (waiting || timed_out) {
    arbiter.update([&] {
      if (me.admission != shm::kAdmitted && r.header.memory_waiters > 0) r.header.memory_waiters--;
      me.admission = shm::kAdmitted;
      me.admission_since_mono_ns = 0;
      me.admission_bytes = me.admission_short_bytes = 0;
      me.blocked_by = 0;
      if (timed_out && g_timeout_s > 0) {
        me.admission_timeouts++;
        r.header.admission_timeouts++;
      }
    });
  }
  double waited_s = start ? double(mono_now_ns() - start) / 1e9 : 0;
  if (turn_timed_out) {
    GSHARE_WARN("%s of %.1f MiB on GPU %s gave up after %.1f s waiting for its turn "
                "(GSHARE_ADMIT_TIMEOUT_S=%g): other jobs held the GPU",
                call, double(bytes) / MiB, device.uuid, waited_s, g_timeout_s);
    return {ReserveStatus::kOverCapacity, r.header.capacity_bytes, r.header.reserved_bytes};
  }
  if (result.status == ReserveStatus::kGranted) {
    // Its turn runs from when the room is there, as after a page-in: the
    // wait for page-outs is not its work.
    if (kept_token) scheduler::restart_turn(arbiter);
    if (waited_s >= 1) GSHARE_INFO("%s on GPU %s admitted after %.1f s", call, device.uuid, waited_s);
    else if (start) GSHARE_DEBUG("%s of %.1f MiB on GPU %s admitted after %.3f s", call, double(bytes) / MiB,
                                 device.uuid, waited_s);
  } else if (timed_out && g_timeout_s > 0) {
    GSHARE_WARN("%s of %.1f MiB on GPU %s gave up waiting after %.1f s (GSHARE_ADMIT_TIMEOUT_S=%g): %s",
                call, double(bytes) / MiB, device.uuid, waited_s, g_timeout_s, why_waited(result));
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

// The upkeep thread's watch (answer_release_requests_from_upkeep): since
// when the job has sat quiet, 0 while it is not.
std::atomic<uint64_t> g_quiet_since_ns{0};
uint64_t g_launches_at_tick = 0;  // upkeep thread only

// Whether a framework's cache may be emptied on request now: when the job
// sits quiet (kQuietRestNs), or between two iterations
// (scheduler/iterations.h) without its token. Emptied mid-step, the
// framework may no longer fit the step's largest block (PyTorch: an
// out-of-memory error natively impossible): the request waits for the
// step's end. A job that keeps its token there goes on running and needs
// its cache: the request waits on for its switch (where a lane-mate's
// space goes back anyway) or its quiet; a job waiting for memory gets the
// bytes it waits for at the runner's boundaries (give_back_cache_to_waiters).
bool framework_at_rest() {
  uint64_t quiet = g_quiet_since_ns.load(std::memory_order_relaxed);
  if (quiet != 0 && mono_now_ns() - quiet >= tunables::kQuietRestNs) return true;
  if (!scheduler::iterations::between_iterations(process_launches())) return false;
  bool runs = false;
  for_each_attached_device([&](Device& device) {
    if (device.account.slot() && scheduler::holds_token(device.account.arbiter())) runs = true;
  });
  return !runs;
}

// Whether a thread of this job waits for the token or for memory, or is
// inside a host sync.
bool waits_for_anything() {
  bool waits = false;
  for_each_attached_device([&](Device& device) {
    const Slot* slot = device.account.slot();
    if (!slot) return;
    if (__atomic_load_n(&slot->job_state, __ATOMIC_RELAXED) == shm::kJobWaiting ||
        __atomic_load_n(&slot->admission, __ATOMIC_RELAXED) != shm::kAdmitted ||
        slot->gpu_waits.load(std::memory_order_relaxed) != 0)
      waits = true;
  });
  return waits;
}

void answer(bool from_hook) {
  if (!release_requested()) return;
  // In Python a framework's cache may exist before its figures have told
  // gshare so (its first steps): the request waits for its rest all the same.
  const bool may_have_cache = has_framework_cache() || can_empty_framework_caches();
  if (may_have_cache && !framework_at_rest() && !page_out_waits_for_cache()) return;
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

void answer_release_requests_from_upkeep(uint64_t launches, uint64_t now_ns) {
  bool quiet = launches == g_launches_at_tick && !waits_for_anything();
  g_launches_at_tick = launches;
  if (!quiet) g_quiet_since_ns.store(0, std::memory_order_relaxed);
  else if (g_quiet_since_ns.load(std::memory_order_relaxed) == 0) g_quiet_since_ns.store(now_ns, std::memory_order_relaxed);
  answer(false);
}

namespace {
// Empties the framework caches and the stream-ordered pools' free memory,
// and counts what they gave back (the frameworks' once, on the first
// device). Whether a framework's cache was emptied.
bool give_back_and_count(bool framework, const char* why, uint64_t* freed_bytes = nullptr) {
  uint64_t emptied = framework ? give_back_framework_caches() : 0;
  const bool framework_emptied = emptied > 0;
  uint64_t total = 0;
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot()) return;
    uint64_t freed = give_back_on(device, emptied, nullptr);
    emptied = 0;
    total += freed;
    if (freed > 0) GSHARE_DEBUG("GPU %s: gave back %.1f MiB of cached memory %s", device.uuid, double(freed) / MiB, why);
  });
  if (freed_bytes) *freed_bytes = total;
  return framework_emptied;
}
}  // namespace

bool give_back_cache_when_switched_out() {
  bool switched_out = false;
  for_each_attached_device([&](Device& device) {
    if (!device.account.slot()) return;
    const Arbiter& arbiter = device.account.arbiter();
    if (!scheduler::holds_token(arbiter) && arbiter.hands_memory_over()) switched_out = true;
  });
  return switched_out && give_back_and_count(has_framework_cache() && can_empty_framework_caches(), "switched out");
}

bool give_back_cache_before_switch(uint64_t* freed_bytes) {
  return give_back_and_count(can_empty_framework_caches(), "before a switch", freed_bytes);
}

namespace {
// Whether a job other than `own` waits for bytes a cache could free: for
// memory or for admission. A job waiting for its lane's space is not
// counted: that space frees as its holder's iteration ends, and the token
// comes to the waiter only when the holder hands over, which gives the
// holder's cache back first (give_back_cache_before_switch). Emptying
// for it at every boundary would only make the running job allocate its
// next iteration again.
//
// Nor is a job waiting for admission while this one runs on: the safety
// condition counts what a job will need, not what its cache holds now, and
// a running job takes its iteration's memory again at once. (A provisional
// job's holdings count in full, but it takes them again too.) The admission
// waiter gets in as the runner's figures are learned or its turn ends.
bool waits_for_bytes(const Region& r, int own, bool running_on) {
  if (__atomic_load_n(&r.header.memory_waiters, __ATOMIC_RELAXED) == 0) return false;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    if (int(i) == own || __atomic_load_n(&r.slots[i].state, __ATOMIC_RELAXED) != shm::kSlotLive) continue;
    uint32_t admission = __atomic_load_n(&r.slots[i].admission, __ATOMIC_RELAXED);
    if (admission == shm::kWaitingForMemory) return true;
    if (admission == shm::kWaitingForAdmission && !running_on) return true;
  }
  return false;
}
}  // namespace

void give_back_cache_to_waiters() {
  bool others_wait = false;
  for_each_attached_device([&](Device& device) {
    const Slot* slot = device.account.slot();
    const Arbiter& arbiter = device.account.arbiter();
    if (!slot || slot->admission != shm::kAdmitted) return;
    const uint32_t gate = slot->gate.load(std::memory_order_relaxed);
    const bool running_on = (gate & shm::kGateOpen) && !(gate & shm::kGateYield);
    if (waits_for_bytes(*arbiter.region(), arbiter.own_slot(), running_on)) others_wait = true;
  });
  if (others_wait) give_back_and_count(can_empty_framework_caches(), "to jobs waiting for memory");
}

}  // namespace gshare::allocator
