// Memory sharing: classification into P and E, lanes and the
// safety condition, admission waits, and pack; real processes over the
// fake driver.
#include <catch2/catch.hpp>

#include <cstdio>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "base/tunables.h"
#include "tests/multiprocess/harness.h"

using namespace gshare::test;
using nlohmann::json;

namespace {

constexpr uint64_t kMs = 1'000'000;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool within(uint64_t value, uint64_t expected, double tolerance) {
  double d = double(value) - double(expected);
  return std::abs(d) <= tolerance * double(expected);
}

std::vector<KernelRun> since(const std::vector<KernelRun>& runs, uint64_t from_ns) {
  std::vector<KernelRun> out;
  for (const KernelRun& r : runs)
    if (r.start_ns >= from_ns) out.push_back(r);
  return out;
}

}  // namespace

TEST_CASE("a job that allocates P once and E each iteration is classified within 5% after two iterations") {
  TestGpu gpu(16 * kGiB);
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  // firstgap: its first iteration stands still on the host for 300 ms after
  // each of its 3 pieces, so that the test sees it there.
  job.post("memtrain 100 1G 3G 3 1 10000 0 firstgap");
  json early = await_process(gpu, job.pid(), "the first iteration", [](const json& p) {
    return p["reserved_bytes"] > 2 * kGiB;
  });
  // Inside its first iteration, nothing is classified: the figures are
  // provisional.
  INFO(early.dump());
  CHECK(early["classified_iterations"] == 0);
  CHECK(early["memory_provisional"] == true);
  // Once two iterations have been classified, the figures are final.
  json p = await_process(gpu, job.pid(), "two classified iterations", [](const json& p) {
    return p["classified_iterations"] >= 2;
  });
  CHECK(p["memory_provisional"] == false);
  uint64_t context = p["context_bytes"];
  CHECK(within(p["persistent_bytes"], 1 * kGiB + context, 0.05));
  CHECK(within(p["ephemeral_bytes"], 3 * kGiB, 0.05));
  CHECK(words(job.reply(60)).at(1) == "ok");
}

TEST_CASE("syncs mid-iteration that free only a small temporary do not end the iteration") {
  // Each activation chunk is read back (a sync) after a 1 MiB temporary
  // came and went, as a value read does: counted as iterations' ends, those
  // syncs would have the first chunks promoted to P.
  TestGpu gpu(16 * kGiB);
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  job.post("memtrain 60 1G 3G 3 1 3000 0 chunksync temps");
  json p = await_process(gpu, job.pid(), "four classified iterations", [](const json& p) {
    return p["classified_iterations"] >= 4;
  }, 40);
  INFO(p.dump());
  uint64_t context = p["context_bytes"];
  CHECK(within(p["persistent_bytes"], 1 * kGiB + context, 0.05));
  CHECK(within(p["ephemeral_bytes"], 3 * kGiB, 0.05));
  CHECK(words(job.reply(60)).at(1) == "ok");
}

TEST_CASE("four jobs of P 1 GiB and E 3 GiB all finish on an 8 GiB GPU, never holding more than 8 GiB, "
          "where natively they run out of memory") {
  // Their peaks sum to 16 GiB: without lanes this mix does not fit. Each
  // runs long enough (about 0.5 s of kernels, 2 s for the four in turns)
  // that all four hold their P at once however late one of them starts on
  // a busy machine (with half as many steps, a loaded CI host once saw
  // only three P beside an E).
  TestGpu gpu(8 * kGiB);
  const std::string trace = gpu.dir() + "/memory.trace";
  const Env env{{"FAKE_CUDA_MEM_TRACE", trace}};
  std::vector<std::unique_ptr<Client>> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(std::make_unique<Client>(gpu, env));
  for (auto& j : jobs) REQUIRE(j->send("init") == "init ok");
  for (auto& j : jobs) j->post("memtrain 120 1G 3G 3 2 2000");
  for (auto& j : jobs) {
    std::string reply = j->reply(120);
    CHECK(reply.rfind("memtrain ok 120", 0) == 0);
    INFO(j->stderr_text());
  }
  std::vector<uint64_t> used = read_memory_trace(trace);
  REQUIRE_FALSE(used.empty());
  uint64_t peak = *std::max_element(used.begin(), used.end());
  CHECK(peak <= 8 * kGiB);
  CHECK(peak >= 7 * kGiB);  // they really shared: P of all four and one E at once

  // The same four without gshare, on a GPU of their own, started together:
  // one runs out of memory. So the jobs above finished thanks to gshare, not
  // to a lenient fake GPU.
  TestGpu native(8 * kGiB);
  std::vector<std::unique_ptr<Client>> bare;
  for (int i = 0; i < 4; ++i) bare.push_back(std::make_unique<Client>(native, Env{{"LD_PRELOAD", ""}}));
  for (auto& j : bare) REQUIRE(j->send("init") == "init ok");
  for (auto& j : bare) j->post("memtrain 15 1G 3G 3 2 2000");
  int failed = 0;
  for (auto& j : bare) failed += j->reply(120).find("err 2") != std::string::npos;
  CHECK(failed >= 1);
}

namespace {
// A job with P = 5 GiB and E = 1 GiB, classified, running for a while.
void start_large_job(const TestGpu& gpu, Client& large) {
  REQUIRE(large.send("init") == "init ok");
  large.post("memtrain 400 5G 1G 1 1 3000");
  json p = await_process(gpu, large.pid(), "the large job's classification", [](const json& p) {
    return p["memory_provisional"] == false;
  });
  REQUIRE(within(p["persistent_bytes"], 5 * kGiB + uint64_t(p["context_bytes"]), 0.05));
}
}  // namespace

