// The arbiter: one process's handle on one GPU's region. Every operation on
// shared state takes the region's robust lock, so the checks below are
// atomic across processes:
//
//   reserve   quota:    slot.reserved + n <= slot.quota
//             capacity: header.reserved + n <= header.capacity (C)
//   commit    reserved bytes became a real allocation
//   rollback  the driver refused; give the reservation back
//   release   a committed allocation was freed
//   lanes     reserve also checks the safety condition with this job's P and
//             E after the allocation, and places jobs in lanes
//             (rules/lanes.h)
//
// Invariant (checked by is_valid, restored by repair):
//   header.reserved == Σ live slots' reserved
//   slot.reserved   >= slot.allocated + slot.context
//   slot.reserved   >= slot.context + slot.persistent (P)
#pragma once

#include <cstddef>
#include <cstdint>

#include "shm/layout.h"
#include "shm/region.h"

namespace gshare::shm {

// Every wait on a region (for the token, memory, admission, a lane's
// space) sleeps on the header's token_futex: a change of any of them bumps
// the word and wakes them all, and each waiter looks again.
void wake_waiters(RegionHeader& h);

// A token waiter sleeps with its slot's bit (slots 32 apart share one), so
// that a grant wakes the job it concerns rather than every waiter: among
// 64 jobs, waking all at each grant kept the new holder waiting for a CPU
// behind the other 63 (scheduler/token.cpp).
uint32_t waiter_bit(int slot);

// Bumps token_futex and wakes the waiters with any of `bits` (and every
// waiter that sleeps without bits: memory and admission waits).
void wake_waiters_with(RegionHeader& h, uint32_t bits);

struct SlotIdentity {
  int32_t pid;
  uint32_t uid;
  uint64_t start_time_ticks;
  const char* command;
  uint64_t quota_bytes;
};

enum class ReserveStatus {
  kGranted,
  kOverQuota,      // this process's quota: refused at once
  kOverCapacity,   // the bytes are held by others now (cached memory to give back, or in use)
  kLaneBusy,       // another job of its lane holds the lane's ephemeral space (see lane space below)
  kInadmissible,   // the safety condition would fail (rules/lanes.h)
  kArbiterBroken,
};

struct ReserveResult {
  ReserveStatus status;
  uint64_t limit_bytes;    // the quota or C that said no
  uint64_t in_use_bytes;   // what was already reserved (or, kInadmissible, the condition's sum) against it
  int blocked_by = -1;     // kLaneBusy: the slot that holds the lane's space
};

// Whether reserved bytes are persistent (allocator/classifier.h): they then
// count in P; everything else a job reserves is ephemeral.
enum class MemoryClass { kEphemeral, kPersistent };

class Arbiter {
 public:
  Arbiter() = default;
  // Takes ownership of an open, writable region.
  explicit Arbiter(const RegionFile& file) : file_(file) {}

  Region* region() const { return file_.region; }
  int fd() const { return file_.fd; }
  const char* path() const { return file_.path; }
  int own_slot() const { return own_slot_; }
  Slot* slot() const { return own_slot_ >= 0 ? &file_.region->slots[own_slot_] : nullptr; }
  // No other live job on this GPU, read without the lock (a moment stale).
  bool alone() const { return __atomic_load_n(&file_.region->header.live_slots, __ATOMIC_RELAXED) <= 1; }

  // Claims a free slot for this process and takes its liveness lock.
  // Returns false if the table is full even after reclaiming dead slots.
  bool claim_slot(const SlotIdentity& who);
  void release_slot();
  // Forgets the slot without touching shared state: a fork()ed child, whose
  // parent still owns it, calls this.
  void forget_slot() { own_slot_ = -1; }

  ReserveResult reserve(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);
  // The answer reserve would give now, changing nothing: a waiter's test
  // of whether to compete for its turn again.
  ReserveResult would_reserve(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);
  // reserve of ephemeral bytes that the driver already took inside an
  // allocation that had its turn (a pool grown by a larger chunk than was
  // admitted): the quota, the safety condition and the capacity apply, the
  // lane's turns not.
  ReserveResult reserve_in_turn(uint64_t bytes);
  // reserve + commit under one lock, for an allocation whose size is known
  // before the driver call; `release` undoes it if the driver then fails.
  ReserveResult reserve_allocation(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);
  // `allocations` is how many ledger entries the bytes belong to: pool
  // growth is charged with 0, a block served from a pool with 0 bytes and 1.
  void commit(uint64_t bytes, uint32_t allocations = 1);  // +allocated
  void rollback(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);  // -reserved
  void release(uint64_t bytes, uint32_t allocations = 1,
               MemoryClass kind = MemoryClass::kEphemeral);  // -reserved, -allocated
  // Charges bytes the driver has already spent without asking (a stream-
  // ordered pool grew past its reservation): no limit check, may overshoot.
  void force_charge(uint64_t bytes);
  // Sets the driver's context memory of this process on this GPU. Not
  // checked against limits: the driver has already spent it.
  void set_context_bytes(uint64_t bytes);
  void set_quota(uint64_t bytes);
  // An allocation was refused after waiting (counted apart from the quota's
  // refusals, which reserve counts itself).
  void note_denied();

