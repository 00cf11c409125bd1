// Every GSHARE_* variable, in one table (options.cpp): name, type, default,
// one-line description. Parsed once, at cuInit, from the environment.
//
// A bad value is never ignored: parse_options fails with one sentence naming
// the variable, the bad value (escaped: it goes to a terminal) and the
// accepted forms, and cuInit then returns CUDA_ERROR_INVALID_VALUE. Numbers
// are plain decimal only. An unknown GSHARE_* name close to a known one (a
// typo such as GSHARE_MEM_LIMT=4GiB, which must not silently run without a
// limit) is an error too; any other unknown GSHARE_* name gets one warning
// and is ignored.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/log.h"
#include "base/policy_names.h"

namespace gshare {

// A size as the user wrote it: bytes, or a percentage of the GPU's memory,
// which is only known once a device is in use.
struct SizeSpec {
  enum Kind { kUnset, kBytes, kPercent } kind = kUnset;
  uint64_t bytes = 0;
  double percent = 0;
  char text[40] = "";  // as written, for messages

  // The size in bytes on a GPU of `gpu_bytes`; `gpu_bytes` when unset. May
  // exceed `gpu_bytes` (quota_on_gpu clamps).
  uint64_t resolve(uint64_t gpu_bytes) const;
};

// The quota `limit` gives on a GPU of `gpu_bytes`, at most the whole GPU. A
// size beyond the GPU gets one warning per process naming the value and
// the GPU's size.
uint64_t quota_on_gpu(const SizeSpec& limit, uint64_t gpu_bytes);

inline constexpr size_t kOptionTextChars = 256;

// GSHARE_SHARED_TURNS: which jobs under fair may share a turn
// (scheduler/token.h, beside).
enum class SharedTurns : uint8_t {
  kOff,        // off: every turn is one job's
  kHostBound,  // on: jobs whose host work leaves the GPU mostly idle
  kGaps,       // gaps: those, and busy jobs whose kernels leave the GPU gaps two to a turn
  kPairs,      // pairs: host-bound jobs, and any busy job two to a turn
};

struct Options {
  bool disable = false;
  SizeSpec mem_limit;
  char dir[kOptionTextChars] = "/dev/shm";
  char group[kOptionTextChars] = "";
  LogLevel log_level = LogLevel::kWarn;
  // Scheduling (scheduler/token.h).
  // GSHARE_POLICY, by parse_policy; kPrefetch when not given and paging is on.
  Policy policy = Policy::kFair;
  bool policy_given = false;  // GSHARE_POLICY was set: a different region policy is worth a warning
  double quantum_ms = 20;  // measured: README, "Measured results"
  bool quantum_given = false;  // GSHARE_QUANTUM_MS was set: kept among many jobs
  uint32_t weight = 1;
  int32_t priority = 0;
  double expected_seconds = 0;  // 0: not given
  uint64_t expected_iters = 0;  // 0: not given
  double idle_ms = 100;
  bool strict_handover = false;
  double slice_max_ms = 200;
  SharedTurns shared_turns = SharedTurns::kGaps;
  // Memory admission (allocator/admission.h).
  double admit_timeout_s = 600;
  // Paging to host memory (allocator/pager.h).
  bool paging = false;
  uint64_t host_mem_limit_bytes = 0;  // 0: half of the host's memory
  bool prefetch = true;
  // Unknown GSHARE_* names that are no typo of a known one, ignored after
  // one warning: how many, and their list (escaped, comma-separated, "…"
  // when it does not fit).
  unsigned ignored_count = 0;
  char ignored[kOptionTextChars] = "";
};

struct OptionInfo {
  const char* name;
  const char* type;
  const char* default_value;
  const char* description;
};

// The table, for the README and `gshare-top --help-env`.
const OptionInfo* option_table(size_t* count);

// Parses the GSHARE_* entries of a NULL-terminated environment array.
// Returns false with one explanatory sentence in `error` on the first problem.
// Writes the one warning about ignored names itself (unless the parsed
// GSHARE_LOG silences warnings).
bool parse_options(const char* const* environment, Options* out, char* error, size_t error_len);

// Checks one variable's value alone, with the parser parse_options uses for
// it: true if it would accept `value`. Otherwise false, with *accepted (when
// not null) set to the forms it takes (for a message), or to nullptr when
// `name` is not one of the table's. For front ends that take the settings
// under other names (the Slurm plugin's --gpu-mem) and must refuse what
// the preload would.
bool option_value_is_valid(const char* name, const char* value, const char** accepted);

// Single-value parsers, exposed for tests.
bool parse_size(const char* text, SizeSpec* out);
bool parse_bool(const char* text, bool* out);

}  // namespace gshare
