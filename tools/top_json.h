// The --json view of a Frame. The schema is documented in tools/README.md and
// at the top of gshare_top.cpp; bump kJsonVersion when a field changes
// meaning or goes away (adding a field does not).
#pragma once

#include <string>

#include "tools/top_sample.h"

namespace gshare::top {

// 2: "state" is the scheduler's running/waiting/idle (was active/idle).
// 3: under pack a GPU has a launch token per lane: "holds_token" is true for
//    any lane's holder, and "holder_*" and "slice_*" describe token 0.
inline constexpr int kJsonVersion = 3;

// One JSON object on one line, without a trailing newline.
std::string render_json(const Frame& frame);

}  // namespace gshare::top
