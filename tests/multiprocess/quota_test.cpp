// The quota holds on every path a program can reach the driver by, and the
// memory a process is shown agrees with it.
#include <catch2/catch.hpp>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {
constexpr int kOutOfMemory = 2;     // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kInvalidValue = 1;    // CUDA_ERROR_INVALID_VALUE

std::string refused(const std::string& command) {
  return command + " err " + std::to_string(kOutOfMemory);
}
}  // namespace

TEST_CASE("the quota holds on all three paths into the driver") {
  for (const char* load : {"gpa", "dlsym", "link"}) {
    INFO("load=" << load);
    TestGpu gpu;
    Client client(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}}, load);
    REQUIRE(client.send("init") == "init ok");
    // 1 GiB minus the 64 MiB the driver spends on the context.
    CHECK(client.send("alloc 600M a") == "alloc ok a");
    CHECK(client.send("alloc 600M b") == refused("alloc"));
    CHECK(client.stderr_text().find("over this process's quota") != std::string::npos);
    CHECK(client.send("free a") == "free ok");
    CHECK(client.send("alloc 600M b") == "alloc ok b");
    CHECK(client.send("alloc 400M c") == refused("alloc"));
    CHECK(client.send("alloc 300M c") == "alloc ok c");
  }
}

TEST_CASE("every allocation kind counts against the quota") {
  TestGpu gpu;
  Client client(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("alloc 900M big") == "alloc ok big");
  CHECK(client.send("pitch 100M 1") == refused("pitch"));
  CHECK(client.send("managed 100M") == refused("managed"));
  CHECK(client.send("async 100M") == refused("async"));
  CHECK(client.send("vmm 128M") == refused("vmm"));
  CHECK(client.send("free big") == "free ok");
  CHECK(client.send("pitch 1000 100000 p") == "pitch ok p 1024");  // rows padded to 512 bytes
  CHECK(client.send("managed 100M m") == "managed ok m");
  CHECK(client.send("async 100M s") == "async ok s");
  CHECK(client.send("vmm 128M v") == "vmm ok v");
  // pitch 97.7M + managed 100M + pool 128M chunk + vmm 128M + context 64M
  CHECK(client.send("alloc 600M") == refused("alloc"));
  CHECK(client.send("vmmfree v") == "vmmfree ok");  // released at mapping, freed at unmap
  CHECK(client.send("free m") == "free ok");
  CHECK(client.send("freeasync s") == "freeasync ok");
  CHECK(client.send("trim") == "trim ok");          // the pool gives its chunk back
  CHECK(client.send("alloc 600M last") == "alloc ok last");
}

TEST_CASE("the reported total equals the quota, and free is quota minus usage") {
  TestGpu gpu;
  Client client(gpu, {{"GSHARE_MEM_LIMIT", "2GiB"}});
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("totalmem") == "totalmem " + std::to_string(2 * kGiB));
  auto info = words(client.send("meminfo"));
  REQUIRE(info.size() == 3);
  CHECK(info[2] == std::to_string(2 * kGiB));
  CHECK(info[1] == std::to_string(2 * kGiB - kFakeContextBytes));
  REQUIRE(client.send("alloc 512M") == "alloc ok a0");
  info = words(client.send("meminfo"));
  CHECK(info[1] == std::to_string(2 * kGiB - kFakeContextBytes - 512 * kMiB));
  auto nvml = words(client.send("nvmlmem"));
  REQUIRE(nvml.size() == 4);
  CHECK(nvml[2] == std::to_string(2 * kGiB));  // NVML agrees with the driver view
  CHECK(nvml[1] == info[1]);
}

TEST_CASE("a percentage quota is a share of the GPU") {
  TestGpu gpu(8 * kGiB);
  Client client(gpu, {{"GSHARE_MEM_LIMIT", "25%"}});
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("totalmem") == "totalmem " + std::to_string(2 * kGiB));
}

