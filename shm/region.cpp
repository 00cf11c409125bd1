#include "shm/region.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/group_text.h"
#include "base/log.h"
#include "shm/robust_mutex.h"

namespace gshare::shm {

namespace {

// Never follow a symlink planted at the path, never block on a FIFO or a
// device, never take a terminal as controlling one.
constexpr int kOpenFlags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

bool resolve_group(const char* name, gid_t* gid, char* error, size_t error_len) {
  group entry;
  group* found = nullptr;
  char buffer[4096];
  if (getgrnam_r(name, &entry, buffer, sizeof buffer, &found) == 0 && found) {
    *gid = found->gr_gid;
    return true;
  }
  // A numeric group id is accepted too (containers often lack /etc/group).
  if (parse_group_text(name, gid) == GroupText::kGid) return true;
  snprintf(error, error_len, "GSHARE_GROUP=%s names no group on this machine", name);
  return false;
}

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Opens `path` without following a symlink or blocking, and fstat()s what
// was opened; anything but a regular file is refused.
int open_regular(const char* path, int access_mode, struct stat* st, char* error,
                 size_t error_len) {
  int fd = open(path, access_mode | kOpenFlags);
  if (fd < 0) {
    int open_errno = errno;
    if (open_errno == ELOOP)
      snprintf(error, error_len, "%s is a symbolic link, which gshare never follows", path);
    else
      snprintf(error, error_len, "cannot open %s: %s", path, strerror(open_errno));
    errno = open_errno;  // ENOENT tells the caller to create the region
    return -1;
  }
  if (fstat(fd, st) != 0) {
    snprintf(error, error_len, "cannot stat %s: %s", path, strerror(errno));
    close(fd);
    errno = EIO;
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    snprintf(error, error_len, "%s is %s (owner uid %u, mode %04o), not a gshare region", path,
             file_type_name(st->st_mode), unsigned(st->st_uid), unsigned(st->st_mode & 07777));
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}


void init_region(Region* r, const char* uuid, uint64_t capacity_bytes) {
  memset(static_cast<void*>(r), 0, sizeof(Region));
  RegionHeader& h = r->header;
  h.magic = kRegionMagic;
  h.layout_version = kLayoutVersion;
  h.header_bytes = sizeof(RegionHeader);
  h.region_bytes = sizeof(Region);
  h.slot_count = kMaxSlots;
  h.slot_bytes = sizeof(Slot);
  snprintf(h.gpu_uuid, sizeof h.gpu_uuid, "%s", uuid);
  h.capacity_bytes = capacity_bytes;
  h.created_unix_ns = unix_now_ns();
  new (&h.seq) std::atomic<uint32_t>(0);
  for (Slot& s : r->slots) {
    new (&s.gate) std::atomic<uint32_t>(kGateClosed);
    new (&s.gpu_waits) std::atomic<uint32_t>(0);
    new (&s.boundary_waits) std::atomic<uint32_t>(0);
    new (&s.launches) std::atomic<uint64_t>(0);
    new (&s.syncs) std::atomic<uint64_t>(0);
    new (&s.iterations) std::atomic<uint64_t>(0);
    new (&s.iteration_ns) std::atomic<uint64_t>(0);
    new (&s.iteration_launches) std::atomic<uint32_t>(0);
    new (&s.iteration_source) std::atomic<uint32_t>(kIterationsUnknown);
  }
  new (&h.token_futex) std::atomic<uint32_t>(0);
}

// Checks the header of the opened file `fd` (read with pread: a file that
// shrinks meanwhile gives a short read, not SIGBUS), then maps it whole for
// a writer. A reader (gshare-top) gets no mapping.
bool check_and_map(int fd, const struct stat& st, bool writable, RegionFile* out, char* error,
                   size_t error_len) {
  if (uint64_t(st.st_size) < sizeof(RegionHeader)) {
    snprintf(error, error_len, "%s is %lld bytes, too small to be a gshare region",
             out->path, static_cast<long long>(st.st_size));
    return false;
  }
  // The header only first: a foreign version may have another size.
  alignas(RegionHeader) unsigned char storage[sizeof(RegionHeader)];
  if (!read_exactly(fd, storage, sizeof storage, 0)) {
    snprintf(error, error_len, "cannot read %s: it shrank while it was read", out->path);
    return false;
  }
  char why[200];
  if (!header_is_valid(*reinterpret_cast<const RegionHeader*>(storage), uint64_t(st.st_size),
                       why, sizeof why)) {
    snprintf(error, error_len, "%s: %s", out->path, why);
    return false;
  }
  out->fd = fd;
  out->writable = writable;
  if (!writable) return true;
  void* whole = mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (whole == MAP_FAILED) {
    snprintf(error, error_len, "cannot map %s: %s", out->path, strerror(errno));
    out->fd = -1;
    return false;
  }
  out->region = static_cast<Region*>(whole);
  return true;
}

// Builds a complete region in a temporary file and moves it into place.
// Returns false only on a real error; losing the race is success (the caller
// opens and checks whatever is at the path then).
bool publish_new_region(const RegionAccess& access, const char* uuid, uint64_t capacity_bytes,
                        const char* path, char* error, size_t error_len) {
  // An unpredictable name, created exclusively: nobody can plant a file or
  // a symlink at it beforehand to redirect the creation or block it.
  char temp[kPathChars];
  int n = snprintf(temp, sizeof temp, "%s%sXXXXXX", path, kCreatingMark);
  if (n < 0 || size_t(n) >= sizeof temp) {
    snprintf(error, error_len, "region path too long in GSHARE_DIR=%s", access.dir);
    return false;
  }
  int fd = mkostemp(temp, O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  if (fd < 0) {
    snprintf(error, error_len, "cannot create a region in GSHARE_DIR=%s: %s", access.dir,
             strerror(errno));
    return false;
  }
  bool ok = true;
  mode_t mode = 0600;
  if (access.group && *access.group) {
    gid_t gid;
    ok = resolve_group(access.group, &gid, error, error_len);
    if (ok && fchown(fd, uid_t(-1), gid) != 0) {
      snprintf(error, error_len, "cannot give the region to GSHARE_GROUP=%s: %s",
               access.group, strerror(errno));
      ok = false;
    }
    mode = 0660;
  }
  if (ok && fchmod(fd, mode) != 0) {  // exact mode whatever the umask
    snprintf(error, error_len, "cannot set the region's mode: %s", strerror(errno));
    ok = false;
  }
  if (ok && ftruncate(fd, sizeof(Region)) != 0) {
    snprintf(error, error_len, "cannot size the region in %s: %s", access.dir, strerror(errno));
    ok = false;
  }
  void* mem = MAP_FAILED;
  if (ok) {
    mem = mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
      snprintf(error, error_len, "cannot map the new region: %s", strerror(errno));
      ok = false;
    }
  }
  if (ok) {
    Region* r = static_cast<Region*>(mem);
    init_region(r, uuid, capacity_bytes);
    if (!robust_mutex_init(&r->header.lock)) {
      snprintf(error, error_len, "cannot create a process-shared robust mutex");
      ok = false;
    }
    munmap(mem, sizeof(Region));
  }
  close(fd);
  if (ok) {
    // Never replaces what is at the path: a region another process
    // published meanwhile, or anything planted there, stays, and the open
    // that follows decides whether it may be joined.
    int rc = renameat2(AT_FDCWD, temp, AT_FDCWD, path, RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      rc = link(temp, path);  // a file system without RENAME_NOREPLACE
    }
    if (rc != 0 && errno != EEXIST) {
      snprintf(error, error_len, "cannot publish the region %s: %s", path, strerror(errno));
      ok = false;
    }
  }
  unlink(temp);  // gone after a rename; the second name after link()
  return ok;
}

// Whether the file `fd` is a gshare region of another layout version, and
// whether a process holds it (a liveness lock on any of its bytes,
// shm/liveness.h). Every layout begins with the magic number and the
// version, so this needs nothing else of the other layout.
enum class ForeignRegion { kNot, kInUse, kUnused, kUnknown };
ForeignRegion foreign_region_use(int fd, uint32_t* version) {
  struct Identity {
    uint64_t magic;
    uint32_t layout_version;
  } id{};
  static_assert(offsetof(RegionHeader, magic) == 0 && offsetof(RegionHeader, layout_version) == 8,
                "every layout starts with its magic number and version");
  if (!read_exactly(fd, &id, sizeof id, 0) || id.magic != kRegionMagic || id.layout_version == kLayoutVersion)
    return ForeignRegion::kNot;
  *version = id.layout_version;
  struct flock any{};
  any.l_type = F_WRLCK;
  any.l_whence = SEEK_SET;  // l_start 0, l_len 0: every byte, to the end and past it
  if (fcntl(fd, F_GETLK, &any) != 0) return ForeignRegion::kUnknown;
  return any.l_type == F_UNLCK ? ForeignRegion::kUnused : ForeignRegion::kInUse;
}

// Appends "; `note`" to the sentence in `error`, if it fits.
void append_note(char* error, size_t error_len, const char* note) {
  const size_t used = strlen(error);
  if (*note && used + 2 < error_len) snprintf(error + used, error_len - used, "; %s", note);
}

// A region of another layout version that no process holds: what an
// upgrade of gshare leaves in GSHARE_DIR, which would otherwise make every
// later process run alone until someone removed the file. `fd` is open on
// `path`, `st` its fstat. Moves the file aside and removes it, and returns
// true: the caller looks at the path again. Should the file moved be
// another than `fd`'s (a new region another process published meanwhile),
// it is put back. False, with nothing done, for a region of this layout or
// a file that is not a gshare region; for a foreign region that stays,
// with why in `kept`.
bool remove_unused_foreign_region(int fd, const struct stat& st, const char* path, char* kept,
                                  size_t kept_len) {
  uint32_t version = 0;
  switch (foreign_region_use(fd, &version)) {
    case ForeignRegion::kNot:
      return false;
    case ForeignRegion::kInUse:
      snprintf(kept, kept_len, "a process of that version uses it");
      return false;
    case ForeignRegion::kUnknown:
      snprintf(kept, kept_len, "whether a process uses it is unknown: %s", strerror(errno));
      return false;
    case ForeignRegion::kUnused:
      break;
  }
  char aside[kPathChars];
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  int n = snprintf(aside, sizeof aside, "%s%s%d.%llx", path, kRemovingMark, int(getpid()),
                   static_cast<unsigned long long>(now.tv_sec) * 1000000000ull + unsigned(now.tv_nsec));
  if (n < 0 || size_t(n) >= sizeof aside) {
    snprintf(kept, kept_len, "no process uses it, but its path is too long to move it aside");
    return false;
  }
  if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) != 0) {
    if (errno == ENOENT) return true;  // another process removed it first
    snprintf(kept, kept_len, "no process uses it, but it cannot be removed: %s", strerror(errno));
    return false;
  }
  struct stat moved;
  if (lstat(aside, &moved) == 0 && moved.st_dev == st.st_dev && moved.st_ino == st.st_ino) {
    unlink(aside);
    GSHARE_INFO("removed %s: a region of layout %u that no process used (this library uses layout %u)",
                path, version, kLayoutVersion);
    return true;
  }
  if (renameat2(AT_FDCWD, aside, AT_FDCWD, path, RENAME_NOREPLACE) != 0)
    GSHARE_WARN("moved a region published meanwhile to %s and could not put it back: %s", aside,
                strerror(errno));
  return true;
}

}  // namespace

