// The launch token between real processes over the fake driver, whose
// kernels take a set time and whose trace says when each one ran. The fake
// GPU runs the kernels of different processes at the same time, so any
// exclusion seen in the trace is gshare's.
#include <catch2/catch.hpp>

#include <set>
#include <unistd.h>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

struct Window {
  uint64_t from_ns, to_ns;
  uint64_t length() const { return to_ns > from_ns ? to_ns - from_ns : 0; }
};

// From when every process has started a kernel to when the first stops.
Window common_window(const std::vector<std::vector<KernelRun>>& per_process) {
  Window w{0, UINT64_MAX};
  for (const auto& runs : per_process) {
    REQUIRE_FALSE(runs.empty());
    w.from_ns = std::max(w.from_ns, runs.front().start_ns);
    uint64_t last = 0;
    for (const KernelRun& r : runs) last = std::max(last, r.end_ns);
    w.to_ns = std::min(w.to_ns, last);
  }
  return w;
}

uint64_t kernel_time_in(const std::vector<KernelRun>& runs, Window w) {
  uint64_t total = 0;
  for (const KernelRun& r : runs) {
    uint64_t from = std::max(r.start_ns, w.from_ns), to = std::min(r.end_ns, w.to_ns);
    if (to > from) total += to - from;
  }
  return total;
}

uint64_t last_end(const std::vector<KernelRun>& runs) {
  uint64_t last = 0;
  for (const KernelRun& r : runs) last = std::max(last, r.end_ns);
  return last;
}

// Kernels of `runs` that start inside [from, to).
int starts_between(const std::vector<KernelRun>& runs, uint64_t from, uint64_t to) {
  int n = 0;
  for (const KernelRun& r : runs) n += r.start_ns >= from && r.start_ns < to;
  return n;
}

// The longest time within [from, until) in which none of one process's
// kernels `runs` (in order) ran: the longest it waited for a turn there.
uint64_t longest_wait_in(const std::vector<KernelRun>& runs, uint64_t from, uint64_t until) {
  uint64_t longest = 0, last_end = from;
  for (const KernelRun& k : runs) {
    if (k.end_ns <= from) continue;
    if (k.start_ns >= until) break;
    if (k.start_ns > last_end) longest = std::max(longest, k.start_ns - last_end);
    last_end = std::max(last_end, k.end_ns);
  }
  return until > last_end ? std::max(longest, until - last_end) : longest;
}

constexpr uint64_t kMs = 1'000'000;

// Lengths of the uninterrupted runs of one process's kernels, in order.
std::vector<double> slice_lengths_ms(const std::vector<KernelRun>& all) {
  std::vector<double> slices;
  size_t first = 0;
  for (size_t i = 1; i <= all.size(); ++i) {
    if (i < all.size() && all[i].pid == all[first].pid) continue;
    slices.push_back(double(all[i - 1].end_ns - all[first].start_ns) / 1e6);
    first = i;
  }
  return slices;
}

