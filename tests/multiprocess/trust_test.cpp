// What one user can do to another's gshare processes through the region
// directory, which is shared by every user (/dev/shm): a file planted there
// is never joined unless the rule of region_file_trusted (shm/region.h)
// allows it, and a process that cannot join still keeps its quota.
//
// Acting as other users needs root (setpriv); without it these tests say so
// and check nothing.
#include <catch2/catch.hpp>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/multiprocess/harness.h"

using namespace gshare::test;

namespace {

constexpr int kOutOfMemory = 2;   // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kInvalidValue = 1;  // CUDA_ERROR_INVALID_VALUE
constexpr gid_t kSharedGroup = 23456;

const User kAttacker{12345, 12345, {}};
const User kVictim{12346, 12346, {}};
const User kMemberA{12345, 12345, {kSharedGroup}};
const User kMemberB{12346, 12346, {kSharedGroup}};

#define SKIP_UNLESS_ROOT()                                                         \
  do {                                                                             \
    if (!running_as_root()) {                                                      \
      WARN("skipped: acting as another user (setpriv) needs root; run as root"); \
      return;                                                                      \
    }                                                                              \
  } while (0)

// Runs a command as `user`; true if it exited 0.
bool run_as(const User& user, const std::vector<std::string>& argv) {
  Finished f = run_to_end(as_user(user, argv), {{"PATH", "/usr/bin:/bin"}}, 20);
  INFO(f.err);
  return f.status == 0;
}

// Starts a client's use of the GPU: gshare attaches to the region at a
// process's first memory call on a device, not at cuInit.
void start(Client& client) {
  REQUIRE(client.send("init") == "init ok");
  REQUIRE(client.send("meminfo").rfind("meminfo ", 0) == 0);
}

// The path of the GPU's region: a process creates it, then it is removed, so
// that the test can plant what it likes there.
std::string region_path_of(const TestGpu& gpu) {
  {
    Client probe(gpu);
    start(probe);
    REQUIRE(probe.finish() == 0);
  }
  for (const auto& entry : std::filesystem::directory_iterator(gpu.dir())) {
    std::string name = entry.path().filename().string();
    if (name.rfind("gshare-", 0) == 0 && name.find(".tmp.") == std::string::npos) {
      std::filesystem::remove(entry.path());
      return entry.path().string();
    }
  }
  FAIL("no region was created in " << gpu.dir());
  return "";
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

std::string mode_of(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return "missing";
  char text[8];
  snprintf(text, sizeof text, "%04o", unsigned(st.st_mode & 07777));
  return text;
}

// A process with a 1 GiB quota that runs alone: it holds its quota and says
// once why it did not join.
void check_runs_alone_with_quota(Client& victim, const std::string& why) {
  REQUIRE(victim.send("init", 10) == "init ok");
  // 1 GiB minus the 64 MiB context.
  CHECK(victim.send("alloc 600M a") == "alloc ok a");
  CHECK(victim.send("alloc 600M b") == "alloc err " + std::to_string(kOutOfMemory));
  std::string err = victim.stderr_text();
  INFO(err);
  CHECK(err.find(why) != std::string::npos);
  CHECK(count_of(err, "runs alone") == 1);
  CHECK(err.find("over this process's quota") != std::string::npos);
}

}  // namespace

TEST_CASE("a region planted by another user is never joined, and the quota still holds") {
  SKIP_UNLESS_ROOT();
  TestGpu gpu;
  gpu.open_to_all_users();
  const std::string path = region_path_of(gpu);
  // The attacker runs gshare itself, so the region is a valid one that the
  // attacker's process uses.
  Client attacker(gpu, {}, "gpa", &kAttacker);
  start(attacker);
  REQUIRE(mode_of(path) == "0600");

  SECTION("owned by another user, mode 0600: root does not join it") {
    Client victim(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
    check_runs_alone_with_quota(victim, "belongs to another user, and GSHARE_GROUP is not set");
    std::string err = victim.stderr_text();
    CHECK(err.find("not joining " + path + " (owner uid 12345, mode 0600)") != std::string::npos);
    CHECK(gpu.top_process(victim.pid()).is_null());
  }
  SECTION("mode 0666: neither root nor another user joins it") {
    REQUIRE(run_as(kAttacker, {"/bin/chmod", "0666", path}));
    REQUIRE(mode_of(path) == "0666");
    for (const User* user : {static_cast<const User*>(nullptr), &kVictim}) {
      INFO("victim uid " << (user ? user->uid : 0));
      Client victim(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}}, "gpa", user);
      check_runs_alone_with_quota(victim, "is writable by every user");
      std::string err = victim.stderr_text();
      CHECK(err.find("not joining " + path + " (owner uid 12345, mode 0666)") != std::string::npos);
      // Its figures are nowhere the attacker could rewrite them.
      CHECK(gpu.top_process(victim.pid()).is_null());
    }
  }
  // gshare-top still shows the attacker's region: it only reads.
  CHECK_FALSE(gpu.top_process(attacker.pid()).is_null());
}

