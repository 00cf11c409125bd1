// Real processes under LD_PRELOAD=libgshare.so over the fake driver.
//
// Each TestGpu is a private fake GPU: its own directory for the arbiter
// regions and the fake driver's state, and its own UUID seed, so tests run
// in parallel without meeting, within one ctest entry or across entries.
// A Client is a running cuda_client driven one command at a time through
// its stdin/stdout, as this test's user or (with root, through setpriv) as
// another.
//
// Tests wait for what they need, never a fixed time: a condition polled
// against a deadline (await, await_process), or a client's loop that runs
// until the test releases it (Client::release). A wait that ends in vain
// fails the test with the GPU's state: gshare-top --json and every live
// client's last command and stderr (TestGpu::state).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gshare::test {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;
// What the fake driver charges for a context (FAKE_CUDA_CTX_BYTES default).
inline constexpr uint64_t kFakeContextBytes = 64 * kMiB;

// Fixed paths of the build, from CMake.
std::string gshare_library();
std::string fake_driver_dir();
std::string cuda_client(bool linked = false);
std::string gshare_top();

using Env = std::map<std::string, std::string>;

// A user other than the test's, for what one user can do to another's
// processes. Acting as one needs root.
struct User {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};
bool running_as_root();
// `argv` run as `user`: setpriv with exactly that uid, gid and groups.
std::vector<std::string> as_user(const User& user, const std::vector<std::string>& argv);

class Client;

class TestGpu {
 public:
  explicit TestGpu(uint64_t memory_bytes = 8 * kGiB);
  ~TestGpu();
  TestGpu(const TestGpu&) = delete;
  TestGpu& operator=(const TestGpu&) = delete;

  const std::string& dir() const { return dir_; }
  // Opens the GPU's directory to every user, as /dev/shm is (mode 1777),
  // and runs its processes from copies of the library, the client and the
  // fake driver inside it, which any user can read wherever the build is.
  void open_to_all_users();
  // The client program its processes run.
  std::string client(bool linked = false) const;
  // The environment of a process on this GPU: fake driver, region dir,
  // and the preload unless `preload` is false. `extra` overrides.
  Env environment(const Env& extra = {}, bool preload = true) const;
  // gshare-top --json for this GPU's regions.
  nlohmann::json top_json() const;
  // Its GPU in that view ("gpus"[0]); before any process has made the
  // region, a GPU with no processes (so that a const view's ["processes"]
  // is there to read, where [0] of the empty "gpus" would be undefined).
  nlohmann::json top_gpu() const;
  // The process of `pid` in gshare-top's view now, or null.
  nlohmann::json top_process(pid_t pid) const;
  // Where the fake driver writes one line per kernel run, for a process
  // given {"FAKE_CUDA_TRACE", gpu.kernel_trace()}.
  std::string kernel_trace() const { return dir_ + "/kernels.trace"; }
  // What a failure shows: gshare-top --json for this GPU, and each live
  // client's pid, last command and stderr so far.
  std::string state() const;

 private:
  friend class Client;
  std::string dir_;
  std::string seed_;
  uint64_t memory_bytes_;
  std::string programs_dir_;  // the copies of open_to_all_users, or "" for the build's
  mutable std::mutex clients_mutex_;
  mutable std::vector<Client*> clients_;  // live, for state()
};

struct Finished {
  int status = -1;  // exit code, or 128 + signal
  std::string out;
  std::string err;
};

// The path of the one region file in `dir` (gshare-GPU-...), or "" if none.
std::string region_file_in(const std::string& dir);

// Runs argv to completion with exactly `env` (plus PATH), with a timeout.
Finished run_to_end(const std::vector<std::string>& argv, const Env& env, double timeout_s = 60);

class Client {
 public:
  // load: "gpa", "dlsym" or "link"; `user`: run as that user (root only).
  Client(const TestGpu& gpu, const Env& extra = {}, const std::string& load = "gpa",
         const User* user = nullptr);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends one command, returns its one-line reply ("" on timeout or exit;
  // a timeout also prints the GPU's state on stderr).
  std::string send(const std::string& command, double timeout_s = 20);
  // The same in two steps, for a command that runs while the test does
  // something else.
  void post(const std::string& command);
  std::string reply(double timeout_s = 20);
  // Ends the loop the client runs now (trainfor, sleep), which stops at the
  // next line on its stdin, and returns that loop's reply.
  std::string release(double timeout_s = 20);
  pid_t pid() const { return pid_; }
  const std::string& last_command() const { return last_command_; }
  void kill9();
  // Closes stdin and waits; returns the exit status.
  int finish();
  // Everything the process wrote to stderr so far.
  std::string stderr_text();

 private:
  const TestGpu& gpu_;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_buffer_, err_buffer_;
  std::string last_command_;
  bool done_ = false;
  bool state_shown_ = false;  // one state on stderr per client, at its first timeout
  void drain_stderr();
};

// Polls `done` every 20 ms until it holds or `timeout_s` passes; whether it
// held.
bool poll_until(const std::function<bool()>& done, double timeout_s);
// Waits until `done` holds; after `timeout_s` in vain the test fails
// (REQUIRE), naming `what` and showing `gpu`'s state.
void await(const TestGpu& gpu, const std::string& what, const std::function<bool()>& done,
           double timeout_s = 20);
// Polls gshare-top until `ready` holds for the process `pid`, and returns
// that view of it; after `timeout_s` in vain the test fails as await does.
nlohmann::json await_process(const TestGpu& gpu, pid_t pid, const std::string& what,
                             const std::function<bool(const nlohmann::json&)>& ready,
                             double timeout_s = 20);

// The values the fake driver wrote to FAKE_CUDA_MEM_TRACE (bytes in use).
std::vector<uint64_t> read_memory_trace(const std::string& path);

// Helpers for replies such as "meminfo <free> <total>".
std::vector<std::string> words(const std::string& line);

// One kernel the fake driver ran: CLOCK_MONOTONIC times.
struct KernelRun {
  pid_t pid = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string name;
};
std::vector<KernelRun> read_kernel_trace(const std::string& path);
// The kernels of one process, by start time.
std::vector<KernelRun> kernels_of(const std::vector<KernelRun>& all, pid_t pid);
// Total time during which kernels of `a` and `b` ran at once.
uint64_t overlap_between(const std::vector<KernelRun>& a, const std::vector<KernelRun>& b);
// The stretches of time in which kernels of `a` and of `b` ran at once,
// in order, stretches less than `join_ns` apart taken as one: one a
// handover when only a holder's tail overlaps the next job's first kernels.
std::vector<std::pair<uint64_t, uint64_t>> overlap_spans(const std::vector<KernelRun>& a,
                                                         const std::vector<KernelRun>& b, uint64_t join_ns);
// CLOCK_MONOTONIC now, the trace's clock.
uint64_t monotonic_ns();

}  // namespace gshare::test
