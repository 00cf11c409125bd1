#include "tools/top_cli.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/options.h"
#include "base/version.h"
#include "tools/top_columns.h"
#include "tools/top_format.h"

namespace gshare::top {

namespace {

constexpr const char* kDelayForms =
    "a number of seconds greater than 0 and at most 3600, such as 1, 0.5 or 2.5";

// Digits with at most one '.', like GSHARE_* sizes: no signs, exponents,
// "inf" or hex, which strtod alone would take.
bool parse_delay(const char* text, double* seconds) {
  bool seen_digit = false, seen_dot = false;
  for (const char* p = text; *p; ++p) {
    if (*p >= '0' && *p <= '9') seen_digit = true;
    else if (*p == '.' && !seen_dot) seen_dot = true;
    else return false;
  }
  if (!seen_digit) return false;
  double value = strtod(text, nullptr);
  if (!(value > 0 && value <= kMaxDelaySeconds)) return false;
  *seconds = value;
  return true;
}

constexpr const char* kListenForms =
    "HOST:PORT, the host a name, an IPv4 address or an IPv6 address in brackets, the port 0 "
    "(any free one) to 65535, such as 127.0.0.1:9400, 0.0.0.0:9400 or [::1]:9400";

bool all_of_chars(const std::string& text, const char* allowed) {
  return !text.empty() && text.find_first_not_of(allowed) == std::string::npos;
}

const OptionInfo* find_option(const char* name) {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  for (size_t i = 0; i < count; ++i)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return nullptr;
}

// GSHARE_DIR's default, from the preload's own table so the two never differ.
std::string builtin_dir() {
  const OptionInfo* option = find_option("GSHARE_DIR");
  return option ? option->default_value : "/dev/shm";
}

std::string default_dir() {
  const char* from_environment = getenv("GSHARE_DIR");
  if (from_environment && *from_environment) return from_environment;
  return builtin_dir();
}

// "/dev/shm/" and "/dev/shm" name the same regions; show them the same way.
std::string without_trailing_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

enum LongOnly { kOnce = 256, kJson, kDir, kHelpEnv, kPrometheus, kServe, kVersionOption, kColumnsOption };

const option kLongOptions[] = {
    {"delay", required_argument, nullptr, 'd'},
    {"once", no_argument, nullptr, kOnce},
    {"json", no_argument, nullptr, kJson},
    {"prometheus", no_argument, nullptr, kPrometheus},
    {"serve", required_argument, nullptr, kServe},
    {"dir", required_argument, nullptr, kDir},
    {"help", no_argument, nullptr, 'h'},
    {"help-env", no_argument, nullptr, kHelpEnv},
    {"version", no_argument, nullptr, kVersionOption},
    {"columns", no_argument, nullptr, kColumnsOption},
    {nullptr, 0, nullptr, 0},
};

// The option getopt just handled as the user typed it ("--delay", "-d"),
// whether its value was attached ("--delay=0") or separate ("--delay 0").
std::string typed_option(char** argv, int index, const char* value) {
  const char* typed = argv[index - 1];
  if (value && typed == value && index >= 2) typed = argv[index - 2];
  std::string option(typed);
  if (option.rfind("--", 0) == 0) return option.substr(0, option.find('='));
  return option.substr(0, 2);
}

// What getopt rejected, as the user typed it.
std::string rejected_option(char** argv, int index, int short_option) {
  std::string typed = index > 0 ? argv[index - 1] : "";
  if (typed.rfind("--", 0) == 0) return typed.substr(0, typed.find('='));
  if (short_option > 0 && short_option < 128) return std::string("-") + char(short_option);
  return typed;
}

}  // namespace

bool parse_listen_address(const std::string& text, ListenAddress* out, std::string* error) {
  auto invalid = [&](const std::string& why) {
    *error = "--serve " + text + " is not valid (" + why + "); accepted: " + kListenForms;
    return false;
  };
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return invalid("no ] after the IPv6 address");
    host = text.substr(1, close - 1);
    if (text.compare(close + 1, 1, ":") != 0) return invalid("no :PORT after the address");
    port = text.substr(close + 2);
    // Hex digits, colons, an embedded IPv4 address, a zone after '%'.
    if (host.find(':') == std::string::npos ||
        !all_of_chars(host, "0123456789abcdefABCDEF:.%_-ghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ"))
      return invalid("not an IPv6 address in the brackets");
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return invalid("no :PORT");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.empty()) return invalid("no host; 0.0.0.0 listens on every interface");
    if (host.find(':') != std::string::npos) return invalid("an IPv6 address goes in brackets");
    if (!all_of_chars(host, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-_"))
      return invalid("not a host name or address");
  }
  if (!all_of_chars(port, "0123456789") || port.size() > 5 || std::stoul(port) > 65535)
    return invalid("the port is not a number from 0 to 65535");
  out->host = host;
  out->port = uint16_t(std::stoul(port));
  return true;
}

bool parse_command_line(int argc, char** argv, CommandLine* out, std::string* error) {
  *out = CommandLine{};
  const std::string see_help = "; see gshare-top --help";
  opterr = 0;  // our own messages, one line each
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":d:h", kLongOptions, nullptr)) != -1) {
    switch (c) {
      case 'd':
        if (!parse_delay(optarg, &out->delay_seconds)) {
          *error = typed_option(argv, optind, optarg) + " " + optarg +
                   " is not valid; accepted: " + kDelayForms;
          return false;
        }
        break;
      case kOnce: out->once = true; break;
      case kJson: out->json = true; break;
      case kPrometheus: out->prometheus = true; break;
      case kServe: {
        ListenAddress address;
        if (!parse_listen_address(optarg, &address, error)) return false;
        out->serve = address;
        break;
      }
      case kDir:
        if (!*optarg) {
          *error = "--dir needs a directory" + see_help;
          return false;
        }
        out->dir = optarg;
        break;
      case 'h': out->help = true; break;
      case kHelpEnv: out->help_env = true; break;
      case kVersionOption: out->version = true; break;
      case kColumnsOption: out->columns = true; break;
      case ':':
        *error = rejected_option(argv, optind, optopt) + " needs a value" + see_help;
        return false;
      default:
        // getopt reports a value given to a flag ("--once=3") as '?' too,
        // with optopt naming the flag.
        if (optopt >= 256 || (optopt > 0 && strchr("dh", optopt)))
          *error = rejected_option(argv, optind, optopt) + " takes no value" + see_help;
        else
          *error = "unknown option " + rejected_option(argv, optind, optopt) + see_help;
        return false;
    }
  }
  if (optind < argc) {
    *error = "unexpected argument " + std::string(argv[optind]) + see_help;
    return false;
  }
  int outputs = (out->json || out->once) + out->prometheus + out->serve.has_value();
  if (outputs > 1) {
    *error = "--serve, --prometheus and --json/--once are different outputs: give one" + see_help;
    return false;
  }
  out->dir = without_trailing_slashes(out->dir.empty() ? default_dir() : out->dir);
  return true;
}

