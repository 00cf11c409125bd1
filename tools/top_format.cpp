#include "tools/top_format.h"

#include <cstdio>

#include "base/log.h"

namespace gshare::top {

namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const size_t last = sizeof kUnits / sizeof kUnits[0] - 1;
  double value = double(bytes) / 1024.0;
  size_t unit = 0;
  // 1023.95 would print as "1024.0": promote it to "1.00" of the next unit.
  while (unit < last && value >= 1023.95) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  snprintf(text, sizeof text, "%.*f %s", value < 9.995 ? 2 : 1, value, kUnits[unit]);
  return text;
}

std::string format_rate(double per_second) {
  char text[32];
  if (per_second <= 0.0) return "0";
  if (per_second < 999.95) snprintf(text, sizeof text, "%.1f", per_second);
  else if (per_second < 999999.5) snprintf(text, sizeof text, "%.0f", per_second);
  else snprintf(text, sizeof text, "%.1fM", per_second / 1e6);
  return text;
}

std::string format_duration(uint64_t ns) {
  if (ns == 0) return "0";
  if (ns < 1000) return "<1us";
  char text[32];
  // Each unit takes over where the one below would round to 1000 (or 60).
  const double us = double(ns) / 1e3, ms = double(ns) / 1e6, s = double(ns) / 1e9;
  if (us < 999.5) snprintf(text, sizeof text, "%.0fus", us);
  else if (ms < 9.995) snprintf(text, sizeof text, "%.2fms", ms);
  else if (ms < 99.95) snprintf(text, sizeof text, "%.1fms", ms);
  else if (ms < 999.5) snprintf(text, sizeof text, "%.0fms", ms);
  else if (s < 9.995) snprintf(text, sizeof text, "%.2fs", s);
  else if (s < 59.95) snprintf(text, sizeof text, "%.1fs", s);
  else {
    uint64_t seconds = (ns + 500000000) / 1000000000;
    if (seconds < 3600)
      snprintf(text, sizeof text, "%llum%02llus", (unsigned long long)(seconds / 60),
               (unsigned long long)(seconds % 60));
    else
      snprintf(text, sizeof text, "%lluh%02llum", (unsigned long long)(seconds / 3600),
               (unsigned long long)(seconds / 60 % 60));
  }
  return text;
}

std::string format_percent(double fraction) {
  char text[32];
  double percent = fraction > 0 ? 100.0 * fraction : 0.0;
  snprintf(text, sizeof text, "%.1f", percent);
  return text;
}

std::string sanitize_for_terminal(std::string_view text) {
  std::string safe;
  safe.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t length = printable_length(text.data(), text.size(), i);
    if (length == 0) {
      safe += '?';
      ++i;
    } else {
      safe.append(text.substr(i, length));
      i += length;
    }
  }
  return safe;
}

size_t display_width(std::string_view text) {
  size_t width = 0;
  for (char c : text)
    if (!is_continuation(static_cast<unsigned char>(c))) ++width;
  return width;
}

std::string truncate_to_width(std::string_view text, size_t width) {
  if (display_width(text) <= width) return std::string(text);
  if (width == 0) return "";
  // Keep width - 1 code points, then the ellipsis.
  size_t kept = 0, end = 0;
  while (end < text.size()) {
    if (!is_continuation(static_cast<unsigned char>(text[end]))) {
      if (kept == width - 1) break;
      ++kept;
    }
    ++end;
  }
  return std::string(text.substr(0, end)) + "\u2026";
}

std::string pad_right(std::string_view text, size_t width) {
  std::string padded(text);
  size_t used = display_width(text);
  if (used < width) padded.append(width - used, ' ');
  return padded;
}

std::string pad_left(std::string_view text, size_t width) {
  size_t used = display_width(text);
  std::string padded(used < width ? width - used : 0, ' ');
  padded.append(text);
  return padded;
}

}  // namespace gshare::top