TEST_CASE("a job that cannot be admitted waits, and proceeds once memory frees") {
  TestGpu gpu(8 * kGiB);
  Client large(gpu), late(gpu);
  start_large_job(gpu, large);
  REQUIRE(late.send("init") == "init ok");
  // 5 GiB + two contexts + the newcomer's 3 GiB (counted as P: its E is
  // not known yet) + the learned E of 1 GiB > 8 GiB: not admitted.
  late.post("alloc 3G x");
  json waiting = await_process(gpu, late.pid(), "a wait for admission", [](const json& p) {
    return p["admission"] == "waiting for admission";
  });
  CHECK(waiting["admission_short_bytes"].get<uint64_t>() > 1 * kGiB);
  CHECK(waiting["admission_short_bytes"].get<uint64_t>() <= 1 * kGiB + 2 * kFakeContextBytes);
  CHECK(late.stderr_text().find("waits for admission") != std::string::npos);
  CHECK(gpu.top_json()["gpus"][0]["memory_waiters"] == 1);
  CHECK(words(large.reply(60)).at(1) == "ok");  // the large job ends its loop, freeing 6 GiB
  CHECK(late.reply(5) == "alloc ok x");
  json admitted = gpu.top_process(late.pid());
  CHECK(admitted["admission"] == "admitted");
  CHECK(admitted["admission_waits"] == 1);
  // The GPU keeps the count, ended jobs included.
  CHECK(gpu.top_json()["gpus"][0]["admission_waits"].get<uint64_t>() >= 1);
}

TEST_CASE("a job that cannot be admitted gets a clean out-of-memory error after GSHARE_ADMIT_TIMEOUT_S") {
  TestGpu gpu(8 * kGiB);
  Client large(gpu), late(gpu, {{"GSHARE_ADMIT_TIMEOUT_S", "0.5"}});
  start_large_job(gpu, large);
  REQUIRE(late.send("init") == "init ok");
  auto start = std::chrono::steady_clock::now();
  CHECK(late.send("alloc 3G x", 20) == "alloc err 2");
  double waited = seconds_since(start);
  CHECK(waited >= 0.5);
  CHECK(waited < 3);
  std::string err = late.stderr_text();
  CHECK(err.find("gave up waiting") != std::string::npos);
  CHECK(err.find("safety condition") != std::string::npos);
  CHECK(err.find("short by") != std::string::npos);
  CHECK(late.send("alloc 1G y") == "alloc ok y");  // still usable: what fits is admitted
}

TEST_CASE("a job waiting for memory the driver refused gives up its turn, and goes on once it is free") {
  // A process outside gshare holds 3 GiB of 8: gshare admits a job's 5 GiB,
  // the driver refuses them, and the job waits for the memory. It waits
  // without the token (the resource order), so another job runs meanwhile.
  TestGpu gpu(8 * kGiB);
  Client outside(gpu, {{"LD_PRELOAD", ""}});
  REQUIRE(outside.send("init") == "init ok");
  REQUIRE(outside.send("alloc 3G held") == "alloc ok held");
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "20"}, {"GSHARE_LOG", "info"}};
  Client a(gpu, env), b(gpu, env);
  REQUIRE(a.send("init") == "init ok");
  a.post("memtrain 1 1G 5G 1 1 1000");
  await(gpu, "a's wait for the memory the driver refused", [&] {
    return a.stderr_text().find("waiting for it") != std::string::npos;
  }, 10);
  REQUIRE(b.send("init") == "init ok");
  CHECK(words(b.send("train 20 1 1000 sync 0", 10)).at(1) == "ok");
  REQUIRE(outside.send("free held") == "free ok");
  CHECK(words(a.reply(30)).at(1) == "ok");
}

TEST_CASE("a pitched allocation the driver refused waits for the memory as a plain one does") {
  // 5 GiB of pitched rows, admitted by gshare while a process outside it
  // holds 3 GiB of 8: the driver refuses, and the allocation waits for the
  // memory instead of failing.
  TestGpu gpu(8 * kGiB);
  Client outside(gpu, {{"LD_PRELOAD", ""}});
  REQUIRE(outside.send("init") == "init ok");
  REQUIRE(outside.send("alloc 3G held") == "alloc ok held");
  Client job(gpu, {{"GSHARE_ADMIT_TIMEOUT_S", "20"}, {"GSHARE_LOG", "info"}});
  REQUIRE(job.send("init") == "init ok");
  job.post("pitch 1048576 5120 rows");
  await(gpu, "the pitched allocation's wait for the memory the driver refused", [&] {
    return job.stderr_text().find("waiting for it") != std::string::npos;
  }, 10);
  REQUIRE(outside.send("free held") == "free ok");
  CHECK(job.reply(30) == "pitch ok rows 1048576");
  CHECK(gpu.top_json()["gpus"][0]["processes"][0]["used_bytes"] >= 5 * kGiB);
}

TEST_CASE("kill -9 of a job frees its lane place: a waiting job is admitted within a second or so") {
  TestGpu gpu(8 * kGiB);
  Client large(gpu), late(gpu);
  start_large_job(gpu, large);
  REQUIRE(late.send("init") == "init ok");
  late.post("alloc 3G x");
  await_process(gpu, late.pid(), "a wait for admission", [](const json& p) {
    return p["admission"] == "waiting for admission";
  });
  large.kill9();
  auto killed = std::chrono::steady_clock::now();
  CHECK(late.reply(5) == "alloc ok x");
  CHECK(seconds_since(killed) < 1.5);
  json gpu_view = gpu.top_json()["gpus"][0];
  REQUIRE(gpu_view["lanes"].size() == 1);
  CHECK(gpu_view["lanes"][0]["pids"] == json::array({late.pid()}));
}

