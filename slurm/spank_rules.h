// What the Slurm plugin decides, apart from Slurm itself: its options and
// the GSHARE_* variable each one sets, their checks, its plugstack.conf
// arguments and the job's LD_PRELOAD. Testable without Slurm
// (spank_rules_test.cpp); gshare_spank.c only carries these to and from
// Slurm's SPANK calls.
//
// The checks are the preload's own parsers (base/options.h,
// option_value_is_valid): a value the plugin lets through is one cuInit
// accepts, and one it refuses is one cuInit would have refused, only later,
// on the node, after the job waited in the queue.
//
// C linkage: the glue is C because <slurm/spank.h>'s SPANK_PLUGIN defines
// the symbols Slurm's loader looks up as C objects.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// One option of srun, sbatch and salloc.
struct gshare_spank_option {
  const char* name;      // without "--": "gpu-mem"
  const char* arginfo;   // the argument in --help: "SIZE|PCT"
  const char* variable;  // the GSHARE_* variable it sets in the job
  const char* usage;     // the --help text
};

// The options, in a fixed order: an option's index is its SPANK `val`.
const struct gshare_spank_option* gshare_spank_options(size_t* count);

// 1 if `value` is valid for option `index`. Otherwise 0, with one sentence
// in `error` naming the option, the value (escaped: it goes to a terminal)
// and what is accepted: "--gpu-mem=lots is not valid; accepted: ...".
int gshare_spank_check_option(size_t index, const char* value, char* error, size_t error_len);

enum { GSHARE_SPANK_TEXT_CHARS = 256, GSHARE_SPANK_PATH_CHARS = 4096 };

// The plugin's arguments in plugstack.conf.
struct gshare_spank_config {
  char dir[GSHARE_SPANK_TEXT_CHARS];    // dir=: GSHARE_DIR for the jobs; "" to leave it
  char group[GSHARE_SPANK_TEXT_CHARS];  // group=: GSHARE_GROUP for the jobs; "" to leave it
  char lib[GSHARE_SPANK_PATH_CHARS];    // lib=: the libgshare.so to preload
  int all;                              // all=1: every job gets the preload, not only those
                                        // that gave a --gpu-* option
};

// Reads `argc` arguments of the form key=value (dir, group, lib, all).
// `default_lib` is the library's installed path, used without lib=. Returns 1,
// or 0 with one sentence in `error` naming the argument and what is accepted.
int gshare_spank_parse_config(int argc, char* const* argv, const char* default_lib,
                              struct gshare_spank_config* out, char* error, size_t error_len);

// The job's LD_PRELOAD: `lib` first, then `existing` (NULL or "" when the
// job has none) without any entry that already names a libgshare.so of the
// same file name (this one or another copy: two copies of the hooks must
// never run in one process). Entries are separated by ':' or ' ', as the
// dynamic loader reads them. Returns 1, or 0 when `out` is too small.
int gshare_spank_preload(const char* existing, const char* lib, char* out, size_t out_len);

#ifdef __cplusplus
}
#endif
