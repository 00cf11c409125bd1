// gshare-top's scheduling columns: what the snapshot copies from the token
// and the per-job fields of a region, the share of GPU time, and how the
// text and JSON views show them.
//
// The regions are written by hand, as the scheduler would
// (tests/unit/hand_written_region.h).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rules/policy.h"
#include "shm/arbiter.h"
#include "shm/layout.h"
#include "shm/region.h"
#include "shm/snapshot.h"
#include "tests/unit/hand_written_region.h"
#include "tools/top_format.h"
#include "tools/top_json.h"
#include "tools/top_sample.h"
#include "tools/top_text.h"

using namespace gshare;
using namespace gshare::shm;
using namespace gshare::test;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecond = 1000000000;
constexpr const char* kUuid = "GPU-5c4ed01e-1111-2222-3333-444444444444";


void grant_token(RegionHeader& h, const Slot& slot, uint32_t index) {
  h.tokens[0].holder = index + 1;
  h.tokens[0].holder_generation = slot.generation;
}

// Sets bucket of monotonic second `second` as the scheduler would.
void set_share_bucket(Slot& slot, uint64_t second, uint32_t us) {
  slot.share_us[second % kShareSeconds] = us;
  slot.share_second[second % kShareSeconds] = uint32_t(second);
}

// Two jobs on one GPU under fair: A holds the token, B waits for it.
struct TwoJobs {
  TempDir dir;
  RegionFile file = open_region(dir.path, kUuid, 8 * kGiB);
  Job a{dir.path, kUuid, 8 * kGiB, "python train.py"};
  Job b{dir.path, kUuid, 8 * kGiB, "python serve.py"};
  uint64_t written_mono_ns = 0;

  TwoJobs() {
    Region* r = file.region;
    write_region(r, [&](RegionHeader& h) {
      uint64_t now = monotonic_now_ns();
      written_mono_ns = now;
      Slot& sa = r->slots[a.slot()];
      Slot& sb = r->slots[b.slot()];
      h.policy = uint32_t(gshare::Policy::kFair);
      grant_token(h, sa, a.slot());
      h.tokens[0].slice_start_mono_ns = now - 5 * kMs;
      h.tokens[0].slice_end_mono_ns = now + 20 * kMs;
      h.handovers = 7;

      sa.job_state = kJobRunning;
      sa.weight = 3;
      sa.priority = 10;
      sa.handover_mode = kHandoverStrict;
      sa.expected_ns = 60 * kSecond;
      sa.expected_iters = 1000;
      sa.arrival_mono_ns = now - 60 * kSecond;
      sa.served_ns = 2 * kSecond;
      sa.accounted_mono_ns = now;
      sa.granted = 4;
      sa.iterations.store(12);
      sa.iteration_ns.store(42100000);  // 42.1 ms
      sa.iteration_launches.store(30);
      sa.iteration_source.store(kIterationsFromLaunches);

      sb.job_state = kJobWaiting;
      sb.weight = 1;
      sb.priority = 0;
      sb.handover_mode = kHandoverOverlap;
      sb.arrival_mono_ns = now - 30 * kSecond;
      sb.wait_ns = 1500 * kMs;
      sb.wait_since_mono_ns = now - 500 * kMs;
      sb.granted = 3;
      sb.iteration_source.store(kIterationsUnknown);
    });
  }
  ~TwoJobs() { close_region(&file); }

  Region* region() { return file.region; }
};

// A slot on the heap: Slot is 512 bytes of atomics and arrays, zeroed.
std::unique_ptr<Slot> zeroed_slot() { return std::make_unique<Slot>(); }

// The process row of `pid`: the one whose first field is the pid.
std::string row_of(const std::vector<gshare::top::TextLine>& lines, pid_t pid) {
  for (const gshare::top::TextLine& line : lines) {
    if (line.kind != gshare::top::TextLine::Kind::kProcess) continue;
    std::string first_field = std::to_string(pid) + " ";
    size_t start = line.text.find_first_not_of(' ');
    if (line.text.compare(start, first_field.size(), first_field) == 0) return line.text;
  }
  return "";
}

