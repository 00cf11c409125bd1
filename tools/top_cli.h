// gshare-top's command line: parsing, and the --help and --help-env texts.
#pragma once

#include <string>

namespace gshare::top {

struct CommandLine {
  double delay_seconds = 1.0;  // -d: live refresh interval
  bool once = false;           // --once: one plain-text frame
  bool json = false;           // --json: one JSON snapshot (wins over --once)
  bool prometheus = false;     // --prometheus: one Prometheus text exposition
  bool help = false;
  bool help_env = false;
  std::string dir;             // --dir, else $GSHARE_DIR, else GSHARE_DIR's default
};

inline constexpr double kMaxDelaySeconds = 3600;

// False with one line in `error` (naming the bad value and what is accepted).
bool parse_command_line(int argc, char** argv, CommandLine* out, std::string* error);

std::string usage_text();
std::string environment_text();

}  // namespace gshare::top
