// What one process has reserved on one GPU, and the limits that apply.
//
// Normally the account is a slot in the GPU's arbiter region, so the limits
// hold across every gshare process on that GPU. When the region cannot be
// used (another gshare version, a corrupt file, a full table, no permission,
// a lock that cannot be taken) the account falls back to this process alone:
// its quota and the GPU's physical size still hold, and a message says that
// others do not see it. Never silently unlimited.
//
// The same happens to an account already in the region whose lock becomes
// unusable (shm/robust_mutex.h): from the first lock that fails, whatever
// the call, the account goes on alone from what its slot held, with one
// message, and its gate is left open so that no thread of this process
// waits for a launch token that nobody can hand over any more.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "shm/arbiter.h"

namespace gshare::allocator {

class DeviceAccount {
 public:
  // Shared mode: `arbiter` holds a claimed slot.
  void use_arbiter(const shm::Arbiter& arbiter, uint64_t capacity_bytes);
  // Alone mode: limits kept in this process.
  void use_local(uint64_t quota_bytes, uint64_t capacity_bytes);

  using MemoryClass = shm::MemoryClass;
  shm::ReserveResult reserve(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);
  // Ephemeral bytes the driver took beyond an admitted allocation
  // (shm::Arbiter::reserve_in_turn).
  shm::ReserveResult reserve_in_turn(uint64_t bytes);
  // reserve + commit at once; `release` undoes it.
  shm::ReserveResult reserve_allocation(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);
  void commit(uint64_t bytes, uint32_t allocations = 1);
  void rollback(uint64_t bytes, MemoryClass kind = MemoryClass::kEphemeral);
  void release(uint64_t bytes, uint32_t allocations = 1, MemoryClass kind = MemoryClass::kEphemeral);
  // Charges bytes the driver already spent (pool growth past a reservation):
  // reserve + commit without the limit check.
  void force_charge(uint64_t bytes);
  void set_context_bytes(uint64_t bytes);
  // An allocation over capacity or the safety condition was finally refused.
  void note_denied() {
    if (shared()) arbiter_.note_denied();
  }

  bool shared() const { return shared_.load(std::memory_order_acquire); }
  shm::Arbiter& arbiter() { return arbiter_; }
  shm::Slot* slot() const { return shared() ? arbiter_.slot() : nullptr; }
  uint64_t quota_bytes() const;
  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t reserved_bytes() const;      // this process
  uint64_t allocated_bytes() const;     // this process, committed
  uint64_t gpu_reserved_bytes() const;  // every gshare process on this GPU

  void forget_after_fork();

  // The region's lock failed (`why`, from shm/robust_mutex.h): goes on
  // alone. Idempotent; the first call tells.
  void lock_became_unusable(const char* why);

 private:
  // Copies the slot's figures into the local account and leaves the
  // region. True for the one call that did it.
  bool fall_back_to_local();
  // After a call into the arbiter that took `failures_before` (the
  // thread's lock failures, shm::robust_mutex_failures_in_thread) before
  // it: whether its lock failed, so that nothing was written to the region
  // and the call must be applied to the local account instead.
  bool lock_failed_since(uint64_t failures_before);
  shm::ReserveResult reserve_local(uint64_t bytes, bool allocated);

  std::atomic<bool> shared_{false};
  shm::Arbiter arbiter_;
  uint64_t capacity_bytes_ = 0;
  // Alone mode only.
  mutable pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  uint64_t quota_bytes_ = 0;
  uint64_t reserved_bytes_ = 0;
  uint64_t allocated_bytes_ = 0;
  uint64_t context_bytes_ = 0;
};

}  // namespace gshare::allocator
