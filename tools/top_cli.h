// gshare-top's command line: parsing, and the --help and --help-env texts.
#pragma once

#include <cstddef>
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
  bool version = false;        // --version: "gshare-top 0.9.0"
  bool columns = false;        // --columns: the process columns and their meanings
  std::string dir;             // --dir, else $GSHARE_DIR, else GSHARE_DIR's default
};

inline constexpr double kMaxDelaySeconds = 3600;

// False with one line in `error` (naming the bad value and what is accepted).
bool parse_command_line(int argc, char** argv, CommandLine* out, std::string* error);

// ADDR:PORT as --serve takes it; false with one line in `error` otherwise.
bool parse_listen_address(const std::string& text, ListenAddress* out, std::string* error);

std::string usage_text();
std::string environment_text();
// "gshare-top 0.9.0\n": the version of the build (project() in CMakeLists.txt).
std::string version_text();
// One line per process column, its header padded to kColumnsHeaderWidth and
// its meaning: what --columns prints (the README's table is made from it).
std::string columns_text();
inline constexpr size_t kColumnsHeaderWidth = 10;

// The width of plain frames written where there is no terminal to ask
// (--once or frames into a pipe): $COLUMNS when it is a plain number from
// kMinPlainWidth up, else kDefaultPlainWidth.
size_t plain_output_width(const char* columns_variable);
inline constexpr size_t kDefaultPlainWidth = 120;
inline constexpr size_t kMinPlainWidth = 40;

}  // namespace gshare::top
