#include "allocator/device_account.h"

namespace gshare::allocator {

namespace {
uint64_t saturating_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

struct Locked {
  explicit Locked(pthread_mutex_t* m) : mutex(m) { pthread_mutex_lock(mutex); }
  ~Locked() { pthread_mutex_unlock(mutex); }
  pthread_mutex_t* mutex;
};
}  // namespace

void DeviceAccount::use_arbiter(const shm::Arbiter& arbiter, uint64_t capacity_bytes) {
  arbiter_ = arbiter;
  capacity_bytes_ = capacity_bytes;
  shared_ = true;
}

void DeviceAccount::use_local(uint64_t quota_bytes, uint64_t capacity_bytes) {
  shared_ = false;
  quota_bytes_ = quota_bytes;
  capacity_bytes_ = capacity_bytes;
}

shm::ReserveResult DeviceAccount::reserve(uint64_t bytes, MemoryClass kind) {
  if (shared_) {
    shm::ReserveResult r = arbiter_.reserve(bytes, kind);
    if (r.status != shm::ReserveStatus::kArbiterBroken) return r;
    fall_back_to_local();
  }
  return reserve_local(bytes, false);
}

shm::ReserveResult DeviceAccount::reserve_in_turn(uint64_t bytes) {
  if (shared_) {
    shm::ReserveResult r = arbiter_.reserve_in_turn(bytes);
    if (r.status != shm::ReserveStatus::kArbiterBroken) return r;
    fall_back_to_local();
  }
  return reserve_local(bytes, false);
}

shm::ReserveResult DeviceAccount::reserve_allocation(uint64_t bytes, MemoryClass kind) {
  if (shared_) {
    shm::ReserveResult r = arbiter_.reserve_allocation(bytes, kind);
    if (r.status != shm::ReserveStatus::kArbiterBroken) return r;
    fall_back_to_local();
  }
  return reserve_local(bytes, true);
}

// The region's lock is unusable: keep enforcing the quota in this process.
void DeviceAccount::fall_back_to_local() {
  use_local(arbiter_.slot()->quota_bytes, capacity_bytes_);
  reserved_bytes_ = arbiter_.slot()->reserved_bytes;
  allocated_bytes_ = arbiter_.slot()->allocated_bytes;
  context_bytes_ = arbiter_.slot()->context_bytes;
}

shm::ReserveResult DeviceAccount::reserve_local(uint64_t bytes, bool allocated) {
  Locked lock(&mutex_);
  uint64_t limit = quota_bytes_ < capacity_bytes_ ? quota_bytes_ : capacity_bytes_;
  if (bytes > limit || reserved_bytes_ > limit - bytes) {
    bool quota = quota_bytes_ <= capacity_bytes_;
    return {quota ? shm::ReserveStatus::kOverQuota : shm::ReserveStatus::kOverCapacity, limit,
            reserved_bytes_};
  }
  reserved_bytes_ += bytes;
  if (allocated) allocated_bytes_ += bytes;
  return {shm::ReserveStatus::kGranted, limit, reserved_bytes_ - bytes};
}

void DeviceAccount::commit(uint64_t bytes, uint32_t allocations) {
  if (shared_) return arbiter_.commit(bytes, allocations);
  Locked lock(&mutex_);
  allocated_bytes_ += bytes;
}

void DeviceAccount::rollback(uint64_t bytes, MemoryClass kind) {
  if (shared_) return arbiter_.rollback(bytes, kind);
  Locked lock(&mutex_);
  reserved_bytes_ = saturating_sub(reserved_bytes_, bytes);
}

void DeviceAccount::release(uint64_t bytes, uint32_t allocations, MemoryClass kind) {
  if (shared_) return arbiter_.release(bytes, allocations, kind);
  Locked lock(&mutex_);
  reserved_bytes_ = saturating_sub(reserved_bytes_, bytes);
  allocated_bytes_ = saturating_sub(allocated_bytes_, bytes);
}

void DeviceAccount::force_charge(uint64_t bytes) {
  if (shared_) return arbiter_.force_charge(bytes);
  Locked lock(&mutex_);
  reserved_bytes_ += bytes;
  allocated_bytes_ += bytes;
}

void DeviceAccount::set_context_bytes(uint64_t bytes) {
  if (shared_) return arbiter_.set_context_bytes(bytes);
  Locked lock(&mutex_);
  reserved_bytes_ = saturating_sub(reserved_bytes_, context_bytes_) + bytes;
  context_bytes_ = bytes;
}

uint64_t DeviceAccount::quota_bytes() const {
  if (shared_) return arbiter_.slot()->quota_bytes;
  return quota_bytes_;
}

uint64_t DeviceAccount::reserved_bytes() const {
  if (shared_) return __atomic_load_n(&arbiter_.slot()->reserved_bytes, __ATOMIC_RELAXED);
  Locked lock(&mutex_);
  return reserved_bytes_;
}

uint64_t DeviceAccount::allocated_bytes() const {
  if (shared_) return __atomic_load_n(&arbiter_.slot()->allocated_bytes, __ATOMIC_RELAXED);
  Locked lock(&mutex_);
  return allocated_bytes_;
}

uint64_t DeviceAccount::gpu_reserved_bytes() const {
  if (shared_) return __atomic_load_n(&arbiter_.region()->header.reserved_bytes, __ATOMIC_RELAXED);
  return reserved_bytes();
}

void DeviceAccount::forget_after_fork() {
  if (shared_) arbiter_.forget_slot();
  shared_ = false;
  mutex_ = PTHREAD_MUTEX_INITIALIZER;
  reserved_bytes_ = allocated_bytes_ = context_bytes_ = 0;
}

}  // namespace gshare::allocator
