// gshare-top's command line: parsing, and the --help and --help-env texts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gshare::top {

// Where --serve listens: a host name, an IPv4 address or an IPv6 address
// (given in brackets, kept without them), and a port; port 0 lets the
// system pick a free one.
struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};

struct CommandLine {
  double delay_seconds = 1.0;  // -d: live refresh interval
  bool once = false;           // --once: one plain-text frame
  bool json = false;           // --json: one JSON snapshot (wins over --once)
  bool prometheus = false;     // --prometheus: one Prometheus text exposition
  std::optional<ListenAddress> serve;  // --serve ADDR:PORT: /metrics over HTTP
  bool help = false;
  bool help_env = false;
  std::string dir;             // --dir, else $GSHARE_DIR, else GSHARE_DIR's default
};

inline constexpr double kMaxDelaySeconds = 3600;

// False with one line in `error` (naming the bad value and what is accepted).
bool parse_command_line(int argc, char** argv, CommandLine* out, std::string* error);

// ADDR:PORT as --serve takes it; false with one line in `error` otherwise.
bool parse_listen_address(const std::string& text, ListenAddress* out, std::string* error);

std::string usage_text();
std::string environment_text();

}  // namespace gshare::top
