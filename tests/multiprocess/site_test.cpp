// Allocation sites (allocator/call_site.h) in a real process under the
// preload: what a site learned classifies the next allocation from it at
// birth, and only from it.
#include <catch2/catch.hpp>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;
using nlohmann::json;

TEST_CASE("an allocation from a site whose allocations turned out persistent is persistent at birth") {
  // Every "alloc" command of the client allocates from one call site, every
  // "managed" command from another.
  TestGpu gpu(16 * kGiB);
  Client job(gpu);
  REQUIRE(job.send("init") == "init ok");
  REQUIRE(job.send("alloc 256M weights") == "alloc ok weights");
  // Alive at the second boundary after its birth: persistent, and so is
  // its site. (A loop of one launch and a sync: its iterations are found.)
  REQUIRE(words(job.send("train 20 1 100 sync 0")).at(1) == "ok");
  json p = await_process(gpu, job.pid(), "the weights to be persistent", [](const json& p) {
    return p["persistent_bytes"] >= p["context_bytes"].get<uint64_t>() + 256 * kMiB;
  });
  const uint64_t context = p["context_bytes"];
  REQUIRE(p["persistent_bytes"] == context + 256 * kMiB);
  // Sites say "persistent" only once the process has freed something (a
  // caching framework frees nothing at first); a buffer too small to take a
  // site teaches none.
  REQUIRE(job.send("alloc 1M small") == "alloc ok small");
  REQUIRE(job.send("free small") == "free ok");
  // No boundary from here on: only a site can make memory persistent. Three
  // from each site, so that the later ones take their site from the cached
  // walk.
  for (int i = 0; i < 3; ++i) {
    REQUIRE(words(job.send("managed 256M")).at(1) == "ok");
    REQUIRE(words(job.send("alloc 256M")).at(1) == "ok");
  }
  p = gpu.top_process(job.pid());
  REQUIRE_FALSE(p.is_null());
  CHECK(p["reserved_bytes"] == context + 7 * 256 * kMiB);
  CHECK(p["persistent_bytes"] == context + 4 * 256 * kMiB);
}
