// Which region files a process may join (region_file_trusted), GSHARE_GROUP's
// numbers, and files of the wrong kind or size at a region's path. The same
// rule with real users of other uids is in tests/multiprocess/trust_test.cpp.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "base/group_text.h"
#include "base/options.h"
#include "shm/region.h"
#include "shm/snapshot.h"

using namespace gshare;
using namespace gshare::shm;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr const char* kUuid = "GPU-00000000-1111-2222-3333-444444444444";
constexpr uid_t kSelf = 1000;
constexpr uid_t kOther = 2000;
constexpr uid_t kStranger = 3000;  // not in the user database
constexpr gid_t kGroup = 500;

Membership test_membership(uid_t uid, gid_t gid) {
  if (uid == kStranger) return Membership::kUnknownUser;
  return uid == kOther && gid == kGroup ? Membership::kMember : Membership::kNotMember;
}

struct stat file_of(uid_t uid, gid_t gid, mode_t mode, mode_t type = S_IFREG) {
  struct stat st {};
  st.st_uid = uid;
  st.st_gid = gid;
  st.st_mode = type | mode;
  st.st_size = sizeof(Region);
  return st;
}

// "" if trusted, else the reason.
std::string verdict(const struct stat& st, bool with_group, gid_t group = kGroup) {
  RegionTrust trust{kSelf, with_group, group, test_membership};
  char why[200] = "";
  return region_file_trusted(st, trust, why, sizeof why) ? "" : why;
}

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

TEST_CASE("the caller's own region is joined unless others or a foreign group may write it") {
  CHECK(verdict(file_of(kSelf, 7, 0600), false) == "");
  CHECK(verdict(file_of(kSelf, 7, 0640), false) == "");
  CHECK(verdict(file_of(kSelf, kGroup, 0660), true) == "");
  CHECK(verdict(file_of(kSelf, 7, 0600), true) == "");  // a private region stays private
  CHECK(verdict(file_of(kSelf, 7, 0666), false) == "is writable by every user");
  CHECK(verdict(file_of(kSelf, 7, 0602), true) == "is writable by every user");
  CHECK(verdict(file_of(kSelf, 7, 0660), false) ==
        "is writable by group 7, and GSHARE_GROUP is not set");
  CHECK(verdict(file_of(kSelf, 7, 0660), true) ==
        "is writable by group 7, not by GSHARE_GROUP's group 500");
}

TEST_CASE("another user's region is joined only as a member's 0660 region of GSHARE_GROUP") {
  CHECK(verdict(file_of(kOther, kGroup, 0660), true) == "");
  CHECK(verdict(file_of(0, kGroup, 0660), true) == "");          // root
  CHECK(verdict(file_of(kStranger, kGroup, 0660), true) == "");  // no user database entry
  CHECK(verdict(file_of(kOther, kGroup, 0660), false) ==
        "belongs to another user, and GSHARE_GROUP is not set");
  CHECK(verdict(file_of(kOther, kGroup, 0600), false) ==
        "belongs to another user, and GSHARE_GROUP is not set");
  CHECK(verdict(file_of(kOther, 7, 0660), true) ==
        "belongs to another user and to group 7, not GSHARE_GROUP's group 500");
  for (mode_t mode : {0600, 0640, 0670, 02660, 04660, 01660}) {
    INFO(std::oct << mode);
    CHECK(verdict(file_of(kOther, kGroup, mode), true) ==
          "belongs to another user, and a shared region's mode is 0660");
  }
  CHECK(verdict(file_of(kOther, kGroup, 0666), true) == "is writable by every user");
  CHECK(verdict(file_of(kOther, kGroup, 0660), true, 501) ==
        "belongs to another user and to group 500, not GSHARE_GROUP's group 501");
  CHECK(verdict(file_of(4000, kGroup, 0660), true) ==
        "belongs to uid 4000, who is not a member of GSHARE_GROUP's group 500");
}

TEST_CASE("only a regular file can be trusted") {
  CHECK(verdict(file_of(kSelf, 7, 0600, S_IFIFO), false) == "is a FIFO");
  CHECK(verdict(file_of(kSelf, 7, 0600, S_IFDIR), false) == "is a directory");
  CHECK(verdict(file_of(kSelf, 7, 0600, S_IFCHR), false) == "is a character device");
}

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
        "characters, or a numeric gid from 0 to 4294967294 (plain decimal), without spaces or "
        "control characters");
  const char* good_env[] = {"GSHARE_GROUP=video", nullptr};
  CHECK(gshare::parse_options(good_env, &options, error, sizeof error));
  CHECK(std::string(options.group) == "video");
}

TEST_CASE("a region file of the wrong size, or one others may write, is refused at open") {
  TempDir dir;
  char path[kPathChars];
  REQUIRE(region_path(dir.path.c_str(), kUuid, path, sizeof path));
  REQUIRE(open_error(dir.path) == "");
  struct stat st;
  REQUIRE(stat(path, &st) == 0);
  REQUIRE(uint64_t(st.st_size) == sizeof(Region));

  REQUIRE(truncate(path, sizeof(Region) + 4096) == 0);  // a valid header, a longer file
  CHECK(open_error(dir.path).find("corrupt region (" + std::to_string(sizeof(Region) + 4096) +
                                  " bytes") != std::string::npos);
  REQUIRE(truncate(path, sizeof(Region) - 4096) == 0);
  CHECK(open_error(dir.path).find("corrupt region") != std::string::npos);
  REQUIRE(truncate(path, sizeof(Region)) == 0);
  CHECK(open_error(dir.path) == "");

  REQUIRE(chmod(path, 0666) == 0);
  CHECK(open_error(dir.path) == std::string("not joining ") + path + " (owner uid " +
                                    std::to_string(geteuid()) +
                                    ", mode 0666): it is writable by every user");
  REQUIRE(chmod(path, 0660) == 0);
  CHECK(open_error(dir.path).find("GSHARE_GROUP is not set") != std::string::npos);
}

TEST_CASE("a FIFO at a region's path is refused at once, by a process and by gshare-top") {
  TempDir dir;
  char path[kPathChars];
  REQUIRE(region_path(dir.path.c_str(), kUuid, path, sizeof path));
  REQUIRE(mkfifo(path, 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  CHECK(open_error(dir.path).find("is a FIFO") != std::string::npos);
  std::vector<GpuSnapshot> view = snapshot_regions(dir.path);
  REQUIRE(view.size() == 1);
  CHECK(view[0].error.find("is a FIFO") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
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
