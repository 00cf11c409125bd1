// Opening, creating and validating the arbiter region file.
//
// Creation is race-free without a daemon: the creator builds the whole
// region in a private temporary file with an unpredictable name, then
// publishes it with a rename that never replaces an existing file, which
// fails if another process published first. So the file at the region's path
// is always fully initialised, and a creator killed half-way leaves only a
// stray temporary file.
//
// The region's directory is usually shared by every user (/dev/shm), so a
// file at the region's path is trusted only if it could not have been
// written by anyone the caller does not trust (region_file_trusted): any
// process that can write the region can lift the others' quotas, hold the
// lock or fake a busy token holder.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "base/clock.h"
#include "shm/layout.h"

namespace gshare::shm {

inline constexpr size_t kPathChars = 512;
// Room for a path of a long GSHARE_DIR and a sentence about it.
inline constexpr size_t kErrorChars = 768;

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

// Beside a region's path, what is no region to read: a region being
// created ("<path>.tmp.<random>") and one of another layout being removed
// ("<path>.old.<pid>.<time>").
inline constexpr const char* kCreatingMark = ".tmp.";
inline constexpr const char* kRemovingMark = ".old.";

// Opens the region of GPU `uuid`, creating it with `capacity_bytes` if it does
// not exist. On failure (foreign version, corrupt, a lock word that is not
// plausible, permissions, a file the caller may not trust) returns false and
// writes one explanatory sentence to `error`.
bool open_or_create_region(const RegionAccess& access, const char* uuid,
                           uint64_t capacity_bytes, RegionFile* out,
                           char* error, size_t error_len);

// Opens an existing region read-only (gshare-top) and checks its header,
// without mapping it: `out->region` stays null and the caller reads the file
// with pread(), so that a region its owner truncates meanwhile gives a short
// read, never SIGBUS. Never writes to it and never blocks: anything but a
// regular file (a FIFO named like a region) is refused.
bool open_region_read_only(const char* path, RegionFile* out, char* error,
                           size_t error_len);

void close_region(RegionFile* file);

// Whether a lock of the region's mutex failed in this process (timed out,
// or its words were not plausible: shm/robust_mutex.h), so that the region
// cannot be used from now on. If so, one sentence naming the region and the
// reason goes to `why`.
bool region_lock_unusable(const RegionFile& file, char* why, size_t why_len);

// Checks the header of a mapped file of `file_bytes` bytes. False, with the
// reason in `why`, for a foreign version, a bad size or a corrupt field.
bool header_is_valid(const RegionHeader& header, uint64_t file_bytes,
                     char* why, size_t why_len);


// Whether a user is in a group, by the user database (NSS).
enum class Membership { kMember, kNotMember, kUnknownUser };
Membership group_membership(uid_t uid, gid_t gid);

// Whom the caller trusts with a region: itself, and with GSHARE_GROUP the
// members of that group.
struct RegionTrust {
  uid_t self;
  bool group_given = false;
  gid_t group = 0;
  Membership (*membership)(uid_t, gid_t) = group_membership;
};

// The rule for joining a region, checked on fstat() of the opened file: a
// regular file, never writable by others; owned by the caller and
// group-writable only when its group is GSHARE_GROUP's; or, with
// GSHARE_GROUP, owned by root or a member of that group, of that group and
// mode exactly 0660. An owner the user database does not know (a container
// without /etc/passwd) counts as a member: only a member can give a file its
// group, except through a set-group-ID directory of that group. False, with
// the reason in `why`, otherwise.
bool region_file_trusted(const struct stat& st, const RegionTrust& trust, char* why,
                         size_t why_len);

// Reads exactly `bytes` at `offset` (pread, retried on EINTR and short
// reads); false on an error or the end of the file: a file that shrank.
bool read_exactly(int fd, void* into, size_t bytes, off_t offset);

}  // namespace gshare::shm
