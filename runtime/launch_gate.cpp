#include "runtime/launch_gate.h"

#include <pthread.h>

#include <utility>

#include "allocator/admission.h"
#include "allocator/allocation_rate.h"
#include "allocator/classifier.h"
#include "allocator/devices.h"
#include "allocator/framework_classes.h"
#include "allocator/framework_counts.h"
#include "allocator/movable_memory.h"
#include "allocator/pools.h"
#include "base/driver_api.h"
#include "base/tunables.h"
#include "scheduler/iterations.h"
#include "scheduler/token.h"
#include "runtime/gpu_busy.h"
#include "runtime/host_bound.h"
#include "runtime/leaves_gaps.h"
#include "runtime/switch_cost.h"
#include "shm/region.h"

namespace gshare::runtime {

using namespace scheduler;

namespace {

std::atomic<int> g_captures_in_progress{0};

bool stream_is_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!driver().stream_is_capturing || driver().stream_is_capturing(stream, &status) != CUDA_SUCCESS)
    return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Priority's bound on a lower job's in-flight work: an event after each of
// its launches, and before the next launch a wait for the event of the
// kDepth-th launch before. With kDepth 1, one kernel at most is queued when
// a higher job wakes, which then starts within about one of the lower
// job's kernels, as priority promises; the lower job pays a host round trip
// between its kernels while a higher job exists. One ring per process:
// events belong to the context they were created in, so the ring is rebuilt
// when the context changes.
struct InFlightBound {
  static constexpr int kDepth = tunables::kPriorityInFlightDepth;
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  CUcontext context = nullptr;
  CUevent events[kDepth] = {};
  bool recorded[kDepth] = {};
  int next = 0;

