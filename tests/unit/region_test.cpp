#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "shm/arbiter.h"
#include "shm/lane_space.h"
#include "shm/region.h"
#include "shm/robust_mutex.h"
#include "shm/snapshot.h"

using namespace gshare::shm;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr const char* kUuid = "GPU-00000000-1111-2222-3333-444444444444";

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/gshare-unit-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { (void)!system(("rm -rf " + path).c_str()); }
  std::string path;
};

Arbiter open_arbiter(const std::string& dir, uint64_t capacity = 8 * kGiB) {
  RegionFile file;
  char error[kErrorChars] = "";
  RegionAccess access{dir.c_str(), nullptr};
  INFO(error);
  REQUIRE(open_or_create_region(access, kUuid, capacity, &file, error, sizeof error));
  return Arbiter(file);
}

SlotIdentity identity(uint64_t quota) {
  return SlotIdentity{int32_t(getpid()), uint32_t(getuid()), 1, "unit-test", quota};
}

bool valid(Arbiter& a) {
  char why[200] = "";
  bool ok = a.is_valid(why, sizeof why);
  if (!ok) FAIL_CHECK(why);
  return ok;
}

// Runs `body` in a child process and waits for it.
template <class Body>
int in_child(Body body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// A child process that runs `setup` (true: it is ready) and then stays
// alive, holding what it set up, until end().
class LiveChild {
 public:
  template <class Setup>
  explicit LiveChild(Setup&& setup) {
    int ready[2], done[2];
    if (pipe(ready) != 0 || pipe(done) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      char c = setup() ? 'y' : 'n';
      (void)!write(ready[1], &c, 1);
      (void)!read(done[0], &c, 1);
      _exit(0);
    }
    close(ready[1]);
    close(done[0]);
    done_ = done[1];
    char c = 0;
    ready_ = pid_ > 0 && read(ready[0], &c, 1) == 1 && c == 'y';
    close(ready[0]);
  }
  ~LiveChild() { end(); }
  LiveChild(const LiveChild&) = delete;
  LiveChild& operator=(const LiveChild&) = delete;
  bool ready() const { return ready_; }
  void end() {
    if (pid_ <= 0) return;
    (void)!write(done_, "x", 1);
    close(done_);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int done_ = -1;
  bool ready_ = false;
};

// Live processes as another process sees them: a process never sees its own
// POSIX locks, so the view is taken from a child, like gshare-top.
int live_processes_seen_from_outside(const std::string& dir) {
  int status = in_child([&] {
    std::vector<GpuSnapshot> view = snapshot_regions(dir);
    _exit(view.size() == 1 ? int(view[0].processes.size()) : 255);
  });
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("a new region is published whole, owner-only, and reopened by others") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  const RegionHeader& h = a.region()->header;
  CHECK(h.magic == kRegionMagic);
  CHECK(h.layout_version == kLayoutVersion);
  CHECK(h.capacity_bytes == 8 * kGiB);
  CHECK(std::string(h.gpu_uuid) == kUuid);
  struct stat st;
  REQUIRE(stat(a.path(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  Arbiter b = open_arbiter(dir.path, 1);  // capacity comes from the creator
  CHECK(b.region()->header.capacity_bytes == 8 * kGiB);
}

TEST_CASE("with GSHARE_GROUP the region is shared with that group, mode 0660") {
  TempDir dir;
  group* own = getgrgid(getgid());
  REQUIRE(own);
  RegionFile file;
  char error[kErrorChars] = "";
  RegionAccess access{dir.path.c_str(), own->gr_name};
  REQUIRE(open_or_create_region(access, kUuid, kGiB, &file, error, sizeof error));
  struct stat st;
  REQUIRE(stat(file.path, &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == getgid());
  close_region(&file);

  TempDir other;
  RegionAccess unknown{other.path.c_str(), "no-such-group-gshare"};
  CHECK_FALSE(open_or_create_region(unknown, kUuid, kGiB, &file, error, sizeof error));
  CHECK(std::string(error).find("GSHARE_GROUP=no-such-group-gshare") != std::string::npos);
}

TEST_CASE("reservations hold the quota and the GPU's capacity") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(3 * kGiB)));
  CHECK(a.reserve(2 * kGiB).status == ReserveStatus::kGranted);
  a.commit(2 * kGiB);
  ReserveResult over = a.reserve(2 * kGiB);
  CHECK(over.status == ReserveStatus::kOverQuota);
  CHECK(over.limit_bytes == 3 * kGiB);
  CHECK(over.in_use_bytes == 2 * kGiB);
  CHECK(a.slot()->denied_count == 1);
  a.release(2 * kGiB);
  CHECK(a.slot()->reserved_bytes == 0);
  CHECK(a.region()->header.reserved_bytes == 0);
  CHECK(valid(a));
}

TEST_CASE("a release never leaves a job's P above what it holds") {
  // P measured from a framework's figures may be stale when its cache is
  // trimmed: the safety condition must not go on counting bytes given back.
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  REQUIRE(a.reserve(5 * kGiB).status == ReserveStatus::kGranted);
  a.commit(5 * kGiB);
  a.update([&] { a.slot()->persistent_bytes = 4 * kGiB; });
  a.release(3 * kGiB);
  CHECK(a.slot()->persistent_bytes == 2 * kGiB);
  a.release(1 * kGiB);
  CHECK(a.slot()->persistent_bytes == 1 * kGiB);
  a.update([&] { a.slot()->persistent_bytes = 512ull << 20; });
  a.release(256ull << 20);  // P within what is held: left alone
  CHECK(a.slot()->persistent_bytes == 512ull << 20);
  CHECK(valid(a));
}

TEST_CASE("two processes share the capacity and a dead one's bytes come back") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  int status = in_child([&] {
    Arbiter child = open_arbiter(dir.path);
    if (!child.claim_slot(identity(8 * kGiB))) _exit(1);
    if (child.reserve(6 * kGiB).status != ReserveStatus::kGranted) _exit(2);
    child.commit(6 * kGiB);
    _exit(0);  // dies holding 6 GiB: its liveness lock goes with it
  });
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(a.region()->header.reserved_bytes == 6 * kGiB);
  CHECK(a.has_dead_slots());
  // Asking for more than is left reclaims the dead process first.
  CHECK(a.reserve(4 * kGiB).status == ReserveStatus::kGranted);
  CHECK(a.region()->header.reserved_bytes == 4 * kGiB);
  CHECK(a.region()->header.reclaimed_slots == 1);
  CHECK(valid(a));
}

TEST_CASE("a newcomer clears out the dead before it claims a slot") {
  TempDir dir;
  int status = in_child([&] {
    Arbiter child = open_arbiter(dir.path);
    if (!child.claim_slot(identity(8 * kGiB))) _exit(1);
    if (child.reserve(6 * kGiB).status != ReserveStatus::kGranted) _exit(2);
    _exit(0);
  });
  REQUIRE(WEXITSTATUS(status) == 0);
  Arbiter a = open_arbiter(dir.path);
  CHECK(a.region()->header.reserved_bytes == 6 * kGiB);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  CHECK(a.region()->header.reserved_bytes == 0);
  CHECK(a.region()->header.reclaimed_slots == 1);
}

TEST_CASE("a slot taken over from a dead job starts with none of its paging or waiting state") {
  // A job killed while paged out, holding pinned host memory, waiting for
  // the token, asked to page out and judged to leave the GPU gaps: the
  // next job in its slot would otherwise count that host memory against
  // GSHARE_HOST_MEM_LIMIT, read as paged out (parked while others ask) and
  // as a thread waiting for the token, answer a page-out nobody asked of
  // it, and share turns as one of a pair before it was ever measured.
  TempDir dir;
  int status = in_child([&] {
    Arbiter child = open_arbiter(dir.path);
    if (!child.claim_slot(identity(8 * kGiB))) _exit(1);
    Slot& s = *child.slot();
    child.update([&] {
      s.paged_out_bytes = s.host_paging_bytes = s.movable_bytes = kGiB;
      s.page_outs = s.page_ins = s.paging_ns = s.paged_in_bytes = s.page_in_copy_ns = s.prefetches = 1;
      s.residency = kPagedOut;
      s.page_out_requests = 3;
      s.page_out_copying = 1;
      s.host_release_requests = 2;
      s.host_release_bytes = kGiB;
      s.page_in_wait_ns = 1;
      s.prefetch_copying = 1;
    });
    s.token_waits.store(1);
    s.switch_memory_ns.store(1);
    s.last_device_work_mono_ns.store(1);
    s.leaves_gaps.store(1);
    _exit(0);
  });
  REQUIRE(WEXITSTATUS(status) == 0);
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  REQUIRE(a.own_slot() == 0);
  const Slot& s = *a.slot();
  CHECK(s.paged_out_bytes == 0);
  CHECK(s.host_paging_bytes == 0);
  CHECK(s.movable_bytes == 0);
  CHECK(s.page_outs + s.page_ins + s.paging_ns + s.paged_in_bytes + s.page_in_copy_ns + s.prefetches == 0);
  CHECK(s.residency == kResident);
  CHECK(s.page_out_requests == s.page_out_acks);
  CHECK(s.page_out_copying == 0);
  CHECK(s.host_release_requests == s.host_release_acks);
  CHECK(s.host_release_bytes == 0);
  CHECK(s.page_in_wait_ns == 0);
  CHECK(s.prefetch_copying == 0);
  CHECK(s.token_waits.load() == 0);
  CHECK(s.switch_memory_ns.load() == 0);
  CHECK(s.last_device_work_mono_ns.load() == 0);
  CHECK(s.leaves_gaps.load() == 0);
}

TEST_CASE("a newcomer corrects GPU totals that its live slots do not add up to") {
  TempDir dir;
  // A live job holding 1 GiB, whose region a broken writer then marks full.
  LiveChild child([&] {
    Arbiter arbiter = open_arbiter(dir.path);
    bool ok = arbiter.claim_slot(identity(8 * kGiB)) &&
              arbiter.reserve(1 * kGiB).status == ReserveStatus::kGranted;
    arbiter.region()->header.reserved_bytes = uint64_t(7) << 56;
    return ok;
  });
  REQUIRE(child.ready());
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  CHECK(a.region()->header.reserved_bytes == 1 * kGiB);
  CHECK(a.region()->header.live_slots == 2);
  CHECK(a.region()->header.repairs == 1);
  CHECK(a.reserve(6 * kGiB).status == ReserveStatus::kGranted);
  CHECK(valid(a));
}

TEST_CASE("a live process's reservation is respected across processes") {
  TempDir dir;
  LiveChild child([&] {
    Arbiter arbiter = open_arbiter(dir.path);
    return arbiter.claim_slot(identity(8 * kGiB)) &&
           arbiter.reserve(6 * kGiB).status == ReserveStatus::kGranted;
  });
  REQUIRE(child.ready());
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  ReserveResult r = a.reserve(4 * kGiB);
  CHECK(r.status == ReserveStatus::kOverCapacity);
  CHECK(r.in_use_bytes == 6 * kGiB);
  CHECK(a.reclaim_dead_slots() == 0);
  CHECK(live_processes_seen_from_outside(dir.path) == 2);
  child.end();
  CHECK(live_processes_seen_from_outside(dir.path) == 1);  // the dead one vanishes at once
  CHECK(a.reserve(4 * kGiB).status == ReserveStatus::kGranted);
}

TEST_CASE("a holder killed mid-update leaves the state repaired, not wedged") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  REQUIRE(a.reserve(1 * kGiB).status == ReserveStatus::kGranted);
  a.commit(1 * kGiB);
  int status = in_child([&] {
    Arbiter child = open_arbiter(dir.path);
    if (!child.claim_slot(identity(8 * kGiB))) _exit(1);
    // Take the lock and die half-way through an update: the slot's bytes
    // changed, the GPU total did not, and the seqlock is left odd.
    Region* r = child.region();
    pthread_mutex_lock(&r->header.lock);
    r->header.seq.fetch_add(1);
    r->slots[child.own_slot()].reserved_bytes += 3 * kGiB;
    r->slots[a.own_slot()].reserved_bytes = 0;  // even corrupts another slot
    _exit(0);
  });
  REQUIRE(WEXITSTATUS(status) == 0);
  // The next lock sees EOWNERDEAD and repairs before anyone reads the state.
  CHECK(a.reserve(1 * kGiB).status == ReserveStatus::kGranted);
  CHECK(a.region()->header.repairs == 1);
  CHECK(valid(a));
  CHECK(a.slot()->reserved_bytes == 2 * kGiB);  // restored to at least what it holds, plus the new one
  CHECK(a.region()->header.reserved_bytes == 2 * kGiB);
  CHECK((a.region()->header.seq.load() & 1u) == 0);
}

TEST_CASE("a region of another layout version that a process uses is refused with a clear reason") {
  TempDir dir;
  // A process of that version holds a slot (its liveness lock) and stays.
  LiveChild child([&] {
    Arbiter arbiter = open_arbiter(dir.path);
    bool ok = arbiter.claim_slot(identity(8 * kGiB));
    arbiter.region()->header.layout_version = kLayoutVersion + 1;
    return ok;
  });
  REQUIRE(child.ready());
  RegionFile file;
  char error[kErrorChars] = "";
  RegionAccess access{dir.path.c_str(), nullptr};
  CHECK_FALSE(open_or_create_region(access, kUuid, 8 * kGiB, &file, error, sizeof error));
  INFO(error);
  CHECK(std::string(error).find("another gshare version") != std::string::npos);
  CHECK(std::string(error).find("a process of that version uses it") != std::string::npos);
  // gshare-top says the same.
  auto view = snapshot_regions(dir.path);
  REQUIRE(view.size() == 1);
  CHECK(view[0].error.find("another gshare version") != std::string::npos);
  CHECK(view[0].error.find("a process of that version uses it") != std::string::npos);
}

TEST_CASE("a region of another layout version that no process uses is replaced by a new one") {
  // What an upgrade of gshare leaves in GSHARE_DIR: kept, it would make
  // every later process run alone on that GPU.
  TempDir dir;
  for (const uint32_t foreign : {kLayoutVersion - 1, kLayoutVersion + 1}) {
    INFO("layout " << foreign);
    {
      Arbiter old = open_arbiter(dir.path);
      REQUIRE(old.claim_slot(identity(8 * kGiB)));
      REQUIRE(old.reserve(1 * kGiB).status == ReserveStatus::kGranted);
      // Its process has gone: in this one its liveness lock would not be
      // seen anyway (a process never sees its own POSIX locks).
      old.region()->header.layout_version = foreign;
    }
    // gshare-top, which never changes a region, says what will happen.
    auto stale = snapshot_regions(dir.path);
    REQUIRE(stale.size() == 1);
    CHECK(stale[0].error.find("no process uses it: the next to start on this GPU replaces it") != std::string::npos);
    Arbiter a = open_arbiter(dir.path);
    CHECK(a.region()->header.layout_version == kLayoutVersion);
    CHECK(a.region()->header.reserved_bytes == 0);  // a new region, not the old one
    REQUIRE(a.claim_slot(identity(8 * kGiB)));
    CHECK(a.reserve(8 * kGiB).status == ReserveStatus::kGranted);
    auto view = snapshot_regions(dir.path);
    REQUIRE(view.size() == 1);
    CHECK(view[0].error.empty());
    // Nothing left beside it: the old file was removed, not renamed.
    int files = 0;
    if (DIR* d = opendir(dir.path.c_str())) {
      while (dirent* e = readdir(d)) files += e->d_name[0] != '.';
      closedir(d);
    }
    CHECK(files == 1);
  }
  // One moved aside and not yet removed is no region to gshare-top.
  char path[kPathChars];
  REQUIRE(region_path(dir.path.c_str(), kUuid, path, sizeof path));
  const std::string aside = std::string(path) + ".old.1.2";
  REQUIRE(link(path, aside.c_str()) == 0);
  CHECK(snapshot_regions(dir.path).size() == 1);
  unlink(aside.c_str());
}

TEST_CASE("a truncated or garbage region is refused, never mapped past its end") {
  TempDir dir;
  char path[kPathChars];
  REQUIRE(region_path(dir.path.c_str(), kUuid, path, sizeof path));
  for (size_t bytes : {size_t(0), size_t(100), sizeof(Region)}) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    std::string junk(bytes, '\x5a');
    REQUIRE(write(fd, junk.data(), junk.size()) == ssize_t(junk.size()));
    close(fd);
    RegionFile file;
    char error[kErrorChars] = "";
    RegionAccess access{dir.path.c_str(), nullptr};
    CHECK_FALSE(open_or_create_region(access, kUuid, 8 * kGiB, &file, error, sizeof error));
    CHECK(std::strlen(error) > 10);
  }
}

