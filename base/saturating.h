// Byte arithmetic that never wraps: a - b, or 0 when b is larger; a + b,
// or UINT64_MAX when the sum would not fit. Byte
// counts read from a region another process may be writing (or that a
// dead process left half-updated) must not turn into 16 EiB.
//
// base/ is the vocabulary every layer may use; it includes nothing of
// gshare's own.
#pragma once

#include <cstdint>

namespace gshare {

inline constexpr uint64_t saturating_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
inline constexpr uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

}  // namespace gshare