const nlohmann::json* json_process(const nlohmann::json& gpu, pid_t pid) {
  for (const nlohmann::json& p : gpu["processes"])
    if (p["pid"] == pid) return &p;
  return nullptr;
}

gshare::top::Frame frame_of(const std::string& dir) {
  gshare::top::Sample before = gshare::top::take_sample(dir);
  return gshare::top::make_frame(dir, before, gshare::top::take_sample(dir));
}

}  // namespace

TEST_CASE("the snapshot copies the policy, the token and each job's scheduling fields") {
  TwoJobs jobs;
  GpuSnapshot gpu = only_gpu(jobs.dir.path);
  CHECK(gpu.policy == "fair");
  CHECK(gpu.holder_slot == int32_t(jobs.a.slot()));
  CHECK(gpu.handovers == 7);
  CHECK(gpu.slice_start_mono_ns == jobs.written_mono_ns - 5 * kMs);
  CHECK(gpu.slice_end_mono_ns == jobs.written_mono_ns + 20 * kMs);
  CHECK(gpu.sampled_mono_ns >= jobs.written_mono_ns);

  const ProcessSnapshot* a = find_process(gpu, jobs.a.slot());
  const ProcessSnapshot* b = find_process(gpu, jobs.b.slot());
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->pid == jobs.a.pid());
  CHECK(a->job_state == kJobRunning);
  CHECK(a->holds_token);
  CHECK(a->weight == 3);
  CHECK(a->priority == 10);
  CHECK(a->handover_mode == "strict");
  CHECK(a->expected_ns == 60 * kSecond);
  CHECK(a->expected_iters == 1000);
  CHECK(a->granted == 4);
  CHECK(a->iterations == 12);
  CHECK(a->iteration_ns == 42100000);
  CHECK(a->iteration_launches == 30);
  CHECK(a->iteration_source == "launches");
  // The holder's time since it was last accounted counts as served.
  uint64_t since_written = gpu.sampled_mono_ns - jobs.written_mono_ns;
  CHECK(a->served_ns == 2 * kSecond + since_written);

  CHECK(b->job_state == kJobWaiting);
  CHECK_FALSE(b->holds_token);
  CHECK(b->handover_mode == "overlap");
  CHECK(b->iteration_source == "unknown");
  CHECK(b->expected_ns == 0);
  // The current wait counts: 1.5 s before it plus 0.5 s of it so far.
  CHECK(b->waiting_ns == 2 * kSecond + since_written);
}

TEST_CASE("a token granted to an earlier owner of the slot is held by nobody") {
  TwoJobs jobs;
  write_region(jobs.region(), [&](RegionHeader& h) {
    h.tokens[0].holder_generation = jobs.region()->slots[jobs.a.slot()].generation + 1;
  });
  GpuSnapshot gpu = only_gpu(jobs.dir.path);
  CHECK(gpu.holder_slot == -1);
  for (const ProcessSnapshot& p : gpu.processes) CHECK_FALSE(p.holds_token);
  // Its time since the last accounting is not counted: it is not the holder.
  CHECK(find_process(gpu, jobs.a.slot())->served_ns == 2 * kSecond);
}