TEST_CASE("a full process table says so and reclaiming frees it") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  // Fill every slot with a dead owner.
  int status = in_child([&] {
    for (uint32_t i = 0; i < kMaxSlots; ++i) {
      Arbiter filler = open_arbiter(dir.path);
      if (!filler.claim_slot(identity(kGiB))) _exit(1);
    }
    _exit(0);
  });
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(a.claim_slot(identity(kGiB)));  // the dead fillers are reclaimed
  CHECK(a.region()->header.reclaimed_slots == kMaxSlots);
}

namespace {

// A thread id that names no thread: a child's, once it has been reaped.
pid_t gone_thread() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

RegionFile file_of(const Arbiter& a) {
  RegionFile file;
  file.region = a.region();
  file.fd = a.fd();
  snprintf(file.path, sizeof file.path, "%s", a.path());
  return file;
}

std::atomic<int> g_unusable_calls{0};
void count_unusable(const pthread_mutex_t*, const char*) { g_unusable_calls++; }

const double kTimeoutS = double(kLockTimeoutNs) / 1e9;

// glibc's type word of a mutex made with these attributes: the garbled
// types below come from real mutexes, not from glibc's private constants.
int kind_of(bool shared, bool robust, int protocol, int type = PTHREAD_MUTEX_DEFAULT) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, type);
  if (shared) pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (robust) pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutexattr_setprotocol(&attr, protocol);
  pthread_mutex_t m;
  pthread_mutex_init(&m, &attr);
  pthread_mutexattr_destroy(&attr);
  int kind = m.__data.__kind;
  pthread_mutex_destroy(&m);
  return kind;
}

}  // namespace