TEST_CASE("without a quota the whole GPU is the limit") {
  TestGpu gpu(4 * kGiB);
  Client client(gpu);
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("totalmem") == "totalmem " + std::to_string(4 * kGiB));
  auto filled = words(client.send("fill 256M"));
  REQUIRE(filled.size() == 4);
  CHECK(filled[1] == std::to_string(4 * kGiB - 256 * kMiB));  // the context takes part of a chunk
}

TEST_CASE("a bad GSHARE_MEM_LIMIT fails cuInit cleanly with one message") {
  TestGpu gpu;
  for (const char* bad : {"lots", "10 GiB", "0", "150%"}) {
    INFO(bad);
    Client client(gpu, {{"GSHARE_MEM_LIMIT", bad}});
    CHECK(client.send("init") == "init err " + std::to_string(kInvalidValue));
    CHECK(client.finish() == 0);
    std::string err = client.stderr_text();
    CHECK(err.find("GSHARE_MEM_LIMIT=" + std::string(bad)) != std::string::npos);
    CHECK(err.find("512MiB") != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
}

TEST_CASE("a misspelt variable never runs without limits") {
  TestGpu gpu;
  Client client(gpu, {{"GSHARE_MEM_LIMT", "1GiB"}});
  CHECK(client.send("init") == "init err " + std::to_string(kInvalidValue));
  CHECK(client.stderr_text().find("did you mean GSHARE_MEM_LIMIT") != std::string::npos);
}

TEST_CASE("GSHARE_DISABLE=1 passes everything straight through") {
  TestGpu gpu;
  Client client(gpu, {{"GSHARE_DISABLE", "1"}, {"GSHARE_MEM_LIMIT", "1GiB"}});
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("alloc 3G") == "alloc ok a0");
  CHECK(client.send("totalmem") == "totalmem " + std::to_string(8 * kGiB));
  CHECK(gpu.top_json()["gpus"].empty());
}

TEST_CASE("destroying a context gives its allocations back") {
  TestGpu gpu;
  Client client(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
  REQUIRE(client.send("init") == "init ok");
  REQUIRE(client.send("alloc 800M") == "alloc ok a0");
  REQUIRE(client.send("reset") == "reset ok");
  REQUIRE(client.send("init") == "init ok");
  CHECK(client.send("alloc 800M") == "alloc ok a1");
}

TEST_CASE("memory freed while NVML lists the GPU's processes is never counted as context memory") {
  // The context memory is NVML's figure for the process less what gshare
  // counts as allocated (allocator/context_memory.h). Read a moment apart,
  // a free between them made the freed bytes context until the next
  // refresh: a job that had given a 5 GiB cache back was refused its next
  // 5 GiB over its quota. Here NVML's listing takes 25 ms after it has read
  // the figures, and the job holds 2 GiB for 25 ms, then nothing for 25 ms,
  // over and over: without the fix about every other refresh (one a
  // second while the figure moves) read 2 GiB of context.
  TestGpu gpu(8 * kGiB);
  Client job(gpu, {{"FAKE_NVML_LIST_US", "25000"}});
  REQUIRE(job.send("init") == "init ok");
  job.post("allocloop 2G 25 25");
  uint64_t most = 0;
  int samples = 0;
  const uint64_t until = monotonic_ns() + 7'000'000'000ull;
  while (monotonic_ns() < until) {
    const nlohmann::json p = gpu.top_process(job.pid());
    if (p.is_object()) {
      most = std::max(most, p["context_bytes"].get<uint64_t>());
      ++samples;
    }
    usleep(100'000);
  }
  INFO(samples << " samples, the most context seen " << most);
  CHECK(samples >= 10);
  CHECK(most <= kFakeContextBytes);
  CHECK(words(job.release(20)).at(1) == "ok");
  // Once the job stops allocating, its context is measured as before.
  const nlohmann::json settled = await_process(gpu, job.pid(), "the context measured", [](const nlohmann::json& p) {
    return p["context_bytes"].get<uint64_t>() == kFakeContextBytes;
  });
  CHECK(settled["context_bytes"].get<uint64_t>() == kFakeContextBytes);
}
