// See fake_common.h.
#include "fake_common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace fakegpu {

// ===========================================================================
// Environment
// ===========================================================================
bool parse_size(const char* text, uint64_t* out) {
  if (text == nullptr || out == nullptr) return false;
  const char* p = text;
  while (std::isspace(static_cast<unsigned char>(*p))) ++p;
  if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(p, &end, 10);
  if (errno != 0) return false;
  std::string suffix;
  for (; *end != '\0'; ++end) {
    if (std::isspace(static_cast<unsigned char>(*end))) continue;
    suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(*end)));
  }
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tib") {
    shift = 40;
  } else {
    return false;
  }
  if (shift != 0 && value > (~0ULL >> shift)) return false;  // overflow
  *out = static_cast<uint64_t>(value) << shift;
  return true;
}

namespace {

void warn_bad(const char* name, const char* value, const char* accepted) {
  std::fprintf(stderr,
               "fake-cuda: ignoring %s=\"%s\": expected %s; using the default\n",
               name, value, accepted);
}

void read_size_var(const char* name, uint64_t* out, bool allow_zero) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return;
  uint64_t parsed = 0;
  if (!parse_size(v, &parsed) || (!allow_zero && parsed == 0)) {
    warn_bad(name, v,
             "a byte count such as 1073741824, 512MiB or 8GiB");
    return;
  }
  *out = parsed;
}

// A whole number from 0 to 10000000 in variable `name`, into *out; a
// malformed one is reported and *out keeps its default.
void read_rate(const char* name, uint64_t* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n > 10'000'000 || v[0] == '-') {
    warn_bad(name, v, "an integer from 0 to 10000000");
  } else {
    *out = n;
  }
}

}  // namespace

Config read_config() {
  Config c;
  if (const char* v = std::getenv("FAKE_CUDA_DEVICES"); v != nullptr && *v) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 0 || n > 64) {
      warn_bad("FAKE_CUDA_DEVICES", v, "an integer from 0 to 64");
    } else {
      c.devices = static_cast<int>(n);
    }
  }
  read_size_var("FAKE_CUDA_MEM", &c.mem_bytes, /*allow_zero=*/false);
  read_size_var("FAKE_CUDA_CTX_BYTES", &c.ctx_bytes, /*allow_zero=*/true);
  read_size_var("FAKE_CUDA_POOL_CHUNK", &c.pool_chunk, /*allow_zero=*/false);
  if (const char* v = std::getenv("FAKE_CUDA_UUID_SEED"); v != nullptr) {
    c.uuid_seed = v;
  }
  if (const char* v = std::getenv("FAKE_CUDA_DIR"); v != nullptr && *v) {
    c.dir = v;
  }
  if (const char* v = std::getenv("FAKE_CUDA_TRACE"); v != nullptr && *v) {
    c.trace_path = v;
  }
  read_rate("FAKE_CUDA_ALLOC_US_PER_GIB", &c.alloc_us_per_gib);
  read_rate("FAKE_CUDA_COPY_MBPS", &c.copy_mb_per_s);
  read_rate("FAKE_CUDA_PIN_MBPS", &c.pin_mb_per_s);
  read_rate("FAKE_CUDA_UNPIN_MBPS", &c.unpin_mb_per_s);
  return c;
}

// ===========================================================================
// Device identity
// ===========================================================================
namespace {

uint64_t fnv1a(const std::string& data) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char ch : data) {
    hash ^= ch;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// splitmix64's finaliser: spreads every input bit over the whole word.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

void device_uuid(const std::string& seed, int index, unsigned char out[16]) {
  const uint64_t h = fnv1a(seed + '\0' + std::to_string(index));
  const uint64_t hi = mix(h ^ 0x1ULL);
  const uint64_t lo = mix(h ^ 0x2ULL);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<unsigned char>(hi >> (56 - 8 * i));
    out[8 + i] = static_cast<unsigned char>(lo >> (56 - 8 * i));
  }
}

std::string uuid_hex(const unsigned char uuid[16]) {
  char buf[33];
  for (int i = 0; i < 16; ++i) std::snprintf(buf + 2 * i, 3, "%02x", uuid[i]);
  return std::string(buf, 32);
}

std::string uuid_string(const unsigned char uuid[16]) {
  const std::string h = uuid_hex(uuid);
  return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" +
         h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20, 12);
}

// ===========================================================================
// Processes
// ===========================================================================
bool read_proc_stat(int pid, char* state, uint64_t* start_time) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may itself contain
  // spaces and parentheses: fields are counted from the last ')'.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;  // now " S ppid ..." : field 3 is the state
  int field = 2;
  char st = '?';
  uint64_t start = 0;
  bool have_start = false;
  char* save = nullptr;
  for (char* tok = strtok_r(p, " ", &save); tok != nullptr;
       tok = strtok_r(nullptr, " ", &save)) {
    ++field;
    if (field == 3) st = tok[0];
    if (field == 22) {
      start = std::strtoull(tok, nullptr, 10);
      have_start = true;
      break;
    }
  }
  if (!have_start) return false;
  if (state != nullptr) *state = st;
  if (start_time != nullptr) *start_time = start;
  return true;
}

