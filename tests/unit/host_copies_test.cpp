// Host copies made ahead of need (allocator/host_copies.h): the pace read
// between the pieces faulted in stops a copy, or hurries it with a
// page-out's threads. The driver is a table of fakes (base/driver_api.h):
// registering succeeds and is counted.
#include "allocator/host_copies.h"

#include <catch2/catch.hpp>

#include <dirent.h>

#include <atomic>

#include "base/driver_api.h"

namespace {

using namespace gshare;
using allocator::HostCopy;
using allocator::Pace;
using allocator::PaceCheck;

constexpr size_t kGiB = size_t(1) << 30;

std::atomic<int> g_registered{0};

// Replaces the driver with one that registers host memory, for the
// test's length.
struct RegisteringDriver {
  DriverApi saved = driver();
  RegisteringDriver() {
    DriverApi api = saved;
    api.mem_host_register = [](void*, size_t, unsigned int) {
      g_registered.fetch_add(1);
      return CUDA_SUCCESS;
    };
    api.mem_host_unregister = [](void*) { return CUDA_SUCCESS; };
    replace_driver(api);
  }
  ~RegisteringDriver() { replace_driver(saved); }
};

int threads_now() {
  int count = 0;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(tasks))
      if (entry->d_name[0] != '.') ++count;
    closedir(tasks);
  }
  return count;
}

// A pace that says what `script` says at each read (the last entry from
// then on), and records the threads of the process at each read.
struct ScriptedPace {
  std::vector<Pace> script;
  std::vector<int> threads;
  static Pace read(const void* context) {
    auto* self = static_cast<ScriptedPace*>(const_cast<void*>(context));
    self->threads.push_back(threads_now());
    return self->script[std::min(self->threads.size(), self->script.size()) - 1];
  }
};

}  // namespace

TEST_CASE("a copy made ahead stops when its pace says stop, registering nothing", "[host_copies]") {
  RegisteringDriver fake;
  g_registered = 0;
  ScriptedPace pace{{Pace::kSteady, Pace::kSteady, Pace::kStop}, {}};
  const HostCopy copy = allocator::make_host_copy(kGiB, 1, PaceCheck{ScriptedPace::read, &pace});
  CHECK(copy.stopped);
  CHECK(copy.pointer == 0);
  CHECK(g_registered == 0);
  // Read after each of its pieces, and none after the stop.
  CHECK(pace.threads.size() == 3);
}

TEST_CASE("a copy made ahead in a hurry faults in with a page-out's threads", "[host_copies]") {
  RegisteringDriver fake;
  g_registered = 0;
  // 8 GiB would take 8 threads; made ahead, 2 start. The second read
  // hurries it, and the fourth stops it, so little of the 8 GiB is
  // touched.
  const int before = threads_now();
  ScriptedPace pace{{Pace::kSteady, Pace::kHurry, Pace::kSteady, Pace::kStop}, {}};
  const HostCopy copy = allocator::make_host_copy(8 * kGiB, 2, PaceCheck{ScriptedPace::read, &pace});
  CHECK(copy.stopped);
  REQUIRE(pace.threads.size() == 4);
  INFO("threads before " << before << ", at each read " << pace.threads[0] << " " << pace.threads[1] << " "
                         << pace.threads[2] << " " << pace.threads[3]);
  CHECK(pace.threads[0] == before + 1);
  CHECK(pace.threads[2] == before + tunables::kPageOutTouchers - 1);
  CHECK(threads_now() == before);  // all joined
}

TEST_CASE("a copy made at a steady pace is registered whole", "[host_copies]") {
  RegisteringDriver fake;
  g_registered = 0;
  ScriptedPace pace{{Pace::kSteady}, {}};
  const HostCopy copy = allocator::make_host_copy(256 << 20, 2, PaceCheck{ScriptedPace::read, &pace});
  REQUIRE(copy.pointer != 0);
  CHECK(copy.registered);
  CHECK_FALSE(copy.stopped);
  CHECK(g_registered == 1);
  // 256 MiB in pieces of 64 MiB, between this thread and no other (one
  // toucher per GiB): four reads.
  CHECK(pace.threads.size() == 4);
  allocator::free_host_copy(copy, 256 << 20);
}
