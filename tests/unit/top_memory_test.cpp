// gshare-top's memory columns (issue #4): what the snapshot copies of each
// job's persistent and ephemeral memory, lane and admission, the lanes and
// the safety condition it sums over the live jobs, and how the text and
// JSON views show them.
//
// The regions are written by hand, as the arbiter would
// (tests/unit/hand_written_region.h).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rules/policy.h"
#include "shm/arbiter.h"
#include "shm/layout.h"
#include "shm/region.h"
#include "shm/snapshot.h"
#include "tests/unit/hand_written_region.h"
#include "tools/top_columns.h"
#include "tools/top_format.h"
#include "tools/top_json.h"
#include "tools/top_sample.h"
#include "tools/top_text.h"

using namespace gshare;
using namespace gshare::shm;
using namespace gshare::test;
using gshare::top::TextLine;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecond = 1000000000;
constexpr uint64_t kCapacity = 8 * kGiB;
constexpr uint64_t kContext = 256 * kMiB;
constexpr const char* kUuid = "GPU-6d3ae12c-1111-2222-3333-444444444444";


void grant_lane_token(RegionHeader& h, uint32_t lane, const Slot& slot, uint32_t index) {
  h.tokens[lane].holder = index + 1;
  h.tokens[lane].holder_generation = slot.generation;
}

// The memory a job holds: its context and `persistent` classified
// persistent, plus `ephemeral_now` in use now; `learned_e` is its learned
// peak per iteration.
void set_memory(Slot& s, uint64_t persistent, uint64_t ephemeral_now, uint64_t learned_e,
                uint32_t class_iterations, uint32_t lane) {
  s.context_bytes = kContext;
  s.persistent_bytes = persistent;
  s.allocated_bytes = persistent + ephemeral_now;
  s.reserved_bytes = kContext + persistent + ephemeral_now;
  s.ephemeral_bytes = learned_e;
  s.class_iterations = class_iterations;
  s.lane = lane;
}

void set_waiting(Slot& s, AdmissionState state, uint64_t since_mono_ns, uint64_t bytes,
                 uint64_t short_bytes) {
  s.admission = state;
  s.admission_since_mono_ns = since_mono_ns;
  s.admission_bytes = bytes;
  s.admission_short_bytes = short_bytes;
}

gshare::top::Frame frame_of(const std::string& dir) {
  gshare::top::Sample before = gshare::top::take_sample(dir);
  return gshare::top::make_frame(dir, before, gshare::top::take_sample(dir));
}

// Four live jobs and a dead one on an 8 GiB GPU under pack:
//
//   job    P (context +)   E now / learned   classified  lane  admission
//   train  256 + 1024 MiB  2 GiB / 1 GiB     5           0     admitted, holds lane 0
//   eval   256 + 512 MiB   0 / 3 GiB         3           0     its turn: waits 1.45 s for memory
//   small  256 + 0 MiB     512 / 256 MiB     1           1     admitted, holds lane 1
//   big    256 + 0 MiB     0 / 0             0           -     waits 12.25 s for admission
//   dead   256 + 4 GiB     4 GiB / 4 GiB     9           1     killed: counts nowhere
//
// Safety over the live ones: ΣP 2.5 GiB + lane 0 3 GiB + lane 1 0.5 GiB +
// big's own lane 0 = 6 GiB of 8 (75.0%). With the dead job it would be OVER.
// The waits start 50 ms past a rounding edge ("turn 1.5s", "wait 12.3s"),
// so that the time the test itself takes does not change what is shown.
struct LaneJobs {
  TempDir dir;
  RegionFile file = open_region(dir.path, kUuid, kCapacity);
  Job train{dir.path, kUuid, kCapacity, "python train.py"};
  Job eval{dir.path, kUuid, kCapacity, "python eval.py"};
  Job small{dir.path, kUuid, kCapacity, "python small.py"};
  Job big{dir.path, kUuid, kCapacity, "python big.py"};
  Job dead{dir.path, kUuid, kCapacity, "python dead.py"};
  uint64_t written_mono_ns = 0;