TEST_CASE("a lock whose owner no longer exists fails in bounded time, once, with its reason") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  pthread_mutex_t& m = a.region()->header.lock;
  // What a crash of the host leaves in a region on lasting storage: the
  // lock word and owner of a thread that is gone, and nobody to wake us.
  pid_t gone = gone_thread();
  m.__data.__lock = gone;
  m.__data.__owner = gone;
  robust_mutex_on_unusable(&count_unusable);
  g_unusable_calls = 0;

  Arbiter b = open_arbiter(dir.path);  // plausible: opening succeeds
  auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(b.claim_slot(identity(kGiB)));
  double waited = seconds_since(start);
  CHECK(waited >= kTimeoutS - 0.1);
  CHECK(waited < kTimeoutS + 3);
  char why[kErrorChars] = "";
  REQUIRE(region_lock_unusable(file_of(b), why, sizeof why));
  CHECK(std::string(why).find(b.path()) != std::string::npos);
  CHECK(std::string(why).find("held for over") != std::string::npos);
  CHECK(std::string(why).find(std::to_string(gone)) != std::string::npos);
  CHECK(g_unusable_calls == 1);

  // From then on every use fails at once, without waiting again.
  start = std::chrono::steady_clock::now();
  CHECK_FALSE(b.claim_slot(identity(kGiB)));
  CHECK(b.reclaim_dead_slots() == 0);
  CHECK_FALSE(b.update([] {}));
  CHECK(seconds_since(start) < 0.5);
  CHECK(g_unusable_calls == 1);
  robust_mutex_on_unusable(nullptr);
}

