#include "base/log.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "base/tunables.h"

namespace gshare {

namespace {
std::atomic<int> g_level{int(LogLevel::kWarn)};

using tunables::kBurst;
std::atomic<long> g_window_second{0};
std::atomic<int> g_in_window{0};
std::atomic<int> g_suppressed{0};

bool take_rate_token() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  long window = g_window_second.load(std::memory_order_relaxed);
  if (ts.tv_sec != window &&
      g_window_second.compare_exchange_strong(window, ts.tv_sec, std::memory_order_relaxed)) {
    g_in_window.store(0, std::memory_order_relaxed);
    int dropped = g_suppressed.exchange(0, std::memory_order_relaxed);
    if (dropped > 0) {
      char line[96];
      int n = snprintf(line, sizeof line, "gshare: (%d messages suppressed)\n", dropped);
      if (n > 0) (void)!write(2, line, size_t(n));
    }
  }
  if (g_in_window.fetch_add(1, std::memory_order_relaxed) < kBurst) return true;
  g_suppressed.fetch_add(1, std::memory_order_relaxed);
  return false;
}
bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

size_t printable_length(const char* text, size_t size, size_t i) {
  unsigned char lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x20 || lead == 0x7F) return 0;
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t code_point;
  if ((lead & 0xE0) == 0xC0) length = 2, code_point = lead & 0x1F;
  else if ((lead & 0xF0) == 0xE0) length = 3, code_point = lead & 0x0F;
  else if ((lead & 0xF8) == 0xF0) length = 4, code_point = lead & 0x07;
  else return 0;
  if (i + length > size) return 0;
  for (size_t k = 1; k < length; ++k) {
    unsigned char byte = static_cast<unsigned char>(text[i + k]);
    if (!is_continuation(byte)) return 0;
    code_point = (code_point << 6) | (byte & 0x3F);
  }
  static const uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  bool overlong = code_point < kSmallest[length];
  bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
  bool c1_control = code_point >= 0x80 && code_point <= 0x9F;
  if (overlong || surrogate || c1_control || code_point > 0x10FFFF) return 0;
  return length;
}

size_t escape_text(const char* text, size_t size, char* out, size_t out_len) {
  if (out_len == 0) return 0;
  size_t written = 0;
  for (size_t i = 0; i < size;) {
    size_t sequence = printable_length(text, size, i);
    size_t take = sequence == 0 ? 1 : sequence;
    if (written + take >= out_len) break;  // keeps room for the NUL, cuts between sequences
    if (sequence == 0) out[written++] = '?';
    else memcpy(out + written, text + i, sequence), written += sequence;
    i += take;
  }
  out[written] = '\0';
  return written;
}

size_t escape_text(const char* text, char* out, size_t out_len) {
  return escape_text(text, strlen(text), out, out_len);
}

void set_log_level(LogLevel level) { g_level.store(int(level), std::memory_order_relaxed); }

bool log_enabled(LogLevel level) { return int(level) <= g_level.load(std::memory_order_relaxed); }

void log_message(LogLevel level, const char* format, ...) {
  if (!take_rate_token()) return;
  char line[1024] = "gshare: ";
  size_t prefix = 8;
  // At GSHARE_LOG=debug every line carries the monotonic clock (seconds, as
  // CLOCK_MONOTONIC and Python's time.monotonic() read it), to line them up
  // across processes.
  if (log_enabled(LogLevel::kDebug)) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    prefix += size_t(snprintf(line + prefix, sizeof line - prefix, "%ld.%06ld ", long(ts.tv_sec), ts.tv_nsec / 1000));
  }
  va_list args;
  va_start(args, format);
  int n = vsnprintf(line + prefix, sizeof line - prefix - 1, format, args);
  va_end(args);
  if (n < 0) return;
  size_t length = prefix + (size_t(n) < sizeof line - prefix - 1 ? size_t(n) : sizeof line - prefix - 2);
  // In place: a replaced byte becomes one '?', so the length never changes.
  for (size_t i = prefix; i < length;) {
    size_t sequence = printable_length(line, length, i);
    if (sequence == 0) line[i++] = '?';
    else i += sequence;
  }
  line[length++] = '\n';
  (void)!write(2, line, length);
}

}  // namespace gshare
