#include "shm/robust_mutex.h"

#include <time.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace gshare::shm {

namespace {

// glibc's robust futex word (__data.__lock): the owner's thread id in the low
// 30 bits, and two flags the kernel and glibc set.
constexpr uint32_t kFutexWaiters = 0x80000000u;
constexpr uint32_t kFutexOwnerDied = 0x40000000u;
constexpr uint32_t kFutexTidMask = 0x3fffffffu;
// __data.__owner besides a thread id: glibc's PTHREAD_MUTEX_INCONSISTENT
// (an EOWNERDEAD holder has not called pthread_mutex_consistent yet) and
// PTHREAD_MUTEX_NOTRECOVERABLE.
constexpr int kOwnerInconsistent = INT_MAX;
constexpr int kOwnerNotRecoverable = INT_MAX - 1;
// Thread ids are below the kernel's pid_max, which can never exceed
// PID_MAX_LIMIT (4M on 64-bit), in every PID namespace.
constexpr uint32_t kTidLimit = 4u * 1024 * 1024;

constexpr size_t kWhyChars = 240;

// The type word a mutex made by robust_mutex_init has, learnt from one made
// the same way rather than from glibc's private constants.
int expected_kind() {
  static const int kind = [] {
    pthread_mutex_t probe;
    if (!robust_mutex_init(&probe)) return INT_MIN;
    int k = probe.__data.__kind;
    pthread_mutex_destroy(&probe);
    return k;
  }();
  return kind;
}

int load(const int* word) { return __atomic_load_n(word, __ATOMIC_RELAXED); }

bool tid_is_plausible(uint32_t tid) { return tid < kTidLimit; }

// Mutexes declared unusable in this process. Lock-free, so that a fork()ed
// child never inherits a held lock here: an entry is claimed (kWriting),
// filled, then published (kReady).
enum EntryState : int { kFree = 0, kWriting = 1, kReady = 2 };
struct Unusable {
  std::atomic<int> state{kFree};
  const pthread_mutex_t* mutex = nullptr;
  char why[kWhyChars] = "";
};
constexpr int kMaxUnusable = 64;
Unusable g_unusable[kMaxUnusable];
std::atomic<int> g_unusable_count{0};
std::atomic<UnusableFn> g_handler{nullptr};
thread_local uint64_t t_failures = 0;

Unusable* find_unusable(const pthread_mutex_t* m) {
  if (g_unusable_count.load(std::memory_order_acquire) == 0) return nullptr;
  for (Unusable& entry : g_unusable)
    if (entry.state.load(std::memory_order_acquire) == kReady && entry.mutex == m) return &entry;
  return nullptr;
}

// Declares `m` unusable. The handler hears of it the first time only (two
// threads failing at once may both record it; handlers are idempotent).
LockResult fail(pthread_mutex_t* m, const char* why) {
  ++t_failures;
  if (find_unusable(m)) return LockResult::kFailed;
  for (Unusable& entry : g_unusable) {
    int expected = kFree;
    if (!entry.state.compare_exchange_strong(expected, kWriting, std::memory_order_acquire))
      continue;
    entry.mutex = m;
    snprintf(entry.why, sizeof entry.why, "%s", why);
    entry.state.store(kReady, std::memory_order_release);
    g_unusable_count.fetch_add(1, std::memory_order_release);
    break;
  }
  // With the table full, the next lock waits and fails again: still bounded.
  if (UnusableFn handler = g_handler.load(std::memory_order_acquire)) handler(m, why);
  return LockResult::kFailed;
}

timespec deadline_after(uint64_t ns) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t total = uint64_t(now.tv_nsec) + ns % 1'000'000'000ull;
  timespec deadline;
  deadline.tv_sec = now.tv_sec + time_t(ns / 1'000'000'000ull + total / 1'000'000'000ull);
  deadline.tv_nsec = long(total % 1'000'000'000ull);
  return deadline;
}

}  // namespace

bool robust_mutex_init(pthread_mutex_t* m) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return false;
  bool ok = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
            pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
            pthread_mutex_init(m, &attr) == 0;
  pthread_mutexattr_destroy(&attr);
  return ok;
}

