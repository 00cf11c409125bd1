#include "shm/arbiter.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/saturating.h"
#include "rules/admission.h"
#include "rules/lanes.h"
#include "rules/policy.h"
#include "shm/futex.h"
#include "shm/lane_space.h"
#include "shm/liveness.h"
#include "shm/robust_mutex.h"
#include "shm/tokens.h"

namespace gshare::shm {

void wake_waiters(RegionHeader& h) {
  h.token_futex.fetch_add(1, std::memory_order_release);
  futex_wake_all(&h.token_futex);
}

uint32_t waiter_bit(int slot) { return 1u << (uint32_t(slot) % 32); }

void wake_waiters_with(RegionHeader& h, uint32_t bits) {
  h.token_futex.fetch_add(1, std::memory_order_release);
  futex_wake_bits(&h.token_futex, bits);
}

namespace {

// Whether the condition must give way for `own`: every job that holds
// memory waits for admission too, so none will shrink, and `own` has waited
// longest. It is then admitted on the bytes really free alone: P figures
// learned before a framework's cache was measured (allocator/classifier.h)
// can count cache as persistent, and jobs stuck mid-iteration never reach
// the boundary where it would be measured.
bool admission_deadlocked_locked(const Region& r, int own) {
  const Slot& me = r.slots[own];
  if (me.admission != kWaitingForAdmission) return false;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (int(i) == own || s.state != kSlotLive || s.allocated_bytes == 0) continue;
    if (s.admission != kWaitingForAdmission) return false;
    if (s.admission_since_mono_ns < me.admission_since_mono_ns ||
        (s.admission_since_mono_ns == me.admission_since_mono_ns && int(i) < own))
      return false;
  }
  return true;
}

void repair_callback(void* arbiter) { static_cast<Arbiter*>(arbiter)->repair_locked(); }

}  // namespace

bool Arbiter::lock() {
  return robust_mutex_lock(&file_.region->header.lock, repair_callback, this) !=
         LockResult::kFailed;
}

void Arbiter::unlock() { robust_mutex_unlock(&file_.region->header.lock); }

bool Arbiter::claim_slot(const SlotIdentity& who) {
  if (!lock()) return false;
  // A newcomer first clears out the dead: nobody may have been alive to do
  // it since they died, and their bytes would shrink everyone's view.
  reclaim_dead_slots_locked();
  correct_totals_locked();
  for (uint32_t i = 0; i < kMaxSlots && own_slot_ < 0; ++i) {
    Slot& s = file_.region->slots[i];
    if (s.state != kSlotFree) continue;
    // A free slot whose byte is still locked belongs to nobody we can
    // trust (an owner mid-exit); skip it.
    if (!hold_liveness_lock(file_.fd, kLivenessByteBase + i)) continue;
    WriteSection write(file_.region->header);
    uint32_t generation = s.generation + 1;
    memset(static_cast<void*>(&s), 0, offsetof(Slot, gate));
    s.generation = generation;
    s.pid = who.pid;
    s.uid = who.uid;
    s.start_time_ticks = who.start_time_ticks;
    s.attach_unix_ns = unix_now_ns();
    snprintf(s.command, sizeof s.command, "%s", who.command ? who.command : "?");
    s.quota_bytes = who.quota_bytes;
    s.lane = kNoLane;
    s.gate.store(kGateClosed, std::memory_order_relaxed);
    s.gpu_waits.store(0, std::memory_order_relaxed);
    s.boundary_waits.store(0, std::memory_order_relaxed);
    s.switch_cost_ns.store(0, std::memory_order_relaxed);
    s.launches.store(0, std::memory_order_relaxed);
    s.syncs.store(0, std::memory_order_relaxed);
    s.iterations.store(0, std::memory_order_relaxed);
    s.iteration_ns.store(0, std::memory_order_relaxed);
    s.iteration_launches.store(0, std::memory_order_relaxed);
    s.iteration_source.store(kIterationsUnknown, std::memory_order_relaxed);
    s.switched_in_mono_ns = 0;
    s.switches = s.switch_ns = s.last_switch_ns = 0;
    s.handover_began_mono_ns = 0;
    s.admission_timeouts = 0;
    s.lane_holder_since_mono_ns = 0;
    s.launches_at_sync.store(0, std::memory_order_relaxed);
    s.token_waits.store(0, std::memory_order_relaxed);
    s.switch_memory_ns.store(0, std::memory_order_relaxed);
    // Paging state (allocator/pager.h) left by a job that died in this
    // slot: its host memory went with it, and nothing of it is out.
    s.paged_out_bytes = s.host_paging_bytes = s.movable_bytes = 0;
    s.page_outs = s.page_ins = s.paging_ns = 0;
    s.residency = kResident;
    s.page_out_acks = s.page_out_requests;
    s.page_out_copying = 0;
    s.last_device_work_mono_ns.store(0, std::memory_order_relaxed);
    s.paged_in_bytes = s.page_in_copy_ns = s.prefetches = 0;
    s.host_release_acks = s.host_release_requests;
    s.host_release_bytes = 0;
    s.page_in_wait_ns = 0;
    s.prefetch_copying = 0;
    // Shared turns: a job starts with turns of its own until its syncs say
    // otherwise, and beside nobody.
    s.shares_turns = 0;
    s.host_bound.store(0, std::memory_order_relaxed);
    s.beside = 0;
    s.gpu_wait_permille.store(0, std::memory_order_relaxed);
    s.gpu_busy_permille.store(0, std::memory_order_relaxed);
    s.shared_runs.store(0, std::memory_order_relaxed);
    s.leaves_gaps.store(0, std::memory_order_relaxed);
    s.state = kSlotLive;
    file_.region->header.live_slots++;
    own_slot_ = int(i);
  }
  unlock();
  return own_slot_ >= 0;
}

