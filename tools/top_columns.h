// The columns of gshare-top's process table, one row each in
// process_columns() (top_columns.cpp). To add a column, add a row there: a
// header, a one-line description (shown by --help), a width, an alignment, a
// function that formats one process and when it gives way on a narrow
// terminal. The text view lays out whatever the table holds.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "tools/top_sample.h"

namespace gshare::top {

enum class Align { kLeft, kRight };

struct Column {
  const char* header;
  const char* description;
  // Columns on screen. 0: the column is flexible; it takes the room the
  // terminal leaves, and is cut (ending in "…") when that is too little.
  size_t width;
  Align align;
  std::string (*format)(const ProcessView& row);
  // 0: always shown. Otherwise, when a row would not fit the terminal, the
  // columns with the largest hide_order are left out first, so that a
  // narrow terminal shows whole columns rather than rows cut at the edge.
  int hide_order;
};

std::span<const Column> process_columns();

// A flexible column is never narrower than this (or its header).
inline constexpr size_t kFlexibleMinWidth = 8;
// Columns that may give way do so before a flexible column gets narrower
// than this (or than its widest cell, if that is less).
inline constexpr size_t kFlexibleWantedWidth = 24;

}  // namespace gshare::top
