// The admission verdict for one reservation of device memory: granted, or
// what the job must wait for (docs/DESIGN.md, §5.7). The checks run in the
// order of the answers:
//   1. its quota (final: refused at once);
//   2. the safety condition ΣP + Σ_lanes max E ≤ C with its new P and E
//      (rules/lanes.h), when it grows: wait for others to shrink or leave;
//      and a re-forming of the lanes that would put two holders in one
//      lane: wait for one of them to end its iteration;
//   3. its lane's ephemeral space, for ephemeral bytes: one job of a lane
//      at a time holds it;
//   4. the bytes really free: wait for caches to come back.
//
// Pure: the rule asks `facts` only what it needs, in that order, so the
// costly lane plan is made only when the job grows. The live arbiter
// answers from the region under its lock (shm/arbiter.cpp); the unit tests
// answer from a table. A Facts type provides:
//   bool over_quota()               the bytes would pass the job's quota
//   bool grows()                    its P or E would grow, or it has no lane
//   bool first_holder_is_me()       it became a lane holder before any other
//                                   (it alone may finish its iteration on
//                                   the bytes really free)
//   const LanePlan& plan()          the lanes with its new P and E
//   bool plan_keeps_holders_apart() the plan leaves one holder a lane
//   int lane_in_plan()              its lane in the plan; -1: none
//   bool admission_deadlocked()     every job that holds memory waits for
//                                   admission too, and it has waited longest
//   bool holds_lane_space()         it holds its lane's space now
//   int first_holder()              the holder that became one first; -1
//   int other_holder_in_plan()      another job of the plan holding its lane's
//                                   space; -1
//   int lane_holder_other_than_me(int lane)  -1: none, or lane < 0
//   int own_lane()                  its lane now; -1: none
//   bool bytes_free()               the GPU's capacity takes the bytes now
#pragma once

#include <cstdint>

#include "rules/lanes.h"

namespace gshare::rules {

enum class Admission {
  kGranted,
  kOverQuota,      // the job's own quota: refused at once
  kInadmissible,   // the safety condition would fail
  kLaneBusy,       // another job holds the lane's space (blocked_by)
  kOverCapacity,   // the bytes are held by others now
};

struct AdmissionVerdict {
  Admission status = Admission::kGranted;
  int blocked_by = -1;       // kLaneBusy: the job to wait for
  uint64_t short_bytes = 0;  // kInadmissible: by how much even one lane misses C
  bool apply_plan = false;   // the plan's lanes are to be written back
  bool grew_past_plan = false;  // granted although no plan fits (the first holder)
};

template <class Facts>
AdmissionVerdict admission_verdict(bool persistent, bool in_turn, Facts& facts) {
  AdmissionVerdict v;
  if (facts.over_quota()) {
    v.status = Admission::kOverQuota;
    return v;
  }
  int lane = facts.own_lane();
  if (facts.grows()) {
    // Where the lanes cannot take a job's growth, the first lane holder,
    // mid-iteration, finishes its iteration on the bytes really free; any
    // other waits for it.
    const bool holder = facts.first_holder_is_me();
    const LanePlan& plan = facts.plan();
    v.apply_plan = plan.fits && facts.plan_keeps_holders_apart();
    v.grew_past_plan = !plan.fits;
    if (!plan.fits && !holder && !facts.admission_deadlocked()) {
      v.status = Admission::kInadmissible;
      v.short_bytes = plan.short_bytes;
    }
    if (v.apply_plan) lane = facts.lane_in_plan();
    // A re-forming that would put two holders in one lane waits for one of
    // them to end its iteration; the job that needs it waits for that.
    if (v.status == Admission::kGranted && (plan.fits ? !v.apply_plan : true) && !holder &&
        facts.holds_lane_space()) {
      v.blocked_by = facts.first_holder();  // a holder growing past its lane
    } else if (plan.fits && !v.apply_plan && !holder) {
      v.blocked_by = facts.other_holder_in_plan();
    }
    if (v.blocked_by >= 0) v.status = Admission::kLaneBusy;
  }
  // One job of a lane at a time holds the lane's ephemeral space.
  if (v.status == Admission::kGranted && !persistent && !in_turn) {
    int other = facts.lane_holder_other_than_me(lane);
    if (other >= 0) {
      v.status = Admission::kLaneBusy;
      v.blocked_by = other;
    }
  }
  if (v.status == Admission::kGranted && !facts.bytes_free()) v.status = Admission::kOverCapacity;
  return v;
}

}  // namespace gshare::rules
