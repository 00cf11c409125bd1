// Text helpers of gshare-top: sizes and rates as people read them, and
// strings made safe and narrow enough for a terminal.
//
// Widths are counted in code points, which is right for the ASCII and Latin
// text of commands and UUIDs; a double-width character (CJK) may shift a row
// by a column, which is not worth a locale-dependent wcwidth().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gshare::top {

// Binary units, three significant digits: "0 B", "512 B", "1.50 GiB",
// "512.0 MiB", "141.0 GiB".
std::string format_bytes(uint64_t bytes);

// Launches per second: "0", "12.5", "48210", "1.3M".
std::string format_rate(double per_second);

// A length of time, three significant digits, 7 columns at most below 1000
// hours: "0", "850us", "42.1ms", "1.25s", "42.1s", "1m05s", "3h07m". Below a
// microsecond "<1us", so a nonzero time never reads as nothing.
std::string format_duration(uint64_t ns);

// A fraction 0..1 as a percentage with one decimal, without the sign (the
// column header has it): "0.0", "42.5", "100.0".
std::string format_percent(double fraction);

// Replaces what a terminal would interpret (C0/C1 controls, DEL, malformed
// UTF-8) by '?'. Region contents are written by other processes and must not
// be able to move the cursor or change the title. The rule is gshare's one
// escaping rule (gshare::printable_length, base/log.h), which its
// messages on stderr follow too.
std::string sanitize_for_terminal(std::string_view text);

// Columns `text` takes on screen (code points).
size_t display_width(std::string_view text);

// `text` cut to at most `width` columns, ending in "…" when something was cut.
std::string truncate_to_width(std::string_view text, size_t width);

// `text` padded with spaces to `width` columns, on the right or the left.
std::string pad_right(std::string_view text, size_t width);
std::string pad_left(std::string_view text, size_t width);

}  // namespace gshare::top
