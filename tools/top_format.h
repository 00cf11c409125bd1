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

// Replaces what a terminal would interpret (C0/C1 controls, DEL, malformed
// UTF-8) by '?'. Region contents are written by other processes and must not
// be able to move the cursor or change the title.
std::string sanitize_for_terminal(std::string_view text);

// Columns `text` takes on screen (code points).
size_t display_width(std::string_view text);

// `text` cut to at most `width` columns, ending in "…" when something was cut.
std::string truncate_to_width(std::string_view text, size_t width);

// `text` padded with spaces to `width` columns, on the right or the left.
std::string pad_right(std::string_view text, size_t width);
std::string pad_left(std::string_view text, size_t width);

}  // namespace gshare::top
