// Byte arithmetic that never wraps: a - b, or 0 when b is larger. Byte
// counts read from a region another process may be writing (or that a
// dead process left half-updated) must not turn into 16 EiB.
//
// base/ is the vocabulary every layer may use; it includes nothing of
// gshare's own.
#pragma once

#include <cstdint>

namespace gshare {

inline constexpr uint64_t saturating_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace gshare
