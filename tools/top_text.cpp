#include "tools/top_text.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include "tools/top_columns.h"
#include "tools/top_format.h"

namespace gshare::top {

namespace {

constexpr const char* kColumnSeparator = " ";

std::string cell_text(const Column& column, const ProcessView& row) {
  return sanitize_for_terminal(column.format(row));
}

// The columns a frame shows and their widths, the same for every GPU's
// table so that they line up.
struct Layout {
  std::vector<const Column*> columns;
  std::vector<size_t> widths;
};

// Widest cell or header of a flexible column over the whole frame.
size_t natural_width(const Column& column, const Frame& frame) {
  size_t widest = display_width(column.header);
  for (const GpuView& gpu : frame.gpus)
    for (const ProcessView& row : gpu.processes)
      widest = std::max(widest, display_width(cell_text(column, row)));
  return widest;
}

size_t flexible_floor(const Column& column) {
  return std::max(kFlexibleMinWidth, display_width(column.header));
}

// The room a flexible column should keep before other columns give way:
// enough to tell commands apart, or all it needs if that is less.
size_t flexible_wanted(const Column& column, const Frame& frame) {
  size_t wanted = std::min(natural_width(column, frame), kFlexibleWantedWidth);
  return std::max(flexible_floor(column), wanted);
}

// A row of `columns`, with separators and the flexible ones as they want.
size_t wanted_row(const std::vector<const Column*>& columns, const Frame& frame) {
  size_t total = 0;
  for (const Column* column : columns) {
    if (total) total += 1;
    total += column->width != 0 ? column->width : flexible_wanted(*column, frame);
  }
  return total;
}

// Leaves out the columns that give way first (Column::hide_order) until a
// row fits `width`, or only columns that never give way are left.
std::vector<const Column*> shown_columns(const Frame& frame, size_t width) {
  std::vector<const Column*> shown;
  for (const Column& column : process_columns()) shown.push_back(&column);
  while (width != 0 && wanted_row(shown, frame) > width) {
    auto first_to_go = std::max_element(
        shown.begin(), shown.end(),
        [](const Column* a, const Column* b) { return a->hide_order < b->hide_order; });
    if ((*first_to_go)->hide_order == 0) break;
    shown.erase(first_to_go);
  }
  return shown;
}

Layout layout_for(const Frame& frame, size_t width) {
  Layout layout;
  layout.columns = shown_columns(frame, width);
  size_t fixed = 0, flexible = 0;
  for (const Column* column : layout.columns) {
    fixed += column->width + (layout.widths.empty() ? 0 : 1);
    flexible += column->width == 0;
    layout.widths.push_back(column->width);
  }
  size_t room = width > fixed ? width - fixed : 0;
  for (size_t i = 0; i < layout.columns.size(); ++i) {
    const Column& column = *layout.columns[i];
    if (column.width != 0) continue;
    size_t natural = natural_width(column, frame);
    if (width == 0) {
      layout.widths[i] = natural;
      continue;
    }
    layout.widths[i] = std::min(natural, std::max(flexible_floor(column), room / flexible));
  }
  return layout;
}

std::string aligned(const std::string& text, size_t width, Align align, bool flexible) {
  std::string fitted = flexible ? truncate_to_width(text, width) : text;
  return align == Align::kLeft ? pad_right(fitted, width) : pad_left(fitted, width);
}

std::string trim_right(std::string text) {
  text.erase(text.find_last_not_of(' ') + 1);
  return text;
}

std::string header_row(const Layout& layout) {
  std::string line;
  for (size_t i = 0; i < layout.columns.size(); ++i) {
    const Column& column = *layout.columns[i];
    if (i) line += kColumnSeparator;
    line += aligned(column.header, layout.widths[i], column.align, column.width == 0);
  }
  return trim_right(line);
}

std::string process_row(const ProcessView& row, const Layout& layout) {
  std::string line;
  for (size_t i = 0; i < layout.columns.size(); ++i) {
    const Column& column = *layout.columns[i];
    if (i) line += kColumnSeparator;
    line += aligned(cell_text(column, row), layout.widths[i], column.align, column.width == 0);
  }
  return trim_right(line);
}

// "GPU-8ba0ab12-…-0123456789ab" is too wide for a narrow terminal; its start
// and end are enough to tell GPUs apart.
std::string abbreviated_uuid(const std::string& uuid) {
  if (display_width(uuid) <= 13) return uuid;
  // Re-sanitised: a cut through a multi-byte character becomes '?'.
  return sanitize_for_terminal(uuid.substr(0, 8)) + "\u2026" +
         sanitize_for_terminal(uuid.substr(uuid.size() - 4));
}

std::string gpu_header(const shm::GpuSnapshot& gpu, size_t process_count, const std::string& uuid,
                       bool with_handovers) {
  double percent = gpu.capacity_bytes ? 100.0 * double(gpu.reserved_bytes) / double(gpu.capacity_bytes) : 0.0;
  char share[32];
  snprintf(share, sizeof share, "%.1f%%", percent);
  std::string line = "GPU " + uuid + "  capacity " + format_bytes(gpu.capacity_bytes) +
                     "  reserved " + format_bytes(gpu.reserved_bytes) + " (" + share +
                     ")  processes " + std::to_string(process_count) + "  policy " +
                     sanitize_for_terminal(gpu.policy);
  if (with_handovers) line += "  handovers " + std::to_string(gpu.handovers);
  return line;
}

// Narrower forms for a narrow terminal: the UUID shortened, then without the
// handover count (the live view clips whatever is still too wide).
std::string gpu_header_line(const GpuView& view, size_t width) {
  std::string uuid = sanitize_for_terminal(view.gpu.uuid);
  size_t count = view.processes.size();
  std::string line = gpu_header(view.gpu, count, uuid, true);
  if (width == 0 || display_width(line) <= width) return line;
  line = gpu_header(view.gpu, count, abbreviated_uuid(uuid), true);
  if (display_width(line) <= width) return line;
  return gpu_header(view.gpu, count, abbreviated_uuid(uuid), false);
}

std::string no_processes_message(const Frame& frame) {
  std::string where = sanitize_for_terminal(frame.dir);
  if (!frame.dir_error.empty()) where += ": " + frame.dir_error;
  return "no gshare processes (looked in " + where + ")";
}

}  // namespace

std::vector<TextLine> render_text(const Frame& frame, size_t width) {
  using Kind = TextLine::Kind;
  std::vector<TextLine> lines;
  Layout layout = layout_for(frame, width);
  for (const GpuView& view : frame.gpus) {
    if (!view.gpu.error.empty()) {
      if (!lines.empty() && lines.back().kind == Kind::kProcess) lines.push_back({Kind::kBlank, ""});
      lines.push_back({Kind::kRegionError, "GPU " + sanitize_for_terminal(view.gpu.path) + ": " +
                                               sanitize_for_terminal(view.gpu.error)});
      continue;
    }
    if (view.processes.empty()) continue;
    if (!lines.empty()) lines.push_back({Kind::kBlank, ""});
    lines.push_back({Kind::kGpu, gpu_header_line(view, width)});
    lines.push_back({Kind::kColumnHeader, header_row(layout)});
    for (const ProcessView& row : view.processes)
      lines.push_back({Kind::kProcess, process_row(row, layout)});
  }
  if (frame.process_count() == 0) lines.push_back({Kind::kMessage, no_processes_message(frame)});
  return lines;
}

std::string title_line(const Frame& frame, double delay_seconds) {
  time_t seconds = time_t(frame.timestamp_unix_ns / 1000000000ull);
  tm local;
  localtime_r(&seconds, &local);
  char clock[16];
  strftime(clock, sizeof clock, "%H:%M:%S", &local);
  char every[32];
  snprintf(every, sizeof every, "%g", delay_seconds);
  return "gshare-top  " + sanitize_for_terminal(frame.dir) + "  every " + every + " s  " + clock;
}

std::string join_lines(const std::vector<TextLine>& lines) {
  std::string text;
  for (const TextLine& line : lines) text += line.text + "\n";
  return text;
}

}  // namespace gshare::top
