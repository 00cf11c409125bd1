// The plain-text view of a Frame: the lines of `--once`, of the frames
// written to a pipe, and of the live screen (which only clips and styles
// them, see top_terminal.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tools/top_sample.h"

namespace gshare::top {

struct TextLine {
  // Lets the live view style a line without parsing it.
  enum class Kind { kTitle, kGpu, kLanes, kRegionError, kColumnHeader, kProcess, kMessage, kBlank };
  Kind kind;
  std::string text;
};

// One frame: per GPU with live processes a header line (capacity, reserved,
// the safety condition, policy, handovers and what a switch costs), a line of its lanes and their members, and
// the process table; a line per unreadable region; "no gshare processes (looked in DIR)"
// when there are no live processes at all. GPUs without processes are left
// out (their regions outlive the processes); --json lists them.
// `width` 0 means no limit: every column, flexible ones at their widest
// cell. Otherwise columns give way in their Column::hide_order while the
// flexible column (COMMAND) would get less than kFlexibleWantedWidth, then
// it shrinks, down to kFlexibleMinWidth. The header and lanes lines wrap
// between their items instead.
std::vector<TextLine> render_text(const Frame& frame, size_t width);

// "gshare-top  /dev/shm  every 1 s  12:00:01", the first line of the live
// screen and of each frame written to a pipe.
std::string title_line(const Frame& frame, double delay_seconds);

// The lines' texts, each ended by '\n'.
std::string join_lines(const std::vector<TextLine>& lines);

}  // namespace gshare::top
