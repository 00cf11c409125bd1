// How busy a job's kernels keep the GPU in its own turns
// (runtime/gpu_busy.h): the stretch's life, from armed to collected, over
// a table of fake driver functions (base/driver_api.h) whose events report
// the elapsed time the test sets.
#include "runtime/gpu_busy.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "base/clock.h"
#include "base/driver_api.h"
#include "scheduler/launch_detours.h"

namespace {

using namespace gshare;

constexpr uint64_t kSecond = 1'000'000'000;

std::atomic<uintptr_t> g_events{0};
std::atomic<int> g_recorded{0};
std::atomic<bool> g_ready{true};
std::atomic<float> g_elapsed_ms{1.0f};  // from a launch's begin event to its end event
std::atomic<float> g_gap_ms{0.0f};      // from one launch's end event to the next's begin
CUcontext const kContext = reinterpret_cast<CUcontext>(uintptr_t(0x1000));
CUstream const kStream = reinterpret_cast<CUstream>(uintptr_t(0x2000));

struct TimingDriver {
  DriverApi saved = driver();
  TimingDriver() {
    DriverApi api = saved;
    api.event_create = [](CUevent* e, unsigned int) {
      *e = reinterpret_cast<CUevent>(++g_events);
      return CUDA_SUCCESS;
    };
    api.event_record = [](CUevent, CUstream) {
      g_recorded++;
      return CUDA_SUCCESS;
    };
    api.event_query = [](CUevent) { return g_ready ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; };
    // Events are made in pairs, a launch's begin (odd) then its end (even).
    api.event_elapsed_time = [](float* ms, CUevent from, CUevent) {
      *ms = reinterpret_cast<uintptr_t>(from) % 2 == 1 ? g_elapsed_ms : g_gap_ms;
      return CUDA_SUCCESS;
    };
    api.ctx_get_current = [](CUcontext* c) {
      *c = kContext;
      return CUDA_SUCCESS;
    };
    api.ctx_push_current = [](CUcontext) { return CUDA_SUCCESS; };
    api.ctx_pop_current = [](CUcontext* c) {
      *c = kContext;
      return CUDA_SUCCESS;
    };
    replace_driver(api);
    runtime::forget_gpu_busy_after_fork();
    g_events = 0;
    g_ready = true;
    g_gap_ms = 0.0f;
  }
  ~TimingDriver() { replace_driver(saved); }
};

int detours() { return scheduler::g_launch_detours.load(); }

// One launch on the slow path while a stretch may be armed, as the launch
// gate makes it (`shared`: in a shared turn); returns whether it was timed.
bool launch(bool own_turn, bool shared = false) {
  if (!runtime::gpu_busy_armed()) return false;
  const int pair = runtime::gpu_busy_before_launch(kStream, own_turn, shared);
  runtime::gpu_busy_after_launch(pair, kStream, true);
  return pair >= 0;
}

}  // namespace

TEST_CASE("an armed stretch times each launch of the job's own turn, then stops detouring its launches") {
  TimingDriver fake;
  const int base = detours();
  CHECK_FALSE(runtime::gpu_busy_armed());
  runtime::arm_gpu_busy_sample(10 * kSecond);
  CHECK(runtime::gpu_busy_armed());
  CHECK(detours() == base + 1);
  const int recorded = g_recorded;
  const uint64_t before_launches = gshare::mono_now_ns();
  int timed = 0;
  while (launch(true)) ++timed;
  // Full at 256 launches; two events around each.
  CHECK(timed == 256);
  CHECK(g_recorded - recorded == 2 * 256);
  CHECK_FALSE(runtime::gpu_busy_armed());
  CHECK(detours() == base);
  // 256 ms of kernels over the few milliseconds the launches took: busy.
  g_elapsed_ms = 1.0f;
  uint32_t permille = 0;
  REQUIRE(runtime::collect_gpu_busy(&permille));
  CHECK(permille == 1000);
  // It tells of the work from the stretch's first launch on.
  CHECK(runtime::collected_gpu_busy_began_ns() >= before_launches);
  CHECK(runtime::collected_gpu_busy_began_ns() <= gshare::mono_now_ns());
  CHECK_FALSE(runtime::collect_gpu_busy(&permille));  // collected once
  // The next stretch comes a second after this one was armed, not before.
  runtime::arm_gpu_busy_sample(10 * kSecond + kSecond / 2);
  CHECK_FALSE(runtime::gpu_busy_armed());
  runtime::arm_gpu_busy_sample(11 * kSecond);
  CHECK(runtime::gpu_busy_armed());
  while (launch(true)) {
  }
  CHECK(detours() == base);
}

