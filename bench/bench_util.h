// What the benchmark programs share: error checks that name the program,
// argument parsing, medians.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace bench {

// The program's name, for its messages; main sets it first.
inline const char*& program() {
  static const char* name = "bench";
  return name;
}

inline void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(result, &name);
  fprintf(stderr, "%s: %s failed: %s (%d)\n", program(), call, name ? name : "unknown error",
          int(result));
  exit(1);
}

inline unsigned long parse_count(const char* option, const char* text) {
  char* end = nullptr;
  unsigned long value = strtoul(text, &end, 10);
  if (!*text || *end || value == 0) {
    fprintf(stderr, "%s: %s needs a positive integer, got '%s'\n", program(), option, text);
    exit(2);
  }
  return value;
}

// For an even count, the mean of the two middle values (as
// bench/benchlib/stats.py), not the upper one; 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

}  // namespace bench

#define CHECK(call) ::bench::check((call), #call)
