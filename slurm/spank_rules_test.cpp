// The Slurm plugin's decisions, without Slurm: its options refuse exactly
// what the preload refuses, its messages name option, value and accepted
// forms, its plugstack.conf arguments, and the job's LD_PRELOAD.
#include "slurm/spank_rules.h"

#include <catch2/catch.hpp>

#include <string>

#include "base/options.h"

namespace {

// What cuInit would say of VARIABLE=value: the preload's own reading of a
// whole environment.
bool preload_accepts(const char* variable, const std::string& value) {
  std::string entry = std::string(variable) + "=" + value;
  const char* environment[] = {entry.c_str(), nullptr};
  gshare::Options options;
  char error[512];
  return gshare::parse_options(environment, &options, error, sizeof error);
}

std::string preload(const char* existing, const char* lib = "/usr/lib/libgshare.so") {
  char out[256];
  REQUIRE(gshare_spank_preload(existing, lib, out, sizeof out) == 1);
  return out;
}

size_t option_index(const std::string& name) {
  size_t count = 0;
  const gshare_spank_option* options = gshare_spank_options(&count);
  for (size_t i = 0; i < count; ++i)
    if (name == options[i].name) return i;
  FAIL("no option --" << name);
  return 0;
}

}  // namespace

TEST_CASE("each option refuses exactly the values its variable's parser refuses") {
  const char* values[] = {
      "20GiB", "512MiB", "25%", "1.5T", "1073741824", "0", "1", "1000", "1001", "-1", "-1000",
      "-1001", "lots", "", "0x14", " 20", "+20", "2e1", "20 GiB", "101%", "0%", "fair", "FIFO",
      "srtf", "priority", "pack", "prefetch", "nope", "fair ", "3", "1.5", "10G", "NaN", "inf"};
  size_t count = 0;
  const gshare_spank_option* options = gshare_spank_options(&count);
  REQUIRE(count == 4);
  for (size_t i = 0; i < count; ++i) {
    for (const char* value : values) {
      char error[512] = "";
      bool plugin = gshare_spank_check_option(i, value, error, sizeof error) == 1;
      INFO("--" << options[i].name << "=" << value << " (" << options[i].variable << ")");
      CHECK(plugin == preload_accepts(options[i].variable, value));
      if (!plugin)
        CHECK(std::string(error).rfind(std::string("gshare: --") + options[i].name + "=", 0) == 0);
    }
  }
}

TEST_CASE("the options set the variables the README documents") {
  size_t count = 0;
  const gshare_spank_option* options = gshare_spank_options(&count);
  REQUIRE(std::string(options[option_index("gpu-mem")].variable) == "GSHARE_MEM_LIMIT");
  REQUIRE(std::string(options[option_index("gpu-policy")].variable) == "GSHARE_POLICY");
  REQUIRE(std::string(options[option_index("gpu-weight")].variable) == "GSHARE_WEIGHT");
  REQUIRE(std::string(options[option_index("gpu-priority")].variable) == "GSHARE_PRIORITY");
}

TEST_CASE("a refused value's message names the option, the value and what is accepted") {
  char error[512];
  REQUIRE(gshare_spank_check_option(option_index("gpu-mem"), "lots", error, sizeof error) == 0);
  CHECK(std::string(error) ==
        "gshare: --gpu-mem=lots is not valid; accepted: a byte count (1073741824), a size with a "
        "unit (512MiB, 10GiB, 10G, 1.5T; K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, "
        "KB/MB/GB/TB of 1000), or a percentage of the GPU (25%)");
  REQUIRE(gshare_spank_check_option(option_index("gpu-policy"), "nope", error, sizeof error) == 0);
  CHECK(std::string(error) == "gshare: --gpu-policy=nope is not valid; accepted: fifo, fair, "
                              "srtf, priority, pack or prefetch");
  REQUIRE(gshare_spank_check_option(option_index("gpu-weight"), "0", error, sizeof error) == 0);
  CHECK(std::string(error) ==
        "gshare: --gpu-weight=0 is not valid; accepted: an integer from 1 to 1000");
  // Terminal control characters in the value are shown as '?'.
  REQUIRE(gshare_spank_check_option(option_index("gpu-priority"), "1\x1b[2J", error,
                                    sizeof error) == 0);
  CHECK(std::string(error).find("--gpu-priority=1?[2J is not valid") != std::string::npos);
}

