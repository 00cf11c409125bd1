#include "base/policy_names.h"

#include <strings.h>

namespace gshare {

namespace {
struct Named {
  Policy policy;
  const char* name;
};
constexpr Named kNames[] = {
    {Policy::kFifo, "fifo"}, {Policy::kFair, "fair"}, {Policy::kSrtf, "srtf"},
    {Policy::kPriority, "priority"}, {Policy::kPack, "pack"},
    {Policy::kPrefetch, "prefetch"}};
}  // namespace

const char* policy_name(Policy policy) {
  for (const Named& n : kNames)
    if (n.policy == policy) return n.name;
  return "unknown";
}

bool parse_policy(const char* text, Policy* out) {
  if (!text) return false;
  for (const Named& n : kNames) {
    if (strcasecmp(text, n.name) == 0) {
      *out = n.policy;
      return true;
    }
  }
  return false;
}

bool policy_is_known(uint32_t value) {
  for (const Named& n : kNames)
    if (uint32_t(n.policy) == value) return true;
  return false;
}

}  // namespace gshare
