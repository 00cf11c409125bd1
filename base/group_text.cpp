#include "base/group_text.h"

#include <cstdint>

namespace gshare {

GroupText parse_group_text(const char* text, gid_t* gid) {
  const char* digits = text[0] == '+' || text[0] == '-' ? text + 1 : text;
  if (*digits == '\0') return GroupText::kName;
  for (const char* p = digits; *p; ++p)
    if (*p < '0' || *p > '9') return GroupText::kName;
  if (digits != text) return GroupText::kInvalid;  // a signed number is no gid
  uint64_t value = 0;
  for (const char* p = digits; *p; ++p) {
    value = value * 10 + uint64_t(*p - '0');
    if (value >= uint64_t(gid_t(-1))) return GroupText::kInvalid;  // (gid_t)-1, or wraps
  }
  *gid = gid_t(value);
  return GroupText::kGid;
}

}  // namespace gshare
