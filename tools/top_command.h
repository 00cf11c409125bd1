// What gshare-top's COMMAND column shows of a process's command line.
#pragma once

#include <string>
#include <string_view>

namespace gshare::top {

// The program's name without its directory, then its arguments:
// "/opt/bin/trainer --lr 3" -> "trainer --lr 3". After an interpreter
// (python, perl, bash, node, ...) the script's directory goes too, since
// the script is the program a reader looks for:
// "/usr/bin/python3 -u /home/me/train.py --lr 3" -> "python3 -u train.py --lr 3".
// `command_line` is argv joined by spaces, as the preload records it (a
// region holds its first 79 bytes); the column cuts the result to fit.
std::string command_summary(std::string_view command_line);

// Whether a program name (no directory) is an interpreter whose first
// argument that is no option names the script it runs.
bool is_interpreter(std::string_view program);

}  // namespace gshare::top