bool robust_mutex_is_plausible(const pthread_mutex_t* m, char* why, size_t why_len) {
  // The type decides which of glibc's code paths runs, and a wrong one
  // aborts the program (a priority-inheritance type with a dead owner trips
  // glibc's assertion "e != ESRCH || !robust") or breaks the protocol.
  int kind = load(&m->__data.__kind);
  if (kind != expected_kind()) {
    snprintf(why, why_len, "its type word is %#x, not the robust process-shared type %#x",
             unsigned(kind), unsigned(expected_kind()));
    return false;
  }
  uint32_t word = uint32_t(load(&m->__data.__lock));
  uint32_t tid = word & kFutexTidMask;
  if (!tid_is_plausible(tid)) {
    snprintf(why, why_len, "its lock word %#x names thread %u, which cannot exist", word, tid);
    return false;
  }
  // Waiters on a free mutex: neither glibc nor the kernel leaves this (a
  // dead owner's word keeps kFutexOwnerDied), and nobody would ever wake
  // them.
  if (tid == 0 && (word & kFutexWaiters) && !(word & kFutexOwnerDied)) {
    snprintf(why, why_len, "its lock word %#x has waiters but no owner", word);
    return false;
  }
  int owner = load(&m->__data.__owner);
  if (owner != kOwnerInconsistent && owner != kOwnerNotRecoverable &&
      (owner < 0 || !tid_is_plausible(uint32_t(owner)))) {
    snprintf(why, why_len, "its owner field names thread %d, which cannot exist", owner);
    return false;
  }
  return true;
}

LockResult robust_mutex_lock(pthread_mutex_t* m, RepairFn repair, void* context) {
  if (find_unusable(m)) {
    ++t_failures;
    return LockResult::kFailed;
  }
  char why[kWhyChars];
  if (!robust_mutex_is_plausible(m, why, sizeof why)) return fail(m, why);
  // A free mutex is taken without reading the clock: the allocation path
  // locks a few times per call.
  int rc = pthread_mutex_trylock(m);
  if (rc == EBUSY) {
    timespec deadline = deadline_after(kLockTimeoutNs);
    rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &deadline);
  }
  if (rc == 0) return LockResult::kLocked;
  if (rc == EOWNERDEAD) {
    // We hold the lock and the state may be half-updated: repair, then
    // declare it consistent so later lockers get a normal lock.
    repair(context);
    pthread_mutex_consistent(m);
    return LockResult::kRepaired;
  }
  if (rc == ETIMEDOUT) {
    uint32_t tid = uint32_t(load(&m->__data.__lock)) & kFutexTidMask;
    snprintf(why, sizeof why,
             "it has been held for over %llu s by thread %u, which seems to be gone or stuck (a "
             "crash of the host with GSHARE_DIR on lasting storage, a stopped process, or a "
             "changed file)",
             (unsigned long long)(kLockTimeoutNs / 1'000'000'000ull), tid);
  } else if (rc == ENOTRECOVERABLE) {
    // A holder saw EOWNERDEAD and unlocked without repairing (gshare always
    // repairs first: a changed file, or another program). Re-creating the
    // mutex in place would race with another process doing the same.
    snprintf(why, sizeof why, "glibc reports it unrecoverable (ENOTRECOVERABLE)");
  } else {
    snprintf(why, sizeof why, "locking it failed: %s", strerror(rc));  // EINVAL, EDEADLK...
  }
  return fail(m, why);
}

void robust_mutex_unlock(pthread_mutex_t* m) { pthread_mutex_unlock(m); }

bool robust_mutex_unusable(const pthread_mutex_t* m, char* why, size_t why_len) {
  Unusable* entry = find_unusable(m);
  if (!entry) return false;
  if (why && why_len) snprintf(why, why_len, "%s", entry->why);
  return true;
}

void robust_mutex_forget(const pthread_mutex_t* m) {
  for (Unusable& entry : g_unusable) {
    if (entry.state.load(std::memory_order_acquire) != kReady || entry.mutex != m) continue;
    int expected = kReady;
    if (!entry.state.compare_exchange_strong(expected, kWriting, std::memory_order_acquire))
      continue;
    entry.mutex = nullptr;
    entry.state.store(kFree, std::memory_order_release);
    g_unusable_count.fetch_sub(1, std::memory_order_release);
  }
}

void robust_mutex_on_unusable(UnusableFn handler) {
  g_handler.store(handler, std::memory_order_release);
}

uint64_t robust_mutex_failures_in_thread() { return t_failures; }

}  // namespace gshare::shm