  // Frees slots whose owners died. Returns how many.
  int reclaim_dead_slots();
  // Whether any slot other than ours looks dead (cheap, lock-free scan).
  bool has_dead_slots() const;

  // Runs fn() under the lock inside a seqlock write section: the scheduler's
  // way to change the token and the scheduling fields. False (fn not run)
  // if the lock is unusable.
  template <class Fn>
  bool update(Fn&& fn) {
    if (!lock()) return false;
    {
      WriteSection write(file_.region->header);
      fn();
    }
    unlock();
    return true;
  }

  // Lanes (rules/lanes.h), under the lock (inside update()): places
  // every live job so that the safety condition holds, or reports by how
  // much it fails. `widen` also re-forms into more lanes when more fit.
  // Under pack a holder whose lane changed gives its token back.
  bool place_lanes_locked(bool widen, uint64_t* short_bytes);

  // Whether another live job shares this job's lane: they take turns with
  // one ephemeral space. A racy read: lanes change under the lock, and a
  // stale answer costs one turn at most.
  bool lane_is_shared() const { return lane_is_shared(own_slot_); }
  bool lane_is_shared(int slot) const;

  // Whether a switch to or from the job in `slot` moves memory: it shares
  // its lane, and a lane-mate needs its memory back (lane_needs_its_memory,
  // shm/lane_space.h). Then it gives its cache back when switched out, and
  // the policy lengthens its turns by what that costs. A racy read, like
  // lane_is_shared.
  bool hands_memory_over() const { return hands_memory_over(own_slot_); }
  bool hands_memory_over(int slot) const;

  // Whether the job in `slot` holds ephemeral memory (beyond a slack of
  // C/64) that another job may need if it lost its token now. A job alone
  // in its lane within its learned E is settled whatever it holds: the lane
  // keeps that space for it. The holder keeps its token at a slice end
  // while this holds, up to GSHARE_SLICE_MAX_MS (scheduler/token.h). A racy
  // read as a hint; decisions read it again under the lock.
  bool holds_unsettled_memory(int slot) const;

  // Lane space, the first resource of the order (README, "How it works"):
  // at most one job of a lane holds more ephemeral memory than the slack,
  // the lane's holder. A job becomes it with a granted ephemeral
  // reservation while no other job of its lane holds the space, and stops
  // when its ephemeral memory falls to the slack (its iteration ended, its
  // cache went back), when it dies, or when it sits idle (what it holds
  // then is asked back like any cache). Whether `slot` is its lane's
  // holder now; a racy read as a hint.
  bool holds_lane_space(int slot) const;
  // Whether `slot` holds its lane's space while a lane-mate waits for it:
  // that job goes first when the token moves. A racy read as a hint.
  bool holds_awaited_lane_space(int slot) const;

  // Whether `slot` waits for lane space (kWaitingForLane) that the live job
  // it waits for (Slot::blocked_by) still holds: the token is of no use to
  // it until that job's iteration ends. Under the lock.
  bool waits_for_held_lane_locked(int slot) const;

  // This job is done with its lane's space (its program is exiting): it
  // stops being the lane's holder, whatever it still holds, and the
  // waiters look again. What it holds still counts in the GPU's reserved
  // bytes, so a lane-mate's allocation waits for those to be free.
  void leave_lane_space();

  // Wakes the jobs blocked in an allocation, if any: memory was given back.
  void wake_memory_waiters_locked();

  // Whether slot `index` is owned by a live process (ours always is).
  bool slot_is_live(int index) const;

  // Checks the invariants under the lock. For tests and debug builds.
  bool is_valid(char* why, size_t why_len);

  // Repairs shared state after a holder died mid-update. Runs with the lock
  // held (robust_mutex_lock calls it); public for tests.
  void repair_locked();

 private:
  // Marks the region as being written, for readers that cannot take the lock.
  struct WriteSection {
    explicit WriteSection(RegionHeader& h) : header(h) {
      header.seq.fetch_add(1, std::memory_order_acq_rel);
    }
    ~WriteSection() { header.seq.fetch_add(1, std::memory_order_release); }
    RegionHeader& header;
  };
  ReserveResult reserve_locked(uint64_t bytes, uint32_t allocations, MemoryClass kind,
                               bool in_turn = false, bool dry = false);
  bool lock();
  void unlock();
  int reclaim_dead_slots_locked();
  // Makes the GPU's totals what its live slots hold (a newcomer checks).
  void correct_totals_locked();
  void free_slot_locked(int index);

  RegionFile file_;
  int own_slot_ = -1;
};

}  // namespace gshare::shm