namespace {
// tests/programs/caching_framework_job.py (a fake `torch` module whose
// empty_cache() gives the cache back) with `args`: ITERATIONS P_MIB E_MIB
// CHUNKS KERNEL_US [chunksync].
std::vector<std::string> caching_job(const std::vector<std::string>& args) {
  std::vector<std::string> argv{GSHARE_TEST_PYTHON, std::string(GSHARE_TEST_PROGRAMS_DIR) + "/caching_framework_job.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// `count` such jobs at once, each run to its end.
std::vector<Finished> run_caching_jobs(const TestGpu& gpu, int count, const std::vector<std::string>& args,
                                       const Env& extra) {
  std::vector<Finished> done(static_cast<size_t>(count));
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i)
    threads.emplace_back([&, i] { done[size_t(i)] = run_to_end(caching_job(args), gpu.environment(extra), 120); });
  for (std::thread& t : threads) t.join();
  return done;
}

// Two of them, each P 1 GiB and E 3 GiB, on 8 GiB: one lane.
std::vector<Finished> run_two_caching_jobs(const TestGpu& gpu, const Env& extra) {
  return run_caching_jobs(gpu, 2, {"200", "1024", "3072", "3", "2000"}, extra);
}

// One such job alone, run to its end into `finished`, with gshare-top's
// view of it read every 50 ms meanwhile, each view shown to `look`: the
// first view `look` says is enough, or null if none was within 60 s. A job
// given LINGER_S lingers after its loop until then (LINGER_RELEASE).
json watch_caching_job(const TestGpu& gpu, const std::vector<std::string>& args, Env extra,
                       const std::function<bool(const json&)>& look, Finished* finished) {
  const std::string release = gpu.dir() + "/release";
  extra["LINGER_RELEASE"] = release;
  std::thread job([&] { *finished = run_to_end(caching_job(args), gpu.environment(extra), 120); });
  json seen;
  auto start = std::chrono::steady_clock::now();
  while (seen.is_null() && seconds_since(start) < 60) {
    json processes = gpu.top_json()["gpus"][0]["processes"];
    if (processes.size() == 1 && look(processes[0])) seen = processes[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  { std::ofstream created(release); }
  job.join();
  return seen;
}

// A view's P and E, within 5% of 1 GiB (beside the context) and 3 GiB.
void check_one_and_three_gib(const json& seen) {
  INFO(seen.dump());
  uint64_t context = seen["context_bytes"];
  CHECK(within(seen["persistent_bytes"], 1 * kGiB + context, 0.05));
  CHECK(within(seen["ephemeral_bytes"], 3 * kGiB, 0.05));
}
}  // namespace

TEST_CASE("a caching framework that syncs mid-iteration is classified from its own figures to within 5%") {
  // Every activation chunk is read back with the chunks alive, so most
  // boundaries fall mid-iteration, and the driver never sees a free: only
  // the framework's figures tell the activations from the weights.
  TestGpu gpu(16 * kGiB);
  Finished finished;
  json seen = watch_caching_job(
      gpu, {"40", "1024", "3072", "6", "2000", "chunksync"}, {},
      [](const json& p) { return p["classified_iterations"] >= 12; }, &finished);
  INFO(finished.err);
  CHECK(finished.out == "done 40\n");
  REQUIRE_FALSE(seen.is_null());
  CHECK(seen["memory_provisional"] == false);
  check_one_and_three_gib(seen);
}

TEST_CASE("a caching framework whose set-up synced before its weights existed has its P within 5% after eight "
          "iterations") {
  // The framework's first answers show 1 MiB in use; were they to stay the
  // least, the job's weights would count as ephemeral, and the job would
  // hold its lane's space even between its iterations.
  TestGpu gpu(16 * kGiB);
  Finished finished;
  json seen = watch_caching_job(
      gpu, {"40", "1024", "3072", "3", "2000"}, {{"SETUP_SYNC", "1"}, {"LINGER_S", "30"}},
      [](const json& p) { return p["iterations"] >= 12 && !p["memory_provisional"].get<bool>(); }, &finished);
  INFO(finished.err);
  CHECK(finished.out == "done 40\n");
  REQUIRE_FALSE(seen.is_null());
  check_one_and_three_gib(seen);
}

TEST_CASE("a caching framework that cannot be asked is measured by emptying its cache once") {
  // No figures: lifetimes alone would make the cache persistent (it is
  // never freed), so gshare empties it once at an iteration's end, and
  // what survives is P.
  TestGpu gpu(16 * kGiB);
  Finished finished;
  json seen = watch_caching_job(
      gpu, {"60", "1024", "3072", "3", "2000"}, {{"FRAMEWORK_SILENT", "1"}, {"LINGER_S", "60"}},
      [](const json& p) { return p["iterations"] >= 50; }, &finished);
  INFO(finished.err);
  CHECK(finished.out == "done 60\n");
  REQUIRE_FALSE(seen.is_null());
  CHECK(seen["memory_provisional"] == false);
  check_one_and_three_gib(seen);
}

TEST_CASE("a framework's cache is measured and given back at switches, so two caching jobs share one lane "
          "where natively the second runs out of memory") {
  TestGpu gpu(8 * kGiB);
  const Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_ADMIT_TIMEOUT_S", "15"}};
  std::vector<Finished> done = run_two_caching_jobs(gpu, env);
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.out == "done 200\n");
  }
  // They took turns, interleaved: neither waited for the other to end.
  auto all = read_kernel_trace(gpu.kernel_trace());
  REQUIRE(all.size() == 800);
  pid_t first = all.front().pid;
  uint64_t first_last_start = 0, other_first_start = UINT64_MAX;
  for (const KernelRun& k : all) {
    if (k.pid == first) first_last_start = std::max(first_last_start, k.start_ns);
    else other_first_start = std::min(other_first_start, k.start_ns);
  }
  CHECK(other_first_start < first_last_start);

  // The same two without gshare: the second job's allocation fails, its
  // own cache being empty. So the turns above are gshare's doing.
  TestGpu native(8 * kGiB);
  int failed = 0;
  for (const Finished& f : run_two_caching_jobs(native, {{"LD_PRELOAD", ""}}))
    failed += f.out.find("error 2") != std::string::npos;
  CHECK(failed >= 1);
}

TEST_CASE("jobs whose stream-ordered pools keep what they free take turns with one lane's space, "
          "where natively the second pool cannot grow") {
  // P 1 GiB and E 3 GiB each, the pieces from the device's pool with a
  // release threshold of UINT64_MAX (PyTorch's cudaMallocAsync backend):
  // a pool that grows waits for its turn, and the other's pool is trimmed.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "20"}};
  Client a(gpu, env), b(gpu, env);
  for (Client* c : {&a, &b}) REQUIRE(c->send("init") == "init ok");
  for (Client* c : {&a, &b}) c->post("memtrain 30 1G 3G 3 2 5000 0 pool");
  for (Client* c : {&a, &b}) {
    std::string reply = c->reply(120);
    INFO(reply << "\n" << c->stderr_text());
    CHECK(words(reply).at(1) == "ok");
  }

  // The same two without gshare: the second pool cannot grow. So the
  // turns above are gshare's doing.
  TestGpu native(8 * kGiB);
  Client x(native, {{"LD_PRELOAD", ""}}), y(native, {{"LD_PRELOAD", ""}});
  for (Client* c : {&x, &y}) REQUIRE(c->send("init") == "init ok");
  for (Client* c : {&x, &y}) c->post("memtrain 30 1G 3G 3 2 5000 0 pool");
  int failed = 0;
  for (Client* c : {&x, &y}) failed += c->reply(120).find("err 2") != std::string::npos;
  CHECK(failed >= 1);
}

TEST_CASE("a framework's figures from the middle of an iteration do not raise P") {
  // Over a pool, the framework's first answer that shows a cache comes
  // with all of the first iteration's memory alive, and the job then
  // pauses there. Counting those activations in P would make the job look
  // settled in the middle of its iteration.
  TestGpu gpu(16 * kGiB);
  Finished finished;
  uint64_t most_p = 0, context = 0;
  json seen = watch_caching_job(
      gpu, {"150", "1024", "3072", "4", "2000", "chunksync"}, {{"FRAMEWORK_POOL", "1"}, {"FIRST_STEP_PAUSE_S", "1.5"}},
      [&](const json& p) {
        most_p = std::max(most_p, p["persistent_bytes"].get<uint64_t>());
        context = p["context_bytes"];
        return p["classified_iterations"] >= 12;
      },
      &finished);
  INFO(finished.err);
  CHECK(finished.out == "done 150\n");
  CHECK(most_p <= uint64_t((1 * kGiB + context) * 1.05));
  REQUIRE_FALSE(seen.is_null());
  check_one_and_three_gib(seen);
}

TEST_CASE("two PyTorch-like jobs over cudaMallocAsync pools that read values back mid-iteration share one lane, "
          "where natively the second pool cannot grow") {
  // caching_framework_job.py with FRAMEWORK_POOL=1: the framework's cache
  // is the device's pool (release threshold UINT64_MAX), and every
  // activation chunk is read back with the chunks so far alive, so the
  // framework's first answers come mid-iteration. P 1 GiB and E 3 GiB each
  // on 8 GiB: they must take turns, each switched out with its activations
  // freed, and neither may fail an allocation.
  TestGpu gpu(8 * kGiB);
  const std::vector<std::string> args{"30", "1024", "3072", "4", "2000", "chunksync"};
  const Env env{{"FRAMEWORK_POOL", "1"}, {"FIRST_STEP_PAUSE_S", "1"}, {"GSHARE_ADMIT_TIMEOUT_S", "20"}};
  for (const Finished& f : run_caching_jobs(gpu, 2, args, env)) {
    INFO(f.err);
    CHECK(f.out == "done 30\n");
  }

  // The same two without gshare: the second job's pool cannot grow. So
  // the turns above are gshare's doing.
  TestGpu native(8 * kGiB);
  int failed = 0;
  for (const Finished& f : run_caching_jobs(native, 2, args, {{"FRAMEWORK_POOL", "1"}, {"LD_PRELOAD", ""}}))
    failed += f.out.find("error 2") != std::string::npos;
  CHECK(failed >= 1);
}

TEST_CASE("a caching job idle in Python gives its cache back to a job that needs the memory") {
  // The first job ends its loop and stays alive in Python code, holding
  // P 1 GiB and 3 GiB of cache, and reaches no gshare hook. The second
  // needs 4 GiB of the 8: the first's cache must come back, emptied on
  // its Python main thread.
  // The first lingers until the test releases it, after the second has
  // finished: the second cannot have waited for it to leave.
  TestGpu gpu(8 * kGiB);
  const std::string job = std::string(GSHARE_TEST_PROGRAMS_DIR) + "/caching_framework_job.py";
  const std::string lingering = gpu.dir() + "/lingering", release = gpu.dir() + "/release";
  Finished first, second;
  // Released and joined however the test ends.
  struct Lingering {
    std::string release;
    std::thread thread;
    void end() {
      if (thread.joinable()) {
        std::ofstream created(release);
        thread.join();
      }
    }
    ~Lingering() { end(); }
  } first_job{release, std::thread([&] {
    first = run_to_end({GSHARE_TEST_PYTHON, job, "20", "1024", "3072", "3", "2000"},
                       gpu.environment({{"LINGER_S", "90"}, {"LINGER_READY", lingering}, {"LINGER_RELEASE", release}}),
                       120);
  })};
  await(gpu, "the first job to end its loop and linger", [&] { return std::ifstream(lingering).good(); }, 60);
  json idle = gpu.top_json()["gpus"][0]["processes"];
  INFO(idle.dump());
  REQUIRE(idle.size() == 1);
  CHECK(idle[0]["reserved_bytes"] >= 4 * kGiB);  // its weights and its cache
  second = run_to_end({GSHARE_TEST_PYTHON, job, "20", "1024", "3072", "3", "2000"},
                      gpu.environment({{"GSHARE_ADMIT_TIMEOUT_S", "20"}}), 60);
  INFO(second.err);
  CHECK(second.out == "done 20\n");
  first_job.end();
  INFO(first.err);
  CHECK(first.out == "done 20\n");
}

TEST_CASE("a caching job gives its cache and its turn back as Python's exit begins, not when its process ends", "[turns]") {
  // The first job ends its loop and exits; its interpreter's teardown then
  // takes 10 s with the cache held (as PyTorch's takes about a second),
  // and reaches no gshare hook, nor any Python code gshare could run. A
  // block of its last iteration stays alive to the end, as a segment a
  // live tensor keeps from PyTorch's empty_cache(). The
  // second needs 4 GiB of the 8 while the first holds 4: it must get them
  // while the first is still tearing down, from gshare's handler at the
  // start of Python's exit.
  TestGpu gpu(8 * kGiB);
  const std::string job = std::string(GSHARE_TEST_PROGRAMS_DIR) + "/caching_framework_job.py";
  const std::string tearing_down = gpu.dir() + "/tearing-down";
  Finished first, second;
  std::atomic<bool> first_ended{false};
  std::thread first_job([&] {
    first = run_to_end({GSHARE_TEST_PYTHON, job, "20", "1024", "3072", "3", "2000"},
                       gpu.environment({{"EXIT_SLOW_S", "10"}, {"EXIT_SLOW_READY", tearing_down},
                                        {"EXIT_KEEP_MIB", "512"}}), 120);
    first_ended = true;
  });
  struct Join {
    std::thread& thread;
    ~Join() { thread.join(); }
  } join{first_job};
  await(gpu, "the first job's teardown", [&] { return std::ifstream(tearing_down).good(); }, 60);
  const json seen = gpu.top_gpu();
  const json& held = seen["processes"];
  INFO(seen.dump());
  REQUIRE(held.size() == 1);
  CHECK(held[0]["reserved_bytes"] < 2 * kGiB);  // its weights, what stays alive (and its context)
  second = run_to_end({GSHARE_TEST_PYTHON, job, "20", "1024", "3072", "3", "2000"},
                      gpu.environment({{"GSHARE_ADMIT_TIMEOUT_S", "60"}, {"GSHARE_LOG", "info"}}), 90);
  CHECK_FALSE(first_ended.load());  // the second did not wait for the first to end
  INFO(second.err);
  CHECK(second.out == "done 20\n");
  // Nor for its lane's space: 512 MiB of the first stay beyond the slack
  // of C/64, yet the first is done with that space.
  CHECK(second.err.find("waits for") == std::string::npos);
}

TEST_CASE("under fifo the job running in a lane keeps its cache while its lane-mates wait for the space", "[turns]") {
  // Three caching jobs of P 1 GiB and E 3 GiB on 8 GiB: one lane, run one
  // after another. The waiters need the lane's space, which the runner's
  // next iteration takes again; emptying its cache at every boundary for
  // them would only make it allocate each iteration anew (on a GPU, a few
  // percent of every step). Each iteration reads a value back after every
  // chunk, and each sync lasts 100 ms, as a step's loss.item() does on a
  // GPU: a waiter whose turn comes while the runner is inside one tries the
  // lane and becomes a job waiting in an allocation.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_POLICY", "fifo"}, {"CACHE_STATS", "1"}};
  std::vector<Finished> done = run_caching_jobs(gpu, 3, {"6", "1024", "3072", "6", "100000", "chunksync"}, env);
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.out == "done 6\n");
    // The weights and one iteration's six chunks. At most one emptying: a
    // runner stalled on a loaded machine may pass for idle once, and an idle
    // job gives its cache back when asked; emptying at every boundary would
    // be five.
    unsigned misses = 0, emptied = 0;
    const size_t at = f.err.find("cache misses ");
    REQUIRE(at != std::string::npos);
    REQUIRE(sscanf(f.err.c_str() + at, "cache misses %u emptied %u", &misses, &emptied) == 2);
    CHECK(emptied <= 1);
    CHECK(misses <= 7 + 6 * emptied);
  }
}