// The GPU's totals are what its live slots hold, each kept by its owner:
// a total that says otherwise (a region written by a broken or foreign
// program) would have every allocation wait for memory nobody holds, or
// admit more than the GPU has. Counted as a repair.
void Arbiter::correct_totals_locked() {
  RegionHeader& h = file_.region->header;
  uint64_t total = 0;
  uint32_t live = 0;
  for (const Slot& s : file_.region->slots) {
    if (s.state != kSlotLive) continue;
    total = total > UINT64_MAX - s.reserved_bytes ? UINT64_MAX : total + s.reserved_bytes;
    ++live;
  }
  if (total == h.reserved_bytes && live == h.live_slots) return;
  WriteSection write(h);
  h.reserved_bytes = total;
  h.live_slots = live;
  h.repairs++;
}

// A freed slot gives the token back at once: the next job is chosen by the
// first waiter that wakes (scheduler/token.cpp), so everyone is woken.
static void drop_token_locked(RegionHeader& h, Slot& s, int index) {
  s.gate.store(kGateClosed, std::memory_order_relaxed);
  s.job_state = kJobIdle;
  bool held = false;
  for (Token& token : h.tokens) {
    if (token.holder != uint32_t(index) + 1) continue;
    forget_gone_holder_locked(token);
    held = true;
  }
  if (held) wake_waiters(h);
}


bool Arbiter::slot_is_live(int index) const {
  if (index < 0 || index >= int(kMaxSlots)) return false;
  if (file_.region->slots[index].state != kSlotLive) return false;
  return index == own_slot_ || liveness_of(file_.fd, kLivenessByteBase + index) != Liveness::kDead;
}

void Arbiter::free_slot_locked(int index) {
  Slot& s = file_.region->slots[index];
  RegionHeader& h = file_.region->header;
  drop_token_locked(h, s, index);
  h.reserved_bytes = saturating_sub(h.reserved_bytes, s.reserved_bytes);
  s.reserved_bytes = s.allocated_bytes = s.context_bytes = 0;
  s.persistent_bytes = s.ephemeral_bytes = 0;
  s.allocation_count = 0;
  s.lane = kNoLane;
  s.lane_holder_since_mono_ns = 0;
  s.state = kSlotFree;
  if (h.live_slots > 0) h.live_slots--;
  // Its lane place is free: the others may spread into more lanes, and
  // whoever waits for memory looks again.
  place_lanes_locked(true, nullptr);
  wake_waiters(h);
}

void Arbiter::release_slot() {
  if (own_slot_ < 0) return;
  if (lock()) {
    WriteSection write(file_.region->header);
    free_slot_locked(own_slot_);
    unlock();
  }
  drop_liveness_lock(file_.fd, kLivenessByteBase + own_slot_);
  own_slot_ = -1;
}

ReserveResult Arbiter::reserve(uint64_t bytes, MemoryClass kind) {
  if (own_slot_ < 0 || !lock()) return {ReserveStatus::kArbiterBroken, 0, 0};
  ReserveResult result = reserve_locked(bytes, 0, kind);
  unlock();
  return result;
}