TEST_CASE("a dead holder, a holder out of range and unknown values are read safely") {
  TwoJobs jobs;
  SECTION("the holder died: nobody holds the token, and the job is gone from the view") {
    jobs.a.kill9();
    GpuSnapshot gpu = only_gpu(jobs.dir.path);
    CHECK(gpu.holder_slot == -1);
    REQUIRE(gpu.processes.size() == 1);
    CHECK(gpu.processes[0].slot == jobs.b.slot());
  }
  SECTION("a holder index past the slot table") {
    write_region(jobs.region(), [&](RegionHeader& h) { h.tokens[0].holder = kMaxSlots + 5; });
    GpuSnapshot gpu = only_gpu(jobs.dir.path);
    CHECK(gpu.holder_slot == -1);
    for (const ProcessSnapshot& p : gpu.processes) CHECK_FALSE(p.holds_token);
  }
  SECTION("values no writer of this version writes") {
    write_region(jobs.region(), [&](RegionHeader& h) {
      h.policy = 99;
      Slot& sa = jobs.region()->slots[jobs.a.slot()];
      sa.job_state = 77;
      sa.handover_mode = 5;
      sa.iteration_source.store(9);
    });
    GpuSnapshot gpu = only_gpu(jobs.dir.path);
    CHECK(gpu.policy == "unknown");
    const ProcessSnapshot* a = find_process(gpu, jobs.a.slot());
    REQUIRE(a);
    CHECK(a->job_state == kJobIdle);
    CHECK(a->handover_mode == "unknown");
    CHECK(a->iteration_source == "unknown");
  }
  SECTION("a region no process has set a policy in yet") {
    write_region(jobs.region(), [&](RegionHeader& h) { h.policy = 0; });
    CHECK(only_gpu(jobs.dir.path).policy == "unknown");
  }
}

TEST_CASE("the share of GPU time counts the buckets of the last 10 seconds only") {
  // 1000.5 s: the buckets cover seconds 991 .. 1000, a window of 9.5 s.
  const uint64_t now = 1000 * kSecond + 500 * kMs;
  const uint64_t long_ago = 100 * kSecond;
  auto slot = zeroed_slot();

  SECTION("half of every second, the current one included, is half") {
    for (uint64_t s = 991; s <= 999; ++s) set_share_bucket(*slot, s, 500000);
    set_share_bucket(*slot, 1000, 250000);
    CHECK(recent_token_share(*slot, false, long_ago, now) == Approx(0.5));
  }
  SECTION("buckets stamped with an older second, a later one, or the wrong bucket read 0") {
    set_share_bucket(*slot, 995, 950000);
    set_share_bucket(*slot, 984, 1000000);  // 16 s ago, in bucket 4
    set_share_bucket(*slot, 990, 1000000);  // just out of the window, bucket 0
    slot->share_us[6] = 1000000;
    slot->share_second[6] = 1006;  // the future: a corrupt stamp
    slot->share_us[7] = 1000000;
    slot->share_second[7] = 998;  // a second that belongs in bucket 8
    CHECK(recent_token_share(*slot, false, long_ago, now) == Approx(0.95 / 9.5));
  }
  SECTION("a job that held the token throughout reads 1, with its unaccounted time") {
    for (uint64_t s = 991; s <= 999; ++s) set_share_bucket(*slot, s, 1000000);
    slot->accounted_mono_ns = 1000 * kSecond;  // the last 0.5 s is in no bucket yet
    CHECK(recent_token_share(*slot, true, long_ago, now) == Approx(1.0));
    // The same slot seen as not holding: its last 0.5 s is not counted.
    CHECK(recent_token_share(*slot, false, long_ago, now) == Approx(9.0 / 9.5));
  }
  SECTION("a holder's unaccounted time counts only from the window's start") {
    slot->accounted_mono_ns = 900 * kSecond;
    CHECK(recent_token_share(*slot, true, long_ago, now) == Approx(1.0));
  }
  SECTION("a job attached 3 s ago is measured over those 3 s") {
    const uint64_t attached = now - 3 * kSecond;  // 997.5 s
    set_share_bucket(*slot, 997, 500000);
    set_share_bucket(*slot, 998, 500000);
    set_share_bucket(*slot, 999, 500000);
    set_share_bucket(*slot, 1000, 250000);
    CHECK(recent_token_share(*slot, false, attached, now) == Approx(1.75 / 3.0));
  }
  SECTION("a job attached a moment ago is measured over at least 1 s") {
    set_share_bucket(*slot, 1000, 100000);
    CHECK(recent_token_share(*slot, false, now - 200 * kMs, now) == Approx(0.1));
  }
  SECTION("an unknown attach time means the whole window") {
    set_share_bucket(*slot, 1000, 475000);
    CHECK(recent_token_share(*slot, false, 0, now) == Approx(0.05));
  }
  SECTION("corrupt buckets never make the share more than 1") {
    for (uint64_t s = 991; s <= 1000; ++s) set_share_bucket(*slot, s, 4000000000u);
    CHECK(recent_token_share(*slot, false, long_ago, now) == 1.0);
  }
}

