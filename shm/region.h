// Opening, creating and validating the arbiter region file.
//
// Creation is race-free without a daemon: the creator builds the whole
// region in a private temporary file, then publishes it with link(), which
// fails if another process published first. So the file at the region's
// path is always fully initialised, and a creator killed half-way leaves only
// a stray temporary file.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "shm/layout.h"

namespace gshare::shm {

inline constexpr size_t kPathChars = 512;
inline constexpr size_t kErrorChars = 320;

struct RegionAccess {
  const char* dir;     // GSHARE_DIR
  const char* group;   // GSHARE_GROUP, or nullptr: mode 0600 instead of 0660
};

struct RegionFile {
  Region* region = nullptr;
  int fd = -1;
  bool writable = false;
  char path[kPathChars] = {};
};

// "<dir>/gshare-<uuid>". False if it does not fit.
bool region_path(const char* dir, const char* uuid, char* out, size_t out_len);

// Opens the region of GPU `uuid`, creating it with `capacity_bytes` if it does
// not exist. On failure (foreign version, corrupt, a lock word that is not
// plausible, permissions) returns false and writes one explanatory sentence
// to `error`.
bool open_or_create_region(const RegionAccess& access, const char* uuid,
                           uint64_t capacity_bytes, RegionFile* out,
                           char* error, size_t error_len);

// Opens an existing region read-only (gshare-top). Never writes to it.
bool open_region_read_only(const char* path, RegionFile* out, char* error,
                           size_t error_len);

void close_region(RegionFile* file);

// Whether a lock of the region's mutex failed in this process (timed out,
// or its words were not plausible: shm/robust_mutex.h), so that the region
// cannot be used from now on. If so, one sentence naming the region and the
// reason goes to `why`.
bool region_lock_unusable(const RegionFile& file, char* why, size_t why_len);

// Wall-clock time in ns since the epoch: the region's timestamps, which
// other processes (gshare-top) read, use this clock.
uint64_t unix_now_ns();
// CLOCK_MONOTONIC in ns: the scheduler's clock (*_mono_ns fields), shared by
// every process on the host and never stepped.
uint64_t mono_now_ns();

// Checks the header of a mapped file of `file_bytes` bytes. False, with the
// reason in `why`, for a foreign version, a bad size or a corrupt field.
bool header_is_valid(const RegionHeader& header, uint64_t file_bytes,
                     char* why, size_t why_len);

}  // namespace gshare::shm