ReserveResult Arbiter::would_reserve(uint64_t bytes, MemoryClass kind) {
  if (own_slot_ < 0 || !lock()) return {ReserveStatus::kArbiterBroken, 0, 0};
  ReserveResult result = reserve_locked(bytes, 0, kind, false, true);
  unlock();
  return result;
}

ReserveResult Arbiter::reserve_in_turn(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return {ReserveStatus::kArbiterBroken, 0, 0};
  ReserveResult result = reserve_locked(bytes, 0, MemoryClass::kEphemeral, true);
  unlock();
  return result;
}

ReserveResult Arbiter::reserve_allocation(uint64_t bytes, MemoryClass kind) {
  if (own_slot_ < 0 || !lock()) return {ReserveStatus::kArbiterBroken, 0, 0};
  ReserveResult result = reserve_locked(bytes, 1, kind);
  unlock();
  return result;
}

bool Arbiter::place_lanes_locked(bool widen, uint64_t* short_bytes) {
  Region& r = *file_.region;
  LaneJobs lane_jobs;
  rules::LaneJob* jobs = lane_jobs.at;
  int n = gather_lane_jobs(r, -1, 0, 0, jobs);
  rules::LanePlan plan =
      widen ? rules::widen_lanes(jobs, n, r.header.capacity_bytes, int(kMaxLanes))
            : rules::place_jobs(jobs, n, r.header.capacity_bytes, int(kMaxLanes));
  if (short_bytes) *short_bytes = plan.short_bytes;
  if (plan.fits && plan_keeps_holders_apart(r, jobs, n)) apply_lanes(r, jobs, n, plan);
  return plan.fits;
}

bool Arbiter::lane_is_shared(int slot) const {
  const Region& r = *file_.region;
  uint32_t lane = r.slots[slot].lane;
  if (lane >= kMaxLanes || r.header.live_slots <= 1) return false;
  for (uint32_t i = 0; i < kMaxSlots; ++i)
    if (int(i) != slot && r.slots[i].state == kSlotLive && r.slots[i].lane == lane) return true;
  return false;
}

bool Arbiter::hands_memory_over(int slot) const {
  return lane_needs_its_memory(file_.region->header, file_.region->slots[slot]) && lane_is_shared(slot);
}

bool Arbiter::holds_unsettled_memory(int slot) const {
  const Region& r = *file_.region;
  const Slot& s = r.slots[slot];
  const uint64_t slack = lane_slack(r.header);
  uint64_t held = ephemeral_now(s);
  if (s.class_iterations >= 2 && held <= s.ephemeral_bytes + slack && !lane_is_shared(slot)) return false;
  return held > slack;
}

bool Arbiter::holds_lane_space(int slot) const {
  return holds_lane_space_locked(*file_.region, slot);
}

bool Arbiter::holds_awaited_lane_space(int slot) const {
  const Region& r = *file_.region;
  if (!holds_lane_space_locked(r, slot)) return false;
  bool awaited = false;
  for_live_slots(r, [&](uint32_t i) {
    awaited = int(i) != slot && r.slots[i].lane == r.slots[slot].lane && r.slots[i].admission == kWaitingForLane;
    return !awaited;
  });
  return awaited;
}

bool Arbiter::waits_for_held_lane_locked(int slot) const {
  const Region& r = *file_.region;
  const Slot& s = r.slots[slot];
  if (s.admission != kWaitingForLane || s.blocked_by == 0 || s.blocked_by > kMaxSlots) return false;
  const int blocker = int(s.blocked_by) - 1;
  return blocker != slot && holds_lane_space_locked(r, blocker) && slot_is_live(blocker);
}

void Arbiter::leave_lane_space() {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  {
    WriteSection write(h);
    file_.region->slots[own_slot_].lane_holder_since_mono_ns = 0;
  }
  wake_waiters(h);
  unlock();
}

void Arbiter::wake_memory_waiters_locked() {
  if (file_.region->header.memory_waiters != 0) wake_waiters(file_.region->header);
}

namespace {
// What rules::admission_verdict asks, answered from the region under the
// lock, each only when asked (the lane plan gathers every live job).
// Reclaiming dead slots (`reclaim`) before a "no" is part of the answer
// where the reservation is real (not `dry`).
template <class Reclaim>
struct RegionFacts {
  Reclaim& reclaim;
  Region& r;
  int own;
  uint64_t bytes, p, e;
  bool dry;
  LaneJobs& lane_jobs;
  int n = 0;
  rules::LanePlan lane_plan;