  bool ready_for(CUcontext current) {
    if (current == context && events[0]) return true;
    if (!driver().event_create || !driver().event_record || !driver().event_synchronize) return false;
    context = current;
    for (int i = 0; i < kDepth; ++i) {
      recorded[i] = false;
      if (driver().event_create(&events[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        events[0] = nullptr;
        return false;
      }
    }
    return true;
  }
};
InFlightBound g_bound;

void wait_for_in_flight_room(shm::Slot* slot) {
  CUcontext current = nullptr;
  if (!driver().ctx_get_current || driver().ctx_get_current(&current) != CUDA_SUCCESS) return;
  pthread_mutex_lock(&g_bound.mutex);
  if (g_bound.ready_for(current) && g_bound.recorded[g_bound.next]) {
    slot->gpu_waits.fetch_add(1, std::memory_order_relaxed);
    driver().event_synchronize(g_bound.events[g_bound.next]);
    slot->gpu_waits.fetch_sub(1, std::memory_order_relaxed);
    g_bound.recorded[g_bound.next] = false;
  }
  pthread_mutex_unlock(&g_bound.mutex);
}

void note_in_flight(CUstream stream) {
  pthread_mutex_lock(&g_bound.mutex);
  if (g_bound.events[0] &&
      driver().event_record(g_bound.events[g_bound.next], stream) == CUDA_SUCCESS) {
    g_bound.recorded[g_bound.next] = true;
    g_bound.next = (g_bound.next + 1) % InFlightBound::kDepth;
  }
  pthread_mutex_unlock(&g_bound.mutex);
}

// What this job would take to allocate again what it gives back at a
// switch: in a shared lane, what it holds beyond P (its iteration's memory,
// in use or cached) goes back before a lane-mate runs, if more than the
// lane's slack, and comes again in its next turn, at the driver's rate
// (allocator/allocation_rate.h).
uint64_t reallocation_after_switch_ns() {
  if (!switch_cost_tracked()) return 0;  // nothing to publish it to
  uint64_t bytes = 0;
  allocator::for_each_attached_device([&](allocator::Device& device) {
    const shm::Slot* slot = device.account.slot();
    if (slot && device.account.arbiter().hands_memory_over()) bytes += shm::ephemeral_now(*slot);
  });
  return allocator::expected_allocation_ns(bytes);
}

// Ends the holder's slice, and the measure of its turn's switch cost
// (runtime/switch_cost.h).
void hand_over(shm::Arbiter& arbiter, shm::Slot* slot) {
  uncount_current_wait();
  end_turn_cost(slot, reallocation_after_switch_ns());
  end_slice(arbiter, allocator::drain_current_context);
}

// Whether the holder, asked to yield where it could, still hands over: not
// while the turn its switch cost so far gives it lasts.
bool yield_stands(shm::Arbiter& arbiter) {
  publish_switch_cost_mid_iteration(reallocation_after_switch_ns());
  return !keep_turn_if_longer(arbiter);
}

// The holder was asked to yield: may this launch be where its slice ends?
// Once the slice is past its limit, yes: no job keeps the GPU longer,
// whether or not it syncs (its lane's space stays its own, shm/arbiter.h).
// Before, not in a shared lane: there the next job needs the ephemeral
// memory that this one holds until its iteration ends, which a sync marks.
bool slice_may_end_here(shm::Arbiter& arbiter, shm::Slot* slot, const void* function) {
  if (slice_past_limit(own_token(arbiter), *slot, mono_now_ns())) return true;
  if (arbiter.lane_is_shared() || arbiter.holds_unsettled_memory(arbiter.own_slot())) return false;
  return iterations::launch_is_boundary(function, slot->launches.load(std::memory_order_relaxed));
}

// A job not yet classified counts all it holds as ephemeral
// (allocator/classifier.h): what stays after it gives its cache back at a
// boundary (its weights) still keeps its lane, and it cannot hand over.
// Having found that once, it does not give its cache back again at its next
// boundaries until its classification moves on: each give-back would only
// have its next step allocate the cache anew (on a GPU, gigabytes a step)
// while its lane-mate waits all the same. Per device: the classified
// iterations at the give-back that could not hand over, plus one; 0: none.
std::atomic<uint32_t> g_futile_give_back[allocator::kMaxDevices];

bool give_back_would_be_futile(int ordinal, const shm::Slot& s) {
  const uint32_t at = g_futile_give_back[ordinal].load(std::memory_order_relaxed);
  return at != 0 && s.class_iterations < 2 && at - 1 == s.class_iterations;
}

void note_give_back_outcome(int ordinal, const shm::Slot& s, bool handed_over) {
  const bool futile = !handed_over && s.class_iterations < 2;
  g_futile_give_back[ordinal].store(futile ? s.class_iterations + 1 : 0, std::memory_order_relaxed);
}

}  // namespace

void note_capture_begun() {
  g_captures_in_progress.fetch_add(1, std::memory_order_relaxed);
  g_launch_detours.fetch_add(1, std::memory_order_relaxed);
}

void note_capture_ended() {
  int now = g_captures_in_progress.load(std::memory_order_relaxed);
  while (now > 0) {
    if (g_captures_in_progress.compare_exchange_weak(now, now - 1)) {
      g_launch_detours.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  }
}

bool stream_is_being_captured(CUstream stream) {
  return g_captures_in_progress.load(std::memory_order_relaxed) != 0 && stream_is_capturing(stream);
}

void forget_launch_state_after_fork() {
  g_captures_in_progress.store(0);
  g_launch_detours.store(0);
  iterations::forget_after_fork();
  forget_switch_cost_after_fork();
  forget_token_waits_after_fork();
  forget_gpu_busy_after_fork();
}

LaunchTicket before_launch_slow(CUstream stream, const void* function) {
  LaunchTicket ticket;
  if (stream_is_being_captured(stream))
    return ticket;  // recorded into a graph, not run: neither gated nor counted
  allocator::Device* device = allocator::current_device();
  if (!device) return ticket;
  shm::Slot* slot = device->account.slot();
  if (!slot) return ticket;  // alone on the GPU (see allocator/device_account.h)
  shm::Arbiter& arbiter = device->account.arbiter();
  uint32_t gate;
  bool waited = false;  // for the token, or a switch's first launch: not a stretch of its own turn
  // Under paging the job's memory must be on the GPU before it launches:
  // paging in comes after the token (the job comes back in its turn) and
  // before the switch's first launch, whose cost then includes it, so that
  // the policy lengthens the job's turns by it. No wait for the token or
  // hand-over happens inside the pager's gate.
  auto leave_gate = [&] {
    allocator::end_device_work(ticket.work);
    ticket.work = {};
  };
  for (;;) {
    gate = slot->gate.load(std::memory_order_acquire);
    if (!(gate & shm::kGateOpen)) {
      leave_gate();
      wait_for_token(arbiter, allocator::answer_release_requests_from_hook);
      waited = true;
    } else if ((gate & shm::kGateYield) && slice_may_end_here(arbiter, slot, function) && yield_stands(arbiter)) {
      leave_gate();
      hand_over(arbiter, slot);
      waited = true;
    } else if (allocator::paging_enabled() && !ticket.work.entered) {
      ticket.work = allocator::begin_device_work();
      if (!ticket.work.entered) {
        ticket.refused = ticket.work.result;
        return ticket;
      }
    } else if (gate & shm::kGateFirstLaunch) {
      // The first launch since a switch made this job the holder: the
      // switch's cost ends here (scheduler/token.h). Then the gate is read
      // again: the token may have moved while we took the lock.
      begin_switch_cost(slot, note_first_launch(arbiter, mono_now_ns()));
      note_switched_in();
      waited = true;
    } else {
      break;
    }
  }
  uint64_t number = slot->launches.fetch_add(1, std::memory_order_relaxed);
  if (iterations::observing()) iterations::record_launch(function, number, mono_now_ns());
  if (gate & shm::kGateBounded) {
    wait_for_in_flight_room(slot);
    ticket.bounded = true;
  }
  // Timed only alone in its own turn: in a shared turn, others' kernels
  // would count as its own; after a wait, the last holder's tail.
  if (gpu_busy_armed()) {
    const bool shared = turn_shared_now(arbiter);
    const bool own_turn = !waited && gate == shm::kGateOpen && allocator::only_slot() == slot && !shared;
    ticket.busy_pair = gpu_busy_before_launch(stream, own_turn, shared);
  }
  return ticket;
}

void after_launch_slow(const LaunchTicket& ticket, CUstream stream, CUresult result) {
  allocator::end_device_work(ticket.work);
  if (ticket.bounded && result == CUDA_SUCCESS) note_in_flight(stream);
  if (ticket.busy_pair >= 0) gpu_busy_after_launch(ticket.busy_pair, stream, result == CUDA_SUCCESS);
}

// A holder asked to yield that syncs at an iteration boundary hands over
// as the sync starts under overlap: its queued tail runs while the next job
// wakes and queues its own work, so the GPU switches without waiting on the
// host. Under strict it hands over after the sync, drained. A sync that
// ends an iteration is also marked in the slot (boundary_waits), so that a
// waiter whose turn comes while the holder is inside it can take the token
// at once under overlap (scheduler/token.cpp).
GpuWaitScope::GpuWaitScope() {
  begin_gpu_wait();
  allocator::for_each_attached_device([](allocator::Device& device) {
    if (shm::Slot* slot = device.account.slot()) slot->gpu_waits.fetch_add(1, std::memory_order_relaxed);
  });
}

GpuWaitScope::~GpuWaitScope() {
  allocator::for_each_attached_device([](allocator::Device& device) {
    if (shm::Slot* slot = device.account.slot()) slot->gpu_waits.fetch_sub(1, std::memory_order_relaxed);
  });
  end_gpu_wait();
}

bool before_host_sync() {
  begin_gpu_wait();
  bool boundary = iterations::sync_would_end_iteration(allocator::process_launches());
  allocator::for_each_attached_device([&](allocator::Device& device) {
    shm::Slot* slot = device.account.slot();
    if (!slot) return;
    slot->gpu_waits.fetch_add(1, std::memory_order_relaxed);
    if (boundary) slot->boundary_waits.fetch_add(1, std::memory_order_relaxed);
    uint32_t gate = slot->gate.load(std::memory_order_acquire);
    shm::Arbiter& arbiter = device.account.arbiter();
    if (boundary && (gate & shm::kGateOpen) && (gate & shm::kGateYield) &&
        slot->handover_mode == shm::kHandoverOverlap && !arbiter.holds_unsettled_memory(arbiter.own_slot()) &&
        yield_stands(arbiter))
      hand_over(arbiter, slot);
  });
  return boundary;
}

void after_host_sync(bool ends_iteration) {
  end_gpu_wait();
  uint64_t launches = allocator::process_launches();
  uint64_t bytes = 0;
  allocator::for_each_attached_device([&](allocator::Device& device) {
    if (shm::Slot* slot = device.account.slot()) bytes += __atomic_load_n(&slot->allocated_bytes, __ATOMIC_RELAXED);
  });
  bool boundary = iterations::on_sync(launches, bytes, mono_now_ns());
  if (boundary) {
    iterations::Estimate estimate = iterations::current(launches);
    // Memory is classified against iterations found from syncs only: a
    // launch pattern may be found in a model's set-up, with boundaries
    // that fall mid-iteration later.
    if (estimate.source == shm::kIterationsFromSyncs) allocator::note_iterations(estimate.iterations);
    allocator::measure_framework_cache_if_due();
    publish_switch_cost(reallocation_after_switch_ns());
  }
  allocator::answer_release_requests_from_hook();
  allocator::for_each_attached_device([&](allocator::Device& device) {
    shm::Slot* slot = device.account.slot();
    if (slot) {
      slot->gpu_waits.fetch_sub(1, std::memory_order_relaxed);
      if (ends_iteration) slot->boundary_waits.fetch_sub(1, std::memory_order_relaxed);
      slot->syncs.fetch_add(1, std::memory_order_relaxed);
      // Whatever it launched before the sync has run: a loan may come
      // should it now work on the host (scheduler/token.h).
      slot->launches_at_sync.store(slot->launches.load(std::memory_order_relaxed), std::memory_order_relaxed);
      uint32_t gate = slot->gate.load(std::memory_order_acquire);
      shm::Arbiter& arbiter = device.account.arbiter();
      if ((gate & shm::kGateOpen) && (gate & shm::kGateYield) && boundary && yield_stands(arbiter)) {
        // Memory the next job needs goes back before the handover: the
        // framework's cache; what stays is live, and the job keeps its turn.
        bool giving_back = arbiter.holds_unsettled_memory(arbiter.own_slot()) &&
                           !give_back_would_be_futile(device.ordinal, *slot);
        if (giving_back) {
          const uint64_t began = mono_now_ns();
          note_handover_began(arbiter, began);
          // What stays is in use at rest: P (allocator/classifier.h).
          uint64_t freed = 0;
          if (allocator::give_back_cache_before_switch(&freed)) allocator::note_cache_emptied_at_boundary();
          // Its next turn allocates that much again (runtime/switch_cost.h).
          note_give_back_before_switch(slot, mono_now_ns() - began + allocator::expected_allocation_ns(freed));
        }
        hand_over(arbiter, slot);
        if (giving_back) {
          note_handover_began(arbiter, 0);
          note_give_back_outcome(device.ordinal, *slot, !holds_token(arbiter));
        }
      } else if (gate & shm::kGateOpen) {
        lend_while_idle(arbiter);
      }
    }
    allocator::refresh_pool_charges_if_freed(device);
  });
  // Switched out at this boundary (now or as the sync began): the lane's
  // next job needs the ephemeral space. So does a job waiting for memory.
  if (boundary) {
    if (allocator::give_back_cache_when_switched_out()) allocator::note_cache_emptied_at_boundary();
    allocator::give_back_cache_to_waiters();
  }
  // At every sync, not only boundaries: P is the least in use at any.
  // Asked last: the answer runs at the program's next bytecode, and a
  // give-back above runs Python code where it would come too early.
  allocator::ask_framework_counts();
}

void note_memory_event(bool allocation) {
  if (iterations::observing()) iterations::record_memory_event(allocation, allocator::process_launches(), mono_now_ns());
}

namespace {
// Whether the job has neither launched nor synchronised on `device` since
// the last tick, nor waits for its work now: it holds the token idle
// (scheduler::account_token_time). Upkeep thread only.
bool held_idle(const allocator::Device& device, const shm::Slot& slot) {
  struct Seen {
    const shm::Slot* slot = nullptr;  // another slot (a new attach): nothing seen yet
    uint64_t launches = 0, syncs = 0;
  };
  static Seen seen[allocator::kMaxDevices];
  if (device.ordinal < 0 || device.ordinal >= allocator::kMaxDevices) return false;
  Seen& last = seen[device.ordinal];
  const uint64_t launches = slot.launches.load(std::memory_order_relaxed);
  const uint64_t syncs = slot.syncs.load(std::memory_order_relaxed);
  const bool busy = slot.gpu_waits.load(std::memory_order_relaxed) != 0;
  const bool idle = last.slot == &slot && last.launches == launches && last.syncs == syncs && !busy;
  last = {&slot, launches, syncs};
  return idle;
}
}  // namespace

void scheduler_tick() {
  uint64_t launches = allocator::process_launches();
  uint64_t now = mono_now_ns();
  iterations::tick(launches, now);
  iterations::Estimate estimate = iterations::current(launches);
  if (estimate.source == shm::kIterationsFromSyncs) allocator::note_iterations(estimate.iterations);
  // A loop that never syncs ends its iterations between ticks: the switch
  // cost's measure is published at the first tick past one.
  publish_switch_cost_if_iterated(estimate.iterations, estimate.source == shm::kIterationsFromLaunches,
                                  reallocation_after_switch_ns());
  allocator::answer_release_requests_from_upkeep(launches, now);
  allocator::for_each_attached_device([&](allocator::Device& device) {
    shm::Slot* slot = device.account.slot();
    if (!slot) return;
    slot->iteration_source.store(estimate.source, std::memory_order_relaxed);
    slot->iterations.store(estimate.iterations, std::memory_order_relaxed);
    slot->iteration_ns.store(estimate.iteration_ns, std::memory_order_relaxed);
    slot->iteration_launches.store(estimate.launches_per_iteration, std::memory_order_relaxed);
    if (slot->gate.load(std::memory_order_relaxed) & shm::kGateOpen)
      account_token_time(device.account.arbiter(), held_idle(device, *slot));
    const shm::Arbiter& arbiter = device.account.arbiter();
    const bool holds = (slot->gate.load(std::memory_order_relaxed) & shm::kGateOpen) &&
                       !__atomic_load_n(&slot->beside, __ATOMIC_RELAXED);
    const uint32_t gpu_share = measure_gpu_share(*slot, turns_may_be_shared(arbiter));
    const auto verdicts = [&] {
      return std::pair(slot->host_bound.load(std::memory_order_relaxed),
                       slot->leaves_gaps.load(std::memory_order_relaxed));
    };
    const auto before = verdicts();
    judge_host_bound(device.ordinal, *slot, holds && turn_shared_now(arbiter), gpu_share);
    judge_leaves_gaps(device.ordinal, *slot, gpu_share);
    if (verdicts() != before && turn_shared_now(arbiter)) scheduler::settle_shared_turn(device.account.arbiter());
  });
}

}  // namespace gshare::runtime