namespace {
// The questions a caching job's CACHE_STATS line counts.
unsigned questions_asked(const Finished& f) {
  const size_t at = f.err.find(" questions ");
  unsigned questions = 0;
  if (at == std::string::npos || sscanf(f.err.c_str() + at, " questions %u", &questions) != 1) return UINT32_MAX;
  return questions;
}
}  // namespace

TEST_CASE("a job is asked for its framework's figures about once a second while alone or while its answers "
          "repeat themselves; beside another job, with answers that move, at the usual rate", "[questions]") {
  // An inference server syncs once a request, and each question runs on
  // its critical path. Once its first answers have classified it, a job is
  // asked at most once a second while it is alone, or while its answers
  // only repeat themselves; beside another job (whose admission its P
  // decides), with answers that move, at up to 1% of its time again.
  // `moving` syncs with its one chunk alive and again at rest: its answers
  // alternate. `steady` syncs only at rest.
  const std::vector<std::string> moving{"1500", "64", "64", "1", "2000", "chunksync"};
  const std::vector<std::string> steady{"1500", "64", "64", "1", "2000"};
  const unsigned window = unsigned(gshare::tunables::kInUseWindow);
  TestGpu gpu(8 * kGiB);
  auto started = std::chrono::steady_clock::now();
  std::vector<Finished> alone = run_caching_jobs(gpu, 1, moving, {{"CACHE_STATS", "1"}});
  const double alone_s = seconds_since(started);
  INFO(alone[0].err);
  REQUIRE(alone[0].out == "done 1500\n");
  CHECK(questions_asked(alone[0]) <= window + 2 + unsigned(alone_s));
  for (const Finished& f : run_caching_jobs(gpu, 2, moving, {{"CACHE_STATS", "1"}})) {
    INFO(f.err);
    REQUIRE(f.out == "done 1500\n");
    CHECK(questions_asked(f) >= 3 * questions_asked(alone[0]));
  }
  started = std::chrono::steady_clock::now();
  std::vector<Finished> repeating = run_caching_jobs(gpu, 2, steady, {{"CACHE_STATS", "1"}});
  const double repeating_s = seconds_since(started);
  for (const Finished& f : repeating) {
    INFO(f.err);
    REQUIRE(f.out == "done 1500\n");
    CHECK(questions_asked(f) <= window + unsigned(gshare::tunables::kSteadyAnswersBeforeRare) + 2 +
                                    unsigned(repeating_s));
  }
}

