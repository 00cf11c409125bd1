// The lane planner (rules/lanes.h): the safety condition, placement of
// newcomers, re-forming on growth, widening when jobs leave.
#include <catch2/catch.hpp>

#include <vector>

#include "rules/lanes.h"

using namespace gshare::rules;

namespace {
constexpr uint64_t GiB = 1ull << 30;

LaneJob job(int id, uint64_t p_gib, uint64_t e_gib, int lane = kNoLane) {
  LaneJob j;
  j.id = id;
  j.persistent = p_gib * GiB;
  j.ephemeral = e_gib * GiB;
  j.lane = lane;
  return j;
}

// Brute force over every assignment of up to 6 jobs to lanes: the least
// possible sum, and the most lanes of any assignment that fits, to hold
// the planner's answers against.
void brute_force(std::vector<LaneJob>& jobs, size_t i, uint64_t capacity, uint64_t* least,
                 int* most_lanes) {
  if (i == jobs.size()) {
    uint64_t sum = safety_bytes(jobs.data(), int(jobs.size()));
    *least = std::min(*least, sum);
    if (sum <= capacity) *most_lanes = std::max(*most_lanes, lanes_in_use(jobs.data(), int(jobs.size())));
    return;
  }
  for (int l = 0; l < int(jobs.size()); ++l) {
    jobs[i].lane = l;
    brute_force(jobs, i + 1, capacity, least, most_lanes);
  }
}

int members(const std::vector<LaneJob>& jobs, int lane) {
  int n = 0;
  for (const LaneJob& j : jobs) n += j.lane == lane;
  return n;
}
}  // namespace

TEST_CASE("the safety sum counts P once per job and the largest E once per lane") {
  std::vector<LaneJob> jobs = {job(0, 1, 3, 0), job(1, 1, 2, 0), job(2, 2, 1, 1)};
  CHECK(safety_bytes(jobs.data(), 3) == (1 + 1 + 2 + 3 + 1) * GiB);
  CHECK(lanes_in_use(jobs.data(), 3) == 2);
  jobs[2].lane = kNoLane;  // a job without a lane is a lane of its own
  CHECK(safety_bytes(jobs.data(), 3) == (1 + 1 + 2 + 3 + 1) * GiB);
}

TEST_CASE("four jobs of P 1 GiB and E 3 GiB share one lane on 8 GiB; not two lanes") {
  std::vector<LaneJob> jobs = {job(0, 1, 3), job(1, 1, 3), job(2, 1, 3), job(3, 1, 3)};
  LanePlan plan = place_jobs(jobs.data(), 4, 8 * GiB, 16);
  REQUIRE(plan.fits);
  CHECK(plan.lane_count == 1);
  CHECK(plan.safety_bytes == 7 * GiB);
  for (const LaneJob& j : jobs) CHECK(j.lane == jobs[0].lane);
}

TEST_CASE("two large jobs take turns in one lane while a small one runs beside them") {
  // Two lanes of the two large jobs would need 2.2 + 3 + 3 > 8; one lane of
  // them and the small job alone needs 2.2 + 3 + 0.1.
  constexpr uint64_t MiB = 1ull << 20;
  std::vector<LaneJob> jobs = {job(0, 1, 3), job(1, 1, 3), job(2, 0, 0)};
  jobs[2].persistent = jobs[2].ephemeral = 100 * MiB;
  jobs[0].lane = 0;
  jobs[1].lane = 1;
  jobs[2].lane = 2;
  LanePlan plan = place_jobs(jobs.data(), 3, 8 * GiB, 16);
  REQUIRE(plan.fits);
  CHECK(plan.lane_count == 2);
  CHECK(jobs[0].lane == jobs[1].lane);
  CHECK(jobs[2].lane != jobs[0].lane);
  CHECK(jobs[2].lane == 2);  // kept its number
  CHECK(plan.safety_bytes == 5 * GiB + 200 * MiB);
}

TEST_CASE("provisional jobs share the lane of the largest learned E, whatever room there is") {
  // What a provisional job holds so far says nothing of what it will need:
  // in a lane of its own it could grow past it beside a job mid-iteration.
  std::vector<LaneJob> jobs = {job(0, 1, 1, 0), job(1, 1, 1, 1), job(2, 1, 1), job(3, 1, 2, 3)};
  jobs[0].provisional = jobs[1].provisional = jobs[2].provisional = true;
  LanePlan plan = place_jobs(jobs.data(), 4, 100 * GiB, 16);
  REQUIRE(plan.fits);
  CHECK(jobs[0].lane == 3);
  CHECK(jobs[1].lane == 3);
  CHECK(jobs[2].lane == 3);
  CHECK(jobs[3].lane == 3);  // the classified job keeps its own
  CHECK(plan.moved == 3);
  CHECK(plan.safety_bytes == (4 + 2) * GiB);
  jobs[1].provisional = false;  // classified: widening gives it a lane of its own
  LanePlan wide = widen_lanes(jobs.data(), 4, 100 * GiB, 16);
  REQUIRE(wide.fits);
  CHECK(wide.lane_count == 2);
  CHECK(jobs[0].lane == jobs[3].lane);  // still with the largest E
  CHECK(jobs[2].lane == jobs[3].lane);
  CHECK(jobs[1].lane != jobs[3].lane);
}