  const Slot& me() const { return r.slots[own]; }
  bool over_quota() const { return bytes > me().quota_bytes || me().reserved_bytes > me().quota_bytes - bytes; }
  bool grows() const { return me().lane >= kMaxLanes || p > persistent_of(me()) || e > ephemeral_of(me()); }
  bool first_holder_is_me() const { return first_holder_locked(r) == own; }
  const rules::LanePlan& plan() {
    const uint64_t capacity = r.header.capacity_bytes;
    n = gather_lane_jobs(r, own, p, e, lane_jobs.at);
    lane_plan = rules::place_jobs(lane_jobs.at, n, capacity, int(kMaxLanes));
    if (!lane_plan.fits && !dry && reclaim() > 0) {
      n = gather_lane_jobs(r, own, p, e, lane_jobs.at);
      lane_plan = rules::place_jobs(lane_jobs.at, n, capacity, int(kMaxLanes));
    }
    return lane_plan;
  }
  bool plan_keeps_holders_apart() const { return shm::plan_keeps_holders_apart(r, lane_jobs.at, n); }
  int lane_in_plan() const {
    for (int i = 0; i < n; ++i)
      if (lane_jobs.at[i].id == own) return lane_jobs.at[i].lane >= 0 ? lane_jobs.at[i].lane : -1;
    return own_lane();
  }
  bool admission_deadlocked() const { return admission_deadlocked_locked(r, own); }
  bool holds_lane_space() const { return holds_lane_space_locked(r, own); }
  int first_holder() const { return first_holder_locked(r); }
  int other_holder_in_plan() const {
    for (int i = 0; i < n; ++i)
      if (lane_jobs.at[i].id != own && holds_lane_space_locked(r, lane_jobs.at[i].id)) return lane_jobs.at[i].id;
    return -1;
  }
  int lane_holder_other_than_me(int lane) const {
    return lane_holder_other_than(r, own, lane >= 0 ? uint32_t(lane) : kNoLane);
  }
  int own_lane() const { return me().lane < kMaxLanes ? int(me().lane) : -1; }
  bool bytes_free() {
    const RegionHeader& h = r.header;
    bool fits = bytes <= h.capacity_bytes && h.reserved_bytes <= h.capacity_bytes - bytes;
    if (!fits && !dry && reclaim() > 0) fits = h.reserved_bytes <= h.capacity_bytes - bytes;
    return fits;
  }
};

ReserveStatus status_of(rules::Admission a) {
  switch (a) {
    case rules::Admission::kGranted: return ReserveStatus::kGranted;
    case rules::Admission::kOverQuota: return ReserveStatus::kOverQuota;
    case rules::Admission::kInadmissible: return ReserveStatus::kInadmissible;
    case rules::Admission::kLaneBusy: return ReserveStatus::kLaneBusy;
    case rules::Admission::kOverCapacity: return ReserveStatus::kOverCapacity;
  }
  return ReserveStatus::kOverCapacity;
}
}  // namespace