TEST_CASE("a job asked rarely is asked at most once in 500 syncs, however long they take", "[questions]") {
  // Once a second is one request in a hundred at 100 requests a second:
  // the question's cost would sit at the server's p99. So a rare question
  // also waits for kRareQuestionSyncs syncs. One sync a step of 10 ms, 1000
  // steps: after the first answers, about 10 s, yet only 1000 syncs.
  const unsigned window = unsigned(gshare::tunables::kInUseWindow);
  TestGpu gpu(8 * kGiB);
  auto started = std::chrono::steady_clock::now();
  std::vector<Finished> alone = run_caching_jobs(gpu, 1, {"500", "64", "64", "1", "10000"}, {{"CACHE_STATS", "1"}});
  const double alone_s = seconds_since(started);
  INFO(alone[0].err);
  REQUIRE(alone[0].out == "done 500\n");
  REQUIRE(alone_s > 5);  // once a second would have asked four more times at least
  CHECK(questions_asked(alone[0]) <= window + 500 / unsigned(gshare::tunables::kRareQuestionSyncs) + 1);
}

TEST_CASE("a job asked for its cache mid-step never empties it mid-step, under every policy that switches", "[rest]") {
  // Two caching jobs of P 1 GiB and E 5 GiB on 8 GiB take turns in one
  // lane. Each step pauses half a second in Python mid-way, its chunks
  // alive and a temporary back in its cache: its waiting lane-mate finds it
  // still and asks for its cache. Emptied then, PyTorch would carve the
  // step's next blocks from the segments that survive and could fail to
  // fit its largest (an out-of-memory error no native run has): the cache
  // must go back only once the step has ended.
  TestGpu gpu(8 * kGiB);
  for (const char* policy : {"fair", "priority", "pack"}) {
    INFO(policy);
    const Env env{{"GSHARE_POLICY", policy}, {"CACHE_STATS", "1"}, {"MID_STEP_PAUSE_S", "0.5"}};
    unsigned emptied_by_both = 0;
    std::string errs;
    // Ten steps: a job's first steps, before its memory is classified,
    // keep its lane (its weights count as ephemeral until then).
    for (const Finished& f : run_caching_jobs(gpu, 2, {"10", "1024", "5000", "5", "20000"}, env)) {
      INFO(f.err);
      errs += f.err;
      CHECK(f.out == "done 10\n");
      unsigned misses = 0, emptied = 0, mid = 0;
      const size_t at = f.err.find("cache misses ");
      REQUIRE(at != std::string::npos);
      REQUIRE(sscanf(f.err.c_str() + at, "cache misses %u emptied %u mid-iteration %u", &misses, &emptied, &mid) ==
              3);
      emptied_by_both += emptied;
      CHECK(mid == 0);
    }
    INFO(errs);
    CHECK(emptied_by_both >= 1);  // the cache did go back for the lane-mate
  }
}

