// The clocks. CLOCK_MONOTONIC in ns is the scheduler's clock (every
// *_mono_ns field): shared by every process on the host and never stepped.
#pragma once

#include <cstdint>

namespace gshare {

uint64_t mono_now_ns();
// CLOCK_REALTIME in ns: for what a person reads (when a process started).
uint64_t unix_now_ns();

}  // namespace gshare
