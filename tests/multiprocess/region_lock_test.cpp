// A region's lock that cannot be taken (its owner is gone, or its words are
// garbled) never hangs or aborts a program: the process runs alone with its
// quota, and says so once. Text from a hostile region reaches stderr
// escaped.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>

#include "shm/layout.h"
#include "shm/robust_mutex.h"
#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

constexpr const char* kOverQuota = "err 2";  // CUDA_ERROR_OUT_OF_MEMORY
const double kLockTimeoutS = double(gshare::shm::kLockTimeoutNs) / 1e9;

// A thread id that names no thread: a child's, once it has been reaped.
pid_t gone_thread() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

// Changes the lock of `gpu`'s region in place, as a crash or a stray write
// would leave it.
void change_lock(const TestGpu& gpu, const std::function<void(pthread_mutex_t&)>& change) {
  std::string path = region_file_in(gpu.dir());
  REQUIRE_FALSE(path.empty());
  int fd = open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  void* p = mmap(nullptr, sizeof(gshare::shm::Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  REQUIRE(p != MAP_FAILED);
  change(static_cast<gshare::shm::Region*>(p)->header.lock);
  munmap(p, sizeof(gshare::shm::Region));
}

int kind_of(int protocol) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutexattr_setprotocol(&attr, protocol);
  pthread_mutex_t m;
  pthread_mutex_init(&m, &attr);
  pthread_mutexattr_destroy(&attr);
  return m.__data.__kind;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Bytes a terminal would act on: controls other than the newline, DEL.
bool has_raw_bytes(const std::string& text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n') || c == 0x7F) return true;
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("a stale, garbled or valid region lock: no hang, no abort, one message, the quota holds") {
  struct Case {
    const char* name;
    std::function<void(pthread_mutex_t&)> change;
    const char* reason;  // in the one message; nullptr: no message
  };
  const Case cases[] = {
      {"valid", [](pthread_mutex_t&) {}, nullptr},
      {"stale: the owner is a thread that no longer exists",
       [](pthread_mutex_t& m) {
         pid_t gone = gone_thread();
         m.__data.__lock = gone;
         m.__data.__owner = gone;
       },
       "held for over"},
      {"garbled: priority inheritance with a dead owner (glibc would abort)",
       [](pthread_mutex_t& m) {
         pid_t gone = gone_thread();
         m.__data.__kind = kind_of(PTHREAD_PRIO_INHERIT);
         m.__data.__lock = gone;
         m.__data.__owner = gone;
       },
       "type word"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    TestGpu gpu(8 * kGiB);
    {
      Client maker(gpu);  // a device's region is made when the process first uses it
      REQUIRE(maker.send("init") == "init ok");
      REQUIRE(maker.send("alloc 1M") == "alloc ok a0");
      REQUIRE(maker.finish() == 0);
    }
    change_lock(gpu, c.change);

    // Two newcomers at once: neither waits for the other, nor for ever.
    auto start = std::chrono::steady_clock::now();
    Client a(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}}), b(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
    a.post("init");
    b.post("init");
    REQUIRE(a.reply(kLockTimeoutS + 20) == "init ok");
    REQUIRE(b.reply(kLockTimeoutS + 20) == "init ok");
    CHECK(seconds_since(start) < kLockTimeoutS + 10);
    for (Client* client : {&a, &b}) {
      CHECK(client->send("alloc 600M a") == "alloc ok a");
      CHECK(client->send("alloc 600M b") == std::string("alloc ") + kOverQuota);  // over 1 GiB
      CHECK(client->send("launch 3 10") == "launch ok 3");
      CHECK(client->send("free a") == "free ok");
      CHECK(client->send("alloc 900M c") == "alloc ok c");
    }
    CHECK(a.finish() == 0);
    CHECK(b.finish() == 0);
    for (Client* client : {&a, &b}) {
      std::string err = client->stderr_text();
      INFO(err);
      CHECK(err.find("process table") == std::string::npos);
      if (!c.reason) {
        CHECK(err.find("unusable") == std::string::npos);
        continue;
      }
      CHECK(count(err, "unusable") == 1);
      CHECK(count(err, c.reason) == 1);
      CHECK(err.find("runs alone") != std::string::npos);
      CHECK(err.find("quota (1073741824 bytes) still holds") != std::string::npos);
    }
    CHECK_NOTHROW(gpu.top_json());
  }
}

TEST_CASE("a process whose region lock becomes stale goes on alone, with its quota") {
  TestGpu gpu(8 * kGiB);
  Client a(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}}), b(gpu);
  REQUIRE(a.send("init") == "init ok");
  REQUIRE(b.send("init") == "init ok");
  REQUIRE(a.send("alloc 300M x") == "alloc ok x");
  REQUIRE(b.send("alloc 16M") == "alloc ok a0");  // both are in the region
  REQUIRE(a.send("launch 3 10") == "launch ok 3");
  change_lock(gpu, [](pthread_mutex_t& m) {
    pid_t gone = gone_thread();
    m.__data.__lock = gone;
    m.__data.__owner = gone;
  });

  // Launches under a lock that nobody can take: each waits at most one
  // timeout, then goes on without the token.
  auto start = std::chrono::steady_clock::now();
  a.post("launch 20 100");
  b.post("launch 20 100");
  CHECK(a.reply(kLockTimeoutS + 20) == "launch ok 20");
  CHECK(b.reply(kLockTimeoutS + 20) == "launch ok 20");
  CHECK(seconds_since(start) < 2 * kLockTimeoutS + 10);

  // Alone, a keeps its quota, from what its slot held: 64 MiB of context
  // and 300 MiB.
  CHECK(a.send("alloc 600M y") == "alloc ok y");
  CHECK(a.send("alloc 200M z") == std::string("alloc ") + kOverQuota);
  CHECK(a.send("free x") == "free ok");
  CHECK(a.send("alloc 200M z") == "alloc ok z");
  CHECK(a.send("meminfo").rfind("meminfo ", 0) == 0);
  start = std::chrono::steady_clock::now();
  CHECK(a.finish() == 0);  // leaving does not wait for the lock again
  CHECK(b.finish() == 0);
  CHECK(seconds_since(start) < kLockTimeoutS);
  for (Client* client : {&a, &b}) {
    std::string err = client->stderr_text();
    INFO(err);
    CHECK(count(err, "unusable") == 1);
    CHECK(err.find("held for over") != std::string::npos);
    CHECK(err.find("goes on alone") != std::string::npos);
  }
  CHECK(a.stderr_text().find("quota (1073741824 bytes) still holds") != std::string::npos);
}

TEST_CASE("text read from a hostile region reaches a client's stderr escaped") {
  TestGpu gpu(8 * kGiB);
  {
    Client maker(gpu);
    REQUIRE(maker.send("init") == "init ok");
    REQUIRE(maker.send("alloc 1M") == "alloc ok a0");
    REQUIRE(maker.finish() == 0);
  }
  std::string path = region_file_in(gpu.dir());
  REQUIRE_FALSE(path.empty());
  int fd = open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  gshare::shm::RegionHeader header;
  REQUIRE(pread(fd, &header, sizeof header, 0) == ssize_t(sizeof header));
  // A UUID that retitles the terminal and clears the screen.
  const char hostile[] = "GPU-\x1b]0;owned\x07\x1b[2J\r\n\xc2\x9b";
  static_assert(sizeof hostile <= sizeof header.gpu_uuid);
  memset(header.gpu_uuid, 0, sizeof header.gpu_uuid);
  memcpy(header.gpu_uuid, hostile, sizeof hostile);
  REQUIRE(pwrite(fd, &header, sizeof header, 0) == ssize_t(sizeof header));
  close(fd);

  Client client(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("alloc 600M") == "alloc ok a0");
  CHECK(client.send("alloc 600M") == std::string("alloc ") + kOverQuota);
  CHECK(client.finish() == 0);
  std::string err = client.stderr_text();
  INFO(err);
  CHECK(err.find("belongs to GPU GPU-?]0;owned??[2J????") != std::string::npos);
  CHECK_FALSE(has_raw_bytes(err));
  Finished top = run_to_end({gshare_top(), "--once", "--dir", gpu.dir()}, {{"PATH", "/usr/bin:/bin"}});
  CHECK(top.status == 0);
  CHECK_FALSE(has_raw_bytes(top.out));
}
