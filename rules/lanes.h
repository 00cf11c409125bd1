// Lanes and the safety condition (docs/DESIGN.md, §5.6; the Salus paper).
//
// Every job has persistent memory P, which stays resident, and ephemeral
// memory E, its peak per iteration. Jobs in one lane never run at the same
// time, so they take turns with one ephemeral space as large as the lane's
// largest E. Memory is admitted only while
//
//     Σ_jobs P + Σ_lanes max_{j in lane} E_j  <=  C
//
// Pure code over the jobs' figures, like rules/policy.h: the arbiter
// runs it under the region's lock, gshare-sim under its virtual clock.
//
// How jobs are placed. A job without a lane opens a new one if the
// condition allows it (more lanes: more jobs may run at once under pack,
// and fewer turns with the same memory), else joins the lane it makes
// larger by the least. If that fails, or a job grew past what its lane
// allows, the lanes are re-formed: the fewest lanes needed is one (ΣP +
// the largest E), and for k lanes the least sum is ΣP + the largest E +
// the k-1 smallest E: those k-1 jobs run in lanes of their own, all others
// take turns in one. The largest k that fits is taken. Jobs keep their
// lane numbers where they can, so that a re-forming moves few jobs.
// Provisional jobs are planned as one job (P their sum, E their largest)
// and share the lane of the largest learned E: what they hold so far is
// no measure of what they will need.
#pragma once

#include <cstdint>

namespace gshare::rules {

inline constexpr int kNoLane = -1;

struct LaneJob {
  int id = -1;                // slot index live, trace index in the simulator
  uint64_t persistent = 0;    // P, bytes
  uint64_t ephemeral = 0;     // E, bytes
  int lane = kNoLane;         // 0 .. max_lanes-1, or kNoLane
  // P and E not yet learned (allocator/classifier.h): such jobs all share
  // one lane, so they take turns while their E is unknown, instead of
  // growing side by side into lanes that later have to merge under them.
  bool provisional = false;
};

struct LanePlan {
  bool fits = false;
  uint64_t safety_bytes = 0;  // Σ P + Σ_lanes max E of the resulting (or current) lanes
  uint64_t short_bytes = 0;   // when it does not fit: by how much even one lane misses C
  int lane_count = 0;         // lanes with members
  int moved = 0;              // jobs whose lane changed
};

// Σ P + Σ_lanes max E, with every job that has no lane counted as a lane
// of its own.
uint64_t safety_bytes(const LaneJob* jobs, int count);

// Number of lanes that have members.
int lanes_in_use(const LaneJob* jobs, int count);

// Gives every job a lane such that the condition holds, changing as little
// as possible: unchanged if it already holds. When no placement fits, the
// lanes are left as they were and `fits` is false. `max_lanes` bounds lane
// numbers (shm::kMaxLanes live).
LanePlan place_jobs(LaneJob* jobs, int count, uint64_t capacity, int max_lanes);

// Re-forms the lanes into more lanes when more now fit (jobs left or
// shrank). Changes nothing otherwise.
LanePlan widen_lanes(LaneJob* jobs, int count, uint64_t capacity, int max_lanes);

// After the lanes were re-formed under per-lane tokens (pack): a job the
// plan moved out of the lane whose token it holds gives that token back and
// waits for its new lane's. Calls drop(k) for each such token k of
// `lanes`: held(k) says whether anyone holds token k, holder_lane(k) the
// lane its holder is in now (kNoLane for none: then it holds no lane's).
template <class Held, class HolderLane, class Drop>
void drop_tokens_of_moved_holders(int lanes, Held&& held, HolderLane&& holder_lane, Drop&& drop) {
  for (int k = 0; k < lanes; ++k)
    if (held(k) && holder_lane(k) != k) drop(k);
}

}  // namespace gshare::rules
