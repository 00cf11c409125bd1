// A lane's ephemeral space, under the region's lock: who holds it, when it
// is free again, and how a lane plan is gathered and written back
// (docs/DESIGN.md, §5.6). Internal to shm/: the arbiter's reservations and
// its answers about lanes are made of these.
#pragma once

#include <cstdint>

#include "rules/lanes.h"
#include "shm/layout.h"

namespace gshare::shm {

// Room for every live job's LaneJob, left uninitialised: gather_lane_jobs
// writes each one it uses, and constructing all 256 on every reservation
// cost most of an allocation's time under gshare.
union LaneJobs {
  LaneJobs() {}
  rules::LaneJob at[kMaxSlots];
};

// Calls fn(i) for each live slot until it returns false, stopping once all
// of header.live_slots were seen: slots are claimed lowest first, so an
// allocation's scan touches the live slots' cache lines, not 256 slots'.
template <class Fn>
void for_live_slots(const Region& r, Fn&& fn) {
  uint32_t left = r.header.live_slots;
  for (uint32_t i = 0; i < kMaxSlots && left > 0; ++i) {
    if (r.slots[i].state != kSlotLive) continue;
    --left;
    if (!fn(i)) return;
  }
}

// The live jobs' figures for the lane planner, `own` (if >= 0) taking
// `own_p`/`own_e` instead of its slot's. Returns how many it wrote.
int gather_lane_jobs(const Region& r, int own, uint64_t own_p, uint64_t own_e, rules::LaneJob* jobs);

// What a job may hold in ephemeral memory and still count as between
// iterations: max(C/64, 64 MiB).
uint64_t lane_slack(const RegionHeader& h);

// Whether a lane-mate of this job needs its ephemeral memory back at a
// switch: the job's iteration (its learned E, or what it holds beyond P
// now) is more than the lane's slack, or the GPU has less than a slack
// free. Otherwise lane-mates hold their slack beside each other, and a
// cache given back would only be allocated again in the job's next turn.
bool lane_needs_its_memory(const RegionHeader& h, const Slot& s);

// Whether a lane's holder sits idle and so holds its space no longer.
bool lane_holder_settled(const Slot& s);

// Whether slot `i` holds its lane's ephemeral space now.
bool holds_lane_space_locked(const Region& r, int i);

// The other job of `lane` that holds the lane's space, or -1.
int lane_holder_other_than(const Region& r, int own, uint32_t lane);

// The holder that became one first, of all lanes, or -1.
int first_holder_locked(const Region& r);

// `own` becomes its lane's holder; former holders that no longer hold the
// space lose the title.
void take_lane_space_locked(Region& r, int own, uint64_t now);

// A holder whose ephemeral memory fell to the slack frees its lane's space.
void drop_lane_space_if_free(const RegionHeader& h, Slot& s);

// Whether `jobs` (a lane plan) keeps every lane to one holder.
bool plan_keeps_holders_apart(const Region& r, const rules::LaneJob* jobs, int n);

// Whether the GPU's policy gives each lane its own token (pack).
bool tokens_follow_lanes(const RegionHeader& h);

// Writes a plan's lanes back; under pack a holder moved to another lane
// gives its old lane's token back.
void apply_lanes(Region& r, const rules::LaneJob* jobs, int n, const rules::LanePlan& plan);

}  // namespace gshare::shm
