#include "slurm/spank_rules.h"

#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "base/options.h"

namespace {

constexpr gshare_spank_option kOptions[] = {
    {"gpu-mem", "SIZE|PCT", "GSHARE_MEM_LIMIT",
     "gshare: device-memory quota of each process on its GPU (20GiB, 512MiB, 25%)"},
    {"gpu-policy", "NAME", "GSHARE_POLICY",
     "gshare: scheduling policy of a shared GPU (fifo, fair, srtf, priority, pack, prefetch); "
     "the first job on a GPU sets it"},
    {"gpu-weight", "N", "GSHARE_WEIGHT", "gshare: share of GPU time under fair (1-1000)"},
    {"gpu-priority", "N", "GSHARE_PRIORITY",
     "gshare: priority under the priority policy (-1000 to 1000, larger first)"},
};
constexpr size_t kOptionCount = sizeof kOptions / sizeof kOptions[0];

// How much of a bad value a message quotes.
constexpr size_t kShownValueChars = 121;

void quote(const char* text, char* out, size_t out_len) { gshare::escape_text(text, out, out_len); }

bool copy_text(const char* value, char* out, size_t out_len) {
  size_t n = strlen(value);
  if (n >= out_len) return false;
  memcpy(out, value, n + 1);
  return true;
}

// A path the dynamic loader can take in LD_PRELOAD: absolute, and free of
// its separators (' ', ':') and of other blanks and controls.
bool is_preloadable_path(const char* path) {
  if (path[0] != '/') return false;
  for (const char* p = path; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c <= ' ' || c == ':' || c == 0x7F) return false;
  }
  return true;
}

const char* file_name(const char* path, size_t length) {
  for (size_t i = length; i > 0; --i)
    if (path[i - 1] == '/') return path + i;
  return path;
}

// Whether the entry `path` (`length` bytes, not NUL-terminated) names a
// file called `name`, in any directory.
bool same_file_name(const char* path, size_t length, const char* name) {
  const char* entry_name = file_name(path, length);
  size_t entry_name_length = length - size_t(entry_name - path);
  return entry_name_length == strlen(name) && strncmp(entry_name, name, entry_name_length) == 0;
}

bool is_separator(char c) { return c == ':' || c == ' '; }

}  // namespace

extern "C" {

const gshare_spank_option* gshare_spank_options(size_t* count) {
  *count = kOptionCount;
  return kOptions;
}

int gshare_spank_check_option(size_t index, const char* value, char* error, size_t error_len) {
  if (index >= kOptionCount) {
    snprintf(error, error_len, "gshare: no option number %zu", index);
    return 0;
  }
  const gshare_spank_option& option = kOptions[index];
  const char* accepted = nullptr;
  if (value && gshare::option_value_is_valid(option.variable, value, &accepted)) return 1;
  char shown[kShownValueChars];
  quote(value ? value : "", shown, sizeof shown);
  snprintf(error, error_len, "gshare: --%s=%s is not valid; accepted: %s", option.name, shown,
           accepted ? accepted : "(unknown)");
  return 0;
}

int gshare_spank_parse_config(int argc, char* const* argv, const char* default_lib,
                              gshare_spank_config* out, char* error, size_t error_len) {
  *out = gshare_spank_config{};
  if (!copy_text(default_lib, out->lib, sizeof out->lib) || !is_preloadable_path(out->lib)) {
    char shown[kShownValueChars];
    quote(default_lib, shown, sizeof shown);
    snprintf(error, error_len,
             "gshare: the built-in library path %s is not usable; give lib= in plugstack.conf",
             shown);
    return 0;
  }
  for (int i = 0; i < argc; ++i) {
    const char* argument = argv[i];
    const char* equals = strchr(argument, '=');
    size_t key_length = equals ? size_t(equals - argument) : strlen(argument);
    const char* value = equals ? equals + 1 : "";
    auto is = [&](const char* key) {
      return strlen(key) == key_length && strncmp(argument, key, key_length) == 0;
    };
    const char* accepted = nullptr;
    bool ok = false;
    if (!equals) {
      accepted = "dir=PATH, group=GROUP, lib=PATH or all=BOOL";
    } else if (is("dir")) {
      ok = gshare::option_value_is_valid("GSHARE_DIR", value, &accepted) &&
           copy_text(value, out->dir, sizeof out->dir);
    } else if (is("group")) {
      ok = gshare::option_value_is_valid("GSHARE_GROUP", value, &accepted) &&
           copy_text(value, out->group, sizeof out->group);
    } else if (is("lib")) {
      accepted = "the absolute path of libgshare.so, without spaces or ':'";
      ok = is_preloadable_path(value) && copy_text(value, out->lib, sizeof out->lib);
    } else if (is("all")) {
      bool all = false;
      ok = gshare::parse_bool(value, &all);
      if (!ok) accepted = "1, 0, true, false, yes, no, on or off";
      out->all = all;
    } else {
      accepted = "dir=PATH, group=GROUP, lib=PATH or all=BOOL";
    }
    if (!ok) {
      char shown[kShownValueChars];
      quote(argument, shown, sizeof shown);
      snprintf(error, error_len,
               "gshare: plugstack.conf argument %s is not valid; accepted: %s", shown,
               accepted ? accepted : "(unknown)");
      return 0;
    }
  }
  return 1;
}

int gshare_spank_preload(const char* existing, const char* lib, char* out, size_t out_len) {
  size_t lib_length = strlen(lib);
  const char* lib_name = file_name(lib, lib_length);
  if (lib_length + 1 > out_len) return 0;
  memcpy(out, lib, lib_length + 1);
  size_t used = lib_length;
  for (const char* p = existing ? existing : ""; *p;) {
    if (is_separator(*p)) {
      ++p;
      continue;
    }
    const char* entry = p;
    while (*p && !is_separator(*p)) ++p;
    size_t length = size_t(p - entry);
    // A libgshare.so already: the node's comes first instead.
    if (same_file_name(entry, length, lib_name)) continue;
    if (used + 1 + length + 1 > out_len) return 0;
    out[used++] = ':';
    memcpy(out + used, entry, length);
    used += length;
    out[used] = '\0';
  }
  return 1;
}

}  // extern "C"