// Waits until the process has launched a kernel: it holds, or held, the
// token.
void await_launched(const TestGpu& gpu, const Client& c) {
  await_process(gpu, c.pid(), "a launch", [](const nlohmann::json& p) { return p["launches"] > 0; });
}
// Waits until the process has asked for the token: it waits for it, or has
// had it already.
void await_arrived(const TestGpu& gpu, const Client& c) {
  await_process(gpu, c.pid(), "a wait for the token", [](const nlohmann::json& p) {
    return p["job_state"] == "waiting" || p["launches"] > 0;
  });
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// What gshare-top says about the switches on a GPU (scheduler/token.h):
// the GPU's figures, and the same summed over its processes.
struct Switches {
  uint64_t handovers = 0, switches = 0, total_ns = 0, max_ns = 0;
  uint64_t process_switches = 0, process_ns = 0;
  bool every_process_ns_positive = true;
};

Switches switches_of(const nlohmann::json& gpu) {
  Switches s;
  s.handovers = gpu["handovers"];
  s.switches = gpu["switches"];
  s.total_ns = gpu["switch_ns_total"];
  s.max_ns = gpu["switch_ns_max"].is_null() ? 0 : gpu["switch_ns_max"].get<uint64_t>();
  for (const nlohmann::json& p : gpu["processes"]) {
    s.process_switches += p["switches"].get<uint64_t>();
    s.process_ns += p["switch_ns"].get<uint64_t>();
    if (p["switches"] > 0 && (p["switch_ns"] == 0 || p["last_switch_ns"].is_null()))
      s.every_process_ns_positive = false;
  }
  return s;
}

struct FairRun {
  double share_a, share_b, overlap_fraction, median_slice_ms;
  double overlap_ms;
  std::vector<double> overlap_span_ms;  // each stretch in which both ran (overlap_spans)
  int handovers;
  Switches switches;
};

// Every handover to a job that then launched is a switch with a measured
// cost: here the next job waits in a launch, so the cost is its wake-up,
// far below a second; a job that finished its loop just as it was given
// the token never launches, and its switch is not counted.
void check_switches(const Switches& s) {
  CHECK(s.switches > 0);
  CHECK(s.switches <= s.handovers);
  CHECK(s.switches * 10 >= s.handovers * 9);
  CHECK(s.process_switches == s.switches);
  CHECK(s.process_ns == s.total_ns);
  CHECK(s.every_process_ns_positive);
  CHECK(s.total_ns > 0);
  CHECK(s.total_ns / s.switches < 250 * kMs);
  CHECK(s.max_ns < 3000 * kMs);
}

// Two processes that launch continuously (2 ms iterations ending in a sync)
// for three seconds, with weights 3:1 or 1:1.
FairRun run_fair_pair(const char* weight_a, const char* handover) {
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fair"},
          {"GSHARE_QUANTUM_MS", "20"}, {"GSHARE_HANDOVER", handover}};
  Env env_a = env;
  env_a["GSHARE_WEIGHT"] = weight_a;
  Client a(gpu, env_a), b(gpu, env);
  REQUIRE(a.send("init") == "init ok");
  REQUIRE(b.send("init") == "init ok");
  a.post("trainfor 3 4 500 sync 0");
  b.post("trainfor 3 4 500 sync 0");
  CHECK(words(a.reply(20)).at(1) == "ok");
  CHECK(words(b.reply(20)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto ka = kernels_of(all, a.pid()), kb = kernels_of(all, b.pid());
  Window w = common_window({ka, kb});
  REQUIRE(w.length() > 2000 * kMs);
  double busy = double(kernel_time_in(ka, w) + kernel_time_in(kb, w));
  // Both clients still live: the GPU's switches are theirs.
  nlohmann::json top = gpu.top_json();
  REQUIRE(top["gpus"][0]["processes"].size() == 2);
  int handovers = top["gpus"][0]["handovers"].get<int>();
  // fair's clock: each job's vtime has run (token time over its weight),
  // and the GPU's floor, the least vtime of the active jobs at some moment,
  // is past none of them (both are idle now, their loops done).
  double most_vtime = 0;
  for (const nlohmann::json& p : top["gpus"][0]["processes"]) {
    CHECK(p["vtime_ms"].get<double>() > 0);
    CHECK(p["vtime_ms"].get<double>() <= p["served_ms"].get<double>() / p["weight"].get<double>() + 100);
    most_vtime = std::max(most_vtime, p["vtime_ms"].get<double>());
  }
  CHECK(top["gpus"][0]["vtime_floor_ms"].get<double>() > 0);
  CHECK(top["gpus"][0]["vtime_floor_ms"].get<double>() <= most_vtime);
  std::vector<double> span_ms;
  for (const auto& [from, to] : overlap_spans(ka, kb, kMs)) span_ms.push_back(double(to - from) / 1e6);
  return {double(kernel_time_in(ka, w)) / busy, double(kernel_time_in(kb, w)) / busy,
          double(overlap_between(ka, kb)) / double(w.length()), median(slice_lengths_ms(all)),
          double(overlap_between(ka, kb)) / 1e6, span_ms, handovers, switches_of(top["gpus"][0])};
}

}  // namespace

TEST_CASE("under fair, two continuous launchers never overlap and split kernel time 50/50", "[policies]") {
  FairRun run = run_fair_pair("1", "strict");
  CHECK(run.overlap_fraction == 0.0);  // strict: the holder drains before handing over
  CHECK(run.share_a == Approx(0.5).margin(0.05));
  CHECK(run.share_b == Approx(0.5).margin(0.05));
  // Slices last one quantum (20 ms), ending at the next 2 ms iteration.
  CHECK(run.median_slice_ms == Approx(21).margin(4));
  check_switches(run.switches);
}

TEST_CASE("under fair with overlap handover, only a holder's tail overlaps the next job", "[policies]") {
  FairRun run = run_fair_pair("1", "overlap");
  // The holder hands over with its last iteration (2 ms) still queued, at
  // most: overlap happens at handovers only, one tail each. Counted and
  // measured a stretch at a time, by the median: a loaded host runs some
  // of the fake GPU's kernels late, which stretched the sum past 2.5 ms a
  // handover (two jobs running side by side would overlap through whole
  // turns of 20 ms).
  INFO("overlap " << run.overlap_ms << " ms in " << run.overlap_span_ms.size() << " stretches, "
                  << run.handovers << " handovers");
  CHECK(run.handovers >= 50);
  CHECK(int(run.overlap_span_ms.size()) <= run.handovers + 2);
  CHECK(median(run.overlap_span_ms) <= 3.0);
  CHECK(run.overlap_ms <= run.handovers * 4.0);
  CHECK(run.share_a == Approx(0.5).margin(0.05));
  check_switches(run.switches);
}

TEST_CASE("under fair, weights 3:1 split kernel time 75/25", "[policies]") {
  FairRun run = run_fair_pair("3", "strict");
  CHECK(run.share_a == Approx(0.75).margin(0.05));
  CHECK(run.share_b == Approx(0.25).margin(0.05));
}

TEST_CASE("under priority, a high-priority launch waits at most about one low-priority kernel", "[policies]") {
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "priority"}};
  Env low_env = env, high_env = env;
  low_env["GSHARE_PRIORITY"] = "0";
  high_env["GSHARE_PRIORITY"] = "10";
  Client low(gpu, low_env), high(gpu, high_env);
  REQUIRE(low.send("init") == "init ok");
  REQUIRE(high.send("init") == "init ok");
  // Low: 20 ms kernels, two per iteration. High: a 1 ms request every 100 ms.
  low.post("trainfor 3 2 20000 sync 0");
  await_launched(gpu, low);
  auto probe = words(high.send("probe 20 1000 100", 30));
  REQUIRE(probe.size() == 4);
  CHECK(probe[1] == "ok");
  double worst_us = std::stod(probe[3]);
  CHECK(worst_us < 20000 + 1000 + 10000);  // one low kernel, its own, slack
  // The low job still runs, and finishes.
  auto done = words(low.reply(30));
  REQUIRE(done.size() == 4);
  CHECK(done[1] == "ok");
  CHECK(std::stol(done[2]) >= 30);  // of about 75 alone
  // While the high job ran, the low one had at most one kernel queued:
  // no more than that one starts during a high kernel.
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto lows = kernels_of(all, low.pid());
  for (const KernelRun& h : kernels_of(all, high.pid()))
    CHECK(starts_between(lows, h.start_ns, h.end_ns) <= 1);
}

