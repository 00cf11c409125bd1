// gshare's own messages: one line each on stderr, prefixed "gshare: ".
// Safe inside hooks: formats into a stack buffer and write()s it, never
// allocates, and caps the rate so a hot failing path cannot flood a log.
//
// Messages quote untrusted text: GSHARE_* values from the environment, and
// whatever another process (or anyone with write access to GSHARE_DIR) put
// into a region. Every line is made terminal-safe before it is written
// (printable_length below), so no byte of such text can move the cursor,
// retitle the terminal or split one message into two lines.
#pragma once

#include <cstddef>

namespace gshare {

enum class LogLevel { kQuiet = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The one escaping rule of gshare, shared by its messages and gshare-top
// (tools/top_format.h): the length of the well-formed UTF-8 sequence at
// text[i] (i < size) that a terminal prints as itself, or 0 when the byte
// there must be replaced by '?' (C0 and C1 controls, DEL, malformed,
// overlong or surrogate UTF-8).
size_t printable_length(const char* text, size_t size, size_t i);

// Copies `text` (`size` bytes) into `out`, NUL-terminated, with every byte
// printable_length rejects replaced by '?'; cut at a sequence boundary when
// `out` is too small. Returns the bytes written, without the NUL.
size_t escape_text(const char* text, size_t size, char* out, size_t out_len);
// The same for a NUL-terminated string.
size_t escape_text(const char* text, char* out, size_t out_len);

}  // namespace gshare

#define GSHARE_LOG(level, ...)                                      \
  do {                                                              \
    if (::gshare::log_enabled(level)) ::gshare::log_message(level, __VA_ARGS__); \
  } while (0)
#define GSHARE_ERROR(...) GSHARE_LOG(::gshare::LogLevel::kError, __VA_ARGS__)
#define GSHARE_WARN(...) GSHARE_LOG(::gshare::LogLevel::kWarn, __VA_ARGS__)
#define GSHARE_INFO(...) GSHARE_LOG(::gshare::LogLevel::kInfo, __VA_ARGS__)
#define GSHARE_DEBUG(...) GSHARE_LOG(::gshare::LogLevel::kDebug, __VA_ARGS__)
