#include "tests/multiprocess/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <catch2/catch.hpp>

namespace gshare::test {

std::string gshare_library() { return GSHARE_TEST_LIBRARY; }
std::string fake_driver_dir() { return GSHARE_TEST_FAKE_DRIVER_DIR; }
std::string cuda_client(bool linked) { return linked ? GSHARE_TEST_CLIENT_LINKED : GSHARE_TEST_CLIENT; }
std::string gshare_top() { return GSHARE_TEST_TOP; }

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::vector<char*> as_argv(const std::vector<std::string>& args) {
  std::vector<char*> v;
  for (const std::string& a : args) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

std::vector<std::string> as_envp(const Env& env) {
  std::vector<std::string> v;
  for (const auto& [k, val] : env) v.push_back(k + "=" + val);
  return v;
}

pid_t spawn(const std::vector<std::string>& argv, const Env& env, int* in, int* out, int* err) {
  int pin[2], pout[2], perr[2];
  if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC))
    throw std::runtime_error("pipe failed");
  std::vector<std::string> envs = as_envp(env);
  std::vector<char*> envp;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args = as_argv(argv);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pin[0], 0);
    dup2(pout[1], 1);
    dup2(perr[1], 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(pin[0]);
  close(pout[1]);
  close(perr[1]);
  *in = pin[1];
  *out = pout[0];
  *err = perr[0];
  return pid;
}

bool read_some(int fd, std::string* into) {
  char buffer[4096];
  ssize_t n = read(fd, buffer, sizeof buffer);
  if (n <= 0) return false;
  into->append(buffer, size_t(n));
  return true;
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::atomic<int> g_counter{0};

}  // namespace

TestGpu::TestGpu(uint64_t memory_bytes) : memory_bytes_(memory_bytes) {
  // Under $TMPDIR (or /tmp), named after the ctest entry (GSHARE_TEST_ENTRY)
  // that made it, so that what a killed entry left behind says whose it is.
  const char* tmp = getenv("TMPDIR");
  const char* entry = getenv("GSHARE_TEST_ENTRY");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gshare-test-" +
                        (entry && *entry ? std::string(entry) + "-" : "") + "XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot make " + pattern);
  dir_ = pattern;
  seed_ = "seed-" + std::to_string(getpid()) + "-" + std::to_string(g_counter++) + "-" +
          std::to_string(time(nullptr));
}

TestGpu::~TestGpu() { (void)!system(("rm -rf '" + dir_ + "'").c_str()); }

void TestGpu::open_to_all_users() {
  namespace fs = std::filesystem;
  if (!programs_dir_.empty()) return;
  if (chmod(dir_.c_str(), 01777) != 0) throw std::runtime_error("cannot open " + dir_);
  const std::string programs = dir_ + "/programs";
  fs::create_directory(programs);
  fs::permissions(programs, fs::perms(0755));
  auto copy = [&](const fs::path& from) {
    fs::copy_file(from, programs + "/" + from.filename().string());
    fs::permissions(programs + "/" + from.filename().string(), fs::perms(0755));
  };
  copy(gshare_library());
  copy(cuda_client(false));
  copy(cuda_client(true));
  for (const fs::directory_entry& entry : fs::directory_iterator(fake_driver_dir())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("lib", 0) != 0) continue;
    if (entry.is_symlink())
      fs::create_symlink(fs::read_symlink(entry.path()), programs + "/" + name);
    else if (entry.is_regular_file())
      copy(entry.path());
  }
  programs_dir_ = programs;
}

std::string TestGpu::client(bool linked) const {
  if (programs_dir_.empty()) return cuda_client(linked);
  return programs_dir_ + "/" + std::filesystem::path(cuda_client(linked)).filename().string();
}

Env TestGpu::environment(const Env& extra, bool preload) const {
  namespace fs = std::filesystem;
  Env env;
  env["PATH"] = "/usr/bin:/bin";
  env["LD_LIBRARY_PATH"] = programs_dir_.empty() ? fake_driver_dir() : programs_dir_;
  env["FAKE_CUDA_DIR"] = dir_;
  env["FAKE_CUDA_UUID_SEED"] = seed_;
  env["FAKE_CUDA_MEM"] = std::to_string(memory_bytes_);
  env["GSHARE_DIR"] = dir_;
  if (preload) {
    env["LD_PRELOAD"] = programs_dir_.empty()
                            ? gshare_library()
                            : programs_dir_ + "/" + fs::path(gshare_library()).filename().string();
  }
  for (const auto& [k, v] : extra) {
    if (v.empty()) env.erase(k); else env[k] = v;
  }
  return env;
}