bool read_exactly(int fd, void* into, size_t bytes, off_t offset) {
  char* p = static_cast<char*>(into);
  while (bytes > 0) {
    ssize_t n = pread(fd, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= size_t(n);
    offset += n;
  }
  return true;
}

bool region_path(const char* dir, const char* uuid, char* out, size_t out_len) {
  int n = snprintf(out, out_len, "%s/gshare-%s", dir, uuid);
  return n > 0 && size_t(n) < out_len;
}

bool header_is_valid(const RegionHeader& h, uint64_t file_bytes, char* why, size_t why_len) {
  if (h.magic != kRegionMagic) {
    snprintf(why, why_len, "not a gshare region (bad magic number)");
    return false;
  }
  if (h.layout_version != kLayoutVersion) {
    snprintf(why, why_len,
             "written by another gshare version (layout %u; this library uses layout %u)",
             h.layout_version, kLayoutVersion);
    return false;
  }
  if (h.header_bytes != sizeof(RegionHeader) || h.region_bytes != sizeof(Region) ||
      h.slot_count != kMaxSlots || h.slot_bytes != sizeof(Slot)) {
    snprintf(why, why_len, "corrupt region header (sizes do not match layout %u)", kLayoutVersion);
    return false;
  }
  // Exactly the layout's size: a region is never resized, and a shorter
  // file would fault (SIGBUS) where the mapping runs past its end.
  if (file_bytes != sizeof(Region)) {
    snprintf(why, why_len, "corrupt region (%llu bytes; layout %u has %llu)",
             (unsigned long long)file_bytes, kLayoutVersion,
             (unsigned long long)sizeof(Region));
    return false;
  }
  if (memchr(h.gpu_uuid, '\0', sizeof h.gpu_uuid) == nullptr) {
    snprintf(why, why_len, "corrupt region header (GPU UUID not terminated)");
    return false;
  }
  return true;
}

Membership group_membership(uid_t uid, gid_t gid) {
  size_t size = 16384;
  char* buffer = nullptr;
  passwd entry;
  passwd* found = nullptr;
  int rc;
  for (;;) {
    buffer = static_cast<char*>(malloc(size));
    if (!buffer) return Membership::kNotMember;
    rc = getpwuid_r(uid, &entry, buffer, size, &found);
    if (rc != ERANGE || size >= (1u << 22)) break;
    free(buffer);
    size *= 4;
  }
  Membership answer = Membership::kNotMember;  // what cannot be checked is not trusted
  if (!found) {
    if (rc == 0 || rc == ENOENT || rc == ESRCH) answer = Membership::kUnknownUser;
  } else if (entry.pw_gid == gid) {
    answer = Membership::kMember;
  } else {
    int count = 256;
    gid_t* groups = nullptr;
    for (;;) {
      gid_t* grown = static_cast<gid_t*>(realloc(groups, size_t(count) * sizeof(gid_t)));
      if (!grown) break;
      groups = grown;
      int capacity = count;
      if (getgrouplist(entry.pw_name, entry.pw_gid, groups, &count) >= 0) {
        for (int i = 0; i < count; ++i)
          if (groups[i] == gid) answer = Membership::kMember;
        break;
      }
      if (count <= capacity || count > 65536) break;
    }
    free(groups);
  }
  free(buffer);
  return answer;
}

bool region_file_trusted(const struct stat& st, const RegionTrust& trust, char* why,
                         size_t why_len) {
  const mode_t mode = st.st_mode & 07777;
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, why_len, "is %s", file_type_name(st.st_mode));
    return false;
  }
  if (mode & S_IWOTH) {
    snprintf(why, why_len, "is writable by every user");
    return false;
  }
  if (st.st_uid == trust.self) {
    if (!(mode & S_IWGRP)) return true;
    if (!trust.group_given) {
      snprintf(why, why_len, "is writable by group %u, and GSHARE_GROUP is not set",
               unsigned(st.st_gid));
      return false;
    }
    if (st.st_gid != trust.group) {
      snprintf(why, why_len, "is writable by group %u, not by GSHARE_GROUP's group %u",
               unsigned(st.st_gid), unsigned(trust.group));
      return false;
    }
    return true;
  }
  if (!trust.group_given) {
    snprintf(why, why_len, "belongs to another user, and GSHARE_GROUP is not set");
    return false;
  }
  if (st.st_gid != trust.group) {
    snprintf(why, why_len, "belongs to another user and to group %u, not GSHARE_GROUP's group %u",
             unsigned(st.st_gid), unsigned(trust.group));
    return false;
  }
  if (mode != 0660) {
    snprintf(why, why_len, "belongs to another user, and a shared region's mode is 0660");
    return false;
  }
  // Root could do anything to this process anyway.
  if (st.st_uid != 0 && trust.membership(st.st_uid, trust.group) == Membership::kNotMember) {
    snprintf(why, why_len, "belongs to uid %u, who is not a member of GSHARE_GROUP's group %u",
             unsigned(st.st_uid), unsigned(trust.group));
    return false;
  }
  return true;
}

