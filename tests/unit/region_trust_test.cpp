// GSHARE_GROUP's numbers, which name the group that regions are shared
// with: a number must be a gid, never wrapped to another group; and what a
// file planted in the region directory can do to a region's creation.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "intercept/options.h"
#include "shm/region.h"
#include "shm/snapshot.h"

using namespace gshare::shm;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr const char* kUuid = "GPU-00000000-1111-2222-3333-444444444444";

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/gshare-trust-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { (void)!system(("rm -rf " + path).c_str()); }
  std::string path;
};

std::string open_error(const std::string& dir) {
  RegionFile file;
  char error[kErrorChars] = "";
  RegionAccess access{dir.c_str(), nullptr};
  if (open_or_create_region(access, kUuid, 8 * kGiB, &file, error, sizeof error)) {
    close_region(&file);
    return "";
  }
  return error;
}

}  // namespace

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

TEST_CASE("a new region leaves no temporary file and is not named after the creator's pid") {
  TempDir dir;
  char path[kPathChars];
  REQUIRE(region_path(dir.path.c_str(), kUuid, path, sizeof path));
  // What the old scheme would have created, taken already.
  std::string guessed = std::string(path) + ".tmp." + std::to_string(getpid());
  REQUIRE(symlink((dir.path + "/elsewhere").c_str(), guessed.c_str()) == 0);
  REQUIRE(open_error(dir.path) == "");
  struct stat st;
  REQUIRE(lstat(path, &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(access((dir.path + "/elsewhere").c_str(), F_OK) != 0);
  REQUIRE(lstat(guessed.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));  // untouched
  REQUIRE(unlink(guessed.c_str()) == 0);
  // Only the region is left.
  std::vector<GpuSnapshot> view = snapshot_regions(dir.path);
  REQUIRE(view.size() == 1);
  CHECK(view[0].error.empty());
  CHECK(system(("test $(ls -A " + dir.path + " | wc -l) -eq 1").c_str()) == 0);
}
