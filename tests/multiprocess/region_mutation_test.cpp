// Randomized mutants of a real region file: bytes flipped or overwritten in
// the lock, the header and the process table. Each is given to a real
// client under the preload over the fake driver, and to gshare-top --json.
// Whatever a mutant holds: no crash, no abort, no hang, no allocation past
// the quota, nothing raw on a terminal. The seed is fixed, so a failure
// names a mutant that the same build reproduces.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "shm/layout.h"
#include "shm/robust_mutex.h"
#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

constexpr int kMutants = 200;
constexpr uint64_t kSeed = 0x6d757461746f7273ull;  // fixed: failures reproduce
constexpr int kWorkers = 8;                          // clients mostly wait: 8 on 2 cores
// A hang fails the test: each process gets this long, and the whole run
// stops starting mutants past kBudgetS.
const double kClientTimeoutS = double(gshare::shm::kLockTimeoutNs) / 1e9 + 25;
constexpr double kTopTimeoutS = 15;
constexpr double kBudgetS = 150;
constexpr uint64_t kQuota = 1 * kGiB;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  chmod(path.c_str(), 0600);
}

size_t lock_offset() {
  alignas(gshare::shm::Region) static unsigned char storage[sizeof(gshare::shm::Region)];
  auto* region = reinterpret_cast<gshare::shm::Region*>(storage);
  return size_t(reinterpret_cast<const unsigned char*>(&region->header.lock) - storage);
}

// One mutant: where it changed what, for the failure message.
struct Mutant {
  std::string bytes;
  std::string how;
};

Mutant mutate(const std::string& base, std::mt19937_64& random, int index) {
  Mutant m{base, ""};
  auto pick = [&](uint64_t from, uint64_t to) {  // [from, to)
    return from + random() % (to - from);
  };
  const uint64_t header = sizeof(gshare::shm::RegionHeader);
  const uint64_t lock = lock_offset(), lock_end = lock + sizeof(pthread_mutex_t);
  const uint64_t table_head = header + 4 * sizeof(gshare::shm::Slot);  // the slots in use
  static const uint64_t kWords[] = {0,          1,          0xff,       0x7fffffff,
                                    0x80000000, 0xffffffff, 0x40000000, 0x7ffffffe,
                                    UINT64_MAX, 1ull << 63, 0x1b5b324a1b5b4800ull};
  std::ostringstream how;
  int kind = index % 4;
  int changes = 1 + int(random() % (kind == 2 ? 16 : 4));
  for (int i = 0; i < changes; ++i) {
    uint64_t at;
    switch (kind) {
      case 0: at = pick(lock, lock_end); break;                 // the lock
      case 1: at = pick(0, header); break;                      // the header
      case 2: at = pick(0, m.bytes.size()); break;              // anywhere
      default: at = pick(0, random() % 2 ? header : table_head); break;
    }
    if (kind == 3) {  // a whole word of a telling value, aligned
      size_t width = random() % 2 ? 8 : 4;
      at &= ~uint64_t(width - 1);
      uint64_t value = kWords[random() % (sizeof kWords / sizeof kWords[0])];
      if (random() % 4 == 0) value = random();
      if (width == 4) value &= 0xffffffffu;
      if (at + width > m.bytes.size()) continue;
      memcpy(&m.bytes[at], &value, width);
      how << " word" << width * 8 << "@" << at << "=" << std::hex << value << std::dec;
    } else if (random() % 2) {
      uint8_t flip = uint8_t(1 + random() % 255);
      m.bytes[at] = char(uint8_t(m.bytes[at]) ^ flip);
      how << " xor@" << at << "=" << int(flip);
    } else {
      static const uint8_t kBytes[] = {0, 0xff, 0x1b, 0x07, 0x0a, 0x80, 0xc3, 0x40};
      uint8_t value = random() % 2 ? kBytes[random() % sizeof kBytes] : uint8_t(random());
      m.bytes[at] = char(value);
      how << " set@" << at << "=" << int(value);
    }
  }
  m.how = how.str();
  return m;
}