// With `allocations` > 0 the granted bytes also count as allocated at once.
// The verdict is rules::admission_verdict's (rules/admission.h). `dry`
// answers without changing anything.
ReserveResult Arbiter::reserve_locked(uint64_t bytes, uint32_t allocations, MemoryClass kind,
                                      bool in_turn, bool dry) {
  Region& r = *file_.region;
  RegionHeader& h = r.header;
  Slot& s = r.slots[own_slot_];
  const bool persistent = kind == MemoryClass::kPersistent;
  const uint64_t now = mono_now_ns();
  // This job's P and E once the bytes are granted.
  uint64_t p = persistent_of(s) + (persistent ? bytes : 0);
  uint64_t e_now = saturating_sub(s.reserved_bytes + bytes, p);
  uint64_t e = s.ephemeral_bytes > e_now ? s.ephemeral_bytes : e_now;
  LaneJobs lane_jobs;
  auto reclaim = [this] { return reclaim_dead_slots_locked(); };
  RegionFacts<decltype(reclaim)> facts{reclaim, r, own_slot_, bytes, p, e, dry, lane_jobs};
  const rules::AdmissionVerdict verdict = rules::admission_verdict(persistent, in_turn, facts);
  ReserveResult result{status_of(verdict.status), h.capacity_bytes, h.reserved_bytes, verdict.blocked_by};
  if (verdict.status == rules::Admission::kOverQuota) {
    result.limit_bytes = s.quota_bytes;
    result.in_use_bytes = s.reserved_bytes;
  } else if (verdict.status == rules::Admission::kInadmissible) {
    result.in_use_bytes = h.capacity_bytes + verdict.short_bytes;
  } else if (verdict.status == rules::Admission::kGranted) {
    result.limit_bytes = 0;
    result.in_use_bytes = 0;
  }
  rules::LaneJob* jobs = lane_jobs.at;
  const int n = facts.n;
  const rules::LanePlan& plan = facts.lane_plan;
  const bool apply = verdict.apply_plan;
  if (dry) return result;
  WriteSection write(h);
  if (apply) apply_lanes(r, jobs, n, plan);
  if (result.status == ReserveStatus::kGranted && verdict.grew_past_plan) s.ephemeral_bytes = e;
  if (result.status == ReserveStatus::kGranted) {
    s.reserved_bytes += bytes;
    h.reserved_bytes += bytes;
    if (persistent) s.persistent_bytes += bytes;
    if (e > s.ephemeral_bytes && s.class_iterations < 2) s.ephemeral_bytes = e;
    if (e_now > s.iteration_peak_bytes) s.iteration_peak_bytes = e_now;
    if (allocations > 0) {
      s.allocated_bytes += bytes;
      s.allocation_count += allocations;
    }
    if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
    if (!persistent && ephemeral_now(s) > lane_slack(h)) take_lane_space_locked(r, own_slot_, now);
  } else if (result.status == ReserveStatus::kOverQuota) {
    s.denied_count++;  // the others may still be granted after a wait (allocator/admission.h)
  }
  return result;
}

void Arbiter::note_denied() {
  if (own_slot_ < 0 || !lock()) return;
  {
    WriteSection write(file_.region->header);
    file_.region->slots[own_slot_].denied_count++;
  }
  unlock();
}

void Arbiter::commit(uint64_t bytes, uint32_t allocations) {
  if (own_slot_ < 0 || !lock()) return;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(file_.region->header);
    s.allocated_bytes += bytes;
    s.allocation_count += allocations;
  }
  unlock();
}

void Arbiter::rollback(uint64_t bytes, MemoryClass kind) {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(h);
    s.reserved_bytes = saturating_sub(s.reserved_bytes, bytes);
    h.reserved_bytes = saturating_sub(h.reserved_bytes, bytes);
    if (kind == MemoryClass::kPersistent) s.persistent_bytes = saturating_sub(s.persistent_bytes, bytes);
    keep_persistent_within_held(s);
    drop_lane_space_if_free(h, s);
    wake_memory_waiters_locked();
  }
  unlock();
}

void Arbiter::release(uint64_t bytes, uint32_t allocations, MemoryClass kind) {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(h);
    s.reserved_bytes = saturating_sub(s.reserved_bytes, bytes);
    s.allocated_bytes = saturating_sub(s.allocated_bytes, bytes);
    s.allocation_count = saturating_sub(s.allocation_count, allocations);
    h.reserved_bytes = saturating_sub(h.reserved_bytes, bytes);
    if (kind == MemoryClass::kPersistent) s.persistent_bytes = saturating_sub(s.persistent_bytes, bytes);
    keep_persistent_within_held(s);
    drop_lane_space_if_free(h, s);
    wake_memory_waiters_locked();
  }
  unlock();
}

void Arbiter::force_charge(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(h);
    s.reserved_bytes += bytes;
    s.allocated_bytes += bytes;
    h.reserved_bytes += bytes;
    if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
    if (ephemeral_now(s) > s.iteration_peak_bytes) s.iteration_peak_bytes = ephemeral_now(s);
  }
  unlock();
}

void Arbiter::set_context_bytes(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(h);
    uint64_t old = s.context_bytes;
    s.context_bytes = bytes;
    s.reserved_bytes = saturating_sub(s.reserved_bytes, old) + bytes;
    h.reserved_bytes = saturating_sub(h.reserved_bytes, old) + bytes;
    if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
  }
  unlock();
}

void Arbiter::set_quota(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return;
  {
    WriteSection write(file_.region->header);
    file_.region->slots[own_slot_].quota_bytes = bytes;
  }
  unlock();
}

