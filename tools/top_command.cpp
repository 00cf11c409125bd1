#include "tools/top_command.h"

#include <vector>

namespace gshare::top {

namespace {

std::string_view base_name(std::string_view path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string_view::npos || slash + 1 == path.size()) return path;
  return path.substr(slash + 1);
}

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// "python3.11", "perl5.36": a name and then only a version.
bool is_versioned(std::string_view program, std::string_view name) {
  if (!starts_with(program, name)) return false;
  for (char c : program.substr(name.size()))
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  return true;
}

// Interpreter options whose value is the next word (python -W error,
// -X dev): that word is no script.
bool takes_value(std::string_view option) { return option == "-W" || option == "-X"; }

// After these the next word is code or a module name, not a file.
bool ends_script_search(std::string_view option) {
  return option == "-c" || option == "-m" || option == "-e";
}

}  // namespace

bool is_interpreter(std::string_view program) {
  for (std::string_view name : {"python", "pypy", "perl", "ruby", "lua", "php", "tclsh"})
    if (is_versioned(program, name)) return true;
  for (std::string_view name : {"node", "nodejs", "bash", "sh", "dash", "zsh", "ksh", "Rscript",
                                "julia"})
    if (program == name) return true;
  return false;
}

std::string command_summary(std::string_view command_line) {
  std::vector<std::string_view> argv = words(command_line);
  if (argv.empty()) return std::string(command_line);
  argv[0] = base_name(argv[0]);
  if (is_interpreter(argv[0])) {
    for (size_t i = 1; i < argv.size(); ++i) {
      if (ends_script_search(argv[i])) break;
      if (takes_value(argv[i])) {
        ++i;
        continue;
      }
      if (starts_with(argv[i], "-")) continue;
      argv[i] = base_name(argv[i]);
      break;
    }
  }
  std::string summary;
  for (std::string_view word : argv) {
    if (!summary.empty()) summary += ' ';
    summary += word;
  }
  return summary;
}

}  // namespace gshare::top
