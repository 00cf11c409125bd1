// gshare's own messages: one line each on stderr, prefixed "gshare: ".
// Safe inside hooks: formats into a stack buffer and write()s it, never
// allocates, and caps the rate so a hot failing path cannot flood a log.
#pragma once

namespace gshare {

enum class LogLevel { kQuiet = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace gshare

#define GSHARE_LOG(level, ...)                                      \
  do {                                                              \
    if (::gshare::log_enabled(level)) ::gshare::log_message(level, __VA_ARGS__); \
  } while (0)
#define GSHARE_ERROR(...) GSHARE_LOG(::gshare::LogLevel::kError, __VA_ARGS__)
#define GSHARE_WARN(...) GSHARE_LOG(::gshare::LogLevel::kWarn, __VA_ARGS__)
#define GSHARE_INFO(...) GSHARE_LOG(::gshare::LogLevel::kInfo, __VA_ARGS__)
#define GSHARE_DEBUG(...) GSHARE_LOG(::gshare::LogLevel::kDebug, __VA_ARGS__)