bool process_alive(int pid, uint64_t start_time) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  char state = '?';
  uint64_t start = 0;
  if (!read_proc_stat(pid, &state, &start)) {
    // No /proc entry: either it just died, or /proc is not mounted. Only
    // in the latter case does kill() tell more.
    struct stat sb;
    if (::stat("/proc/self/stat", &sb) == 0) return false;
    return true;
  }
  if (state == 'Z' || state == 'X' || state == 'x') return false;
  return start == start_time;
}

namespace {

// This process's start time, read once per pid (a forked child re-reads it).
uint64_t own_start_time() {
  static std::mutex mu;
  static int cached_pid = -1;
  static uint64_t cached_start = 0;
  const int pid = static_cast<int>(::getpid());
  std::lock_guard<std::mutex> guard(mu);
  if (cached_pid != pid) {
    uint64_t start = 0;
    if (!read_proc_stat(pid, nullptr, &start)) start = 0;
    cached_start = start;
    cached_pid = pid;
  }
  return cached_start;
}

}  // namespace

// ===========================================================================
// The shared device file
// ===========================================================================
namespace {

constexpr uint64_t kMagic = 0x3144554341464b46ULL;  // "FKFACUD1" little-endian
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxEntries = 1024;

struct Entry {
  int32_t pid;          // 0 = free
  uint32_t reserved;
  uint64_t start_time;  // /proc/<pid>/stat field 22
  uint64_t used_bytes;  // allocations + contexts + pool reservations + cuMemCreate
};

}  // namespace

struct DeviceFile::Table {
  uint64_t magic;      // written last by the creator
  uint32_t version;
  uint32_t max_entries;
  alignas(64) pthread_mutex_t mutex;  // robust, process-shared
  alignas(64) Entry entries[kMaxEntries];
};

DeviceFile::~DeviceFile() {
  if (table_ != nullptr) ::munmap(table_, sizeof(Table));
}

bool DeviceFile::open(const std::string& dir, const std::string& hex,
                      std::string* error) {
  if (table_ != nullptr) return true;
  if (const char* v = std::getenv("FAKE_CUDA_MEM_TRACE"); v != nullptr && *v)
    mem_trace_fd_ = ::open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const std::string final_path = dir + "/fakecuda-" + hex;
  auto fail = [&](const std::string& what) {
    if (error != nullptr) {
      *error = what + " (" + final_path + "): " + std::strerror(errno);
    }
    return false;
  };

  ::mkdir(dir.c_str(), 0777);  // convenience for tests; fails harmlessly if it exists

  for (int attempt = 0; attempt < 2; ++attempt) {
    // 1. Use the file if it already exists.
    int fd = ::open(final_path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      struct stat sb;
      if (::fstat(fd, &sb) != 0) {
        ::close(fd);
        return fail("cannot stat the fake device file");
      }
      if (static_cast<size_t>(sb.st_size) < sizeof(Table)) {
        ::close(fd);
        errno = EINVAL;
        return fail("the fake device file is too small (stale or foreign)");
      }
      void* m = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE,
                       MAP_SHARED, fd, 0);
      ::close(fd);
      if (m == MAP_FAILED) return fail("cannot map the fake device file");
      Table* t = static_cast<Table*>(m);
      if (t->magic != kMagic || t->version != kVersion ||
          t->max_entries != kMaxEntries) {
        ::munmap(m, sizeof(Table));
        errno = EINVAL;
        return fail("the fake device file has another layout; delete it");
      }
      table_ = t;
      path_ = final_path;
      return true;
    }
    if (errno != ENOENT) return fail("cannot open the fake device file");

    // 2. Create it under a private name, initialise it, then link() it into
    //    place, so that nobody ever sees a half-initialised table.
    static std::atomic<unsigned> counter{0};
    struct timespec now;
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    char tmp[4096];
    std::snprintf(tmp, sizeof(tmp), "%s/.fakecuda-%s.%d.%u.%ld", dir.c_str(),
                  hex.c_str(), static_cast<int>(::getpid()), counter++,
                  static_cast<long>(now.tv_nsec));
    fd = ::open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return fail("cannot create a fake device file");
    ::fchmod(fd, 0666);  // shared by every test process, whatever the umask
    if (::ftruncate(fd, sizeof(Table)) != 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp);
      errno = e;
      return fail("cannot size the fake device file");
    }
    void* m = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
      int e = errno;
      ::unlink(tmp);
      errno = e;
      return fail("cannot map the new fake device file");
    }
    Table* t = static_cast<Table*>(m);
    std::memset(t, 0, sizeof(Table));
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&t->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    t->version = kVersion;
    t->max_entries = kMaxEntries;
    __atomic_store_n(&t->magic, kMagic, __ATOMIC_RELEASE);
    ::msync(m, sizeof(Table), MS_SYNC);
    const int rc = ::link(tmp, final_path.c_str());
    const int link_errno = errno;
    ::unlink(tmp);
    if (rc == 0) {
      table_ = t;
      path_ = final_path;
      return true;
    }
    ::munmap(m, sizeof(Table));
    if (link_errno != EEXIST) {
      errno = link_errno;
      return fail("cannot publish the fake device file");
    }
    // Someone else published it first: loop and use theirs.
  }
  errno = EAGAIN;
  return fail("the fake device file keeps disappearing");
}