TEST_CASE("the snapshot's share uses the host's monotonic clock") {
  TwoJobs jobs;
  const uint64_t second = jobs.written_mono_ns / kSecond;
  write_region(jobs.region(), [&](RegionHeader&) {
    Slot& sa = jobs.region()->slots[jobs.a.slot()];
    Slot& sb = jobs.region()->slots[jobs.b.slot()];
    // A: 1.5 s of token time in the last few seconds, and a stale bucket.
    sa.accounted_mono_ns = 0;  // no unaccounted time
    set_share_bucket(sa, second - 1, 500000);
    set_share_bucket(sa, second - 2, 500000);
    set_share_bucket(sa, second - 3, 500000);
    set_share_bucket(sa, second - 14, 1000000);
    // B attached 2 s ago and held the token for 1 s of them.
    sb.arrival_mono_ns = jobs.written_mono_ns - 2 * kSecond;
    set_share_bucket(sb, second - 1, 1000000);
  });
  GpuSnapshot gpu = only_gpu(jobs.dir.path);
  const ProcessSnapshot* a = find_process(gpu, jobs.a.slot());
  const ProcessSnapshot* b = find_process(gpu, jobs.b.slot());
  REQUIRE(a);
  REQUIRE(b);
  // Over a window of 9 to 10 s.
  CHECK(a->share_10s >= 0.15 - 1e-9);
  CHECK(a->share_10s <= 1.5 / 9.0 + 1e-9);
  // Over its 2 s of life (a little more by the time of the copy).
  CHECK(b->share_10s > 0.4);
  CHECK(b->share_10s <= 0.5 + 1e-9);
}

TEST_CASE("the state column is the scheduler's, and a job that launched ran") {
  using gshare::top::ProcessState;
  using gshare::top::process_state;
  CHECK(process_state(kJobRunning, false) == ProcessState::kRunning);
  CHECK(process_state(kJobWaiting, false) == ProcessState::kWaiting);
  CHECK(process_state(kJobWaiting, true) == ProcessState::kWaiting);
  CHECK(process_state(kJobIdle, false) == ProcessState::kIdle);
  // No policy gates it yet, or it went idle after launching: it ran.
  CHECK(process_state(kJobIdle, true) == ProcessState::kRunning);
  CHECK(std::string(gshare::top::state_name(ProcessState::kRunning)) == "running");
  CHECK(std::string(gshare::top::state_name(ProcessState::kWaiting)) == "waiting");
  CHECK(std::string(gshare::top::state_name(ProcessState::kIdle)) == "idle");
}

TEST_CASE("durations and shares read as people read them") {
  using gshare::top::format_duration;
  using gshare::top::format_percent;
  CHECK(format_duration(0) == "0");
  CHECK(format_duration(400) == "<1us");
  CHECK(format_duration(850000) == "850us");
  CHECK(format_duration(999600) == "1.00ms");
  CHECK(format_duration(42100000) == "42.1ms");
  CHECK(format_duration(420 * kMs) == "420ms");
  CHECK(format_duration(1250 * kMs) == "1.25s");
  CHECK(format_duration(42100 * kMs) == "42.1s");
  CHECK(format_duration(59980 * kMs) == "1m00s");
  CHECK(format_duration(65 * kSecond) == "1m05s");
  CHECK(format_duration((3 * 3600 + 7 * 60) * kSecond) == "3h07m");
  CHECK(format_percent(0) == "0.0");
  CHECK(format_percent(0.425) == "42.5");
  CHECK(format_percent(1) == "100.0");
}