bool has_raw_bytes(const std::string& text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n') || c == 0x7F) return true;
  return false;
}

struct Tally {
  std::mutex mutex;
  int tried = 0, crashes = 0, aborts = 0, hangs = 0, violations = 0, raw = 0, other = 0;
  int alone = 0;      // mutants whose client ran alone (the region refused)
  int timed_out = 0;  // of those, a lock that timed out (a plausible owner that never lets go)
  std::vector<std::string> failures;
  void fail(int* counter, int index, const std::string& how, const std::string& what) {
    std::lock_guard<std::mutex> hold(mutex);
    ++*counter;
    if (failures.size() < 40) failures.push_back("mutant " + std::to_string(index) + " (" + how +
                                                 "): " + what);
  }
};

// The client's script: its live allocations never exceed the quota, whatever
// the region says (refusals are allowed: a mutant may claim the GPU full).
const std::vector<std::pair<std::string, int64_t>> kScript = {
    {"init", 0},         {"alloc 600M a", 600}, {"alloc 600M b", 600}, {"alloc 300M c", 300},
    {"launch 3 10", 0},  {"free a", -600},      {"alloc 500M d", 500}, {"sync", 0},
    {"meminfo", 0},      {"exit", 0}};

void try_mutant(const TestGpu& gpu, const std::string& region_name, const Mutant& m, int index,
                Tally& tally) {
  std::string dir = gpu.dir() + "/mutant-" + std::to_string(index);
  mkdir(dir.c_str(), 0700);
  write_file(dir + "/" + region_name, m.bytes);

  // gshare-top first, on the mutant as made.
  auto top = run_to_end({gshare_top(), "--json", "--dir", dir}, {{"PATH", "/usr/bin:/bin"}},
                        kTopTimeoutS);
  if (top.status == 128 + SIGKILL) tally.fail(&tally.hangs, index, m.how, "gshare-top hung");
  else if (top.status == 128 + SIGABRT) tally.fail(&tally.aborts, index, m.how, "gshare-top aborted");
  else if (top.status > 128) tally.fail(&tally.crashes, index, m.how, "gshare-top crashed: " + std::to_string(top.status));
  else if (top.status != 0 || nlohmann::json::parse(top.out, nullptr, false).is_discarded())
    tally.fail(&tally.other, index, m.how, "gshare-top failed: " + top.err);
  if (has_raw_bytes(top.err)) tally.fail(&tally.raw, index, m.how, "raw bytes on gshare-top's stderr");

  std::vector<std::string> argv = {cuda_client(), "--load=gpa"};
  for (const auto& step : kScript) argv.push_back(step.first);
  Env env = gpu.environment({{"GSHARE_DIR", dir}, {"FAKE_CUDA_DIR", dir},
                             {"GSHARE_MEM_LIMIT", std::to_string(kQuota)}});
  auto start = std::chrono::steady_clock::now();
  Finished f = run_to_end(argv, env, kClientTimeoutS);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string tail = " after " + std::to_string(took) + " s; stdout: " + f.out + " stderr: " +
                     f.err.substr(0, 600);
  if (took >= kClientTimeoutS - 0.5) tally.fail(&tally.hangs, index, m.how, "client hung" + tail);
  else if (f.status == 128 + SIGABRT) tally.fail(&tally.aborts, index, m.how, "client aborted" + tail);
  else if (f.status > 128) tally.fail(&tally.crashes, index, m.how, "client died of signal " + std::to_string(f.status - 128) + tail);
  else if (f.status != 0) tally.fail(&tally.other, index, m.how, "client exited " + std::to_string(f.status) + tail);
  if (has_raw_bytes(f.err)) tally.fail(&tally.raw, index, m.how, "raw bytes on the client's stderr" + tail);

  std::vector<std::string> replies;
  std::istringstream lines(f.out);
  for (std::string line; std::getline(lines, line);) replies.push_back(line);
  int64_t live_mib = 0, peak_mib = 0;
  for (size_t i = 0; i < kScript.size() && i < replies.size(); ++i) {
    const std::string& command = kScript[i].first;
    std::string verb = command.substr(0, command.find(' '));
    bool ok = replies[i].rfind(verb + " ", 0) == 0 && replies[i].rfind(verb + " err", 0) != 0;
    if (verb == "alloc" || verb == "free") {
      if (ok) live_mib += kScript[i].second;
      peak_mib = std::max(peak_mib, live_mib);
    } else if (!ok && verb != "exit") {
      tally.fail(&tally.other, index, m.how, "'" + command + "' replied '" + replies[i] + "'" + tail);
    }
  }
  if (uint64_t(peak_mib) * kMiB > kQuota)
    tally.fail(&tally.violations, index, m.how,
               "held " + std::to_string(peak_mib) + " MiB under a 1 GiB quota" + tail);
  if (f.err.find("runs alone") != std::string::npos || f.err.find("goes on alone") != std::string::npos) {
    std::lock_guard<std::mutex> hold(tally.mutex);
    tally.alone++;
    if (f.err.find("held for over") != std::string::npos) tally.timed_out++;
  }
  std::lock_guard<std::mutex> hold(tally.mutex);
  tally.tried++;
}

}  // namespace