TEST_CASE("a job asked for its cache in its first steps, before gshare knows it has one, empties it only at rest",
          "[rest]") {
  // The second of two caching jobs (P 1 GiB, E 5 GiB on 8 GiB) comes while
  // the first pauses mid-way through its first step. Its framework has not
  // yet answered gshare's questions, so gshare cannot tell a cache from
  // live memory: asked for its cache then, it must still wait for the
  // step's end.
  const double delay_s = GENERATE(0.25, 0.4);
  INFO("second job " << delay_s << " s later");
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_POLICY", "fair"}, {"CACHE_STATS", "1"}, {"MID_STEP_PAUSE_S", "0.5"}};
  const std::vector<std::string> args{"4", "1024", "5000", "5", "20000"};
  Finished first, second;
  std::thread early([&] { first = run_to_end(caching_job(args), gpu.environment(env), 120); });
  std::this_thread::sleep_for(std::chrono::milliseconds(int(delay_s * 1000)));
  second = run_to_end(caching_job(args), gpu.environment(env), 120);
  early.join();
  for (const Finished* f : {&first, &second}) {
    INFO(f->err);
    CHECK(f->out == "done 4\n");
    CHECK(f->err.find(" mid-iteration 0 ") != std::string::npos);
  }
}

namespace {
// The CLOCK_MONOTONIC times (GSHARE_LOG=debug stamps every line) of the
// lines of `log` that contain every one of `parts`.
std::vector<double> stamps_of(const std::string& log, std::initializer_list<const char*> parts) {
  std::vector<double> stamps;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const char* part : parts) all = all && line.find(part) != std::string::npos;
    double t = 0;
    if (all && sscanf(line.c_str(), "gshare: %lf", &t) == 1) stamps.push_back(t);
  }
  return stamps;
}
}  // namespace

TEST_CASE("a job not yet classified gives its cache back once while it cannot hand over, not at every step",
          "[rest]") {
  // The first of two caching jobs (P 1 GiB, E 5 GiB on 8 GiB) is not yet
  // classified when the second comes and waits for their lane: all it
  // holds counts as ephemeral, its weights too, so even with its cache
  // given back at a boundary it keeps the lane until its classification
  // moves on (a few steps). Giving the cache back at each of those
  // boundaries would only have each next step allocate it anew: once is
  // how it learns, then once more where it hands over.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_POLICY", "fair"}, {"CACHE_STATS", "1"}, {"GSHARE_LOG", "debug"}};
  const std::vector<std::string> args{"8", "1024", "5000", "5", "20000"};
  Env slow = env;
  slow["FIRST_STEP_PAUSE_S"] = "0.3";  // the second job comes during the first step
  Finished first, second;
  std::thread early([&] { first = run_to_end(caching_job(args), gpu.environment(slow), 120); });
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  second = run_to_end(caching_job(args), gpu.environment(env), 120);
  early.join();
  INFO(first.err);
  INFO(second.err);
  REQUIRE(first.out == "done 8\n");
  REQUIRE(second.out == "done 8\n");
  // The second job gets in once the first hands its lane over: the
  // admission of its first allocation that waited for memory (its weights,
  // or its step's first piece where the weights got in while the first
  // job paused in its first step and lost the token, idle), or its first
  // admission where it came late and waited only for the token. The
  // first job's cache goes back before a switch, or to a job waiting for
  // memory: either counts.
  const std::vector<double> waits = stamps_of(second.err, {"waits for"});
  double admitted = 0;
  for (double t : stamps_of(second.err, {"admitted after"}))
    if (admitted == 0 && (waits.empty() || t >= waits[0])) admitted = t;
  REQUIRE(admitted > 0);
  unsigned before_handover = 0;
  for (double t : stamps_of(first.err, {"gave back", "cached memory"})) before_handover += t <= admitted;
  CHECK(before_handover >= 1);
  CHECK(before_handover <= 2);
}

