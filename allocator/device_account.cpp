#include "allocator/device_account.h"

#include "base/saturating.h"
#include "base/log.h"
#include "shm/futex.h"
#include "shm/robust_mutex.h"

namespace gshare::allocator {

namespace {

struct Locked {
  explicit Locked(pthread_mutex_t* m) : mutex(m) { pthread_mutex_lock(mutex); }
  ~Locked() { pthread_mutex_unlock(mutex); }
  pthread_mutex_t* mutex;
};

// The accounts in a region, for the lock's failure handler: any thread's
// failed lock (a launch waiting for the token, the upkeep thread) takes the
// account out of the region, not only a failed reservation.
constexpr int kMaxSharedAccounts = 64;
std::atomic<DeviceAccount*> g_shared_accounts[kMaxSharedAccounts];

void on_lock_unusable(const pthread_mutex_t* m, const char* why) {
  for (std::atomic<DeviceAccount*>& entry : g_shared_accounts) {
    DeviceAccount* account = entry.load(std::memory_order_acquire);
    if (account && account->shared() && &account->arbiter().region()->header.lock == m)
      account->lock_became_unusable(why);
  }
}

void register_shared(DeviceAccount* account) {
  shm::robust_mutex_on_unusable(&on_lock_unusable);
  for (std::atomic<DeviceAccount*>& entry : g_shared_accounts) {
    if (entry.load(std::memory_order_relaxed) == account) return;
  }
  for (std::atomic<DeviceAccount*>& entry : g_shared_accounts) {
    DeviceAccount* expected = nullptr;
    if (entry.compare_exchange_strong(expected, account, std::memory_order_acq_rel)) return;
  }
  // More GPUs than entries: such an account still falls back at its first
  // failed reservation, and every lock stays bounded.
}

void unregister_shared(DeviceAccount* account) {
  for (std::atomic<DeviceAccount*>& entry : g_shared_accounts) {
    DeviceAccount* expected = account;
    entry.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }
}
}  // namespace

void DeviceAccount::use_arbiter(const shm::Arbiter& arbiter, uint64_t capacity_bytes) {
  arbiter_ = arbiter;
  capacity_bytes_ = capacity_bytes;
  shared_.store(true, std::memory_order_release);
  register_shared(this);
  // A lock that failed between the claim and now (the slot's scheduling
  // settings are written in between) was not this account's yet: the
  // handler did not hear of it for us.
  char why[256];
  if (shm::robust_mutex_unusable(&arbiter_.region()->header.lock, why, sizeof why))
    lock_became_unusable(why);
}

void DeviceAccount::use_local(uint64_t quota_bytes, uint64_t capacity_bytes) {
  shared_.store(false, std::memory_order_release);
  quota_bytes_ = quota_bytes;
  capacity_bytes_ = capacity_bytes;
}

shm::ReserveResult DeviceAccount::reserve(uint64_t bytes, MemoryClass kind) {
  if (shared()) {
    shm::ReserveResult r = arbiter_.reserve(bytes, kind);
    if (r.status != shm::ReserveStatus::kArbiterBroken) return r;
    lock_became_unusable(nullptr);
  }
  return reserve_local(bytes, false);
}

shm::ReserveResult DeviceAccount::reserve_in_turn(uint64_t bytes) {
  if (shared()) {
    shm::ReserveResult r = arbiter_.reserve_in_turn(bytes);
    if (r.status != shm::ReserveStatus::kArbiterBroken) return r;
    lock_became_unusable(nullptr);
  }
  return reserve_local(bytes, false);
}

shm::ReserveResult DeviceAccount::reserve_allocation(uint64_t bytes, MemoryClass kind) {
  if (shared()) {
    shm::ReserveResult r = arbiter_.reserve_allocation(bytes, kind);
    if (r.status != shm::ReserveStatus::kArbiterBroken) return r;
    lock_became_unusable(nullptr);
  }
  return reserve_local(bytes, true);
}

// The region's lock is unusable: keep enforcing the quota in this process,
// from what the slot held (the last state written under the lock).
bool DeviceAccount::fall_back_to_local() {
  Locked lock(&mutex_);
  if (!shared_.load(std::memory_order_acquire)) return false;
  const shm::Slot* s = arbiter_.slot();
  quota_bytes_ = s->quota_bytes;
  reserved_bytes_ = s->reserved_bytes;
  allocated_bytes_ = s->allocated_bytes;
  context_bytes_ = s->context_bytes;
  shared_.store(false, std::memory_order_release);
  unregister_shared(this);
  return true;
}

void DeviceAccount::lock_became_unusable(const char* why) {
  if (!shared()) return;
  char reason[shm::kPathChars + 256];
  if (!why) {
    shm::RegionFile file;
    file.region = arbiter_.region();
    snprintf(file.path, sizeof file.path, "%s", arbiter_.path());
    if (!shm::region_lock_unusable(file, reason, sizeof reason))
      snprintf(reason, sizeof reason, "the lock of %s is unusable", arbiter_.path());
  } else {
    snprintf(reason, sizeof reason, "the lock of %s is unusable: %s", arbiter_.path(), why);
  }
  shm::Slot* s = arbiter_.slot();
  if (!fall_back_to_local()) return;
  // Nobody can hand this job the launch token any more: a thread waiting
  // for it (scheduler/token.h) must go on. The gate is written without the
  // lock, which is unusable, and only this process reads it; the futex is
  // bumped so that the waiter wakes now rather than at its next check.
  shm::RegionHeader& h = arbiter_.region()->header;
  s->gate.store(shm::kGateOpen, std::memory_order_release);
  h.token_futex.fetch_add(1, std::memory_order_acq_rel);
  shm::futex_wake_all(&h.token_futex);
  GSHARE_ERROR("%s. This process goes on alone on this GPU: its quota (%llu bytes) still holds, "
               "but other gshare processes no longer see what it does",
               reason, (unsigned long long)quota_bytes_);
}

bool DeviceAccount::lock_failed_since(uint64_t failures_before) {
  if (shm::robust_mutex_failures_in_thread() == failures_before) return false;
  lock_became_unusable(nullptr);  // normally done already, by the handler
  return true;
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

// Each call into the arbiter below takes the lock once, first: a lock that
// fails writes nothing, and the call is then applied here instead.
void DeviceAccount::commit(uint64_t bytes, uint32_t allocations) {
  if (shared()) {
    uint64_t failures = shm::robust_mutex_failures_in_thread();
    arbiter_.commit(bytes, allocations);
    if (!lock_failed_since(failures)) return;
  }
  Locked lock(&mutex_);
  allocated_bytes_ += bytes;
}

void DeviceAccount::rollback(uint64_t bytes, MemoryClass kind) {
  if (shared()) {
    uint64_t failures = shm::robust_mutex_failures_in_thread();
    arbiter_.rollback(bytes, kind);
    if (!lock_failed_since(failures)) return;
  }
  Locked lock(&mutex_);
  reserved_bytes_ = saturating_sub(reserved_bytes_, bytes);
}

void DeviceAccount::release(uint64_t bytes, uint32_t allocations, MemoryClass kind) {
  if (shared()) {
    uint64_t failures = shm::robust_mutex_failures_in_thread();
    arbiter_.release(bytes, allocations, kind);
    if (!lock_failed_since(failures)) return;
  }
  Locked lock(&mutex_);
  reserved_bytes_ = saturating_sub(reserved_bytes_, bytes);
  allocated_bytes_ = saturating_sub(allocated_bytes_, bytes);
}

void DeviceAccount::force_charge(uint64_t bytes) {
  if (shared()) {
    uint64_t failures = shm::robust_mutex_failures_in_thread();
    arbiter_.force_charge(bytes);
    if (!lock_failed_since(failures)) return;
  }
  Locked lock(&mutex_);
  reserved_bytes_ += bytes;
  allocated_bytes_ += bytes;
}

void DeviceAccount::set_context_bytes(uint64_t bytes) {
  if (shared()) {
    uint64_t failures = shm::robust_mutex_failures_in_thread();
    arbiter_.set_context_bytes(bytes);
    if (!lock_failed_since(failures)) return;
  }
  Locked lock(&mutex_);
  reserved_bytes_ = saturating_sub(reserved_bytes_, context_bytes_) + bytes;
  context_bytes_ = bytes;
}

uint64_t DeviceAccount::quota_bytes() const {
  if (shared()) return arbiter_.slot()->quota_bytes;
  return quota_bytes_;
}

uint64_t DeviceAccount::reserved_bytes() const {
  if (shared()) return __atomic_load_n(&arbiter_.slot()->reserved_bytes, __ATOMIC_RELAXED);
  Locked lock(&mutex_);
  return reserved_bytes_;
}

uint64_t DeviceAccount::allocated_bytes() const {
  if (shared()) return __atomic_load_n(&arbiter_.slot()->allocated_bytes, __ATOMIC_RELAXED);
  Locked lock(&mutex_);
  return allocated_bytes_;
}

uint64_t DeviceAccount::gpu_reserved_bytes() const {
  if (shared()) return __atomic_load_n(&arbiter_.region()->header.reserved_bytes, __ATOMIC_RELAXED);
  return reserved_bytes();
}

void DeviceAccount::forget_after_fork() {
  if (shared()) arbiter_.forget_slot();
  shared_.store(false, std::memory_order_relaxed);
  unregister_shared(this);
  mutex_ = PTHREAD_MUTEX_INITIALIZER;
  reserved_bytes_ = allocated_bytes_ = context_bytes_ = 0;
}

}  // namespace gshare::allocator
