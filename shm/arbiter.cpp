#include "shm/arbiter.h"

#include <cstdio>
#include <cstring>

#include "shm/futex.h"
#include "shm/liveness.h"
#include "shm/robust_mutex.h"

namespace gshare::shm {

namespace {

uint64_t saturating_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

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
    s.gate.store(kGateClosed, std::memory_order_relaxed);
    s.gpu_waits.store(0, std::memory_order_relaxed);
    s.boundary_waits.store(0, std::memory_order_relaxed);
    s.launches.store(0, std::memory_order_relaxed);
    s.syncs.store(0, std::memory_order_relaxed);
    s.iterations.store(0, std::memory_order_relaxed);
    s.iteration_ns.store(0, std::memory_order_relaxed);
    s.iteration_launches.store(0, std::memory_order_relaxed);
    s.iteration_source.store(kIterationsUnknown, std::memory_order_relaxed);
    s.state = kSlotLive;
    own_slot_ = int(i);
  }
  unlock();
  return own_slot_ >= 0;
}

// A freed slot gives the token back at once: the next job is chosen by the
// first waiter that wakes (scheduler/token.cpp), so everyone is woken.
static void drop_token_locked(RegionHeader& h, Slot& s, int index) {
  s.gate.store(kGateClosed, std::memory_order_relaxed);
  s.job_state = kJobIdle;
  if (h.holder != uint32_t(index) + 1) return;
  h.holder = 0;
  h.slice_end_mono_ns = 0;
  h.token_futex.fetch_add(1, std::memory_order_release);
  futex_wake_all(&h.token_futex);
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
  s.allocation_count = 0;
  s.state = kSlotFree;
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

ReserveResult Arbiter::reserve(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return {ReserveStatus::kArbiterBroken, 0, 0};
  ReserveResult result = reserve_locked(bytes, 0);
  unlock();
  return result;
}

ReserveResult Arbiter::reserve_allocation(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return {ReserveStatus::kArbiterBroken, 0, 0};
  ReserveResult result = reserve_locked(bytes, 1);
  unlock();
  return result;
}

// With `allocations` > 0 the granted bytes also count as allocated at once.
ReserveResult Arbiter::reserve_locked(uint64_t bytes, uint32_t allocations) {
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  ReserveResult result{ReserveStatus::kGranted, 0, 0};
  if (bytes > s.quota_bytes || s.reserved_bytes > s.quota_bytes - bytes) {
    result = {ReserveStatus::kOverQuota, s.quota_bytes, s.reserved_bytes};
  } else {
    bool fits = bytes <= h.capacity_bytes && h.reserved_bytes <= h.capacity_bytes - bytes;
    // Before saying no, give back what dead processes still hold.
    if (!fits && reclaim_dead_slots_locked() > 0)
      fits = h.reserved_bytes <= h.capacity_bytes - bytes;
    if (!fits) result = {ReserveStatus::kOverCapacity, h.capacity_bytes, h.reserved_bytes};
  }
  WriteSection write(h);
  if (result.status == ReserveStatus::kGranted) {
    s.reserved_bytes += bytes;
    h.reserved_bytes += bytes;
    if (allocations > 0) {
      s.allocated_bytes += bytes;
      s.allocation_count += allocations;
    }
    if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
  } else {
    s.denied_count++;
  }
  return result;
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

void Arbiter::rollback(uint64_t bytes) {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(h);
    s.reserved_bytes = saturating_sub(s.reserved_bytes, bytes);
    h.reserved_bytes = saturating_sub(h.reserved_bytes, bytes);
  }
  unlock();
}

void Arbiter::release(uint64_t bytes, uint32_t allocations) {
  if (own_slot_ < 0 || !lock()) return;
  RegionHeader& h = file_.region->header;
  Slot& s = file_.region->slots[own_slot_];
  {
    WriteSection write(h);
    s.reserved_bytes = saturating_sub(s.reserved_bytes, bytes);
    s.allocated_bytes = saturating_sub(s.allocated_bytes, bytes);
    s.allocation_count = saturating_sub(s.allocation_count, allocations);
    h.reserved_bytes = saturating_sub(h.reserved_bytes, bytes);
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
      h.reclaimed_slots++;
      continue;
    }
    // Only the holder's gate may be open; a garbage job state reads as idle.
    if (h.holder != i + 1) s.gate.store(kGateClosed, std::memory_order_relaxed);
    if (s.job_state > kJobRunning || (s.job_state == kJobRunning && h.holder != i + 1))
      s.job_state = kJobIdle;
    uint64_t floor = s.allocated_bytes + s.context_bytes;
    if (s.reserved_bytes < floor) s.reserved_bytes = floor;
    total += s.reserved_bytes;
  }
  h.reserved_bytes = total;
  if (h.holder > kMaxSlots || (h.holder != 0 && file_.region->slots[h.holder - 1].state != kSlotLive))
    h.holder = 0;
  // Whoever waits re-decides who holds the token.
  h.token_futex.fetch_add(1, std::memory_order_release);
  futex_wake_all(&h.token_futex);
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