bool DeviceFile::lock() {
  if (table_ == nullptr) return false;
  int rc = pthread_mutex_lock(&table_->mutex);
  if (rc == EOWNERDEAD) {
    // The previous holder died while holding the lock. Every update under it
    // is a single aligned store, so the table is consistent: just mark it so.
    pthread_mutex_consistent(&table_->mutex);
    rc = 0;
  }
  return rc == 0;
}

void DeviceFile::unlock() { pthread_mutex_unlock(&table_->mutex); }

uint64_t DeviceFile::sweep_locked() {
  const int me = static_cast<int>(::getpid());
  const uint64_t my_start = own_start_time();
  uint64_t sum = 0;
  for (uint32_t i = 0; i < kMaxEntries; ++i) {
    Entry& e = table_->entries[i];
    if (e.pid == 0) continue;
    const bool alive = (e.pid == me && e.start_time == my_start) ||
                       process_alive(e.pid, e.start_time);
    if (!alive) {
      e.used_bytes = 0;
      e.start_time = 0;
      e.pid = 0;
      continue;
    }
    sum += e.used_bytes;
  }
  return sum;
}

int DeviceFile::find_own_locked() {
  const int me = static_cast<int>(::getpid());
  const uint64_t my_start = own_start_time();
  for (uint32_t i = 0; i < kMaxEntries; ++i) {
    const Entry& e = table_->entries[i];
    if (e.pid == me && e.start_time == my_start) return static_cast<int>(i);
  }
  return -1;
}

bool DeviceFile::charge(uint64_t bytes, uint64_t total) {
  if (bytes == 0) return true;
  if (!lock()) return false;
  const uint64_t used = sweep_locked();
  if (used > total || bytes > total - used) {
    unlock();
    return false;
  }
  int idx = find_own_locked();
  if (idx < 0) {
    for (uint32_t i = 0; i < kMaxEntries; ++i) {
      if (table_->entries[i].pid == 0) {
        idx = static_cast<int>(i);
        Entry& e = table_->entries[i];
        e.used_bytes = 0;
        e.start_time = own_start_time();
        e.pid = static_cast<int32_t>(::getpid());
        break;
      }
    }
  }
  if (idx < 0) {  // table full of live processes
    unlock();
    return false;
  }
  table_->entries[idx].used_bytes += bytes;
  trace_locked();
  unlock();
  return true;
}

// One line per change, "<device bytes in use>", written under the table's
// lock so that the lines of all processes come in the order of the changes.
void DeviceFile::trace_locked() {
  if (mem_trace_fd_ < 0) return;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < kMaxEntries; ++i)
    if (table_->entries[i].pid != 0) sum += table_->entries[i].used_bytes;
  char line[32];
  int n = std::snprintf(line, sizeof line, "%llu\n", static_cast<unsigned long long>(sum));
  if (::write(mem_trace_fd_, line, size_t(n)) < 0) {
    // A lost trace line only weakens a test's evidence; never the driver.
  }
}

void DeviceFile::uncharge(uint64_t bytes) {
  if (bytes == 0) return;
  if (!lock()) return;
  const int idx = find_own_locked();
  if (idx >= 0) {
    Entry& e = table_->entries[idx];
    e.used_bytes = (e.used_bytes > bytes) ? e.used_bytes - bytes : 0;
    if (e.used_bytes == 0) {
      e.start_time = 0;
      e.pid = 0;
    }
  }
  trace_locked();
  unlock();
}

uint64_t DeviceFile::used() {
  if (!lock()) return 0;
  const uint64_t sum = sweep_locked();
  unlock();
  return sum;
}

std::vector<ProcessUsage> DeviceFile::processes() {
  std::vector<ProcessUsage> out;
  if (!lock()) return out;
  sweep_locked();
  for (uint32_t i = 0; i < kMaxEntries; ++i) {
    const Entry& e = table_->entries[i];
    if (e.pid != 0 && e.used_bytes != 0) out.push_back({e.pid, e.used_bytes});
  }
  unlock();
  return out;
}

}  // namespace fakegpu
