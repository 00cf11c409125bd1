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

// A row cut at the edge when even the columns that never give way do not
// fit `width` (0: no limit), so that no row runs past the terminal.
std::string fitted_row(const std::string& line, size_t width) {
  return width != 0 && display_width(line) > width ? truncate_to_width(line, width) : line;
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

// Continuation lines of a wrapped header or lanes line start with this.
constexpr const char* kContinuationIndent = "    ";

// `items` joined by `separator` on one line or, when that is wider than
// `width` (0: no limit), over as many as needed, breaking only between
// items, so that nothing is lost at the edge of a narrow terminal.
std::vector<std::string> wrapped(const std::vector<std::string>& items, const char* separator,
                                 size_t width) {
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& item : items) {
    if (line.empty()) {
      line = item;
      continue;
    }
    std::string longer = line + separator + item;
    if (width == 0 || display_width(longer) <= width) {
      line = std::move(longer);
      continue;
    }
    lines.push_back(std::move(line));
    line = kContinuationIndent + item;
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

std::string percent_of(uint64_t part, uint64_t whole) {
  double percent = whole ? 100.0 * double(part) / double(whole) : 0.0;
  char text[32];
  snprintf(text, sizeof text, "(%.1f%%)", percent);
  return text;
}

bool any_provisional(const GpuView& view) {
  for (const ProcessView& row : view.processes)
    if (row.process.memory_provisional) return true;
  return false;
}

// The left side of the safety condition ΣP + Σ_lanes max E <= C against C:
// "~" while some job's P or E may still move, OVER when it does not hold.
std::string safety_item(const GpuView& view) {
  const shm::GpuSnapshot& gpu = view.gpu;
  std::string item = "safety " + format_bytes(gpu.safety_bytes) +
                     (any_provisional(view) ? "~ " : " ") +
                     percent_of(gpu.safety_bytes, gpu.capacity_bytes);
  if (gpu.safety_bytes > gpu.capacity_bytes) item += " OVER";
  return item;
}

std::vector<std::string> gpu_header_items(const GpuView& view, const std::string& uuid) {
  const shm::GpuSnapshot& gpu = view.gpu;
  std::vector<std::string> items = {
      "GPU " + uuid,
      "capacity " + format_bytes(gpu.capacity_bytes),
      "reserved " + format_bytes(gpu.reserved_bytes) + " " +
          percent_of(gpu.reserved_bytes, gpu.capacity_bytes),
      safety_item(view),
      "processes " + std::to_string(view.processes.size()),
  };
  if (gpu.memory_waiters != 0) items.push_back("memory waiters " + std::to_string(gpu.memory_waiters));
  items.push_back("policy " + sanitize_for_terminal(gpu.policy));
  items.push_back("handovers " + std::to_string(gpu.handovers));
  // What a switch costs (scheduler/token.h): grant to the new holder's
  // first launch, mean and largest; left out before the first.
  if (gpu.switches != 0)
    items.push_back("switch mean " + format_duration(gpu.switch_ns_total / gpu.switches) + " max " +
                    format_duration(gpu.switch_ns_max));
  return items;
}

// On a narrow terminal the UUID is shortened first, then the line wraps
// (the live view clips whatever is still too wide).
std::vector<std::string> gpu_header_lines(const GpuView& view, size_t width) {
  std::string uuid = sanitize_for_terminal(view.gpu.uuid);
  std::vector<std::string> lines = wrapped(gpu_header_items(view, uuid), "  ", width);
  if (lines.size() == 1) return lines;
  return wrapped(gpu_header_items(view, abbreviated_uuid(uuid)), "  ", width);
}

// "0 [1234* 1240] E 3.00 GiB": a lane's members by pid, under pack the
// holder of the lane's token starred (as in TOKEN), and the lane's
// ephemeral space, "~" while a member's E may still move.
std::string lane_item(const shm::LaneSnapshot& lane, const GpuView& view) {
  std::string members;
  bool provisional = false;
  for (const ProcessView& row : view.processes) {  // by pid
    const shm::ProcessSnapshot& p = row.process;
    if (std::find(lane.slots.begin(), lane.slots.end(), p.slot) == lane.slots.end()) continue;
    if (!members.empty()) members += " ";
    members += std::to_string(p.pid);
    if (int32_t(p.slot) == lane.holder_slot) members += "*";
    provisional = provisional || p.memory_provisional;
  }
  return std::to_string(lane.lane) + " [" + members + "] E " + format_bytes(lane.ephemeral_bytes) +
         (provisional ? "~" : "");
}

// "lanes: 0 [1234 1240] E 3.00 GiB · 1 [1250] E 512.0 MiB"; nothing before
// any job is placed.
std::vector<std::string> lanes_lines(const GpuView& view, size_t width) {
  std::vector<std::string> items;
  for (const shm::LaneSnapshot& lane : view.gpu.lanes) items.push_back(lane_item(lane, view));
  if (items.empty()) return {};
  items[0] = "lanes: " + items[0];
  return wrapped(items, " \u00b7 ", width);
}

// "waits: 1234 for its lane held by 1240; 1240 for the token held by 1250":
// who waits for whom (Slot::blocked_by, the token's holder), so that a
// chain of waits, or a cycle, shows at a glance; nothing while no job waits
// in an allocation.
std::vector<std::string> wait_lines(const GpuView& view, size_t width) {
  const shm::GpuSnapshot& gpu = view.gpu;
  auto pid_of_slot = [&](int32_t slot) -> int32_t {
    for (const ProcessView& row : view.processes)
      if (int32_t(row.process.slot) == slot) return row.process.pid;
    return -1;
  };
  const int32_t holder = pid_of_slot(gpu.holder_slot);
  std::vector<std::string> items;
  std::vector<int32_t> blockers;
  for (const ProcessView& row : view.processes) {
    const shm::ProcessSnapshot& p = row.process;
    if (p.admission == "admitted" || p.blocked_by_pid < 0) continue;
    const char* what = p.admission == "waiting for lane"     ? "its lane"
                       : p.admission == "waiting for memory" ? "memory"
                                                             : "admission, on memory";
    items.push_back(std::to_string(p.pid) + " for " + what + " held by " + std::to_string(p.blocked_by_pid));
    blockers.push_back(p.blocked_by_pid);
  }
  for (const ProcessView& row : view.processes) {
    const shm::ProcessSnapshot& p = row.process;
    bool blocks = std::find(blockers.begin(), blockers.end(), p.pid) != blockers.end();
    if (blocks && p.job_state == shm::kJobWaiting && holder >= 0 && holder != p.pid)
      items.push_back(std::to_string(p.pid) + " for the token held by " + std::to_string(holder));
  }
  if (items.empty()) return {};
  items[0] = "waits: " + items[0];
  return wrapped(items, "; ", width);
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
    for (std::string& line : gpu_header_lines(view, width)) lines.push_back({Kind::kGpu, std::move(line)});
    for (std::string& line : lanes_lines(view, width)) lines.push_back({Kind::kLanes, std::move(line)});
    for (std::string& line : wait_lines(view, width)) lines.push_back({Kind::kLanes, std::move(line)});
    lines.push_back({Kind::kColumnHeader, fitted_row(header_row(layout), width)});
    for (const ProcessView& row : view.processes)
      lines.push_back({Kind::kProcess, fitted_row(process_row(row, layout), width)});
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