TEST_CASE("a lock of a foreign type is refused before glibc sees it, never aborting") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(kGiB)));
  pthread_mutex_t& m = a.region()->header.lock;
  // Priority inheritance with a dead owner: glibc's lock asserts
  // "e != ESRCH || !robust" and aborts the program.
  pid_t gone = gone_thread();
  m.__data.__kind = kind_of(true, true, PTHREAD_PRIO_INHERIT);
  m.__data.__lock = gone;
  m.__data.__owner = gone;

  RegionFile file;
  char error[kErrorChars] = "";
  RegionAccess access{dir.path.c_str(), nullptr};
  CHECK_FALSE(open_or_create_region(access, kUuid, 8 * kGiB, &file, error, sizeof error));
  CHECK(std::string(error).find("lock of") != std::string::npos);
  CHECK(std::string(error).find("type word") != std::string::npos);

  // A process already in the region gets a refusal, at once, not an abort.
  auto start = std::chrono::steady_clock::now();
  CHECK(a.reserve(kGiB / 4).status == ReserveStatus::kArbiterBroken);
  CHECK(seconds_since(start) < 0.5);
  char why[kErrorChars] = "";
  CHECK(region_lock_unusable(file_of(a), why, sizeof why));
}

TEST_CASE("lock words that cannot be glibc's are refused at open") {
  struct Garbling {
    const char* what;
    void (*apply)(pthread_mutex_t&);
    const char* reason;
  };
  const Garbling cases[] = {
      {"owner tid beyond any pid_max", [](pthread_mutex_t& m) { m.__data.__lock = 0x3fffffff; },
       "cannot exist"},
      {"negative owner field", [](pthread_mutex_t& m) { m.__data.__owner = -5; }, "cannot exist"},
      {"waiters on a free lock",
       [](pthread_mutex_t& m) { m.__data.__lock = int(0x80000000u); }, "no owner"},
      {"type zeroed", [](pthread_mutex_t& m) { m.__data.__kind = 0; }, "type word"},
      {"recursive",
       [](pthread_mutex_t& m) {
         m.__data.__kind = kind_of(true, true, PTHREAD_PRIO_NONE, PTHREAD_MUTEX_RECURSIVE);
       },
       "type word"},
      {"not robust",
       [](pthread_mutex_t& m) { m.__data.__kind = kind_of(true, false, PTHREAD_PRIO_NONE); },
       "type word"},
  };
  for (const Garbling& g : cases) {
    INFO(g.what);
    TempDir dir;
    {
      Arbiter a = open_arbiter(dir.path);
      g.apply(a.region()->header.lock);
    }
    RegionFile file;
    char error[kErrorChars] = "";
    RegionAccess access{dir.path.c_str(), nullptr};
    CHECK_FALSE(open_or_create_region(access, kUuid, 8 * kGiB, &file, error, sizeof error));
    CHECK(std::string(error).find(g.reason) != std::string::npos);
  }
}

