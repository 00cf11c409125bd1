// The scheduling policies by name: the vocabulary GSHARE_POLICY, the
// region's header, gshare-top and gshare-sim share. What each policy
// decides is in rules/policy.h.
#pragma once

#include <cstdint>

namespace gshare {

enum class Policy : uint32_t { kFifo = 1, kFair = 2, kSrtf = 3, kPriority = 4, kPack = 5, kPrefetch = 6 };

// "fifo", "fair", "srtf", "priority", "pack", "prefetch".
const char* policy_name(Policy policy);
// Case-insensitive; false for anything else.
bool parse_policy(const char* text, Policy* out);
bool policy_is_known(uint32_t value);

}  // namespace gshare
