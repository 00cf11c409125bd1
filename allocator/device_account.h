// What one process has reserved on one GPU, and the limits that apply.
//
// Normally the account is a slot in the GPU's arbiter region, so the limits
// hold across every gshare process on that GPU. When the region cannot be
// used (another gshare version, a corrupt file, a full table, no permission)
// the account falls back to this process alone: its quota and the GPU's
// physical size still hold, and a message says that others do not see it.
// Never silently unlimited.
#pragma once

#include <pthread.h>

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
    if (shared_) arbiter_.note_denied();
  }

  bool shared() const { return shared_; }
  shm::Arbiter& arbiter() { return arbiter_; }
  shm::Slot* slot() const { return shared_ ? arbiter_.slot() : nullptr; }
  uint64_t quota_bytes() const;
  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t reserved_bytes() const;      // this process
  uint64_t allocated_bytes() const;     // this process, committed
  uint64_t gpu_reserved_bytes() const;  // every gshare process on this GPU

  void forget_after_fork();

 private:
  void fall_back_to_local();
  shm::ReserveResult reserve_local(uint64_t bytes, bool allocated);

  bool shared_ = false;
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