TEST_CASE("a running job asked for its cache keeps it: it empties it neither mid-step nor at its boundaries",
          "[rest]") {
  // Under priority, a job of higher priority runs its ten steps while a
  // lower one waits for their lane (P 1 GiB and E 5 GiB each, on 8 GiB).
  // Each step pauses 0.3 s in Python mid-way: the waiter finds the runner
  // still and asks for its cache. The runner goes on running, and its next
  // steps need the cache: emptied at each boundary, each step would
  // allocate anew (on a GPU, 78 GB in 240 ms each step); emptied mid-step,
  // PyTorch may no longer fit the step's largest block.
  TestGpu gpu(8 * kGiB);
  const Env common{{"GSHARE_POLICY", "priority"}, {"CACHE_STATS", "1"}, {"MID_STEP_PAUSE_S", "0.3"}};
  Env high = common, low = common;
  high["GSHARE_PRIORITY"] = "10";
  Finished runner, waiter;
  std::thread first([&] {
    runner = run_to_end(caching_job({"10", "1024", "5000", "5", "20000"}), gpu.environment(high), 120);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  waiter = run_to_end(caching_job({"3", "1024", "5000", "5", "20000"}), gpu.environment(low), 120);
  first.join();
  INFO(runner.err);
  CHECK(runner.out == "done 10\n");
  CHECK(runner.err.find("cache misses 7 emptied 0 mid-iteration 0") != std::string::npos);
  INFO(waiter.err);
  CHECK(waiter.out == "done 3\n");
}

TEST_CASE("every switch is measured, and the GPU's figures are its jobs'") {
  // Two jobs of P 1 GiB and E 3 GiB can only take turns in one lane of
  // 8 GiB. Each hands over where its last iteration's memory is free.
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_POLICY", "fair"}};
  Client a(gpu, env), b(gpu, env);
  for (Client* c : {&a, &b}) REQUIRE(c->send("init") == "init ok");
  // A turn grows with what a switch costs (rules::slice_length), and on a
  // loaded machine a switch's frees cost more: rounds go on until ten
  // switches have been seen.
  json seen;
  for (int round = 0; round < 8; ++round) {
    for (Client* c : {&a, &b}) c->post("memtrain 40 1G 3G 3 2 10000");
    for (Client* c : {&a, &b}) CHECK(words(c->reply(120)).at(1) == "ok");
    seen = gpu.top_json()["gpus"][0];  // both still alive
    if (seen["switches"].get<uint64_t>() >= 10) break;
  }
  INFO(seen.dump());
  uint64_t switches = seen["switches"], total_ns = seen["switch_ns_total"];
  REQUIRE(switches >= 10);
  CHECK(switches <= seen["handovers"].get<uint64_t>());
  CHECK(seen["switch_ns_max"].get<uint64_t>() < 5000 * kMs);
  uint64_t process_switches = 0, process_ns = 0;
  for (const json& p : seen["processes"]) {
    CHECK(p["switches"].get<uint64_t>() > 0);
    CHECK(p["last_switch_ns"].get<uint64_t>() > 0);
    process_switches += p["switches"].get<uint64_t>();
    process_ns += p["switch_ns"].get<uint64_t>();
  }
  CHECK(process_switches == switches);
  CHECK(process_ns == total_ns);
}

TEST_CASE("a switch's measured cost includes the last job giving its framework cache back") {
  // Two caching jobs in one lane: each, asked to yield at its boundary,
  // empties its cache (here 50 ms slower, as PyTorch's frees sync) before
  // handing over; the switch is measured from there. (Such switches make
  // the turns long, runtime/switch_cost.h: a few switches in all.)
  TestGpu gpu(8 * kGiB);
  const Env env{{"GSHARE_ADMIT_TIMEOUT_S", "15"}, {"EMPTY_CACHE_MS", "50"}};
  std::vector<Finished> done = run_two_caching_jobs(gpu, env);
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.out == "done 200\n");
  }
  json seen = gpu.top_json()["gpus"][0];
  INFO(seen.dump());
  uint64_t switches = seen["switches"];
  REQUIRE(switches >= 2);
  CHECK(seen["switch_ns_max"].get<uint64_t>() >= 45 * kMs);
  CHECK(seen["switch_ns_max"].get<uint64_t>() < 5000 * kMs);
}

