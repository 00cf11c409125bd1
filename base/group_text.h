// GSHARE_GROUP as written: a group name, a gid (digits only, at most
// 4294967294: (gid_t)-1 means "no change" to chown and names no group), or a
// number that is no gid (a sign, or too large), which is refused rather than
// wrapped to another group.
#pragma once

#include <sys/types.h>

namespace gshare {

enum class GroupText { kName, kGid, kInvalid };
GroupText parse_group_text(const char* text, gid_t* gid);

}  // namespace gshare
