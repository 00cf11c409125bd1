// How many jobs one shared turn holds (scheduler/token.h, docs/DESIGN.md
// §7.9). Beside one another the jobs run as they would natively: each one's
// host work needs a CPU, and their kernels take turns on the GPU's time.
// So a turn holds no more jobs than the deciding process has CPUs (among 64
// host-bound PyTorch jobs on an H200 with 16 cores, 32 beside one another
// made the slowest 0.45 of the fastest), and their GPU shares, each measured
// in its own turns (runtime/gpu_busy.h), add up to one GPU at most. Pure
// code: the scheduler calls it under the region's lock, the unit tests
// directly.
#pragma once

#include <cstdint>

namespace gshare::rules {

// `jobs` in the turn with the one asking to join, on `cpus` CPUs, their
// GPU shares summing to `busy_permille` thousandths.
inline bool turn_has_room(uint32_t jobs, unsigned cpus, uint64_t busy_permille) {
  return jobs <= cpus && busy_permille <= 1000;
}

}  // namespace gshare::rules
