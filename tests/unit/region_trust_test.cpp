// GSHARE_GROUP's numbers, which name the group that regions are shared
// with: a number must be a gid, never wrapped to another group.
#include <catch2/catch.hpp>

#include <string>

#include "intercept/options.h"
#include "shm/region.h"

using namespace gshare::shm;

TEST_CASE("a GSHARE_GROUP number must be a gid") {
  gid_t gid = 99;
  CHECK(parse_group_text("0", &gid) == GroupText::kGid);
  CHECK(gid == 0);
  CHECK(parse_group_text("4294967294", &gid) == GroupText::kGid);
  CHECK(gid == 4294967294u);
  CHECK(parse_group_text("0012", &gid) == GroupText::kGid);
  CHECK(gid == 12);
  for (const char* bad : {"-1", "+1", "-0", "4294967295", "4294967296", "18446744073709551616",
                          "99999999999999999999999999"}) {
    INFO(bad);
    CHECK(parse_group_text(bad, &gid) == GroupText::kInvalid);
  }
  for (const char* name : {"video", "gpu-users", "1x", "-", "+"})
    CHECK(parse_group_text(name, &gid) == GroupText::kName);

  gshare::Options options;
  char error[512] = "";
  const char* bad_env[] = {"GSHARE_GROUP=4294967296", nullptr};
  CHECK_FALSE(gshare::parse_options(bad_env, &options, error, sizeof error));
  CHECK(std::string(error) ==
        "GSHARE_GROUP=4294967296 is not valid; accepted: a group name of fewer than 256 "
        "characters, or a numeric gid from 0 to 4294967294");
  const char* good_env[] = {"GSHARE_GROUP=video", nullptr};
  CHECK(gshare::parse_options(good_env, &options, error, sizeof error));
  CHECK(std::string(options.group) == "video");
}