bool Arbiter::has_dead_slots() const {
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    if (int(i) == own_slot_ || file_.region->slots[i].state == kSlotFree) continue;
    if (liveness_of(file_.fd, kLivenessByteBase + i) == Liveness::kDead) return true;
  }
  return false;
}

int Arbiter::reclaim_dead_slots_locked() {
  int reclaimed = 0;
  WriteSection write(file_.region->header);
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    // Never judge our own slot: our own POSIX lock does not show in F_GETLK.
    if (int(i) == own_slot_ || file_.region->slots[i].state == kSlotFree) continue;
    if (liveness_of(file_.fd, kLivenessByteBase + i) != Liveness::kDead) continue;
    free_slot_locked(int(i));
    ++reclaimed;
  }
  file_.region->header.reclaimed_slots += uint64_t(reclaimed);
  return reclaimed;
}

int Arbiter::reclaim_dead_slots() {
  if (!lock()) return 0;
  int reclaimed = reclaim_dead_slots_locked();
  unlock();
  return reclaimed;
}

void Arbiter::repair_locked() {
  RegionHeader& h = file_.region->header;
  // A writer may have died inside its write section: make seq even again.
  uint32_t seq = h.seq.load(std::memory_order_relaxed);
  if (seq & 1u) h.seq.store(seq + 1, std::memory_order_release);
  WriteSection write(h);
  uint64_t total = 0;
  uint32_t live = 0;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = file_.region->slots[i];
    if (s.state != kSlotLive) {
      s.state = kSlotFree;  // also repairs a garbage state value
      continue;
    }
    if (int(i) != own_slot_ && liveness_of(file_.fd, kLivenessByteBase + i) == Liveness::kDead) {
      drop_token_locked(h, s, int(i));
      s.state = kSlotFree;
      s.reserved_bytes = s.allocated_bytes = s.context_bytes = 0;
      s.persistent_bytes = s.ephemeral_bytes = 0;
      s.lane = kNoLane;
      s.lane_holder_since_mono_ns = 0;
      h.reclaimed_slots++;
      continue;
    }
    // Only a holder's gate may be open; a garbage job state reads as idle.
    bool holder = holds_any_token(h, i);
    if (!holder) s.gate.store(kGateClosed, std::memory_order_relaxed);
    if (s.job_state > kJobRunning || (s.job_state == kJobRunning && !holder))
      s.job_state = kJobIdle;
    if (s.lane >= kMaxLanes) s.lane = kNoLane;
    if (s.admission > kWaitingForLane) s.admission = kAdmitted;
    uint64_t floor = s.allocated_bytes + s.context_bytes;
    if (s.reserved_bytes < floor) s.reserved_bytes = floor;
    keep_persistent_within_held(s);
    total += s.reserved_bytes;
    ++live;
  }
  h.reserved_bytes = total;
  h.live_slots = live;
  for (Token& token : h.tokens)
    if (token.holder > kMaxSlots ||
        (token.holder != 0 && file_.region->slots[token.holder - 1].state != kSlotLive))
      forget_gone_holder_locked(token);
  // Whoever waits re-decides who holds the token.
  wake_waiters(h);
  h.repairs++;
}

bool Arbiter::is_valid(char* why, size_t why_len) {
  if (!lock()) {
    snprintf(why, why_len, "the region lock is unusable");
    return false;
  }
  const RegionHeader& h = file_.region->header;
  bool ok = true;
  uint64_t total = 0;
  for (uint32_t i = 0; i < kMaxSlots && ok; ++i) {
    const Slot& s = file_.region->slots[i];
    if (s.state == kSlotFree) continue;
    if (s.state != kSlotLive) {
      snprintf(why, why_len, "slot %u has state %u", i, s.state);
      ok = false;
    } else if (s.reserved_bytes < s.allocated_bytes + s.context_bytes) {
      snprintf(why, why_len, "slot %u reserves %llu bytes but holds %llu", i,
               (unsigned long long)s.reserved_bytes,
               (unsigned long long)(s.allocated_bytes + s.context_bytes));
      ok = false;
    }
    total += s.reserved_bytes;
  }
  if (ok && total != h.reserved_bytes) {
    snprintf(why, why_len, "GPU reserves %llu bytes but its slots sum to %llu",
             (unsigned long long)h.reserved_bytes, (unsigned long long)total);
    ok = false;
  }
  if (ok && (h.seq.load() & 1u)) {
    snprintf(why, why_len, "seqlock left odd");
    ok = false;
  }
  unlock();
  return ok;
}

}  // namespace gshare::shm