TEST_CASE("plugstack.conf arguments: dir, group, lib, all") {
  gshare_spank_config config;
  char error[512] = "";
  {
    char* argv[] = {nullptr};
    REQUIRE(gshare_spank_parse_config(0, argv, "/usr/lib/libgshare.so", &config, error,
                                      sizeof error) == 1);
    CHECK(std::string(config.lib) == "/usr/lib/libgshare.so");
    CHECK(config.dir[0] == '\0');
    CHECK(config.group[0] == '\0');
    CHECK(config.all == 0);
  }
  {
    char a0[] = "dir=/run/gshare", a1[] = "lib=/opt/gshare/libgshare.so", a2[] = "all=1",
         a3[] = "group=gpushare";
    char* argv[] = {a0, a1, a2, a3};
    REQUIRE(gshare_spank_parse_config(4, argv, "/usr/lib/libgshare.so", &config, error,
                                      sizeof error) == 1);
    CHECK(std::string(config.dir) == "/run/gshare");
    CHECK(std::string(config.lib) == "/opt/gshare/libgshare.so");
    CHECK(std::string(config.group) == "gpushare");
    CHECK(config.all == 1);
  }
  struct Bad {
    const char* argument;
    const char* message;
  } bad[] = {
      {"dir=run/gshare", "argument dir=run/gshare is not valid; accepted: an absolute path"},
      {"lib=libgshare.so", "accepted: the absolute path of libgshare.so"},
      {"lib=/opt/my gshare/libgshare.so", "accepted: the absolute path of libgshare.so"},
      {"lib=/a:/b/libgshare.so", "accepted: the absolute path of libgshare.so"},
      {"all=maybe", "argument all=maybe is not valid; accepted: 1, 0, true"},
      {"group=-1", "argument group=-1 is not valid; accepted: a group name"},
      {"dirs=/run/gshare", "accepted: dir=PATH, group=GROUP, lib=PATH or all=BOOL"},
      {"all", "argument all is not valid; accepted: dir=PATH"},
  };
  for (const Bad& b : bad) {
    std::string argument = b.argument;
    char* argv[] = {argument.data()};
    INFO(b.argument);
    REQUIRE(gshare_spank_parse_config(1, argv, "/usr/lib/libgshare.so", &config, error,
                                      sizeof error) == 0);
    CHECK(std::string(error).rfind("gshare: plugstack.conf argument ", 0) == 0);
    CHECK(std::string(error).find(b.message) != std::string::npos);
  }
}

TEST_CASE("the job's LD_PRELOAD gets libgshare.so first, once") {
  CHECK(preload(nullptr) == "/usr/lib/libgshare.so");
  CHECK(preload("") == "/usr/lib/libgshare.so");
  CHECK(preload("/opt/a.so") == "/usr/lib/libgshare.so:/opt/a.so");
  CHECK(preload("/opt/a.so /opt/b.so") == "/usr/lib/libgshare.so:/opt/a.so:/opt/b.so");
  // Already there, in any place: not twice.
  CHECK(preload("/usr/lib/libgshare.so") == "/usr/lib/libgshare.so");
  CHECK(preload("/opt/a.so:/usr/lib/libgshare.so") == "/usr/lib/libgshare.so:/opt/a.so");
  // Another copy of the library: the node's replaces it.
  CHECK(preload("/home/me/build/libgshare.so::/opt/a.so") == "/usr/lib/libgshare.so:/opt/a.so");
  CHECK(preload("libgshare.so") == "/usr/lib/libgshare.so");
  // Only the same file name counts.
  CHECK(preload("/opt/libgshare.so.1 /opt/xlibgshare.so") ==
        "/usr/lib/libgshare.so:/opt/libgshare.so.1:/opt/xlibgshare.so");
  char small[24];
  CHECK(gshare_spank_preload("/opt/a.so", "/usr/lib/libgshare.so", small, sizeof small) == 0);
  CHECK(gshare_spank_preload(nullptr, "/usr/lib/libgshare.so", small, sizeof small) == 1);
}

TEST_CASE("option_value_is_valid: the table's parser for a name, nothing for an unknown name") {
  const char* accepted = "not touched";
  CHECK(gshare::option_value_is_valid("GSHARE_WEIGHT", "7", &accepted));
  CHECK_FALSE(gshare::option_value_is_valid("GSHARE_WEIGHT", "7.5", &accepted));
  CHECK(std::string(accepted) == "an integer from 1 to 1000");
  CHECK_FALSE(gshare::option_value_is_valid("GSHARE_NOT_AN_OPTION", "1", &accepted));
  CHECK(accepted == nullptr);
  CHECK_FALSE(gshare::option_value_is_valid("GSHARE_DIR", "relative", nullptr));
}
