// gshare-top reads the regions of live processes and drops dead ones.
#include <catch2/catch.hpp>

#include <filesystem>

#include "base/version.h"
#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {
const nlohmann::json* find_process(const nlohmann::json& top, pid_t pid) {
  for (const auto& gpu : top["gpus"])
    for (const auto& p : gpu["processes"])
      if (p["pid"] == pid) return &p;
  return nullptr;
}
}  // namespace

TEST_CASE("gshare-top --json shows live processes and drops dead ones") {
  TestGpu gpu(8 * kGiB);
  Client a(gpu, {{"GSHARE_MEM_LIMIT", "2GiB"}}), b(gpu);
  REQUIRE(a.send("init") == "init ok");
  REQUIRE(b.send("init") == "init ok");
  REQUIRE(a.send("alloc 512M") == "alloc ok a0");
  REQUIRE(b.send("alloc 1G") == "alloc ok a0");
  REQUIRE(a.send("launch 50 10") == "launch ok 50");

  nlohmann::json top = gpu.top_json();
  REQUIRE(top["gpus"].size() == 1);
  CHECK(top["gpus"][0]["total_bytes"] == 8 * kGiB);
  CHECK(top["gpus"][0]["uuid"].get<std::string>().rfind("GPU-", 0) == 0);
  const nlohmann::json* pa = find_process(top, a.pid());
  const nlohmann::json* pb = find_process(top, b.pid());
  REQUIRE(pa);
  REQUIRE(pb);
  CHECK((*pa)["quota_bytes"] == 2 * kGiB);
  CHECK((*pa)["used_bytes"] == 512 * kMiB + kFakeContextBytes);
  CHECK((*pa)["context_bytes"] == kFakeContextBytes);
  CHECK((*pa)["launches"] == 50);
  CHECK((*pa)["command"].get<std::string>().find("cuda_client") != std::string::npos);
  CHECK((*pb)["quota_bytes"] == 8 * kGiB);
  CHECK((*pb)["used_bytes"] == 1 * kGiB + kFakeContextBytes);

  b.kill9();
  top = gpu.top_json();
  CHECK(find_process(top, b.pid()) == nullptr);
  CHECK(find_process(top, a.pid()) != nullptr);
}

TEST_CASE("gshare-top --once prints a frame with each process") {
  TestGpu gpu;
  Client a(gpu);
  REQUIRE(a.send("init") == "init ok");
  REQUIRE(a.send("alloc 256M") == "alloc ok a0");
  Finished f = run_to_end({gshare_top(), "--once", "--dir", gpu.dir()}, {{"PATH", "/usr/bin:/bin"}});
  CHECK(f.status == 0);
  CHECK(f.out.find(std::to_string(a.pid())) != std::string::npos);
  CHECK(f.out.find("capacity") != std::string::npos);
}

TEST_CASE("at GSHARE_LOG=info the preload names its version once, at cuInit; at warn never") {
  TestGpu gpu;
  const std::string line = std::string("gshare: libgshare.so ") + gshare::kVersion + " started in pid ";
  Client told(gpu, {{"GSHARE_LOG", "info"}});
  REQUIRE(told.send("init") == "init ok");
  REQUIRE(told.send("alloc 16M") == "alloc ok a0");
  CHECK(told.finish() == 0);
  std::string err = told.stderr_text();
  INFO(err);
  size_t at = err.find(line + std::to_string(told.pid()) + "\n");
  CHECK(at != std::string::npos);
  CHECK(err.find(line, at + 1) == std::string::npos);

  Client quiet(gpu);
  REQUIRE(quiet.send("init") == "init ok");
  CHECK(quiet.finish() == 0);
  CHECK(quiet.stderr_text().find("libgshare.so") == std::string::npos);
}

TEST_CASE("gshare-top with no region says there are no gshare processes") {
  TestGpu gpu;
  Finished f = run_to_end({gshare_top(), "--once", "--dir", gpu.dir()}, {{"PATH", "/usr/bin:/bin"}});
  CHECK(f.status == 0);
  CHECK(f.out.find("no gshare processes") != std::string::npos);
  CHECK(gpu.top_json()["gpus"].empty());
}

TEST_CASE("preloading gshare into a program without CUDA costs nothing and prints nothing") {
  TestGpu gpu;
  // The program does exactly what it does without the preload, and gshare
  // says nothing.
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"/bin/true"}, {"/bin/ls", "-a", "/", gpu.dir()}}) {
    INFO(argv.back());
    Finished with = run_to_end(argv, gpu.environment());
    Finished without = run_to_end(argv, gpu.environment({}, false));
    CHECK(with.status == 0);
    CHECK(with.status == without.status);
    CHECK(with.out == without.out);
    CHECK(with.err.empty());
  }
  // Nor does gshare do anything in it: no driver loaded, no thread started,
  // as the program sees itself.
  Finished self = run_to_end({"/bin/cat", "/proc/self/maps", "/proc/self/status"}, gpu.environment());
  INFO(self.out);
  REQUIRE(self.status == 0);
  CHECK(self.out.find("libgshare") != std::string::npos);  // preloaded
  CHECK(self.out.find("libcuda") == std::string::npos);
  CHECK(self.out.find("libnvidia-ml") == std::string::npos);
  CHECK(self.out.find("\nThreads:\t1\n") != std::string::npos);
  CHECK(self.err.empty());
  // Nothing was created where the regions live.
  CHECK(std::filesystem::is_empty(gpu.dir()));
  CHECK(gpu.top_json()["gpus"].empty());
}
