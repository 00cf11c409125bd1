// The Prometheus view of the regions: one text exposition (format 0.0.4) of
// every GPU and process, what `gshare-top --prometheus` prints and
// `gshare-top --serve` answers on /metrics. Rendered from one snapshot, so
// a scrape needs no second sample: rates are Prometheus's to take from the
// counters. The metric table is in top_prometheus.cpp and the README
// (gshare-top, Prometheus).
#pragma once

#include <string>
#include <vector>

#include "shm/snapshot.h"

namespace gshare::top {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// The exposition of `gpus` (as snapshot_regions returns them) read from
// `dir`; `dir_error` non-empty: `dir` itself could not be read. Ends with a
// newline. A region that cannot be read is a metric, never an exception.
std::string render_prometheus(const std::vector<shm::GpuSnapshot>& gpus, const std::string& dir,
                              const std::string& dir_error);

// `text` as a label value between double quotes: backslash, double quote
// and newline escaped, and bytes that are not UTF-8 (a command line is any
// bytes) replaced by U+FFFD, which Prometheus would otherwise reject.
std::string prometheus_label_value(const std::string& text);

// The program name of a command line as the regions keep it (arguments
// joined by spaces): the last path component of its first word.
std::string short_command(const std::string& command_line);

// Every metric name a sample line of render_prometheus can carry (a
// summary's name_sum and name_count), in its order: what a dashboard may
// query.
std::vector<std::string> prometheus_sample_names();

}  // namespace gshare::top