std::string usage_text() {
  std::string text =
      "usage: gshare-top [-d SECONDS] [--once] [--json] [--prometheus] [--serve ADDR:PORT]\n"
      "                  [--dir DIR] [--columns] [-h|--help] [--help-env] [--version]\n"
      "\n"
      "Shows the GPU memory, launches and scheduling of every process running under\n"
      "gshare (LD_PRELOAD=libgshare.so), read from the per-GPU regions\n"
      "gshare-<GPU-UUID>. Reads only; needs no preload. Live on a terminal (q\n"
      "quits), plain frames one after another when stdout is not a terminal.\n"
      "\n"
      "options:\n"
      "  -d, --delay SECONDS  refresh interval, more than 0 and at most 3600 (default 1)\n"
      "      --once           print one plain-text frame and exit\n"
      "      --json           print one JSON snapshot and exit (schema: tools/README.md)\n"
      "      --prometheus     print one Prometheus text exposition and exit (for\n"
      "                       node_exporter's textfile collector)\n"
      "      --serve ADDR:PORT  serve the same on http://ADDR:PORT/metrics, a fresh\n"
      "                       snapshot per scrape, until SIGINT or SIGTERM; port 0\n"
      "                       takes a free one (the address served is printed on stderr)\n"
      "      --dir DIR        directory of the regions (default $GSHARE_DIR, else ";
  text += builtin_dir() + ")\n";
  text +=
      "      --columns        the process columns and what they mean, one a line\n"
      "  -h, --help           this help\n"
      "      --help-env       the GSHARE_* variables of the preload\n"
      "      --version        the version of gshare-top\n"
      "\n"
      "Rates are taken over the refresh interval; --once, --json and the first\n"
      "live frame sample twice, 0.25 s apart (-d does not change that). --json\n"
      "wins over --once. --prometheus and --serve read one snapshot and leave\n"
      "rates to Prometheus; their metrics are listed in the README (gshare-top,\n"
      "Prometheus), a Grafana dashboard in tools/grafana/gshare-dashboard.json.\n"
      "Where stdout is no terminal, rows are cut to $COLUMNS, else to 120 columns.\n"
      "\n"
      "Each GPU's line shows its memory, the safety sum P + lanes' E against the\n"
      "capacity (OVER when it exceeds it), its scheduling policy (fifo, fair,\n"
      "srtf, priority, pack; unknown until a process sets one), how often a\n"
      "launch token changed hands and what a switch cost, mean and max (from\n"
      "the grant to the new holder's first launch); the line below lists its\n"
      "lanes and their members, a lane's token holder starred under pack. P and\n"
      "E end in ~ while provisional. On a narrow terminal some columns give way,\n"
      "SWITCH first.\n"
      "\n"
      "columns:\n";
  for (const Column& column : process_columns())
    text += "  " + pad_right(column.header, kColumnsHeaderWidth) + " " + column.description + "\n";
  return text;
}

std::string columns_text() {
  std::string text;
  for (const Column& column : process_columns())
    text += pad_right(column.header, kColumnsHeaderWidth) + " " + column.description + "\n";
  return text;
}

std::string version_text() { return std::string("gshare-top ") + kVersion + "\n"; }

size_t plain_output_width(const char* columns_variable) {
  if (!columns_variable || !*columns_variable) return kDefaultPlainWidth;
  size_t width = 0;
  for (const char* p = columns_variable; *p; ++p) {
    if (*p < '0' || *p > '9' || width > 100000) return kDefaultPlainWidth;
    width = width * 10 + size_t(*p - '0');
  }
  return width >= kMinPlainWidth ? width : kDefaultPlainWidth;
}

std::string environment_text() {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  std::string text = "Variables read by libgshare.so (gshare-top reads only GSHARE_DIR):\n";
  for (size_t i = 0; i < count; ++i) {
    text += "  " + std::string(table[i].name) + " (" + table[i].type + ", default " +
            table[i].default_value + ")\n      " + table[i].description + "\n";
  }
  return text;
}

}  // namespace gshare::top