TEST_CASE("gshare-top's text shows the policy, the token, the state and the scheduling columns") {
  TwoJobs jobs;
  gshare::top::Frame frame = frame_of(jobs.dir.path);
  std::vector<gshare::top::TextLine> lines = gshare::top::render_text(frame, 0);
  std::string text = gshare::top::join_lines(lines);
  INFO(text);
  CHECK(text.find("policy fair") != std::string::npos);
  CHECK(text.find("handovers 7") != std::string::npos);
  for (const char* header : {"STATE", "TOKEN", "GPU%", "W/P", "ITER", "ITERS", "WAIT"})
    CHECK(text.find(header) != std::string::npos);

  std::string a = row_of(lines, jobs.a.pid());
  std::string b = row_of(lines, jobs.b.pid());
  REQUIRE(!a.empty());
  REQUIRE(!b.empty());
  CHECK(a.find(" running ") != std::string::npos);
  CHECK(a.find(" * ") != std::string::npos);
  CHECK(a.find(" w3 ") != std::string::npos);  // fair: the weight
  CHECK(a.find(" 42.1ms ") != std::string::npos);
  CHECK(a.find(" 12 ") != std::string::npos);
  CHECK(b.find(" waiting ") != std::string::npos);
  CHECK(b.find("*") == std::string::npos);
  CHECK(b.find(" w1 ") != std::string::npos);
  CHECK(b.find(" - ") != std::string::npos);  // no iteration detected
  CHECK(b.find(" 2.0") != std::string::npos);  // 1.5 s waited + 0.5 s of the current wait

  SECTION("W/P shows what the policy looks at") {
    auto set_policy = [&](gshare::Policy policy) {
      write_region(jobs.region(), [&](RegionHeader& h) { h.policy = uint32_t(policy); });
    };
    set_policy(gshare::Policy::kPriority);
    lines = gshare::top::render_text(frame_of(jobs.dir.path), 0);
    CHECK(row_of(lines, jobs.a.pid()).find(" p10 w3 ") != std::string::npos);
    CHECK(row_of(lines, jobs.b.pid()).find(" p0 ") != std::string::npos);
    set_policy(gshare::Policy::kFifo);
    lines = gshare::top::render_text(frame_of(jobs.dir.path), 0);
    CHECK(row_of(lines, jobs.a.pid()).find(" w3 p10 ") != std::string::npos);
  }
  SECTION("an 80-column terminal keeps whole rows: detail columns give way, the state stays") {
    lines = gshare::top::render_text(frame, 80);
    for (const gshare::top::TextLine& line : lines) {
      if (line.kind == gshare::top::TextLine::Kind::kGpu) continue;  // the live view clips it
      INFO(line.text);
      CHECK(gshare::top::display_width(line.text) <= 80);
    }
    std::string narrow = gshare::top::join_lines(lines);
    for (const char* header : {"PID", "COMMAND", "USED", "STATE", "TOKEN", "GPU%"})
      CHECK(narrow.find(header) != std::string::npos);
    CHECK(narrow.find("CONTEXT") == std::string::npos);
    CHECK(narrow.find("SWITCH") == std::string::npos);
    CHECK(row_of(lines, jobs.a.pid()).find(" running ") != std::string::npos);
  }
}

