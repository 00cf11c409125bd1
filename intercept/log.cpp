#include "intercept/log.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace gshare {

namespace {
std::atomic<int> g_level{int(LogLevel::kWarn)};

// At most kBurst messages per second; the rest are counted and reported.
constexpr int kBurst = 20;
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
}  // namespace

void set_log_level(LogLevel level) { g_level.store(int(level), std::memory_order_relaxed); }

bool log_enabled(LogLevel level) { return int(level) <= g_level.load(std::memory_order_relaxed); }

void log_message(LogLevel level, const char* format, ...) {
  (void)level;
  if (!take_rate_token()) return;
  char line[1024] = "gshare: ";
  size_t prefix = 8;
  va_list args;
  va_start(args, format);
  int n = vsnprintf(line + prefix, sizeof line - prefix - 1, format, args);
  va_end(args);
  if (n < 0) return;
  size_t length = prefix + (size_t(n) < sizeof line - prefix - 1 ? size_t(n) : sizeof line - prefix - 2);
  line[length++] = '\n';
  (void)!write(2, line, length);
}

}  // namespace gshare