TEST_CASE("fifo runs the first job until it is done, then the next arrival", "[policies]") {
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fifo"}};
  Client a(gpu, env), b(gpu, env), c(gpu, env);
  for (Client* x : {&a, &b, &c}) REQUIRE(x->send("init") == "init ok");
  // Arrivals in order: each once the one before has asked for the token.
  a.post("train 100 2 1000 sync 0");
  await_launched(gpu, a);
  b.post("train 50 2 1000 sync 0");
  await_arrived(gpu, b);
  c.post("train 50 2 1000 sync 0");
  for (Client* x : {&a, &b, &c}) CHECK(words(x->reply(30)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto ka = kernels_of(all, a.pid()), kb = kernels_of(all, b.pid()), kc = kernels_of(all, c.pid());
  REQUIRE(ka.size() == 200);
  REQUIRE(kb.size() == 100);
  REQUIRE(kc.size() == 100);
  CHECK(last_end(ka) <= kb.front().start_ns);
  CHECK(last_end(kb) <= kc.front().start_ns);
}

TEST_CASE("srtf runs the job with the least remaining time first; a shorter arrival preempts at the slice end",
          "[policies]") {
  TestGpu gpu;
  // Strict handovers: no loans. Under overlap a holder whose host work
  // between syncs passes 2 ms (a loaded machine's slow wake-ups) lends the
  // token to a waiting job for a kernel or two, and the kernels' order is
  // then not the order of turns that this test reads.
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "srtf"},
          {"GSHARE_QUANTUM_MS", "30"}, {"GSHARE_HANDOVER", "strict"}};
  Env long_env = env, mid_env = env, short_env = env, unknown_env = env;
  long_env["GSHARE_EXPECTED_SECONDS"] = "100";
  mid_env["GSHARE_EXPECTED_SECONDS"] = "2";
  short_env["GSHARE_EXPECTED_SECONDS"] = "0.5";
  Client longer(gpu, long_env), unknown(gpu, unknown_env), mid(gpu, mid_env), shorter(gpu, short_env);
  for (Client* x : {&longer, &unknown, &mid, &shorter}) REQUIRE(x->send("init") == "init ok");
  longer.post("trainfor 3 1 2000 sync 0");
  await_launched(gpu, longer);
  // While the long job runs: a job with no estimate and a 2 s one arrive,
  // then, while the 2 s job runs, a 0.5 s one.
  unknown.post("train 40 1 2000 sync 0");
  mid.post("train 200 1 2000 sync 0");
  await_launched(gpu, mid);
  uint64_t short_posted_ns = monotonic_ns();
  shorter.post("train 40 1 2000 sync 0");
  for (Client* x : {&longer, &unknown, &mid, &shorter}) CHECK(words(x->reply(30)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto kl = kernels_of(all, longer.pid()), ku = kernels_of(all, unknown.pid());
  auto km = kernels_of(all, mid.pid()), ks = kernels_of(all, shorter.pid());
  REQUIRE(ks.size() == 40);
  REQUIRE(km.size() == 200);
  // The 2 s job took over from the long one at its slice end and ran
  // until the shorter one came, which took over at the next slice end.
  CHECK(km.front().start_ns < short_posted_ns);
  CHECK(ks.front().start_ns - short_posted_ns < 30 * kMs + 50 * kMs);
  CHECK(last_end(ks) <= last_end(km));
  CHECK(starts_between(km, ks.front().start_ns + 3 * kMs, last_end(ks)) == 0);
  // The long job waited for both; the job with no estimate counts as
  // longest: it ran last.
  {
    // Who ran when, should this fail: runs of consecutive kernels per job.
    std::string timeline;
    pid_t last = 0;
    for (const KernelRun& k : all) {
      if (k.pid == last) continue;
      last = k.pid;
      const char* who = k.pid == longer.pid() ? "long" : k.pid == mid.pid() ? "mid"
                        : k.pid == shorter.pid() ? "short" : "unknown";
      timeline += std::string(who) + "@" + std::to_string((k.start_ns - all.front().start_ns) / kMs) + " ";
    }
    INFO(timeline);
    CHECK(starts_between(kl, km.front().start_ns + 3 * kMs, last_end(km)) == 0);
    CHECK(last_end(kl) <= ku.front().start_ns);
  }
}

TEST_CASE("kill -9 of the token holder passes the token on within a second", "[policies]") {
  // Under strict handovers, so that the waiter's first kernel is the one
  // the kill lets in: under overlap a holder descheduled after a sync (a
  // loaded machine) lends the token, and the waiter runs on loan before.
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fifo"}, {"GSHARE_HANDOVER", "strict"}};
  Client holder(gpu, env), waiter(gpu, env);
  REQUIRE(holder.send("init") == "init ok");
  REQUIRE(waiter.send("init") == "init ok");
  holder.post("trainfor 20 1 2000 sync 0");
  await_launched(gpu, holder);
  waiter.post("train 20 1 2000 sync 0");
  await_arrived(gpu, waiter);
  uint64_t killed_ns = monotonic_ns();
  holder.kill9();
  CHECK(words(waiter.reply(10)).at(1) == "ok");
  auto mine = kernels_of(read_kernel_trace(gpu.kernel_trace()), waiter.pid());
  REQUIRE(mine.size() == 20);
  CHECK(mine.front().start_ns > killed_ns);  // it had waited until then
  CHECK(mine.front().start_ns - killed_ns < 1000 * kMs);
}

TEST_CASE("kill -9 of a waiter changes nothing for the others", "[policies]") {
  // Under strict handovers: under overlap a holder descheduled for 2 ms
  // after a sync (a loaded machine) may lend the token, and the victim may
  // run a kernel on loan before it is killed.
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fifo"}, {"GSHARE_HANDOVER", "strict"}};
  Client first(gpu, env), victim(gpu, env), last(gpu, env);
  for (Client* x : {&first, &victim, &last}) REQUIRE(x->send("init") == "init ok");
  // The first job runs until released, so that the others are sure to be
  // waiting behind it.
  first.post("trainfor 60 1 2000 sync 0");
  await_launched(gpu, first);
  victim.post("train 50 1 2000 sync 0");
  await_arrived(gpu, victim);
  last.post("train 50 1 2000 sync 0");
  await_arrived(gpu, last);
  victim.kill9();
  CHECK(words(first.release()).at(1) == "ok");
  CHECK(words(last.reply(20)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto kf = kernels_of(all, first.pid()), kl = kernels_of(all, last.pid());
  REQUIRE_FALSE(kf.empty());
  REQUIRE(kl.size() == 50);
  CHECK(kernels_of(all, victim.pid()).empty());
  CHECK(last_end(kf) <= kl.front().start_ns);
  // The first job's finish hands over at once: nobody waits on the dead one.
  CHECK(kl.front().start_ns - last_end(kf) < 300 * kMs);
}

TEST_CASE("an idle holder loses the token after GSHARE_IDLE_MS") {
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fifo"},
          {"GSHARE_IDLE_MS", "150"}};
  Client idler(gpu, env), waiter(gpu, env);
  REQUIRE(idler.send("init") == "init ok");
  REQUIRE(waiter.send("init") == "init ok");
  // Takes the token, then does nothing. It never syncs: a holder whose
  // work is known drained would lend the token at once (loans, below).
  REQUIRE(idler.send("launch 3 1000") == "launch ok 3");
  usleep(10'000);  // its kernels done
  uint64_t asked_ns = monotonic_ns();
  REQUIRE(waiter.send("train 5 1 1000 sync 0") .rfind("train ok", 0) == 0);
  auto mine = kernels_of(read_kernel_trace(gpu.kernel_trace()), waiter.pid());
  REQUIRE_FALSE(mine.empty());
  uint64_t waited = mine.front().start_ns - asked_ns;
  CHECK(waited >= 140 * kMs);  // the idler kept it for its idle time
  CHECK(waited < 600 * kMs);
  CHECK(idler.send("pid").rfind("pid", 0) == 0);  // and the idler is still alive
}

TEST_CASE("a holder whose copy to pageable memory waits for its kernels is not idle") {
  // PyTorch's `.item()`: cuMemcpyDtoHAsync into pageable memory returns only
  // once the step's kernels are done, then a stream sync. The job is busy on
  // the GPU throughout; taken for idle during the copy, it lost its turn at
  // nearly every step (and under paging, its memory after it).
  TestGpu gpu;
  Env env{{"GSHARE_POLICY", "fair"}, {"GSHARE_QUANTUM_MS", "2000"}};
  Client a(gpu, env), b(gpu, env);
  REQUIRE(a.send("init") == "init ok");
  REQUIRE(b.send("init") == "init ok");
  // Steps of one 150 ms kernel: 25 each, 7.5 s in all, about four turns of
  // 2 s. Found idle in its copies (past GSHARE_IDLE_MS, 100 ms), a holder
  // would hand over at every step: 50 times.
  a.post("train 25 1 150000 acopy 0");
  b.post("train 25 1 150000 acopy 0");
  CHECK(a.reply(120).rfind("train ok 25 ", 0) == 0);
  CHECK(b.reply(120).rfind("train ok 25 ", 0) == 0);
  const uint64_t handovers = gpu.top_json()["gpus"][0]["handovers"];
  CHECK(handovers <= 12);
}

namespace {
// gshare's latest iteration (ms) lies within what the loop itself timed
// for its last iterations (those the figure gshare published may be of),
// give or take 30%: a host hiccup that stretches an iteration on a loaded
// machine stretches it for both.
void check_latest_iteration(Client& job, double gshare_ms) {
  auto last = words(job.send("lastiters"));
  REQUIRE(last.size() == 3);
  INFO("gshare's latest iteration " << gshare_ms << " ms; the loop's last ones " << last[1] << " to "
                                    << last[2] << " ms");
  CHECK(gshare_ms >= 0.7 * std::stod(last[1]));
  CHECK(gshare_ms <= 1.3 * std::stod(last[2]));
}

nlohmann::json only_process(const nlohmann::json& top) {
  REQUIRE(top["gpus"].size() == 1);
  REQUIRE(top["gpus"][0]["processes"].size() == 1);
  return top["gpus"][0]["processes"][0];
}
}  // namespace

TEST_CASE("iteration detection finds the iterations of a loop that synchronises") {
  TestGpu gpu;
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  // 60 iterations: 3 kernels of 300 us, a sync, 3 ms on the host.
  auto done = words(job.send("train 60 3 300 sync 3000"));
  REQUIRE(done.size() == 4);
  // The upkeep thread publishes the figures every 250 ms.
  nlohmann::json p = await_process(gpu, job.pid(), "the loop's iterations", [](const nlohmann::json& p) {
    return p["iteration_source"] == "syncs" && p["iterations"] >= 50;
  }, 5);
  CHECK(only_process(gpu.top_json())["pid"] == job.pid());
  CHECK(p["iteration_source"] == "syncs");
  CHECK(p["iteration_launches"] == 3);
  CHECK(p["iterations"].get<int>() >= 50);  // found within the first few
  CHECK(p["iterations"].get<int>() <= 60);
  check_latest_iteration(job, p["iteration_ms"].get<double>());
}

TEST_CASE("iteration detection takes a synchronous copy to the host as a sync") {
  TestGpu gpu;
  for (const char* load : {"gpa", "dlsym", "link"}) {
    INFO(load);
    Client job(gpu, {}, load);
    REQUIRE(job.send("init") == "init ok");
    // The loss read back with cuMemcpyDtoH, no explicit sync.
    auto done = words(job.send("train 40 3 300 copy 2000"));
    REQUIRE(done.size() == 4);
    nlohmann::json p = await_process(gpu, job.pid(), "the loop's iterations", [](const nlohmann::json& p) {
      return p["iteration_source"] == "syncs" && p["iterations"] >= 30;
    }, 5);
    CHECK(only_process(gpu.top_json())["pid"] == job.pid());
    CHECK(p["iteration_source"] == "syncs");
    CHECK(p["iteration_launches"] == 3);
    CHECK(p["iterations"].get<int>() >= 30);
    job.send("exit");
    job.finish();
  }
}

TEST_CASE("iteration detection finds the iterations of a loop that never synchronises") {
  TestGpu gpu;
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  // 4 different kernels, no sync, 4 ms on the host: only the launch pattern shows.
  auto done = words(job.send("train 600 4 100 nosync 4000"));
  REQUIRE(done.size() == 4);
  nlohmann::json p = await_process(gpu, job.pid(), "the loop's last iteration", [](const nlohmann::json& p) {
    return p["iterations"] == 600;
  }, 5);
  CHECK(only_process(gpu.top_json())["pid"] == job.pid());
  CHECK(p["iteration_source"] == "launches");
  CHECK(p["iteration_launches"] == 4);
  CHECK(p["iterations"] == 600);
  check_latest_iteration(job, p["iteration_ms"].get<double>());
}

TEST_CASE("a process that asks for another policy than the GPU's gets one warning naming both") {
  TestGpu gpu;
  Client first(gpu, {{"GSHARE_POLICY", "fifo"}});
  REQUIRE(first.send("init") == "init ok");
  REQUIRE(first.send("launch 1 10") == "launch ok 1");
  Client second(gpu, {{"GSHARE_POLICY", "srtf"}});
  REQUIRE(second.send("init") == "init ok");
  REQUIRE(second.send("launch 1 10") == "launch ok 1");
  std::string err = second.stderr_text();
  CHECK(err.find("GSHARE_POLICY=srtf") != std::string::npos);
  CHECK(err.find("fifo") != std::string::npos);
  CHECK(gpu.top_json()["gpus"][0]["policy"] == "fifo");
  Client third(gpu);  // the default, not asked for: no warning
  REQUIRE(third.send("init") == "init ok");
  REQUIRE(third.send("launch 1 10") == "launch ok 1");
  CHECK(third.stderr_text().find("GSHARE_POLICY") == std::string::npos);
}

TEST_CASE("srtf ranks a job by GSHARE_EXPECTED_ITERS times its measured iteration time") {
  TestGpu gpu;
  Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "srtf"},
          {"GSHARE_QUANTUM_MS", "30"}};
  Env long_env = env, short_env = env;
  long_env["GSHARE_EXPECTED_ITERS"] = "100000";
  short_env["GSHARE_EXPECTED_ITERS"] = "150";
  Client longer(gpu, long_env), shorter(gpu, short_env);
  REQUIRE(longer.send("init") == "init ok");
  REQUIRE(shorter.send("init") == "init ok");
  longer.post("trainfor 3 1 2000 sync 0");
  await_process(gpu, longer.pid(), "the long job's iteration time", [](const nlohmann::json& p) {
    return !p["iteration_ms"].is_null();
  });
  shorter.post("train 150 1 2000 sync 0");
  CHECK(words(shorter.reply(20)).at(1) == "ok");
  CHECK(words(longer.reply(20)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto kl = kernels_of(all, longer.pid()), ks = kernels_of(all, shorter.pid());
  REQUIRE(ks.size() == 150);
  // The newcomer is measured in its first slice, found shorter (0.3 s
  // against 200 s), and runs to its end; the long job waits throughout,
  // but for a slice or two while the newcomer is not yet measured.
  int long_kernels_meanwhile = starts_between(kl, ks.front().start_ns, last_end(ks));
  CHECK(long_kernels_meanwhile <= 40);  // at most about two 30 ms slices of 2 ms kernels
  CHECK(last_end(ks) - ks.front().start_ns < 600 * kMs);  // 300 ms of work, barely interrupted
  CHECK(last_end(ks) < last_end(kl));  // it did not wait for the long job to end
}

TEST_CASE("a holder that never syncs cannot starve the others: every wait ends within its bound") {
  // The holder keeps 1 GiB of memory no iteration has classified (so its
  // lane's space is its own) and launches without ever syncing. A job that
  // only launches gets slices within quantum + GSHARE_SLICE_MAX_MS, and a
  // newcomer's allocation is answered within GSHARE_ADMIT_TIMEOUT_S.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "5"}};
  Client holder(gpu, env), launcher(gpu, env), newcomer(gpu, env);
  for (Client* c : {&holder, &launcher, &newcomer}) REQUIRE(c->send("init") == "init ok");
  REQUIRE(holder.send("alloc 1G") == "alloc ok a0");
  holder.post("trainfor 60 1 2000 nosync 0");  // until released
  await_launched(gpu, holder);
  auto start = std::chrono::steady_clock::now();
  launcher.post("train 20 1 1000 sync 0");
  std::string allocated = newcomer.send("alloc 512M", 10);
  double answered_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(newcomer.stderr_text());
  CHECK_FALSE(allocated.empty());
  CHECK(answered_s < 5 + 1.0);
  std::string trained = launcher.reply(8);
  double trained_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(trained.rfind("train ok 20", 0) == 0);
  CHECK(trained_s < 8);
  CHECK(holder.release().rfind("train ok", 0) == 0);  // it ran throughout
}

TEST_CASE("under fair, a holder sitting idle with nobody waiting is not charged for that time") {
  // Its set-up done, a job waits (for a common start, for its user) and
  // keeps the token, since nobody else wants it. Charged for that, it
  // would come back seconds ahead on fair's clock, and every job that
  // arrived meanwhile would be placed against that lead.
  TestGpu gpu;
  Client job(gpu, {{"GSHARE_POLICY", "fair"}});
  REQUIRE(job.send("init") == "init ok");
  CHECK(words(job.send("train 20 1 2000 sync 0", 20)).at(1) == "ok");
  usleep(2'000'000);
  nlohmann::json p = gpu.top_process(job.pid());
  INFO(p.dump());
  CHECK(p["holds_token"] == true);  // nobody asked for it
  CHECK(p["served_ms"].get<double>() < 600);
  CHECK(p["vtime_ms"].get<double>() < 600);
}

TEST_CASE("under fair, a job switched out that stops launching becomes idle without another grant") {
  // A job handed over at its slice's end is marked waiting, so that it
  // goes on at its next launch. One that never launches again (its work
  // done, or asleep at a barrier) waits in name only: granted the token, it
  // would hold it unused for its idle time while the others stand still,
  // and on fair's clock it would stay active with its old vtime. With a
  // quantum of 1 ms the stopping job hands over at nearly every sync, its
  // last one too. Two heavy jobs (weight 200: turns of 200 ms) take turns
  // meanwhile; the first decision after the stop comes after the stopping
  // job's idle time (100 ms), and its vtime is the least of the three only
  // turns later. Its share is 1/401 of the GPU, so that each of its 2 ms
  // steps waits for about four heavy turns: a few steps an episode.
  TestGpu gpu;
  const Env env{{"GSHARE_POLICY", "fair"}, {"GSHARE_QUANTUM_MS", "1"}, {"GSHARE_IDLE_MS", "100"}};
  Env heavy_env = env;
  heavy_env["GSHARE_WEIGHT"] = "200";
  Client stopping(gpu, env), heavy(gpu, heavy_env), other(gpu, heavy_env);
  for (Client* job : {&stopping, &heavy, &other}) REQUIRE(job->send("init") == "init ok");
  heavy.post("trainfor 60 1 2000 sync 0");
  other.post("trainfor 60 1 2000 sync 0");
  await_launched(gpu, heavy);
  await_launched(gpu, other);
  for (int episode = 0; episode < 3; ++episode) {
    REQUIRE(words(stopping.send("train 4 1 2000 sync 0", 20)).at(1) == "ok");
    const uint64_t granted = gpu.top_process(stopping.pid())["granted"].get<uint64_t>();
    usleep(1'500'000);  // seven of the heavy jobs' turns
    nlohmann::json p = gpu.top_process(stopping.pid());
    INFO("episode " << episode << ": " << p.dump());
    CHECK(p["granted"].get<uint64_t>() == granted);
    CHECK(p["job_state"] == "idle");
    CHECK(p["holds_token"] == false);
  }
  for (Client* job : {&heavy, &other}) CHECK(job->release().rfind("train ok", 0) == 0);
}

namespace {
// The time in `w` during which at least one kernel of `runs` ran.
uint64_t busy_time_in(std::vector<KernelRun> runs, Window w) {
  std::sort(runs.begin(), runs.end(), [](const KernelRun& x, const KernelRun& y) { return x.start_ns < y.start_ns; });
  uint64_t busy = 0, covered_to = w.from_ns;
  for (const KernelRun& r : runs) {
    const uint64_t from = std::max(r.start_ns, covered_to), to = std::min(r.end_ns, w.to_ns);
    if (to > from) busy += to - from;
    covered_to = std::max(covered_to, std::min(r.end_ns, w.to_ns));
  }
  return busy;
}
}  // namespace

namespace {
// Two jobs that run `train` and a third that runs `host_bound_step` (a
// short step, then host work: "KERNELS MICROS sync GAP_MICROS") for 4 s,
// started together. Before them the third runs 1.5 s alone: its pace on
// this machine now (other tests may load it, stretching every sleep and
// wake-up), in *alone_ms a step, and what fair's clock charged it for
// that, in *alone_served_ms. Returns the third's reply to the run
// together, once all three have answered ok.
std::vector<std::string> run_beside_host_bound(TestGpu& gpu, Client& host_bound, Client& a, Client& b,
                                               const std::string& train, const std::string& host_bound_step,
                                               double* alone_ms, double* alone_served_ms) {
  for (Client* job : {&host_bound, &a, &b}) REQUIRE(job->send("init") == "init ok");
  const std::vector<std::string> alone = words(host_bound.send("trainfor 1.5 " + host_bound_step, 20));
  REQUIRE(alone.at(1) == "ok");
  *alone_ms = std::stod(alone.at(3)) / std::max(1.0, std::stod(alone.at(2)));
  *alone_served_ms = gpu.top_process(host_bound.pid())["served_ms"].get<double>();
  a.post(train);
  b.post(train);
  host_bound.post("trainfor 4 " + host_bound_step);
  const std::vector<std::string> reply = words(host_bound.reply(20));
  for (Client* job : {&a, &b}) CHECK(words(job->reply(20)).at(1) == "ok");
  REQUIRE(reply.at(1) == "ok");
  return reply;
}
}  // namespace

TEST_CASE("a holder working on the host lends the token until its next launch") {
  // One job spends 30 ms on the host after each 1 ms kernel and its sync;
  // two others launch 2 ms kernels back to back. Holding the token, the
  // first would leave the GPU idle through its host work: with 5 ms
  // quanta fair's clock gave it a third of the time, the GPU ran kernels
  // about 70% of it, and the job made 23 steps a second, waiting for
  // turns. Lent to the others while it works on the host, and taken back
  // at its next launch, the token keeps the GPU busy, and the host-bound
  // job keeps the pace it has alone (31 ms a step). Under strict handovers
  // nothing is lent: taking the token back would find the borrower's
  // kernel still running.
  for (const std::string handover : {"overlap", "strict"}) {
    INFO(handover);
    TestGpu gpu;
    const Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fair"},
                  {"GSHARE_QUANTUM_MS", "5"}, {"GSHARE_HANDOVER", handover}};
    Client host_bound(gpu, env), a(gpu, env), b(gpu, env);
    double alone_ms = 0, alone_served_ms = 0;
    const std::vector<std::string> reply = run_beside_host_bound(gpu, host_bound, a, b, "trainfor 4 1 2000 sync 0",
                                                                 "1 1000 sync 30000", &alone_ms, &alone_served_ms);
    nlohmann::json top = gpu.top_json()["gpus"][0];
    if (handover == "strict") {
      CHECK(top["loans"].get<uint64_t>() == 0);
      continue;
    }
    const double steps = std::stod(reply.at(2)), elapsed_ms = std::stod(reply.at(3));
    INFO("alone " << alone_ms << " ms a step");
    CHECK(steps >= 0.85 * elapsed_ms / std::max(31.0, alone_ms));
    auto all = read_kernel_trace(gpu.kernel_trace());
    Window w = common_window({kernels_of(all, host_bound.pid()), kernels_of(all, a.pid()), kernels_of(all, b.pid())});
    REQUIRE(w.length() > 3000 * kMs);
    const double busy = double(busy_time_in(all, w)) / double(w.length());
    INFO("GPU busy " << busy << ", " << top.dump());
    CHECK(busy >= 0.8);
    CHECK(top["loans"].get<uint64_t>() >= uint64_t(steps / 2));
    // The lender is charged only for what it held: a few ms a step, not
    // a third of the time.
    for (const nlohmann::json& p : top["processes"])
      if (p["pid"] == host_bound.pid()) CHECK(p["served_ms"].get<double>() - alone_served_ms < 0.25 * elapsed_ms);
  }
}

TEST_CASE("under fair, jobs that come back to a running holder are placed level with its clock as charged now") {
  // A holder's clock is charged at decisions and at every upkeep tick, so
  // between two it lags by up to a tick (250 ms). Jobs that come back from
  // idle are placed level with the least clock: placed against the lagging
  // figure, they stood up to a tick behind the holder, which then waited
  // for all of them to catch up (among 64 jobs, six rounds of turns). The
  // holder runs alone, seven jobs join it at once; three times, since the
  // lag at their arrival is anywhere within a tick.
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    TestGpu gpu;
    const Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fair"}, {"GSHARE_QUANTUM_MS", "20"}};
    Client holder(gpu, env);
    std::vector<std::unique_ptr<Client>> others;
    for (int i = 0; i < 7; ++i) others.push_back(std::make_unique<Client>(gpu, env));
    REQUIRE(holder.send("init") == "init ok");
    for (auto& c : others) REQUIRE(c->send("init") == "init ok");
    holder.post("trainfor 4 1 2000 sync 0");
    await_launched(gpu, holder);
    usleep(1'000'000 + 83'000 * round);
    for (auto& c : others) c->post("trainfor 2 1 2000 sync 0");
    CHECK(words(holder.reply(20)).at(1) == "ok");
    for (auto& c : others) CHECK(words(c->reply(20)).at(1) == "ok");
    auto all = read_kernel_trace(gpu.kernel_trace());
    uint64_t joined = UINT64_MAX;
    for (auto& c : others) {
      auto runs = kernels_of(all, c->pid());
      REQUIRE_FALSE(runs.empty());
      joined = std::min(joined, runs.front().start_ns);
    }
    // The holder's longest wait in the newcomers' first second: its turn
    // comes after one of each of theirs (7 x 20 ms, and switches).
    const uint64_t longest = longest_wait_in(kernels_of(all, holder.pid()), joined, joined + 1000 * kMs);
    INFO(gpu.top_json().dump());
    CHECK(longest < 400 * kMs);
  }
}

TEST_CASE("a holder whose steps are many short kernels lends its token as soon as its host work begins") {
  // The shape of a PyTorch step: a host-bound job launches ten 300 us
  // kernels, syncs and works 30 ms on the host; two others run steps of
  // thirty such kernels and a sync. The loan watcher that woke while the
  // holder was inside its sync slept until the holder's slice ended (20
  // ms), so the job held the token through most of its host work: it was
  // charged a third of the time and made 71 and 77 steps in 4 s, where it
  // makes 118 alone.
  TestGpu gpu;
  const Env env{{"GSHARE_POLICY", "fair"}};
  Client host_bound(gpu, env), a(gpu, env), b(gpu, env);
  double alone_ms = 0, alone_served_ms = 0;
  const std::vector<std::string> reply = run_beside_host_bound(gpu, host_bound, a, b, "trainfor 4 30 300 sync 0",
                                                               "10 300 sync 30000", &alone_ms, &alone_served_ms);
  nlohmann::json top = gpu.top_json()["gpus"][0];
  INFO(top.dump());
  INFO("alone " << alone_ms << " ms a step");
  const double steps = std::stod(reply.at(2)), elapsed_ms = std::stod(reply.at(3));
  // Its pace alone. (Its charge is checked with one-kernel steps above:
  // here, on a loaded machine, a wake-up of several milliseconds adds to
  // each of its holds.)
  CHECK(steps >= 0.85 * elapsed_ms / std::max(34.0, alone_ms));
  CHECK(top["loans"].get<uint64_t>() >= uint64_t(steps / 2));
}

TEST_CASE("under fair, a job that ran on while the others waited for a start keeps its place among them", "[many]") {
  // Eight jobs take turns, then seven stop launching (they wait for a
  // start, as a benchmark's jobs do after warming up) while the eighth
  // runs on alone for 1.5 s; then the seven start again. The time it ran
  // alone took nothing from them: charged in full, it stood 1.5 s ahead on
  // fair's clock of seven jobs still marked waiting, and its next turn
  // came only once each of them had run 1.5 s (64 jobs on an H100: a first
  // turn 17 s into the window).
  TestGpu gpu;
  const Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fair"}, {"GSHARE_QUANTUM_MS", "20"}};
  Client runner(gpu, env);
  std::vector<std::unique_ptr<Client>> others;
  for (int i = 0; i < 7; ++i) others.push_back(std::make_unique<Client>(gpu, env));
  REQUIRE(runner.send("init") == "init ok");
  for (auto& c : others) REQUIRE(c->send("init") == "init ok");
  runner.post("trainfor 4 1 2000 sync 0");
  for (auto& c : others) c->post("trainfor 1 1 2000 sync 0");
  for (auto& c : others) CHECK(words(c->reply(20)).at(1) == "ok");
  usleep(1'500'000);
  for (auto& c : others) c->post("trainfor 2 1 2000 sync 0");
  CHECK(words(runner.reply(20)).at(1) == "ok");
  for (auto& c : others) CHECK(words(c->reply(20)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  // When the seven came back: the earliest of their second runs' kernels.
  uint64_t back = UINT64_MAX;
  for (auto& c : others) {
    auto runs = kernels_of(all, c->pid());
    REQUIRE_FALSE(runs.empty());
    uint64_t last_first_run = runs.front().start_ns;
    for (size_t i = 1; i < runs.size(); ++i)
      if (runs[i].start_ns > runs[i - 1].end_ns + 1000 * kMs) {
        last_first_run = runs[i].start_ns;
        break;
      }
    back = std::min(back, last_first_run);
  }
  REQUIRE(back != UINT64_MAX);
  // The runner's longest wait in their first second back: its turn comes
  // after one of each of theirs (7 x 20 ms, and switches).
  const uint64_t longest = longest_wait_in(kernels_of(all, runner.pid()), back, back + 1000 * kMs);
  INFO(gpu.top_json().dump());
  CHECK(longest < 400 * kMs);
}

TEST_CASE("among many waiters one watches the holder: turns keep their length, and a watcher killed is replaced",
          "[many]") {
  // Ten jobs under fair: nine wait at any moment. One of them watches the
  // holder for its slice's end; the others sleep until their own grant (a
  // grant wakes the new holder and the watcher, not all nine). Were the
  // slice's end missed, a turn would last until a sleeper's own check,
  // 250 ms, and a job would wait seconds between turns.
  TestGpu gpu;
  const Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fair"}, {"GSHARE_QUANTUM_MS", "20"}};
  std::vector<std::unique_ptr<Client>> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(std::make_unique<Client>(gpu, env));
  for (auto& c : jobs) REQUIRE(c->send("init") == "init ok");
  // They run until released, 2.5 s after the kill: however long a loaded
  // machine takes to start them, the survivors' turns after it are seen.
  for (auto& c : jobs) c->post("trainfor 30 1 2000 sync 0");
  for (auto& c : jobs) await_launched(gpu, *c);
  // The watcher: a waiting job, named by gshare-top.
  pid_t victim = 0;
  await(gpu, "a waiter watching the holder", [&] {
    const nlohmann::json g = gpu.top_gpu();
    if (!g.contains("watcher_pid") || g["watcher_pid"].is_null()) return false;
    victim = g["watcher_pid"].get<pid_t>();
    return victim != g["holder_pid"];
  });
  Client* killed = nullptr;
  for (auto& c : jobs)
    if (c->pid() == victim) killed = c.get();
  REQUIRE(killed != nullptr);
  const uint64_t kill_ns = monotonic_ns();
  killed->kill9();
  // Another waiter takes its place.
  await(gpu, "another watcher", [&] {
    const nlohmann::json g = gpu.top_gpu();
    return g["watcher_pid"].is_number() && g["watcher_pid"] != victim;
  });
  const uint64_t now = monotonic_ns(), release_ns = kill_ns + 2500 * kMs;
  if (now < release_ns) usleep(useconds_t((release_ns - now) / 1000));
  for (auto& c : jobs)
    if (c.get() != killed) CHECK(c->release().rfind("train ok", 0) == 0);
  const auto all = read_kernel_trace(gpu.kernel_trace());
  INFO(gpu.top_json().dump());
  // Turns, all jobs' alike: about the quantum (20 ms) and a step.
  std::vector<KernelRun> survivors;
  for (const KernelRun& k : all)
    if (k.pid != victim) survivors.push_back(k);
  const double turn_ms = median(slice_lengths_ms(survivors));
  CHECK(turn_ms >= 10);
  CHECK(turn_ms < 80);
  // Before the kill and after it, each job's turn came round: nine turns
  // of about 22 ms between two of one job's (a loaded machine stretches
  // them).
  uint64_t end = UINT64_MAX;
  for (auto& c : jobs)
    if (c.get() != killed) end = std::min(end, last_end(kernels_of(all, c->pid())));
  REQUIRE(end > kill_ns + 1500 * kMs);
  for (auto& c : jobs) {
    if (c.get() == killed) continue;
    const auto mine = kernels_of(all, c->pid());
    REQUIRE_FALSE(mine.empty());
    CHECK(longest_wait_in(mine, mine.front().end_ns, kill_ns) < 2000 * kMs);
    CHECK(longest_wait_in(mine, kill_ns, end) < 2000 * kMs);
  }
}

TEST_CASE("among many jobs the default quantum shrinks so that turns come round; a chosen one stays", "[many]") {
  // 32 jobs under fair: half leave GSHARE_QUANTUM_MS unset (20 ms, shrunk
  // to 320 ms / 32 = 10 ms among 32), half set it to 20. A turn lasts its
  // quantum and at most as much again for the wake of its job (the jobs'
  // median switch cost: rules::slice_length), so the first half's turns
  // run 10 to 20 ms and the second half's 20 to 40 ms. gshare-top shows the
  // holder's slice: its start to its end. Shared turns host-bound only: 32
  // busy jobs on two cores wait little of the time they run, and the gaps
  // rule would pair some (a pair counts as one turn, and the quantum grows).
  TestGpu gpu;
  const Env adapting{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "fair"}, {"GSHARE_SHARED_TURNS", "on"}};
  Env chosen = adapting;
  chosen["GSHARE_QUANTUM_MS"] = "20";
  constexpr int kJobs = 32;
  std::vector<std::unique_ptr<Client>> jobs;
  std::set<pid_t> chose;
  for (int i = 0; i < kJobs; ++i) {
    jobs.push_back(std::make_unique<Client>(gpu, i % 2 ? chosen : adapting));
    if (i % 2) chose.insert(jobs.back()->pid());
  }
  for (auto& c : jobs) REQUIRE(c->send("init") == "init ok");
  for (auto& c : jobs) c->post("trainfor 60 1 1000 sync 0");
  await(gpu, "every job's first launch", [&] {
    const nlohmann::json g = gpu.top_gpu();
    int launched = 0;
    for (const nlohmann::json& p : g["processes"]) launched += p["launches"] > 0;
    return launched == kJobs;
  });
  std::vector<double> adapted_ms, kept_ms;
  const uint64_t until = monotonic_ns() + 6000 * kMs;
  while (monotonic_ns() < until) {
    const nlohmann::json g = gpu.top_gpu();
    if (g["holder_pid"].is_number() && g["slice_elapsed_ms"].is_number() && g["slice_remaining_ms"].is_number() &&
        g["slice_remaining_ms"].get<double>() > 0) {
      const double length = g["slice_elapsed_ms"].get<double>() + g["slice_remaining_ms"].get<double>();
      (chose.count(g["holder_pid"].get<pid_t>()) ? kept_ms : adapted_ms).push_back(length);
    }
  }
  for (auto& c : jobs) CHECK(words(c->release(40)).at(1) == "ok");
  INFO("adapted " << nlohmann::json(adapted_ms).dump() << "\nkept " << nlohmann::json(kept_ms).dump());
  REQUIRE(adapted_ms.size() >= 4);
  REQUIRE(kept_ms.size() >= 4);
  CHECK(*std::min_element(adapted_ms.begin(), adapted_ms.end()) >= 9.9);
  CHECK(*std::max_element(adapted_ms.begin(), adapted_ms.end()) <= 20.1);
  CHECK(*std::min_element(kept_ms.begin(), kept_ms.end()) >= 19.9);
  CHECK(*std::max_element(kept_ms.begin(), kept_ms.end()) <= 40.1);
  // Some turn of the first half was shorter than any of the second's may
  // be (a loaded host's slow wakes stretch many to their 20 ms).
  CHECK(*std::min_element(adapted_ms.begin(), adapted_ms.end()) < 19.9);
}
