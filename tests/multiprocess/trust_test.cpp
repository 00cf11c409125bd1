// What one user can do to another's gshare processes through the region
// directory, which is shared by every user (/dev/shm).
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

constexpr int kInvalidValue = 1;  // CUDA_ERROR_INVALID_VALUE

// Starts a client's use of the GPU: gshare attaches to the region at a
// process's first memory call on a device, not at cuInit.
void start(Client& client) {
  REQUIRE(client.send("init") == "init ok");
  REQUIRE(client.send("meminfo").rfind("meminfo ", 0) == 0);
}

}  // namespace

TEST_CASE("a GSHARE_GROUP number that is no gid fails cuInit with one message") {
  TestGpu gpu;
  for (const char* bad : {"-1", "4294967295", "4294967296", "99999999999999999999", "+5"}) {
    INFO(bad);
    Client client(gpu, {{"GSHARE_GROUP", bad}});
    CHECK(client.send("init") == "init err " + std::to_string(kInvalidValue));
    CHECK(client.finish() == 0);
    std::string err = client.stderr_text();
    CHECK(err.find("GSHARE_GROUP=" + std::string(bad) + " is not valid") != std::string::npos);
    CHECK(err.find("4294967294") != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
  Client largest(gpu, {{"GSHARE_GROUP", "4294967294"}});
  start(largest);
}