  LaneJobs() {
    Region* r = file.region;
    write_region(r, [&](RegionHeader& h) {
      uint64_t now = monotonic_now_ns();
      written_mono_ns = now;
      h.policy = uint32_t(gshare::Policy::kPack);
      h.memory_waiters = 2;
      h.handovers = 9;
      Slot& st = r->slots[train.slot()];
      Slot& se = r->slots[eval.slot()];
      Slot& ss = r->slots[small.slot()];
      Slot& sb = r->slots[big.slot()];
      Slot& sd = r->slots[dead.slot()];

      set_memory(st, 1 * kGiB, 2 * kGiB, 1 * kGiB, 5, 0);
      st.job_state = kJobRunning;
      st.weight = 2;
      st.priority = 7;
      st.released_bytes = 64 * kMiB;
      st.admission_waits = 1;
      st.admission_bytes = 123;  // left from an earlier wait: not shown once admitted
      grant_lane_token(h, 0, st, train.slot());

      set_memory(se, 512 * kMiB, 0, 3 * kGiB, 3, 0);
      set_waiting(se, kWaitingForMemory, now - 1450 * kMs, 1 * kGiB, 512 * kMiB);
      se.admission_waits = 2;
      se.job_state = kJobIdle;

      set_memory(ss, 0, 512 * kMiB, 256 * kMiB, 1, 1);
      ss.job_state = kJobRunning;
      grant_lane_token(h, 1, ss, small.slot());

      set_memory(sb, 0, 0, 0, 0, kNoLane);
      set_waiting(sb, kWaitingForAdmission, now - 12250 * kMs, 2 * kGiB, 1536 * kMiB);
      sb.admission_waits = 1;

      set_memory(sd, 4 * kGiB, 4 * kGiB, 4 * kGiB, 9, 1);
    });
    dead.kill9();
  }
  ~LaneJobs() { close_region(&file); }

  Region* region() { return file.region; }
};

const LaneSnapshot* find_lane(const GpuSnapshot& gpu, int32_t lane) {
  for (const LaneSnapshot& l : gpu.lanes)
    if (l.lane == lane) return &l;
  return nullptr;
}