TEST_CASE("a newcomer opens a lane of its own while the condition allows it") {
  std::vector<LaneJob> jobs = {job(0, 1, 2, 0), job(1, 1, 2)};
  LanePlan plan = place_jobs(jobs.data(), 2, 8 * GiB, 16);
  REQUIRE(plan.fits);
  CHECK(jobs[0].lane == 0);  // the placed job stays
  CHECK(jobs[1].lane != 0);
  CHECK(plan.lane_count == 2);
  CHECK(plan.moved == 1);
}

TEST_CASE("a newcomer joins the lane it grows least when a new lane does not fit") {
  // 1+1+1 + 4+3 = 10: a third lane (+2) does not fit in 10; joining lane 0
  // (E 4) costs nothing.
  std::vector<LaneJob> jobs = {job(0, 1, 4, 0), job(1, 1, 3, 1), job(2, 1, 2)};
  LanePlan plan = place_jobs(jobs.data(), 3, 10 * GiB, 16);
  REQUIRE(plan.fits);
  CHECK(jobs[2].lane == 0);
  CHECK(jobs[0].lane == 0);
  CHECK(jobs[1].lane == 1);
  CHECK(plan.safety_bytes == 10 * GiB);
}

TEST_CASE("a growth past the lanes re-forms them into fewer") {
  // Two lanes fit while E is small; E grows to 3 each and only one lane fits.
  std::vector<LaneJob> jobs = {job(0, 1, 3, 0), job(1, 1, 3, 1), job(2, 1, 3, 0), job(3, 1, 3, 1)};
  CHECK(safety_bytes(jobs.data(), 4) == 10 * GiB);
  LanePlan plan = place_jobs(jobs.data(), 4, 8 * GiB, 16);
  REQUIRE(plan.fits);
  CHECK(plan.lane_count == 1);
  CHECK(plan.safety_bytes == 7 * GiB);
  CHECK(plan.moved == 2);  // the leader kept its lane number: only the other lane's jobs moved
}

TEST_CASE("what cannot fit even in one lane is refused with the shortfall, lanes untouched") {
  std::vector<LaneJob> jobs = {job(0, 3, 2, 0), job(1, 3, 4, 0)};
  LanePlan plan = place_jobs(jobs.data(), 2, 8 * GiB, 16);
  CHECK_FALSE(plan.fits);
  CHECK(plan.short_bytes == 2 * GiB);  // 3 + 3 + 4 = 10
  CHECK(jobs[0].lane == 0);
  CHECK(jobs[1].lane == 0);
}

TEST_CASE("widening spreads jobs into more lanes once more fit") {
  std::vector<LaneJob> jobs = {job(0, 1, 3, 0), job(1, 1, 3, 0)};
  LanePlan same = place_jobs(jobs.data(), 2, 8 * GiB, 16);
  CHECK(same.moved == 0);  // already fits: place_jobs changes nothing
  LanePlan wide = widen_lanes(jobs.data(), 2, 8 * GiB, 16);
  REQUIRE(wide.fits);
  CHECK(wide.lane_count == 2);
  CHECK(jobs[0].lane != jobs[1].lane);
}

TEST_CASE("lane numbers stay below the bound") {
  std::vector<LaneJob> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(job(i, 0, 1));
  LanePlan plan = place_jobs(jobs.data(), 10, 100 * GiB, 3);
  REQUIRE(plan.fits);
  CHECK(plan.lane_count == 3);
  for (const LaneJob& j : jobs) CHECK((j.lane >= 0 && j.lane < 3));
  CHECK(members(jobs, 0) + members(jobs, 1) + members(jobs, 2) == 10);
}

TEST_CASE("the planner fits whenever any assignment fits, and widening finds the most lanes that fit") {
  // Small random mixes: whenever the planner says it does not fit, no
  // assignment fits; when it fits, its sum is within capacity.
  uint64_t seed = 12345;
  auto next = [&] { seed = seed * 6364136223846793005ull + 1442695040888963407ull; return seed >> 33; };
  for (int round = 0; round < 300; ++round) {
    int n = 1 + int(next() % 6);
    std::vector<LaneJob> jobs;
    for (int i = 0; i < n; ++i) jobs.push_back(job(i, next() % 3, next() % 5));
    uint64_t capacity = (4 + next() % 12) * GiB;
    uint64_t least = UINT64_MAX;
    int most_lanes = 0;
    std::vector<LaneJob> scratch = jobs;
    brute_force(scratch, 0, capacity, &least, &most_lanes);
    std::vector<LaneJob> planned = jobs;
    LanePlan plan = place_jobs(planned.data(), n, capacity, 16);
    CHECK(plan.fits == (least <= capacity));
    if (plan.fits) {
      CHECK(plan.safety_bytes <= capacity);
      CHECK(plan.safety_bytes == safety_bytes(planned.data(), n));
      LanePlan wide = widen_lanes(planned.data(), n, capacity, 16);
      CHECK(wide.fits);
      CHECK(wide.lane_count == most_lanes);
      CHECK(wide.safety_bytes <= capacity);
    } else {
      CHECK(plan.short_bytes == least - capacity);
    }
  }
}