bool open_or_create_region(const RegionAccess& access, const char* uuid, uint64_t capacity_bytes,
                           RegionFile* out, char* error, size_t error_len) {
  if (!region_path(access.dir, uuid, out->path, sizeof out->path)) {
    snprintf(error, error_len, "GSHARE_DIR=%s is too long", access.dir);
    return false;
  }
  RegionTrust trust{geteuid()};
  if (access.group && *access.group) {
    if (!resolve_group(access.group, &trust.group, error, error_len)) return false;
    trust.group_given = true;
  }
  // Three looks: a region to join; else none, one created (or another
  // creator's); a foreign one removed first.
  for (int attempt = 0; attempt < 3; ++attempt) {
    struct stat st;
    int fd = open_regular(out->path, O_RDWR, &st, error, error_len);
    if (fd >= 0) {
      char why[200];
      if (!region_file_trusted(st, trust, why, sizeof why)) {
        snprintf(error, error_len, "not joining %s (owner uid %u, mode %04o): it %s", out->path,
                 unsigned(st.st_uid), unsigned(st.st_mode & 07777), why);
        close(fd);
        return false;
      }
      char kept[160] = "";
      if (remove_unused_foreign_region(fd, st, out->path, kept, sizeof kept)) {
        close(fd);
        continue;
      }
      if (!check_and_map(fd, st, true, out, error, error_len)) {
        append_note(error, error_len, kept);
        close(fd);
        return false;
      }
      if (strncmp(out->region->header.gpu_uuid, uuid, kUuidChars) != 0) {
        snprintf(error, error_len, "%s belongs to GPU %s", out->path,
                 out->region->header.gpu_uuid);
        close_region(out);
        return false;
      }
      // A lock word glibc could misbehave on is refused before anyone locks
      // it (shm/robust_mutex.h); a plausible but stale one is found by the
      // first lock, which is bounded.
      char lock_why[200];
      if (!robust_mutex_is_plausible(&out->region->header.lock, lock_why, sizeof lock_why)) {
        snprintf(error, error_len, "the lock of %s is unusable: %s", out->path, lock_why);
        close_region(out);
        return false;
      }
      return true;
    }
    if (errno != ENOENT) return false;
    if (!publish_new_region(access, uuid, capacity_bytes, out->path, error, error_len))
      return false;
  }
  snprintf(error, error_len, "%s vanished while it was being opened", out->path);
  return false;
}