TEST_CASE("a symlink planted at the region path is never followed") {
  SKIP_UNLESS_ROOT();
  TestGpu gpu;
  gpu.open_to_all_users();
  const std::string path = region_path_of(gpu);
  const std::string precious = gpu.dir() + "/precious";
  const std::string absent = gpu.dir() + "/never-created";
  { std::ofstream(precious) << "the victim's data\n"; }
  const std::string precious_mode = mode_of(precious);

  for (const std::string& target : {precious, absent}) {
    INFO("symlink to " << target);
    std::filesystem::remove(path);
    REQUIRE(run_as(kAttacker, {"/bin/ln", "-s", target, path}));
    Client victim(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
    check_runs_alone_with_quota(victim, "is a symbolic link, which gshare never follows");
    CHECK(std::filesystem::is_symlink(path));
  }
  std::ifstream in(precious);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "the victim's data\n");
  CHECK(mode_of(precious) == precious_mode);
  CHECK_FALSE(std::filesystem::exists(absent));
}

TEST_CASE("symlinks planted at guessable temporary names neither redirect nor block creation") {
  SKIP_UNLESS_ROOT();
  TestGpu gpu;
  gpu.open_to_all_users();
  const std::string path = region_path_of(gpu);
  const std::string redirected = gpu.dir() + "/redirected";
  // The next pids, so the creator's own among them: a name made of the pid
  // would be taken already.
  long last_pid = 0;
  std::ifstream("/proc/sys/kernel/ns_last_pid") >> last_pid;
  REQUIRE(last_pid > 0);
  constexpr long kPlanted = 3000;
  long planted = 0;
  for (long pid = last_pid + 1; pid <= last_pid + kPlanted; ++pid) {
    std::string name = path + ".tmp." + std::to_string(pid);
    if (symlink(redirected.c_str(), name.c_str()) == 0 &&
        lchown(name.c_str(), kAttacker.uid, kAttacker.gid) == 0)
      ++planted;
  }
  REQUIRE(planted == kPlanted);

  // Not root, whom the directory's sticky bit does not stop from removing
  // what another user planted.
  Client creator(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}}, "gpa", &kVictim);
  start(creator);
  if (creator.pid() > last_pid + kPlanted)
    WARN("the creator's pid " << creator.pid() << " is past the planted names (busy machine)");
  CHECK(creator.stderr_text().find("runs alone") == std::string::npos);
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(st.st_uid == kVictim.uid);
  CHECK(mode_of(path) == "0600");
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(redirected)));
  // It is the GPU's region: a second process joins it.
  Client second(gpu, {}, "gpa", &kVictim);
  start(second);
  nlohmann::json top = gpu.top_json();
  REQUIRE(top["gpus"].size() == 1);
  CHECK(top["gpus"][0]["processes"].size() == 2);
  CHECK(creator.send("alloc 600M a") == "alloc ok a");
  CHECK(creator.send("alloc 600M b") == "alloc err " + std::to_string(kOutOfMemory));
}

TEST_CASE("a FIFO named like a region blocks neither a process nor gshare-top") {
  SKIP_UNLESS_ROOT();
  TestGpu gpu;
  gpu.open_to_all_users();
  const std::string path = region_path_of(gpu);
  REQUIRE(run_as(kAttacker, {"/usr/bin/mkfifo", "-m", "0666", path}));
  REQUIRE(run_as(kAttacker, {"/usr/bin/mkfifo", "-m", "0644", gpu.dir() + "/gshare-elsewhere"}));

  Client victim(gpu, {{"GSHARE_MEM_LIMIT", "1GiB"}});
  check_runs_alone_with_quota(victim,
                              "is a FIFO (owner uid 12345, mode 0666), not a gshare region");

  for (const char* mode : {"--json", "--once"}) {
    INFO(mode);
    Finished top = run_to_end({gshare_top(), mode, "--dir", gpu.dir()}, {{"PATH", "/usr/bin:/bin"}},
                              10);
    INFO(top.err);
    REQUIRE(top.status == 0);  // 137: killed after the timeout, it blocked
    if (std::string(mode) == "--json") {
      nlohmann::json json = nlohmann::json::parse(top.out);
      REQUIRE(json["gpus"].size() == 2);
      for (const nlohmann::json& g : json["gpus"])
        CHECK(g["error"].get<std::string>().find("is a FIFO") != std::string::npos);
    }
  }
}