TEST_CASE("an unrecoverable lock is unusable, not re-created under another process") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  a.region()->header.lock.__data.__owner = INT_MAX - 1;  // glibc's PTHREAD_MUTEX_NOTRECOVERABLE
  Arbiter b = open_arbiter(dir.path);
  auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(b.claim_slot(identity(kGiB)));
  CHECK(seconds_since(start) < 0.5);
  char why[kErrorChars] = "";
  REQUIRE(region_lock_unusable(file_of(b), why, sizeof why));
  CHECK(std::string(why).find("unrecoverable") != std::string::npos);
}

TEST_CASE("a dead owner's lock is still repaired, and what an unmapped region learnt is forgotten") {
  TempDir dir;
  Arbiter a = open_arbiter(dir.path);
  REQUIRE(a.claim_slot(identity(8 * kGiB)));
  // Two bytes changed into "its owner died": the next lock repairs.
  a.region()->header.lock.__data.__lock = int(0x40000000u);
  CHECK(a.reserve(kGiB).status == ReserveStatus::kGranted);
  CHECK(a.region()->header.repairs == 1);
  CHECK(valid(a));

  RegionFile file;
  char error[kErrorChars] = "";
  RegionAccess access{dir.path.c_str(), nullptr};
  REQUIRE(open_or_create_region(access, kUuid, 8 * kGiB, &file, error, sizeof error));
  pthread_mutex_t* m = &file.region->header.lock;
  m->__data.__owner = INT_MAX - 1;  // PTHREAD_MUTEX_NOTRECOVERABLE
  CHECK(robust_mutex_lock(m, [](void*) {}, nullptr) == LockResult::kFailed);
  CHECK(robust_mutex_unusable(m, nullptr, 0));
  m->__data.__owner = 0;
  close_region(&file);
  CHECK_FALSE(robust_mutex_unusable(m, nullptr, 0));
}