bool open_region_read_only(const char* path, RegionFile* out, char* error, size_t error_len) {
  snprintf(out->path, sizeof out->path, "%s", path);
  struct stat st;
  int fd = open_regular(path, O_RDONLY, &st, error, error_len);
  if (fd < 0) return false;
  if (!check_and_map(fd, st, false, out, error, error_len)) {
    // What a process that uses gshare would do with a foreign region.
    uint32_t version = 0;
    const ForeignRegion use = foreign_region_use(fd, &version);
    if (use == ForeignRegion::kInUse) append_note(error, error_len, "a process of that version uses it");
    if (use == ForeignRegion::kUnused)
      append_note(error, error_len, "no process uses it: the next to start on this GPU replaces it");
    close(fd);
    return false;
  }
  return true;
}

bool region_lock_unusable(const RegionFile& file, char* why, size_t why_len) {
  char reason[256];
  if (!file.region || !robust_mutex_unusable(&file.region->header.lock, reason, sizeof reason))
    return false;
  snprintf(why, why_len, "the lock of %s is unusable: %s", file.path, reason);
  return true;
}

void close_region(RegionFile* file) {
  if (file->region) {
    robust_mutex_forget(&file->region->header.lock);  // another region may map here later
    munmap(file->region, sizeof(Region));
  }
  if (file->fd >= 0) close(file->fd);
  file->region = nullptr;
  file->fd = -1;
}

}  // namespace gshare::shm
