// Sleeping on a word of the shared region. The futex is keyed by the
// physical page, not the address, so processes that map the region at
// different addresses still meet (no FUTEX_PRIVATE_FLAG on purpose).
#pragma once

#include <atomic>
#include <cstdint>

namespace gshare::shm {

// Sleeps while *word == expected, at most timeout_ns. Returns at once if the
// word already differs; may return early (a wake, a signal, a spurious wake):
// callers re-check their condition.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns);

// Wakes every process and thread sleeping on `word`.
void futex_wake_all(std::atomic<uint32_t>* word);

// futex_wait for a sleeper that only some wakes concern: it sleeps with
// `bits` (FUTEX_WAIT_BITSET), and futex_wake_bits wakes it only where their
// bits meet. futex_wake_all still wakes it, and a futex_wait sleeper (all
// bits) wakes at any futex_wake_bits.
void futex_wait_bits(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns, uint32_t bits);

// Wakes the sleepers on `word` whose bits meet `bits`.
void futex_wake_bits(std::atomic<uint32_t>* word, uint32_t bits);

}  // namespace gshare::shm