TEST_CASE("a lane-mate needs a job's memory back only past the lane's slack, or on a nearly full GPU") {
  // The slack is C/64: 1 GiB here. Lane-mates below it hold their caches
  // beside each other; a job that gave its cache back at every switch
  // would only allocate it again in its next turn.
  static RegionHeader h{};
  static Slot s{};
  h.capacity_bytes = 64 * kGiB;
  h.reserved_bytes = 10 * kGiB;
  s.persistent_bytes = kGiB;
  s.reserved_bytes = kGiB + 100 * (kGiB / 1024);  // 100 MiB beyond P
  s.ephemeral_bytes = 100 * (kGiB / 1024);
  REQUIRE(lane_slack(h) == kGiB);
  CHECK_FALSE(lane_needs_its_memory(h, s));
  SECTION("its learned iteration is larger than the slack") {
    s.ephemeral_bytes = 2 * kGiB;
    CHECK(lane_needs_its_memory(h, s));
  }
  SECTION("it holds more than the slack beyond P now") {
    s.reserved_bytes = 3 * kGiB;
    CHECK(lane_needs_its_memory(h, s));
  }
  SECTION("the GPU has less than a slack free") {
    h.reserved_bytes = 63 * kGiB + kGiB / 2;
    CHECK(lane_needs_its_memory(h, s));
  }
}