TEST_CASE("gshare-top's JSON has the policy, the holder and each job's scheduling values") {
  TwoJobs jobs;
  nlohmann::json top = nlohmann::json::parse(gshare::top::render_json(frame_of(jobs.dir.path)));
  INFO(top.dump(2));
  CHECK(top["version"] == 3);
  REQUIRE(top["gpus"].size() == 1);
  const nlohmann::json& gpu = top["gpus"][0];
  CHECK(gpu["policy"] == "fair");
  CHECK(gpu["holder_slot"] == jobs.a.slot());
  CHECK(gpu["holder_pid"] == jobs.a.pid());
  CHECK(gpu["handovers"] == 7);
  CHECK(gpu["slice_elapsed_ms"].get<double>() >= 5.0);
  CHECK(gpu["slice_remaining_ms"].get<double>() <= 20.0);

  const nlohmann::json* a = json_process(gpu, jobs.a.pid());
  const nlohmann::json* b = json_process(gpu, jobs.b.pid());
  REQUIRE(a);
  REQUIRE(b);
  CHECK((*a)["state"] == "running");
  CHECK((*a)["job_state"] == "running");
  CHECK((*a)["holds_token"] == true);
  CHECK((*a)["weight"] == 3);
  CHECK((*a)["priority"] == 10);
  CHECK((*a)["handover"] == "strict");
  CHECK((*a)["granted"] == 4);
  CHECK((*a)["served_ms"].get<double>() >= 2000.0);
  CHECK((*a)["iterations"] == 12);
  CHECK((*a)["iteration_ms"].get<double>() == Approx(42.1));
  CHECK((*a)["iteration_launches"] == 30);
  CHECK((*a)["iteration_source"] == "launches");
  CHECK((*a)["expected_seconds"].get<double>() == Approx(60.0));
  CHECK((*a)["expected_iterations"] == 1000);
  CHECK((*a)["gpu_share_10s"].get<double>() >= 0.0);

  CHECK((*b)["state"] == "waiting");
  CHECK((*b)["holds_token"] == false);
  CHECK((*b)["wait_ms"].get<double>() >= 2000.0);
  CHECK((*b)["wait_ms"].get<double>() < 3000.0);
  CHECK((*b)["iteration_ms"].is_null());
  CHECK((*b)["iteration_launches"].is_null());
  CHECK((*b)["expected_seconds"].is_null());
  CHECK((*b)["expected_iterations"].is_null());
  CHECK((*b)["iteration_source"] == "unknown");
  CHECK((*b)["gpu_share_10s"] == 0.0);

  SECTION("without a holder the holder and the slice are null") {
    write_region(jobs.region(), [&](RegionHeader& h) { h.tokens[0].holder = 0; });
    nlohmann::json idle = nlohmann::json::parse(gshare::top::render_json(frame_of(jobs.dir.path)));
    const nlohmann::json& g = idle["gpus"][0];
    CHECK(g["holder_slot"].is_null());
    CHECK(g["holder_pid"].is_null());
    CHECK(g["slice_elapsed_ms"].is_null());
    CHECK(g["slice_remaining_ms"].is_null());
  }
  SECTION("a slice without an end has no remainder") {
    write_region(jobs.region(), [&](RegionHeader& h) { h.tokens[0].slice_end_mono_ns = UINT64_MAX; });
    nlohmann::json fifo = nlohmann::json::parse(gshare::top::render_json(frame_of(jobs.dir.path)));
    CHECK(fifo["gpus"][0]["slice_remaining_ms"].is_null());
    CHECK(fifo["gpus"][0]["slice_elapsed_ms"].is_number());
  }
}

