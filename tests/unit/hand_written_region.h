// Regions written by hand, for the tests of what gshare-top reads: child
// processes own one slot each (a process never sees its own liveness locks,
// so the jobs must be other processes), and the test, playing the arbiter,
// sets fields on its own mapping inside a seqlock write section.
#pragma once

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "shm/arbiter.h"
#include "shm/layout.h"
#include "shm/region.h"
#include "shm/snapshot.h"

namespace gshare::test {

using shm::Region;
using shm::RegionHeader;

// A private directory for the test's regions, removed afterwards.
struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/gshare-hand-region-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { (void)!system(("rm -rf " + path).c_str()); }
  std::string path;
};

inline uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline shm::RegionFile open_region(const std::string& dir, const char* uuid, uint64_t capacity) {
  shm::RegionFile file;
  char error[shm::kErrorChars] = "";
  shm::RegionAccess access{dir.c_str(), nullptr};
  INFO(error);
  REQUIRE(shm::open_or_create_region(access, uuid, capacity, &file, error, sizeof error));
  return file;
}

// A job: a child process that claims a slot in the region and lives until
// the test kills it (kill -9, the way any gshare process may end).
class Job {
 public:
  Job(const std::string& dir, const char* uuid, uint64_t capacity, const char* command) {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      shm::RegionFile file;
      char error[shm::kErrorChars];
      shm::RegionAccess access{dir.c_str(), nullptr};
      int slot = -1;
      if (shm::open_or_create_region(access, uuid, capacity, &file, error, sizeof error)) {
        shm::Arbiter arbiter(file);
        shm::SlotIdentity who{int32_t(getpid()), uint32_t(getuid()), 1, command, capacity};
        if (arbiter.claim_slot(who)) slot = arbiter.own_slot();
      }
      (void)!write(ready[1], &slot, sizeof slot);
      for (;;) pause();
    }
    close(ready[1]);
    REQUIRE(read(ready[0], &slot_, sizeof slot_) == sizeof slot_);
    close(ready[0]);
    REQUIRE(slot_ >= 0);
  }
  ~Job() { kill9(); }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  void kill9() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  uint32_t slot() const { return uint32_t(slot_); }

 private:
  pid_t pid_ = -1;
  int slot_ = -1;
};

// Writes like the scheduler does: inside a seqlock write section, so that a
// reader never takes a half-written state for a whole one.
template <class Fn>
void write_region(Region* region, Fn fn) {
  region->header.seq.fetch_add(1, std::memory_order_acq_rel);
  fn(region->header);
  region->header.seq.fetch_add(1, std::memory_order_release);
}

// What gshare-top reads of the test's regions: the one GPU, and a process
// of it by slot (null if absent).
inline shm::GpuSnapshot only_gpu(const std::string& dir) {
  std::vector<shm::GpuSnapshot> gpus = shm::snapshot_regions(dir);
  REQUIRE(gpus.size() == 1);
  REQUIRE(gpus[0].error.empty());
  return gpus[0];
}

inline const shm::ProcessSnapshot* find_process(const shm::GpuSnapshot& gpu, uint32_t slot) {
  for (const shm::ProcessSnapshot& p : gpu.processes)
    if (p.slot == slot) return &p;
  return nullptr;
}

}  // namespace gshare::test
