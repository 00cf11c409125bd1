#include "shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace gshare::shm {

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns) {
  timespec timeout{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait_bits(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns, uint32_t bits) {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time.
  timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  uint64_t ns = uint64_t(at.tv_nsec) + timeout_ns % 1'000'000'000;
  at.tv_sec += time_t(timeout_ns / 1'000'000'000 + ns / 1'000'000'000);
  at.tv_nsec = long(ns % 1'000'000'000);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_BITSET, expected, &at, nullptr, bits);
}

void futex_wake_bits(std::atomic<uint32_t>* word, uint32_t bits) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_BITSET, INT_MAX, nullptr, nullptr, bits);
}

}  // namespace gshare::shm
