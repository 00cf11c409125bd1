// The admission verdict as a pure function (rules/admission.h): its order
// of checks, and that it asks for the lane plan only when the job grows.
#include "rules/admission.h"

#include <catch2/catch.hpp>

using gshare::rules::Admission;
using gshare::rules::admission_verdict;
using gshare::rules::LanePlan;

namespace {
// A table of facts, counting what the rule asked.
struct TableFacts {
  bool quota_passed = false, growing = false, first_holder_me = false;
  LanePlan lane_plan{true, 0, 0, 1, 0};
  bool holders_apart = true, deadlocked = false, holds_space = false, free_bytes = true;
  int plan_lane = 0, first = -1, other_in_plan = -1, lane_holder = -1, lane = 0;
  int plans_made = 0, lane_asked = -2;

  bool over_quota() const { return quota_passed; }
  bool grows() const { return growing; }
  bool first_holder_is_me() const { return first_holder_me; }
  const LanePlan& plan() {
    plans_made++;
    return lane_plan;
  }
  bool plan_keeps_holders_apart() const { return holders_apart; }
  int lane_in_plan() const { return plan_lane; }
  bool admission_deadlocked() const { return deadlocked; }
  bool holds_lane_space() const { return holds_space; }
  int first_holder() const { return first; }
  int other_holder_in_plan() const { return other_in_plan; }
  int lane_holder_other_than_me(int l) {
    lane_asked = l;
    return lane_holder;
  }
  int own_lane() const { return lane; }
  bool bytes_free() const { return free_bytes; }
};
}  // namespace

TEST_CASE("the quota says no first, whatever else holds") {
  TableFacts f;
  f.quota_passed = true;
  f.growing = true;
  f.lane_plan.fits = false;
  f.free_bytes = false;
  CHECK(admission_verdict(false, false, f).status == Admission::kOverQuota);
  CHECK(f.plans_made == 0);
}

TEST_CASE("a job that does not grow takes its lane's space and the free bytes, with no lane plan") {
  TableFacts f;
  auto v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kGranted);
  CHECK(f.plans_made == 0);
  CHECK(f.lane_asked == 0);
  f.lane_holder = 7;  // a lane-mate holds the space
  v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kLaneBusy);
  CHECK(v.blocked_by == 7);
  // Persistent bytes, and a pool's growth taken in turn, need no lane space.
  CHECK(admission_verdict(true, false, f).status == Admission::kGranted);
  CHECK(admission_verdict(false, true, f).status == Admission::kGranted);
  f.free_bytes = false;
  CHECK(admission_verdict(true, false, f).status == Admission::kOverCapacity);
}

TEST_CASE("growth past every placement waits for admission, except for the first holder and a deadlock") {
  TableFacts f;
  f.growing = true;
  f.lane_plan = LanePlan{false, 0, 3u << 20, 1, 0};
  auto v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kInadmissible);
  CHECK(v.short_bytes == 3u << 20);
  CHECK(f.plans_made == 1);
  f.first_holder_me = true;  // mid-iteration: it finishes on the bytes really free
  v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kGranted);
  CHECK(v.grew_past_plan);
  CHECK_FALSE(v.apply_plan);
  f.first_holder_me = false;
  f.deadlocked = true;  // every holder of memory waits too, and it waited longest
  CHECK(admission_verdict(false, false, f).status == Admission::kGranted);
}

TEST_CASE("a re-forming that would put two holders in one lane waits for one of them") {
  TableFacts f;
  f.growing = true;
  f.holders_apart = false;
  f.other_in_plan = 4;
  auto v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kLaneBusy);
  CHECK(v.blocked_by == 4);
  CHECK_FALSE(v.apply_plan);
  // A holder itself growing past its lane waits for the first holder.
  f.holds_space = true;
  f.first = 2;
  v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kLaneBusy);
  CHECK(v.blocked_by == 2);
}

TEST_CASE("an applied plan moves the job: its lane's space is asked of its new lane") {
  TableFacts f;
  f.growing = true;
  f.plan_lane = 3;
  auto v = admission_verdict(false, false, f);
  CHECK(v.status == Admission::kGranted);
  CHECK(v.apply_plan);
  CHECK(f.lane_asked == 3);
}
