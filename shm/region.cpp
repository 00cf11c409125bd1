#include "shm/region.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "shm/robust_mutex.h"

namespace gshare::shm {

namespace {

bool resolve_group(const char* name, gid_t* gid, char* error, size_t error_len) {
  group entry;
  group* found = nullptr;
  char buffer[4096];
  if (getgrnam_r(name, &entry, buffer, sizeof buffer, &found) == 0 && found) {
    *gid = found->gr_gid;
    return true;
  }
  // A numeric group id is accepted too (containers often lack /etc/group).
  char* end = nullptr;
  unsigned long value = strtoul(name, &end, 10);
  if (end != name && *end == '\0') {
    *gid = gid_t(value);
    return true;
  }
  snprintf(error, error_len, "GSHARE_GROUP=%s names no group on this machine", name);
  return false;
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

bool map_file(int fd, bool writable, RegionFile* out, char* error, size_t error_len) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(error, error_len, "cannot stat %s: %s", out->path, strerror(errno));
    return false;
  }
  if (uint64_t(st.st_size) < sizeof(RegionHeader)) {
    snprintf(error, error_len, "%s is %lld bytes, too small to be a gshare region",
             out->path, static_cast<long long>(st.st_size));
    return false;
  }
  // Map only the header first: a foreign version may have another size.
  void* head = mmap(nullptr, sizeof(RegionHeader), PROT_READ, MAP_SHARED, fd, 0);
  if (head == MAP_FAILED) {
    snprintf(error, error_len, "cannot map %s: %s", out->path, strerror(errno));
    return false;
  }
  char why[200];
  bool valid = header_is_valid(*static_cast<RegionHeader*>(head), uint64_t(st.st_size),
                               why, sizeof why);
  munmap(head, sizeof(RegionHeader));
  if (!valid) {
    snprintf(error, error_len, "%s: %s", out->path, why);
    return false;
  }
  int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* whole = mmap(nullptr, sizeof(Region), prot, MAP_SHARED, fd, 0);
  if (whole == MAP_FAILED) {
    snprintf(error, error_len, "cannot map %s: %s", out->path, strerror(errno));
    return false;
  }
  out->region = static_cast<Region*>(whole);
  out->fd = fd;
  out->writable = writable;
  return true;
}

// Builds a complete region in a temporary file and links it into place.
// Returns false only on a real error; losing the race is success.
bool publish_new_region(const RegionAccess& access, const char* uuid, uint64_t capacity_bytes,
                        const char* path, char* error, size_t error_len) {
  char temp[kPathChars];
  int n = snprintf(temp, sizeof temp, "%s.tmp.%d", path, int(getpid()));
  if (n < 0 || size_t(n) >= sizeof temp) {
    snprintf(error, error_len, "region path too long in GSHARE_DIR=%s", access.dir);
    return false;
  }
  unlink(temp);  // a stray from an earlier process with our pid
  int fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
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
  if (ok && link(temp, path) != 0 && errno != EEXIST) {
    snprintf(error, error_len, "cannot publish the region %s: %s", path, strerror(errno));
    ok = false;
  }
  unlink(temp);
  return ok;
}

}  // namespace

uint64_t mono_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

uint64_t unix_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
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
      h.slot_count != kMaxSlots || h.slot_bytes != sizeof(Slot) || file_bytes < sizeof(Region)) {
    snprintf(why, why_len, "corrupt region header (sizes do not match layout %u)", kLayoutVersion);
    return false;
  }
  if (memchr(h.gpu_uuid, '\0', sizeof h.gpu_uuid) == nullptr) {
    snprintf(why, why_len, "corrupt region header (GPU UUID not terminated)");
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
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = open(out->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      if (!map_file(fd, true, out, error, error_len)) {
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
      char why[200];
      if (!robust_mutex_is_plausible(&out->region->header.lock, why, sizeof why)) {
        snprintf(error, error_len, "the lock of %s is unusable: %s", out->path, why);
        close_region(out);
        return false;
      }
      return true;
    }
    if (errno != ENOENT) {
      snprintf(error, error_len, "cannot open %s: %s", out->path, strerror(errno));
      return false;
    }
    if (!publish_new_region(access, uuid, capacity_bytes, out->path, error, error_len))
      return false;
  }
  snprintf(error, error_len, "%s vanished while it was being opened", out->path);
  return false;
}

bool open_region_read_only(const char* path, RegionFile* out, char* error, size_t error_len) {
  snprintf(out->path, sizeof out->path, "%s", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    snprintf(error, error_len, "cannot open %s: %s", path, strerror(errno));
    return false;
  }
  if (!map_file(fd, false, out, error, error_len)) {
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