std::vector<uint32_t> sorted(std::vector<uint32_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

std::string pids_in_order(pid_t a, pid_t b, const char* mark_a) {
  return a < b ? std::to_string(a) + mark_a + " " + std::to_string(b)
               : std::to_string(b) + " " + std::to_string(a) + mark_a;
}

std::string text_of(const std::vector<TextLine>& lines, TextLine::Kind kind) {
  std::string text;
  for (const TextLine& line : lines)
    if (line.kind == kind) text += line.text + "\n";
  return text;
}

// Whether the column header row names `header` (a whole word of it).
bool lines_have_header(const std::vector<TextLine>& lines, const std::string& header) {
  for (const TextLine& line : lines) {
    if (line.kind != TextLine::Kind::kColumnHeader) continue;
    std::string padded = " " + line.text + " ";
    if (padded.find(" " + header + " ") != std::string::npos) return true;
  }
  return false;
}

// The process row whose first field is `pid`.
std::string row_of(const std::vector<TextLine>& lines, pid_t pid) {
  for (const TextLine& line : lines) {
    if (line.kind != TextLine::Kind::kProcess) continue;
    std::string first_field = std::to_string(pid) + " ";
    size_t start = line.text.find_first_not_of(' ');
    if (line.text.compare(start, first_field.size(), first_field) == 0) return line.text;
  }
  return "";
}

std::string trimmed(const std::string& text) {
  size_t first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The cell of column `header` in a row of a frame rendered at full width
// (every column shown), found by position: the table's widths, and for the
// flexible COMMAND the room up to the next column, read off the header row.
// Rows here are ASCII, so bytes are columns.
std::string cell(const std::vector<TextLine>& lines, const std::string& row, const std::string& header) {
  std::string header_row;
  for (const TextLine& line : lines)
    if (line.kind == TextLine::Kind::kColumnHeader) header_row = line.text;
  std::span<const gshare::top::Column> columns = gshare::top::process_columns();
  size_t start = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    size_t width = columns[i].width;
    if (width == 0) {
      const gshare::top::Column& next = columns[i + 1];
      size_t next_header = header_row.find(std::string(" ") + next.header, start) + 1;
      size_t next_start = next.align == gshare::top::Align::kRight
                              ? next_header + std::string(next.header).size() - next.width
                              : next_header;
      width = next_start - 1 - start;
    }
    if (columns[i].header == header) return start < row.size() ? row.substr(start, width) : "";
    start += width + 1;
  }
  FAIL("no column " << header);
  return "";
}

const gshare::top::Column& column_named(const std::string& header) {
  for (const gshare::top::Column& column : gshare::top::process_columns())
    if (column.header == header) return column;
  FAIL("no column " << header);
  return gshare::top::process_columns()[0];
}

const nlohmann::json* json_process(const nlohmann::json& gpu, pid_t pid) {
  for (const nlohmann::json& p : gpu["processes"])
    if (p["pid"] == pid) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("the snapshot copies each job's P, E, class, lane and admission") {
  LaneJobs jobs;
  GpuSnapshot gpu = only_gpu(jobs.dir.path);
  REQUIRE(gpu.processes.size() == 4);  // the dead job is gone
  CHECK_FALSE(find_process(gpu, jobs.dead.slot()));

  const ProcessSnapshot* train = find_process(gpu, jobs.train.slot());
  const ProcessSnapshot* eval = find_process(gpu, jobs.eval.slot());
  const ProcessSnapshot* small = find_process(gpu, jobs.small.slot());
  const ProcessSnapshot* big = find_process(gpu, jobs.big.slot());
  REQUIRE(train);
  REQUIRE(eval);
  REQUIRE(small);
  REQUIRE(big);
  uint64_t since_written = gpu.sampled_mono_ns - jobs.written_mono_ns;

  // P is the context plus the persistent allocations; E the larger of the
  // learned peak and what is in use beyond P now.
  CHECK(train->persistent_bytes == kContext + 1 * kGiB);
  CHECK(train->ephemeral_bytes == 2 * kGiB);  // in use now, over the 1 GiB learned
  CHECK(train->class_iterations == 5);
  CHECK_FALSE(train->memory_provisional);
  CHECK(train->lane == 0);
  CHECK(train->admission == "admitted");
  CHECK(train->admission_wait_ns == 0);
  CHECK(train->admission_bytes == 0);  // a stale value is not shown once admitted
  CHECK(train->admission_waits == 1);
  CHECK(train->released_bytes == 64 * kMiB);

  CHECK(eval->persistent_bytes == kContext + 512 * kMiB);
  CHECK(eval->ephemeral_bytes == 3 * kGiB);  // learned, none in use now
  CHECK_FALSE(eval->memory_provisional);
  CHECK(eval->lane == 0);
  CHECK(eval->admission == "waiting for memory");
  CHECK(eval->admission_wait_ns == 1450 * kMs + since_written);
  CHECK(eval->admission_bytes == 1 * kGiB);
  CHECK(eval->admission_short_bytes == 512 * kMiB);
  CHECK(eval->admission_waits == 2);

  CHECK(small->persistent_bytes == kContext);
  CHECK(small->ephemeral_bytes == 512 * kMiB);
  CHECK(small->class_iterations == 1);
  CHECK(small->memory_provisional);  // one classified iteration is not enough
  CHECK(small->lane == 1);

  CHECK(big->persistent_bytes == kContext);
  CHECK(big->ephemeral_bytes == 0);
  CHECK(big->memory_provisional);
  CHECK(big->lane == -1);
  CHECK(big->admission == "waiting for admission");
  CHECK(big->admission_wait_ns == 12250 * kMs + since_written);
  CHECK(big->admission_short_bytes == 1536 * kMiB);
}

TEST_CASE("the lanes and the safety sum count the live jobs only") {
  LaneJobs jobs;
  GpuSnapshot gpu = only_gpu(jobs.dir.path);
  CHECK(gpu.memory_waiters == 2);
  REQUIRE(gpu.lanes.size() == 2);
  CHECK(gpu.lanes[0].lane == 0);
  CHECK(gpu.lanes[1].lane == 1);

  const LaneSnapshot* lane0 = find_lane(gpu, 0);
  const LaneSnapshot* lane1 = find_lane(gpu, 1);
  REQUIRE(lane0);
  REQUIRE(lane1);
  CHECK(sorted(lane0->slots) == sorted({jobs.train.slot(), jobs.eval.slot()}));
  CHECK(lane0->ephemeral_bytes == 3 * kGiB);  // its largest E: eval's
  CHECK(lane0->holder_slot == int32_t(jobs.train.slot()));
  // The dead job was in lane 1 with 4 GiB of E: it no longer counts.
  CHECK(lane1->slots == std::vector<uint32_t>{jobs.small.slot()});
  CHECK(lane1->ephemeral_bytes == 512 * kMiB);
  CHECK(lane1->holder_slot == int32_t(jobs.small.slot()));
  // ΣP 2.5 GiB + 3 GiB + 0.5 GiB + big's lane of its own (0).
  CHECK(gpu.safety_bytes == 6 * kGiB);

  SECTION("outside pack no lane has a holder of its own") {
    write_region(jobs.region(), [](RegionHeader& h) { h.policy = uint32_t(gshare::Policy::kFair); });
    GpuSnapshot fair = only_gpu(jobs.dir.path);
    REQUIRE(fair.lanes.size() == 2);
    for (const LaneSnapshot& lane : fair.lanes) CHECK(lane.holder_slot == -1);
  }
  SECTION("a lane token granted to an earlier owner of the slot is held by nobody") {
    write_region(jobs.region(), [&](RegionHeader& h) {
      h.tokens[1].holder_generation = jobs.region()->slots[jobs.small.slot()].generation + 1;
    });
    CHECK(find_lane(only_gpu(jobs.dir.path), 1)->holder_slot == -1);
  }
}

TEST_CASE("gshare-top's JSON has each job's memory classes and the GPU's lanes and safety") {
  LaneJobs jobs;
  nlohmann::json top = nlohmann::json::parse(gshare::top::render_json(frame_of(jobs.dir.path)));
  INFO(top.dump(2));
  CHECK(top["version"] == 3);
  REQUIRE(top["gpus"].size() == 1);
  const nlohmann::json& gpu = top["gpus"][0];
  CHECK(gpu["policy"] == "pack");
  CHECK(gpu["safety_bytes"] == 6 * kGiB);
  CHECK(gpu["safety_holds"] == true);
  CHECK(gpu["memory_waiters"] == 2);

  REQUIRE(gpu["lanes"].size() == 2);
  const nlohmann::json& lane0 = gpu["lanes"][0];
  CHECK(lane0["lane"] == 0);
  CHECK(lane0["ephemeral_bytes"] == 3 * kGiB);
  std::vector<pid_t> pids0 = lane0["pids"].get<std::vector<pid_t>>();
  std::sort(pids0.begin(), pids0.end());
  std::vector<pid_t> expected0 = {jobs.train.pid(), jobs.eval.pid()};
  std::sort(expected0.begin(), expected0.end());
  CHECK(pids0 == expected0);
  CHECK(lane0["holder_slot"] == jobs.train.slot());
  const nlohmann::json& lane1 = gpu["lanes"][1];
  CHECK(lane1["lane"] == 1);
  CHECK(lane1["ephemeral_bytes"] == 512 * kMiB);
  CHECK(lane1["pids"] == nlohmann::json::array({jobs.small.pid()}));  // not the dead job's
  CHECK(lane1["holder_slot"] == jobs.small.slot());

  const nlohmann::json* train = json_process(gpu, jobs.train.pid());
  const nlohmann::json* eval = json_process(gpu, jobs.eval.pid());
  const nlohmann::json* big = json_process(gpu, jobs.big.pid());
  REQUIRE(train);
  REQUIRE(eval);
  REQUIRE(big);
  CHECK(json_process(gpu, jobs.dead.pid()) == nullptr);
  CHECK((*train)["persistent_bytes"] == kContext + 1 * kGiB);
  CHECK((*train)["ephemeral_bytes"] == 2 * kGiB);
  CHECK((*train)["memory_provisional"] == false);
  CHECK((*train)["classified_iterations"] == 5);
  CHECK((*train)["lane"] == 0);
  CHECK((*train)["admission"] == "admitted");
  CHECK((*train)["admission_wait_ms"] == 0.0);
  CHECK((*train)["admission_bytes"] == 0);
  CHECK((*train)["admission_waits"] == 1);
  CHECK((*train)["released_bytes"] == 64 * kMiB);

  CHECK((*eval)["admission"] == "waiting for memory");
  CHECK((*eval)["admission_wait_ms"].get<double>() >= 1450.0);
  CHECK((*eval)["admission_wait_ms"].get<double>() < 6450.0);
  CHECK((*eval)["admission_bytes"] == 1 * kGiB);
  CHECK((*eval)["admission_short_bytes"] == 512 * kMiB);
  CHECK((*eval)["admission_waits"] == 2);

  CHECK((*big)["lane"].is_null());
  CHECK((*big)["memory_provisional"] == true);
  CHECK((*big)["classified_iterations"] == 0);
  CHECK((*big)["admission"] == "waiting for admission");
  CHECK((*big)["admission_short_bytes"] == 1536 * kMiB);

  SECTION("safety_holds is false once the sum exceeds the capacity") {
    write_region(jobs.region(), [&](RegionHeader&) {
      jobs.region()->slots[jobs.eval.slot()].ephemeral_bytes = 6 * kGiB;  // lane 0: 6 GiB
    });
    nlohmann::json over = nlohmann::json::parse(gshare::top::render_json(frame_of(jobs.dir.path)));
    CHECK(over["gpus"][0]["safety_bytes"] == 9 * kGiB);
    CHECK(over["gpus"][0]["safety_holds"] == false);
  }
}

TEST_CASE("P and E read as USED does, with ~ while provisional; ADMIT says what a job waits for") {
  const gshare::top::Column& p = column_named("P");
  const gshare::top::Column& e = column_named("E");
  const gshare::top::Column& lane = column_named("LANE");
  const gshare::top::Column& admit = column_named("ADMIT");
  const gshare::top::Column& short_by = column_named("SHORT");
  gshare::top::ProcessView row;
  row.process.persistent_bytes = 1536 * kMiB;
  row.process.ephemeral_bytes = 512 * kMiB;
  row.process.admission = "admitted";

  row.process.memory_provisional = false;
  CHECK(p.format(row) == gshare::top::format_bytes(1536 * kMiB) + " ");  // the units line up
  CHECK(p.format(row) == "1.50 GiB ");
  CHECK(e.format(row) == "512.0 MiB ");
  row.process.memory_provisional = true;
  CHECK(p.format(row) == "1.50 GiB~");
  CHECK(e.format(row) == "512.0 MiB~");
  // The widest size with its mark fits the column.
  row.process.persistent_bytes = 1023 * kMiB + 900 * 1024;
  CHECK(p.format(row) == "1023.9 MiB~");
  CHECK(gshare::top::display_width(p.format(row)) <= p.width);

  row.process.lane = -1;
  CHECK(lane.format(row) == "-");
  row.process.lane = 3;
  CHECK(lane.format(row) == "3");

  CHECK(admit.format(row) == "-");
  CHECK(short_by.format(row) == "-");
  row.process.admission = "waiting for admission";
  row.process.admission_wait_ns = 2449 * kMs;
  row.process.admission_short_bytes = 1536 * kMiB;
  CHECK(admit.format(row) == "wait 2.4s");
  CHECK(short_by.format(row) == "1.50 GiB");
  row.process.admission = "waiting for memory";
  CHECK(admit.format(row) == "turn 2.4s");
  row.process.admission_wait_ns = 0;
  CHECK(admit.format(row) == "turn 0.0s");
  row.process.admission_wait_ns = 999940 * kMs;
  CHECK(admit.format(row) == "turn 999.9s");
  // From 1000 s on, minutes and hours keep the column's width.
  row.process.admission_wait_ns = 1000 * kSecond;
  CHECK(admit.format(row) == "turn 16m40s");
  row.process.admission_wait_ns = (3 * 3600 + 7 * 60) * kSecond;
  CHECK(admit.format(row) == "turn 3h07m");
  CHECK(gshare::top::display_width(admit.format(row)) <= admit.width);
}

TEST_CASE("gshare-top's text shows P, E, the lane and admission, and the GPU's safety and lanes") {
  LaneJobs jobs;
  gshare::top::Frame frame = frame_of(jobs.dir.path);
  std::vector<TextLine> lines = gshare::top::render_text(frame, 0);
  INFO(gshare::top::join_lines(lines));

  std::string header = text_of(lines, TextLine::Kind::kGpu);
  REQUIRE(std::count(header.begin(), header.end(), '\n') == 1);  // no limit: one line
  // Small and big are still provisional, so the sum may still move.
  CHECK(header.find("  safety 6.00 GiB~ (75.0%)  ") != std::string::npos);
  CHECK(header.find("OVER") == std::string::npos);
  CHECK(header.find("  memory waiters 2  ") != std::string::npos);
  CHECK(header.find("  policy pack  ") != std::string::npos);

  // Members by pid, each lane's token holder starred; the dead job nowhere.
  std::string lanes = text_of(lines, TextLine::Kind::kLanes);
  CHECK(lanes == "lanes: 0 [" + pids_in_order(jobs.train.pid(), jobs.eval.pid(), "*") +
                     "] E 3.00 GiB \u00b7 1 [" + std::to_string(jobs.small.pid()) +
                     "*] E 512.0 MiB~\n");

  std::string train = row_of(lines, jobs.train.pid());
  std::string eval = row_of(lines, jobs.eval.pid());
  std::string small = row_of(lines, jobs.small.pid());
  std::string big = row_of(lines, jobs.big.pid());
  REQUIRE(!train.empty());
  REQUIRE(!eval.empty());
  REQUIRE(!small.empty());
  REQUIRE(!big.empty());
  CHECK(row_of(lines, jobs.dead.pid()).empty());

  CHECK(trimmed(cell(lines, train, "USED")) == "3.25 GiB");
  CHECK(cell(lines, train, "P") == "  1.25 GiB ");
  CHECK(cell(lines, train, "E") == "  2.00 GiB ");
  CHECK(trimmed(cell(lines, train, "LANE")) == "0");
  CHECK(trimmed(cell(lines, train, "ADMIT")) == "-");
  CHECK(trimmed(cell(lines, train, "SHORT")) == "-");
  CHECK(trimmed(cell(lines, train, "TOKEN")) == "*");
  CHECK(trimmed(cell(lines, train, "W/P")) == "w2");  // pack is fair within a lane

  CHECK(trimmed(cell(lines, eval, "P")) == "768.0 MiB");
  CHECK(trimmed(cell(lines, eval, "E")) == "3.00 GiB");
  CHECK(trimmed(cell(lines, eval, "LANE")) == "0");
  // Its wait, 1.45 s when the region was written, as the frame's later
  // sample found it: "turn 1.5s" unless a slow machine took 50 ms or more
  // between writing the region and sampling it.
  REQUIRE(frame.gpus.size() == 1);
  char waited[32];
  snprintf(waited, sizeof waited, "turn %.1fs",
           1.45 + double(frame.gpus[0].gpu.sampled_mono_ns - jobs.written_mono_ns) / 1e9);
  CHECK(trimmed(cell(lines, eval, "ADMIT")) == waited);
  CHECK(trimmed(cell(lines, eval, "SHORT")) == "512.0 MiB");

  CHECK(cell(lines, small, "P") == " 256.0 MiB~");
  CHECK(cell(lines, small, "E") == " 512.0 MiB~");
  CHECK(trimmed(cell(lines, small, "LANE")) == "1");
  CHECK(trimmed(cell(lines, small, "TOKEN")) == "*");

  CHECK(trimmed(cell(lines, big, "P")) == "256.0 MiB~");
  CHECK(trimmed(cell(lines, big, "E")) == "0 B~");
  CHECK(trimmed(cell(lines, big, "LANE")) == "-");
  CHECK(trimmed(cell(lines, big, "ADMIT")) == "wait 12.3s");
  CHECK(trimmed(cell(lines, big, "SHORT")) == "1.50 GiB");

  SECTION("a sum over the capacity is marked OVER") {
    write_region(jobs.region(), [&](RegionHeader&) {
      jobs.region()->slots[jobs.eval.slot()].ephemeral_bytes = 6 * kGiB;
    });
    std::string over = gshare::top::join_lines(gshare::top::render_text(frame_of(jobs.dir.path), 0));
    CHECK(over.find("  safety 9.00 GiB~ (112.5%) OVER  ") != std::string::npos);
  }
  SECTION("once every job is classified, nothing is marked provisional") {
    write_region(jobs.region(), [&](RegionHeader&) {
      for (const Job* job : {&jobs.small, &jobs.big}) jobs.region()->slots[job->slot()].class_iterations = 2;
    });
    lines = gshare::top::render_text(frame_of(jobs.dir.path), 0);
    CHECK(text_of(lines, TextLine::Kind::kGpu).find("  safety 6.00 GiB (75.0%)  ") != std::string::npos);
    CHECK(text_of(lines, TextLine::Kind::kLanes).find("~") == std::string::npos);
    CHECK(cell(lines, row_of(lines, jobs.small.pid()), "P") == " 256.0 MiB ");
  }
  SECTION("outside pack no lane member is starred, and no waiter no waiter count") {
    write_region(jobs.region(), [](RegionHeader& h) {
      h.policy = uint32_t(gshare::Policy::kFair);
      h.memory_waiters = 0;
    });
    lines = gshare::top::render_text(frame_of(jobs.dir.path), 0);
    std::string fair_lanes = text_of(lines, TextLine::Kind::kLanes);
    CHECK(fair_lanes.rfind("lanes: 0 [", 0) == 0);
    CHECK(fair_lanes.find("*") == std::string::npos);
    CHECK(text_of(lines, TextLine::Kind::kGpu).find("memory waiters") == std::string::npos);
  }
  SECTION("before any job is placed there is no lanes line") {
    write_region(jobs.region(), [&](RegionHeader&) {
      for (const Job* job : {&jobs.train, &jobs.eval, &jobs.small})
        jobs.region()->slots[job->slot()].lane = kNoLane;
    });
    lines = gshare::top::render_text(frame_of(jobs.dir.path), 0);
    CHECK(text_of(lines, TextLine::Kind::kLanes).empty());
  }
}

TEST_CASE("on a narrow terminal the header and lanes wrap, and ADMIT outlasts the other memory columns") {
  LaneJobs jobs;
  gshare::top::Frame frame = frame_of(jobs.dir.path);

  SECTION("80 columns") {
    std::vector<TextLine> lines = gshare::top::render_text(frame, 80);
    std::string text = gshare::top::join_lines(lines);
    INFO(text);
    for (const TextLine& line : lines) {
      INFO(line.text);
      CHECK(gshare::top::display_width(line.text) <= 80);
    }
    // Wrapped between items: nothing of the header is lost, the UUID shortened.
    std::string header = text_of(lines, TextLine::Kind::kGpu);
    CHECK(std::count(header.begin(), header.end(), '\n') >= 2);
    CHECK(header.rfind("GPU GPU-6d3a\u20264444  capacity 8.00 GiB", 0) == 0);
    for (const char* item : {"safety 6.00 GiB~ (75.0%)", "memory waiters 2", "policy pack", "handovers 9"})
      CHECK(header.find(item) != std::string::npos);
    CHECK(header.find("\n    ") != std::string::npos);  // continuation lines are indented

    for (const char* kept : {"PID", "COMMAND", "USED", "ADMIT", "STATE", "TOKEN", "GPU%"})
      CHECK(lines_have_header(lines, kept));
    for (const char* gone : {"SHORT", "CONTEXT", "LANE", "P", "E"})
      CHECK_FALSE(lines_have_header(lines, gone));
    CHECK(row_of(lines, jobs.big.pid()).find(" wait 12.3s ") != std::string::npos);
  }
  SECTION("40 columns: the lanes wrap between lanes") {
    std::vector<TextLine> lines = gshare::top::render_text(frame, 40);
    std::string lanes = text_of(lines, TextLine::Kind::kLanes);
    INFO(lanes);
    CHECK(lanes.rfind("lanes: 0 [", 0) == 0);
    CHECK(lanes.find("\n    1 [" + std::to_string(jobs.small.pid()) + "*] E 512.0 MiB~\n") !=
          std::string::npos);
  }
}

TEST_CASE("the text frame names who waits for whom: the lane's holder, memory's holder, the token's holder") {
  LaneJobs jobs;
  Region* r = jobs.region();
  write_region(r, [&](RegionHeader&) {
    Slot& se = r->slots[jobs.eval.slot()];
    se.admission = kWaitingForLane;
    se.blocked_by = uint32_t(jobs.train.slot()) + 1;
    se.job_state = kJobWaiting;
    r->slots[jobs.big.slot()].blocked_by = uint32_t(jobs.eval.slot()) + 1;
  });
  std::string waits = text_of(gshare::top::render_text(frame_of(jobs.dir.path), 0), TextLine::Kind::kLanes);
  const std::string eval = std::to_string(jobs.eval.pid()), train = std::to_string(jobs.train.pid()),
                    big = std::to_string(jobs.big.pid());
  INFO(waits);
  CHECK(waits.find("waits: ") != std::string::npos);
  CHECK(waits.find(eval + " for its lane held by " + train) != std::string::npos);
  CHECK(waits.find(big + " for admission, on memory held by " + eval) != std::string::npos);
  CHECK(waits.find(eval + " for the token held by " + train) != std::string::npos);
  // Once nobody waits in an allocation, no such line.
  write_region(r, [&](RegionHeader&) {
    r->slots[jobs.eval.slot()].admission = kAdmitted;
    r->slots[jobs.big.slot()].admission = kAdmitted;
  });
  waits = text_of(gshare::top::render_text(frame_of(jobs.dir.path), 0), TextLine::Kind::kLanes);
  CHECK(waits.find("waits:") == std::string::npos);
}