TEST_CASE("members of GSHARE_GROUP share one region of mode 0660; a non-member's is refused") {
  SKIP_UNLESS_ROOT();
  const Env group{{"GSHARE_GROUP", std::to_string(kSharedGroup)}, {"GSHARE_ADMIT_TIMEOUT_S", "0"}};

  // 12345 and 12346 are in no user database here, so a member is known by
  // the group of its file (region_file_trusted).
  SECTION("two users of the group share the GPU") {
    TestGpu gpu(8 * kGiB);
    gpu.open_to_all_users();
    Client a(gpu, group, "gpa", &kMemberA), b(gpu, group, "gpa", &kMemberB);
    start(a);
    start(b);
    nlohmann::json top = gpu.top_json();
    REQUIRE(top["gpus"].size() == 1);
    CHECK(top["gpus"][0]["processes"].size() == 2);
    std::string path = top["gpus"][0]["path"];
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0660);
    CHECK(st.st_gid == kSharedGroup);
    CHECK(st.st_uid == kMemberA.uid);
    // One GPU's capacity between them, as in sharing_test.cpp.
    CHECK(a.send("alloc 5G big") == "alloc ok big");
    CHECK(b.send("alloc 3G x") == "alloc err " + std::to_string(kOutOfMemory));
    CHECK(b.stderr_text().find("the GPU is full") != std::string::npos);
    CHECK(a.stderr_text().find("runs alone") == std::string::npos);
    CHECK(b.stderr_text().find("runs alone") == std::string::npos);
  }
  SECTION("a region of the group owned by a known user outside it is refused") {
    passwd* nobody = getpwuid(65534);
    if (!nobody) {
      WARN("skipped: no user 65534 in the user database to be the non-member");
      return;
    }
    // nobody's effective group is the shared one (as through a set-group-ID
    // program), so its region gets that group, but nobody is no member.
    const User outsider{65534, kSharedGroup, {}};
    TestGpu gpu(8 * kGiB);
    gpu.open_to_all_users();
    Client creator(gpu, group, "gpa", &outsider);
    start(creator);
    Client member(gpu, Env{{"GSHARE_GROUP", std::to_string(kSharedGroup)},
                           {"GSHARE_MEM_LIMIT", "1GiB"}},
                  "gpa", &kMemberB);
    check_runs_alone_with_quota(
        member, "belongs to uid 65534, who is not a member of GSHARE_GROUP's group 23456");
  }
  SECTION("a member's region is refused without GSHARE_GROUP, or with another group") {
    TestGpu gpu(8 * kGiB);
    gpu.open_to_all_users();
    Client a(gpu, group, "gpa", &kMemberA);
    start(a);
    for (const char* other : {"", "34567"}) {
      INFO("GSHARE_GROUP=" << other);
      Client b(gpu, {{"GSHARE_GROUP", other}, {"GSHARE_MEM_LIMIT", "1GiB"}}, "gpa", &kMemberB);
      check_runs_alone_with_quota(
          b, *other ? "not GSHARE_GROUP's group 34567"
                    : "belongs to another user, and GSHARE_GROUP is not set");
    }
  }
}

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

TEST_CASE("memory that can be paged, exported through CUDA IPC, opens only for its own user and root") {
  SKIP_UNLESS_ROOT();
  TestGpu gpu(8 * kGiB);
  gpu.open_to_all_users();
  const Env paging = {{"GSHARE_PAGING", "on"}};
  Client owner(gpu, paging, "gpa", &kVictim);
  start(owner);
  REQUIRE(owner.send("alloc 32M shared") == "alloc ok shared");
  REQUIRE(owner.send("put shared 0x42 32M") == "put ok");
  const std::string reply = owner.send("ipc shared");
  INFO(owner.stderr_text());
  REQUIRE(reply.rfind("ipc ok ", 0) == 0);
  const std::string handle = reply.substr(7);
  // Another user holds the handle, but the owner will not hand it the memory.
  Client attacker(gpu, {}, "gpa", &kAttacker);
  start(attacker);
  CHECK(attacker.send("ipcopen " + handle + " m") == "ipcopen err 400");  // CUDA_ERROR_INVALID_HANDLE
  INFO(attacker.stderr_text());
  CHECK(attacker.stderr_text().find("answers only its own user and root") != std::string::npos);
  // The owner's thread that answered writes its line after the answer: a
  // loaded machine may read the owner's stderr between the two.
  const std::string refusal =
      "refused a CUDA IPC import asked by process " + std::to_string(attacker.pid()) + " of user 12345";
  CHECK(poll_until([&] { return owner.stderr_text().find(refusal) != std::string::npos; }, 5));
  // Root may.
  Client admin(gpu);
  start(admin);
  CHECK(admin.send("ipcopen " + handle + " m") == "ipcopen ok m");
  CHECK(admin.send("peek m 0") == "peek 66");
  CHECK(admin.send("ipcclose m") == "ipcclose ok");
}