namespace {
// Two caching jobs of one lane, `iterations` of 2 × 30 ms each, under
// `policy`, with each emptying of the cache taking `empty_cache_ms`:
// the most a job's switch cost read in gshare-top while they ran, and the
// GPU's switches by the end.
struct TurnsSeen {
  uint64_t switches = 0;
  uint64_t most_switch_cost_ns = 0;
  uint64_t most_switch_memory_ns = 0;
};
TurnsSeen two_jobs_taking_turns(const std::string& policy, int empty_cache_ms, Env env = {}, int iterations = 30) {
  TestGpu gpu(8 * kGiB);
  env["GSHARE_POLICY"] = policy;
  env["EMPTY_CACHE_MS"] = std::to_string(empty_cache_ms);
  env["GSHARE_LOG"] = "debug";  // a failure shows what gshare did
  TurnsSeen seen;
  std::atomic<bool> ended{false};
  std::thread watcher([&] {
    while (!ended) {
      json gpu_view = gpu.top_json()["gpus"][0];
      for (const json& p : gpu_view["processes"])
      {
        seen.most_switch_cost_ns = std::max(seen.most_switch_cost_ns, p["switch_cost_ns"].get<uint64_t>());
        seen.most_switch_memory_ns = std::max(seen.most_switch_memory_ns, p["switch_memory_ns"].get<uint64_t>());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::string count = std::to_string(iterations);
  std::vector<Finished> done = run_caching_jobs(gpu, 2, {count, "400", "5000", "1", "30000"}, env);
  ended = true;
  watcher.join();
  seen.switches = gpu.top_json()["gpus"][0]["switches"];
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.out == "done " + count + "\n");
  }
  return seen;
}
}  // namespace

TEST_CASE("jobs that hand a lane's memory over at every switch take turns of many iterations; "
          "where switches cost nothing, turns stay short", "[turns]") {
  // Emptying a cache of 5 GiB costs 100 ms here, as freeing and allocating
  // again tens of GiB does on a GPU: a turn of one 60 ms iteration would
  // spend more than half the time switching. Turns of forty times a
  // switch's cost (4 s here) make one or two turns a job. (srtf,
  // knowing neither job's length, lets the holder keep the GPU; and a
  // job's first switch, with its set-up, is not measured.)
  for (const std::string policy : {"fair", "srtf", "priority", "pack"}) {
    INFO(policy);
    TurnsSeen costly = two_jobs_taking_turns(policy, 100);
    if (policy != "srtf") CHECK(costly.most_switch_cost_ns >= 60 * kMs);
    CHECK(costly.switches <= 16);
  }
  // The same jobs with switches that cost nothing but their memory calls
  // (allocating a 5 GiB cache anew, over the fake driver: about a
  // millisecond, tens on a loaded machine): turns as long as the quantum,
  // or forty times that cost where it is more (rules::slice_length), each
  // ending at the first iteration boundary after. From the most the cost
  // read while they ran, the fewest switches those turns allow: at least
  // three quarters of them (the figure, sampled every 100 ms, may miss a
  // turn's peak). Twice the iterations, so that even turns of three
  // iterations, 40 switches, stand well apart from the costly jobs' 16.
  TurnsSeen cheap = two_jobs_taking_turns("fair", 0, {}, 60);
  INFO("switches " << cheap.switches << ", most cost " << cheap.most_switch_cost_ns << " ns, most memory cost "
                   << cheap.most_switch_memory_ns << " ns");
  CHECK(cheap.most_switch_cost_ns < 100 * kMs);
  const uint64_t iteration_ns = 60 * kMs, work_ns = 2 * 60 * iteration_ns;
  const uint64_t slice_ns =
      std::max<uint64_t>(2 * 20 * kMs, gshare::tunables::kTurnPerSwitchCost * cheap.most_switch_memory_ns);
  CHECK(cheap.switches * 4 >= 3 * work_ns / (slice_ns + iteration_ns));
}

TEST_CASE("a switch costs what the driver takes to allocate the lane's memory anew, and turns grow with it",
          "[switch_cost]") {
  // The same two jobs with a cache that empties at once, over a driver
  // that takes 100 ms to allocate one's 5 GB (as a GPU's maps tens of GB
  // in a quarter of a second): the cost is in the allocation, inside
  // gshare's hook, and the turns must pay for it all the same.
  Env slow_driver{{"FAKE_CUDA_ALLOC_US_PER_GIB", "20000"}};
  TurnsSeen seen = two_jobs_taking_turns("fair", 0, slow_driver);
  CHECK(seen.most_switch_cost_ns >= 80 * kMs);
  CHECK(seen.switches <= 12);
}

TEST_CASE("a turn lasts what its switch's cost says from the moment its iteration has measured it",
          "[switch_cost]") {
  // Three jobs of one lane (P 400 MiB, E 5 GiB of 8 GiB) over a driver
  // that takes 240 ms to allocate one job's E, as an H200's maps 78 GB.
  // Each step takes its E in 8 pieces with a launch after each; the set-up
  // syncs before the weights exist; a cache takes 50 ms to empty. A switch
  // to a job costs about 300 ms, so its turns last the most, 10 s: longer
  // than a job's 24 steps (4.3 s). The ask to yield comes at the quantum's
  // end, long before the first step after a switch has allocated its E and
  // measured that; it must not stand. So after the first turns (each job's
  // set-up, three switches) each job runs to its end in one turn: three
  // more. Honouring the ask made two or more costly switches besides.
  for (const std::string policy : {"fair", "priority", "pack"}) {
    INFO(policy);
    TestGpu gpu(8 * kGiB);
    const Env env{{"GSHARE_POLICY", policy},         {"SETUP_SYNC", "1"},
                  {"MID_STEP_PAUSE_S", "0.001"},     {"EMPTY_CACHE_MS", "50"},
                  {"FAKE_CUDA_ALLOC_US_PER_GIB", "48000"}};
    std::vector<Finished> done = run_caching_jobs(gpu, 3, {"24", "400", "5120", "8", "17000"}, env);
    for (const Finished& f : done) {
      INFO(f.err);
      CHECK(f.out == "done 24\n");
    }
    json seen = gpu.top_json()["gpus"][0];
    INFO(seen.dump());
    CHECK(seen["switches"].get<uint64_t>() <= 7);
  }
}

TEST_CASE("pack runs jobs of two lanes at once and never two jobs of one lane at once") {
  TestGpu gpu(8 * kGiB);
  const Env env{{"FAKE_CUDA_TRACE", gpu.kernel_trace()}, {"GSHARE_POLICY", "pack"},
                {"GSHARE_HANDOVER", "strict"}};
  // Two large jobs can only take turns in one lane (2 GiB + 3 + 3 > 8);
  // a small one fits in a lane of its own beside them.
  Client big1(gpu, env), big2(gpu, env), small(gpu, env);
  for (Client* c : {&big1, &big2, &small}) REQUIRE(c->send("init") == "init ok");
  big1.post("memtrain 400 1G 3G 3 2 2000");
  big2.post("memtrain 400 1G 3G 3 2 2000");
  small.post("memtrain 800 64M 64M 1 2 2000");
  auto classified = [](const json& p) { return p["memory_provisional"] == false; };
  for (Client* c : {&big1, &big2, &small}) await_process(gpu, c->pid(), "its classification", classified);
  // Lanes may re-form while figures settle; judge from when they are set.
  await_process(gpu, small.pid(), "the two lanes", [&](const json& p) {
    json a = gpu.top_process(big1.pid()), b = gpu.top_process(big2.pid());
    return !a.is_null() && !b.is_null() && a["lane"] == b["lane"] && p["lane"] != a["lane"];
  });
  uint64_t from = monotonic_ns();
  for (Client* c : {&big1, &big2, &small}) CHECK(words(c->reply(120)).at(1) == "ok");
  auto all = read_kernel_trace(gpu.kernel_trace());
  auto k1 = since(kernels_of(all, big1.pid()), from), k2 = since(kernels_of(all, big2.pid()), from);
  auto ks = since(kernels_of(all, small.pid()), from);
  REQUIRE(k1.size() > 20);
  REQUIRE(k2.size() > 20);
  REQUIRE(ks.size() > 20);
  CHECK(overlap_between(k1, k2) == 0);
  CHECK(overlap_between(k1, ks) + overlap_between(k2, ks) > 20 * kMs);
}

TEST_CASE("jobs that sync mid-iteration, started together, take turns with the lane's space and all finish") {
  // Each job syncs after every piece of its ephemeral memory, as a forward
  // pass that reads values back does, and syncs 9 times while setting up:
  // boundaries found from syncs then fall mid-iteration. A job switched out
  // there would keep its live pieces while the next job's need the same
  // space. Peaks: 3 x 5.5 GiB on 8 GiB; one lane: 3 x 1 + 4.5 fits.
  TestGpu gpu(8 * kGiB);
  const std::string trace = gpu.dir() + "/memory.trace";
  const Env env{{"FAKE_CUDA_MEM_TRACE", trace}, {"GSHARE_ADMIT_TIMEOUT_S", "60"}};
  std::vector<std::unique_ptr<Client>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(std::make_unique<Client>(gpu, env));
  for (auto& j : jobs) REQUIRE(j->send("init") == "init ok");
  for (auto& j : jobs) j->post("memtrain 10 1G 4608M 3 2 2000 9 chunksync");
  for (auto& j : jobs) {
    std::string reply = j->reply(90);
    INFO(j->stderr_text());
    CHECK(reply.rfind("memtrain ok 10", 0) == 0);
  }
  std::vector<uint64_t> used = read_memory_trace(trace);
  REQUIRE_FALSE(used.empty());
  CHECK(*std::max_element(used.begin(), used.end()) <= 8 * kGiB);
}