nlohmann::json TestGpu::top_json() const {
  Finished f = run_to_end({gshare_top(), "--json", "--dir", dir_}, {{"PATH", "/usr/bin:/bin"}});
  if (f.status != 0) throw std::runtime_error("gshare-top failed: " + f.err);
  return nlohmann::json::parse(f.out);
}

std::string TestGpu::state() const {
  std::string text = "gshare-top --json of " + dir_ + ":\n";
  try {
    text += top_json().dump(1);
  } catch (const std::exception& e) {
    text += e.what();
  }
  std::lock_guard<std::mutex> hold(clients_mutex_);
  for (Client* c : clients_)
    text += "\n-- client " + std::to_string(c->pid()) + ", last command '" + c->last_command() +
            "', stderr:\n" + c->stderr_text();
  return text;
}

nlohmann::json TestGpu::top_gpu() const {
  nlohmann::json top = top_json();
  if (top.contains("gpus") && top["gpus"].is_array() && !top["gpus"].empty()) return top["gpus"][0];
  return {{"processes", nlohmann::json::array()}};
}

nlohmann::json TestGpu::top_process(pid_t pid) const {
  nlohmann::json top = top_json();
  for (const nlohmann::json& gpu : top["gpus"])
    for (const nlohmann::json& p : gpu["processes"])
      if (p["pid"] == pid) return p;
  return nullptr;
}

std::string region_file_in(const std::string& dir) {
  std::string found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("gshare-GPU-", 0) == 0 && name.find(".tmp") == std::string::npos)
        found = dir + "/" + name;
    }
    closedir(d);
  }
  return found;
}

Finished run_to_end(const std::vector<std::string>& argv, const Env& env, double timeout_s) {
  int in, out, err;
  Finished f;
  pid_t pid = spawn(argv, env, &in, &out, &err);
  close(in);
  double deadline = now_s() + timeout_s;
  bool out_open = true, err_open = true;
  while ((out_open || err_open) && now_s() < deadline) {
    pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    if (poll(fds, 2, 100) <= 0) continue;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP))) out_open = read_some(out, &f.out);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP))) err_open = read_some(err, &f.err);
  }
  if (out_open || err_open) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(out);
  close(err);
  f.status = decode_status(status);
  return f;
}

bool running_as_root() { return geteuid() == 0; }