TEST_CASE("a stretch of launches far apart lasts its length, and its share is its kernels' time over it") {
  TimingDriver fake;
  runtime::arm_gpu_busy_sample(20 * kSecond);
  // A launch every 2 ms, each kernel 0.4 ms: the stretch ends at the first
  // launch 10 ms past its first (with 4 timed at least), about a fifth busy.
  int timed = 0;
  while (launch(true)) {
    ++timed;
    usleep(2000);
  }
  CHECK(timed >= 4);
  CHECK(timed <= 6);
  g_elapsed_ms = 0.4f;
  uint32_t permille = 0;
  REQUIRE(runtime::collect_gpu_busy(&permille));
  // 0.4 ms of kernels every 2 ms or more (a loaded machine sleeps longer).
  CHECK(permille >= 20);
  CHECK(permille <= 260);
}

TEST_CASE("a stretch cut short by the job's turn with too few launches says nothing") {
  TimingDriver fake;
  const int base = detours();
  runtime::arm_gpu_busy_sample(30 * kSecond);
  CHECK(launch(true));
  CHECK(launch(true));
  // The turn ended (or another job runs beside it): the stretch closes.
  CHECK_FALSE(launch(false));
  CHECK(detours() == base);
  uint32_t permille = 0;
  CHECK_FALSE(runtime::collect_gpu_busy(&permille));
}

TEST_CASE("launches outside the job's own turn are not timed, and a stretch with none stops detouring") {
  TimingDriver fake;
  const int base = detours();
  runtime::arm_gpu_busy_sample(40 * kSecond);
  CHECK_FALSE(launch(false));
  CHECK(runtime::gpu_busy_armed());  // still waiting for its own turn
  // Among many jobs its turn comes round in a few hundred milliseconds:
  // still armed then.
  runtime::arm_gpu_busy_sample(40 * kSecond + kSecond / 2);
  CHECK(runtime::gpu_busy_armed());
  // A second with nothing timed: it gives up until the next tick.
  runtime::arm_gpu_busy_sample(41 * kSecond);
  CHECK_FALSE(runtime::gpu_busy_armed());
  CHECK(detours() == base);
}

TEST_CASE("a stretch that has timed nothing is given up at a launch in a shared turn") {
  TimingDriver fake;
  const int base = detours();
  runtime::arm_gpu_busy_sample(45 * kSecond);
  CHECK_FALSE(launch(false, true));
  CHECK_FALSE(runtime::gpu_busy_armed());
  CHECK(detours() == base);
  // Once a stretch has timed launches, a shared turn closes it with what
  // it has (four at least: kept).
  runtime::arm_gpu_busy_sample(47 * kSecond);
  for (int i = 0; i < 4; ++i) CHECK(launch(true));
  CHECK_FALSE(launch(false, true));
  CHECK(detours() == base);
  uint32_t permille = 0;
  CHECK(runtime::collect_gpu_busy(&permille));
}

TEST_CASE("a stretch whose kernels still run is collected once they are done") {
  TimingDriver fake;
  runtime::arm_gpu_busy_sample(50 * kSecond);
  while (launch(true)) {
  }
  g_ready = false;
  uint32_t permille = 0;
  CHECK_FALSE(runtime::collect_gpu_busy(&permille));
  g_ready = true;
  CHECK(runtime::collect_gpu_busy(&permille));
}

namespace {

// A stretch of launches that each take `host_us` between their begin event
// and their return, then `gap_us` of host work before the next.
uint32_t busy_of_launches_with_host_time(int host_us, int gap_us) {
  int timed = 0;
  for (;;) {
    if (!runtime::gpu_busy_armed()) break;
    const int pair = runtime::gpu_busy_before_launch(kStream, true, false);
    usleep(host_us);
    runtime::gpu_busy_after_launch(pair, kStream, true);
    if (pair < 0) break;
    ++timed;
    usleep(gap_us);
  }
  CHECK(timed >= 4);
  uint32_t permille = 0;
  REQUIRE(runtime::collect_gpu_busy(&permille));
  return permille;
}

}  // namespace

TEST_CASE("a kernel launched onto an idle GPU is not charged the host's time between its begin event and its launch") {
  TimingDriver fake;
  // Each launch takes 1 ms on the host, then 1 ms before the next; its
  // pair reads 1.2 ms: the kernel (0.2 ms) arrived as the launch returned.
  g_elapsed_ms = 1.2f;
  SECTION("the GPU idle between launches: the kernels' 0.2 ms of each 2 ms, or less") {
    g_gap_ms = 0.8f;
    runtime::arm_gpu_busy_sample(60 * kSecond);
    CHECK(busy_of_launches_with_host_time(1000, 1000) <= 120);
  }
  SECTION("the GPU busy throughout, each begin event right after the last end: the pairs' whole time") {
    g_gap_ms = 0.0f;
    runtime::arm_gpu_busy_sample(70 * kSecond);
    // 1.2 ms of each 2 ms (less on a loaded machine whose sleeps run long).
    CHECK(busy_of_launches_with_host_time(1000, 1000) >= 200);
  }
}