TEST_CASE("mutants of a real region never crash, abort, hang or lift a quota", "[mutation]") {
  auto start = std::chrono::steady_clock::now();
  TestGpu gpu(8 * kGiB);
  // A region with a life: two jobs that allocated and launched (the token
  // moved), copied while they were alive, so that their slots are live in
  // the copy with no process behind them.
  std::string base;
  {
    Client a(gpu, {{"GSHARE_MEM_LIMIT", "2GiB"}}), b(gpu, {{"GSHARE_POLICY", "fair"}});
    REQUIRE(a.send("init") == "init ok");
    REQUIRE(b.send("init") == "init ok");
    REQUIRE(a.send("alloc 512M") == "alloc ok a0");
    REQUIRE(b.send("alloc 256M") == "alloc ok a0");
    REQUIRE(a.send("launch 20 50") == "launch ok 20");
    REQUIRE(b.send("launch 20 50") == "launch ok 20");
    std::string path = region_file_in(gpu.dir());
    REQUIRE_FALSE(path.empty());
    base = read_file(path);
  }
  REQUIRE(base.size() == sizeof(gshare::shm::Region));
  std::string region_name = region_file_in(gpu.dir()).substr(gpu.dir().size() + 1);

  std::mt19937_64 random(kSeed);
  std::vector<Mutant> mutants;
  for (int i = 0; i < kMutants; ++i) mutants.push_back(mutate(base, random, i));

  Tally tally;
  std::atomic<int> next{0};
  std::atomic<bool> out_of_time{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      for (int i; (i = next++) < kMutants;) {
        double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (spent > kBudgetS) {
          out_of_time = true;
          return;
        }
        try_mutant(gpu, region_name, mutants[size_t(i)], i, tally);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string report;
  for (const std::string& f : tally.failures) report += f + "\n";
  INFO(report);
  printf("region mutants: %d of %d tried in %.1f s (seed %#llx); %d ran alone (%d after a lock "
         "timeout); crashes %d, aborts %d, hangs %d, quota violations %d, raw bytes %d, other "
         "failures %d\n",
         tally.tried, kMutants, took, (unsigned long long)kSeed, tally.alone, tally.timed_out,
         tally.crashes,
         tally.aborts, tally.hangs, tally.violations, tally.raw, tally.other);
  CHECK_FALSE(out_of_time);
  CHECK(tally.tried == kMutants);
  CHECK(tally.crashes == 0);
  CHECK(tally.aborts == 0);
  CHECK(tally.hangs == 0);
  CHECK(tally.violations == 0);
  CHECK(tally.raw == 0);
  CHECK(tally.other == 0);
}