std::vector<std::string> as_user(const User& user, const std::vector<std::string>& argv) {
  std::string groups;
  for (gid_t g : user.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  std::vector<std::string> full = {access("/usr/bin/setpriv", X_OK) == 0 ? "/usr/bin/setpriv"
                                                                          : "/bin/setpriv",
                                   "--reuid=" + std::to_string(user.uid),
                                   "--regid=" + std::to_string(user.gid),
                                   groups.empty() ? "--clear-groups" : "--groups=" + groups,
                                   "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

Client::Client(const TestGpu& gpu, const Env& extra, const std::string& load, const User* user)
    : gpu_(gpu) {
  bool linked = load == "link";
  std::vector<std::string> argv = {gpu.client(linked), "--load=" + load, "--stdin"};
  if (user) argv = as_user(*user, argv);
  pid_ = spawn(argv, gpu.environment(extra), &in_, &out_, &err_);
  fcntl(err_, F_SETFL, O_NONBLOCK);
  std::lock_guard<std::mutex> hold(gpu_.clients_mutex_);
  gpu_.clients_.push_back(this);
}

Client::~Client() {
  {
    std::lock_guard<std::mutex> hold(gpu_.clients_mutex_);
    gpu_.clients_.erase(std::find(gpu_.clients_.begin(), gpu_.clients_.end(), this));
  }
  if (!done_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(in_);
  close(out_);
  close(err_);
}

void Client::drain_stderr() {
  while (read_some(err_, &err_buffer_)) {
  }
}

std::string Client::send(const std::string& command, double timeout_s) {
  post(command);
  return reply(timeout_s);
}

void Client::post(const std::string& command) {
  last_command_ = command;
  std::string line = command + "\n";
  if (write(in_, line.data(), line.size()) != ssize_t(line.size())) return;
}

std::string Client::reply(double timeout_s) {
  double deadline = now_s() + timeout_s;
  for (;;) {
    size_t newline = out_buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string reply = out_buffer_.substr(0, newline);
      out_buffer_.erase(0, newline + 1);
      drain_stderr();
      return reply;
    }
    double left = deadline - now_s();
    if (left <= 0) {
      // The check on this empty reply fails; what hung shows here.
      if (!state_shown_) {
        state_shown_ = true;
        std::cerr << "client " << pid_ << ": no reply to '" << last_command_ << "' within "
                  << timeout_s << " s; " << gpu_.state() << std::endl;
      }
      return "";
    }
    pollfd fd{out_, POLLIN, 0};
    if (poll(&fd, 1, int(left * 1000) + 1) > 0 && !read_some(out_, &out_buffer_)) return "";
  }
}

std::string Client::release(double timeout_s) {
  std::string loop = last_command_;
  post("release");
  std::string reply_of_loop = reply(timeout_s);
  std::string released = reply(timeout_s);
  if (released != "release ok")
    return "release of '" + loop + "' got '" + reply_of_loop + "' then '" + released + "'";
  return reply_of_loop;
}

void Client::kill9() {
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  done_ = true;
}

int Client::finish() {
  close(in_);
  in_ = -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  done_ = true;
  drain_stderr();
  return decode_status(status);
}

std::string Client::stderr_text() {
  drain_stderr();
  return err_buffer_;
}

bool poll_until(const std::function<bool()>& done, double timeout_s) {
  const double deadline = now_s() + timeout_s;
  for (;;) {
    if (done()) return true;
    if (now_s() >= deadline) return false;
    usleep(20000);
  }
}

void await(const TestGpu& gpu, const std::string& what, const std::function<bool()>& done,
           double timeout_s) {
  if (!poll_until(done, timeout_s))
    FAIL("waited " << timeout_s << " s in vain for " << what << "\n" << gpu.state());
}

nlohmann::json await_process(const TestGpu& gpu, pid_t pid, const std::string& what,
                             const std::function<bool(const nlohmann::json&)>& ready,
                             double timeout_s) {
  nlohmann::json seen;
  await(gpu, what + " (pid " + std::to_string(pid) + ")", [&] {
    seen = gpu.top_process(pid);
    return !seen.is_null() && ready(seen);
  }, timeout_s);
  return seen;
}

std::vector<uint64_t> read_memory_trace(const std::string& path) {
  std::vector<uint64_t> values;
  std::ifstream in(path);
  uint64_t v;
  while (in >> v) values.push_back(v);
  return values;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace gshare::test

namespace gshare::test {

std::vector<KernelRun> read_kernel_trace(const std::string& path) {
  std::vector<KernelRun> runs;
  std::ifstream file(path);
  KernelRun run;
  while (file >> run.pid >> run.start_ns >> run.end_ns >> run.name) runs.push_back(run);
  std::sort(runs.begin(), runs.end(),
            [](const KernelRun& a, const KernelRun& b) { return a.start_ns < b.start_ns; });
  return runs;
}

std::vector<KernelRun> kernels_of(const std::vector<KernelRun>& all, pid_t pid) {
  std::vector<KernelRun> mine;
  for (const KernelRun& run : all)
    if (run.pid == pid) mine.push_back(run);
  return mine;
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

namespace {
// Each stretch in which a kernel of `a` and one of `b` both ran.
std::vector<std::pair<uint64_t, uint64_t>> intersections(const std::vector<KernelRun>& a,
                                                         const std::vector<KernelRun>& b) {
  std::vector<std::pair<uint64_t, uint64_t>> both;
  for (const KernelRun& x : a)
    for (const KernelRun& y : b) {
      uint64_t from = std::max(x.start_ns, y.start_ns), to = std::min(x.end_ns, y.end_ns);
      if (to > from) both.push_back({from, to});
    }
  return both;
}
}  // namespace

uint64_t overlap_between(const std::vector<KernelRun>& a, const std::vector<KernelRun>& b) {
  uint64_t total = 0;
  for (const auto& [from, to] : intersections(a, b)) total += to - from;
  return total;
}

std::vector<std::pair<uint64_t, uint64_t>> overlap_spans(const std::vector<KernelRun>& a,
                                                         const std::vector<KernelRun>& b, uint64_t join_ns) {
  std::vector<std::pair<uint64_t, uint64_t>> both = intersections(a, b);
  std::sort(both.begin(), both.end());
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [from, to] : both) {
    if (!spans.empty() && from <= spans.back().second + join_ns)
      spans.back().second = std::max(spans.back().second, to);
    else
      spans.push_back({from, to});
  }
  return spans;
}

}  // namespace gshare::test