TEST_CASE("gshare-top shows what a switch cost: per GPU the mean and the largest, per job its mean") {
  TwoJobs jobs;
  SECTION("before any switch there is nothing to show, and JSON says null, not 0") {
    gshare::top::Frame frame = frame_of(jobs.dir.path);
    std::vector<gshare::top::TextLine> lines = gshare::top::render_text(frame, 0);
    std::string text = gshare::top::join_lines(lines);
    INFO(text);
    CHECK(text.find("switch mean") == std::string::npos);
    CHECK(text.find("SWITCH") != std::string::npos);
    std::string row = row_of(lines, jobs.a.pid());
    REQUIRE(row.size() > 2);
    CHECK(row.substr(row.size() - 2) == " -");  // SWITCH, the last column
    nlohmann::json top = nlohmann::json::parse(gshare::top::render_json(frame));
    const nlohmann::json& gpu = top["gpus"][0];
    CHECK(gpu["switches"] == 0);
    CHECK(gpu["switch_ns_total"] == 0);
    CHECK(gpu["switch_ns_max"].is_null());
    const nlohmann::json* a = json_process(gpu, jobs.a.pid());
    REQUIRE(a);
    CHECK((*a)["switches"] == 0);
    CHECK((*a)["switch_ns"] == 0);
    CHECK((*a)["last_switch_ns"].is_null());
  }
  SECTION("after switches: the snapshot copies them, the text and JSON show them") {
    // Six switches on the GPU, one of them to a job that has ended since.
    write_region(jobs.region(), [&](RegionHeader& h) {
      Slot& sa = jobs.region()->slots[jobs.a.slot()];
      Slot& sb = jobs.region()->slots[jobs.b.slot()];
      sa.switches = 3;
      sa.switch_ns = 4500 * 1000;      // a mean of 1.5 ms
      sa.last_switch_ns = 2100 * 1000;
      sb.switches = 2;
      sb.switch_ns = 500 * 1000;       // a mean of 250 us
      sb.last_switch_ns = 300 * 1000;
      h.switches = 6;
      h.switch_ns_total = 6 * kMs;     // a mean of 1 ms
      h.switch_ns_max = 2100 * 1000;
    });
    GpuSnapshot snapshot = only_gpu(jobs.dir.path);
    CHECK(snapshot.switches == 6);
    CHECK(snapshot.switch_ns_total == 6 * kMs);
    CHECK(snapshot.switch_ns_max == 2100 * 1000);
    const ProcessSnapshot* pa = find_process(snapshot, jobs.a.slot());
    REQUIRE(pa);
    CHECK(pa->switches == 3);
    CHECK(pa->switch_ns == 4500 * 1000);
    CHECK(pa->last_switch_ns == 2100 * 1000);

    gshare::top::Frame frame = frame_of(jobs.dir.path);
    std::vector<gshare::top::TextLine> lines = gshare::top::render_text(frame, 0);
    std::string text = gshare::top::join_lines(lines);
    INFO(text);
    CHECK(text.find("handovers 7  switch mean 1.00ms max 2.10ms") != std::string::npos);
    std::string a = row_of(lines, jobs.a.pid()), b = row_of(lines, jobs.b.pid());
    CHECK(a.substr(a.size() - 7) == " 1.50ms");
    CHECK(b.substr(b.size() - 6) == " 250us");

    nlohmann::json top = nlohmann::json::parse(gshare::top::render_json(frame));
    const nlohmann::json& gpu = top["gpus"][0];
    CHECK(gpu["switches"] == 6);
    CHECK(gpu["switch_ns_total"] == 6 * kMs);
    CHECK(gpu["switch_ns_max"] == 2100 * 1000);
    const nlohmann::json* ja = json_process(gpu, jobs.a.pid());
    const nlohmann::json* jb = json_process(gpu, jobs.b.pid());
    REQUIRE(ja);
    REQUIRE(jb);
    CHECK((*ja)["switches"] == 3);
    CHECK((*ja)["switch_ns"] == 4500 * 1000);
    CHECK((*ja)["last_switch_ns"] == 2100 * 1000);
    CHECK((*jb)["switches"] == 2);
    CHECK((*jb)["last_switch_ns"] == 300 * 1000);

    // SWITCH is the first column to give way on a narrow terminal.
    size_t full = 0;
    for (const gshare::top::TextLine& line : lines)
      if (line.kind == gshare::top::TextLine::Kind::kColumnHeader) full = line.text.size();
    std::string narrow = gshare::top::join_lines(gshare::top::render_text(frame, full - 1));
    CHECK(narrow.find("SWITCH") == std::string::npos);
    CHECK(narrow.find("SHORT") != std::string::npos);
    CHECK(narrow.find("switch mean 1.00ms") != std::string::npos);  // the GPU line wraps instead
  }
}
