#include "shm/lane_space.h"

#include <algorithm>

#include "base/clock.h"
#include "base/policy_names.h"
#include "base/tunables.h"
#include "rules/policy.h"
#include "shm/arbiter.h"
#include "shm/tokens.h"

namespace gshare::shm {

// The live jobs' figures for the lane planner, with `own` (if >= 0) taking
// `own_p`/`own_e` instead of its slot's. Slots of dead owners not yet
// reclaimed still count: over-counting is safe, and reclaim comes soon.
int gather_lane_jobs(const Region& r, int own, uint64_t own_p, uint64_t own_e,
                     rules::LaneJob* jobs) {
  int n = 0;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (s.state != kSlotLive) continue;
    // A job paged out to host memory (allocator/pager.h) shares nothing
    // while it is out: it counts with what it still holds on the GPU, and
    // is admitted again, P and E, when it comes back.
    if (s.residency == kPagedOut && int(i) != own) {
      rules::LaneJob& j = jobs[n++];
      j.id = int(i);
      j.persistent = s.reserved_bytes;
      j.ephemeral = 0;
      j.lane = s.lane < kMaxLanes ? int(s.lane) : rules::kNoLane;
      j.provisional = false;
      continue;
    }
    rules::LaneJob& j = jobs[n++];
    j.id = int(i);
    j.persistent = int(i) == own ? own_p : persistent_of(s);
    j.ephemeral = int(i) == own ? own_e : ephemeral_of(s);
    j.lane = s.lane < kMaxLanes ? int(s.lane) : rules::kNoLane;
    j.provisional = s.class_iterations < 2;
  }
  // A provisional job's E is not known yet, and what it holds may all stay
  // (weights not yet classified): it counts as P, and its E as the largest
  // learned one. So a newcomer that cannot fit beside the others waits at
  // its first allocations, before it holds what they need.
  uint64_t learned_e = 0;
  for (int k = 0; k < n; ++k)
    if (!jobs[k].provisional) learned_e = std::max(learned_e, jobs[k].ephemeral);
  for (int k = 0; k < n; ++k) {
    if (!jobs[k].provisional || learned_e == 0) continue;
    jobs[k].persistent += jobs[k].ephemeral;
    jobs[k].ephemeral = learned_e;
  }
  return n;
}

// What a job may hold in ephemeral memory and still count as between
// iterations: leftovers such as a value read back, a small cache.
uint64_t lane_slack(const RegionHeader& h) {
  return std::max<uint64_t>(tunables::kLaneSlackMinBytes, h.capacity_bytes / tunables::kLaneSlackDivisor);
}

bool lane_needs_its_memory(const RegionHeader& h, const Slot& s) {
  const uint64_t slack = lane_slack(h);
  const uint64_t reserved = __atomic_load_n(&h.reserved_bytes, __ATOMIC_RELAXED);
  const bool tight = reserved + slack > h.capacity_bytes;
  return tight || std::max(s.ephemeral_bytes, ephemeral_now(s)) > slack;
}

// A lane's holder that sits idle (the token neither held nor wanted, no
// memory waited for, no thread in a host sync) holds its space no longer:
// a program that allocates and then waits for its user, or a framework's
// cache left behind, must not keep its lane-mates out. What it holds still
// counts against the capacity, and is asked back when short. One that has
// launched may be mid-iteration with host work between its kernels (a
// first step's library set-up): it keeps the space for kLaneSettleNs after
// it lost the token.
using tunables::kLaneSettleNs;

bool lane_holder_settled(const Slot& s) {
  if (s.job_state != kJobIdle || s.admission != kAdmitted || s.gpu_waits.load(std::memory_order_relaxed) != 0)
    return false;
  return s.launches.load(std::memory_order_relaxed) == 0 || mono_now_ns() >= s.accounted_mono_ns + kLaneSettleNs;
}

// Whether slot `i` holds its lane's ephemeral space now (Arbiter::holds_lane_space).
bool holds_lane_space_locked(const Region& r, int i) {
  const Slot& s = r.slots[i];
  if (s.state != kSlotLive || s.lane_holder_since_mono_ns == 0) return false;
  if (ephemeral_now(s) <= lane_slack(r.header)) return false;
  return !lane_holder_settled(s);
}

// The other job of `lane` that holds the lane's space, or -1. Should lanes
// hold two holders (a re-forming that could not wait, see
// plan_keeps_holders_apart), the earlier holder goes first and the later
// one waits: of two jobs each holding part of one space, one finishes.
int lane_holder_other_than(const Region& r, int own, uint32_t lane) {
  if (lane >= kMaxLanes) return -1;
  const Slot& me = r.slots[own];
  const bool own_holds = holds_lane_space_locked(r, own);
  int other = -1;
  for_live_slots(r, [&](uint32_t i) {
    if (int(i) == own || r.slots[i].lane != lane || !holds_lane_space_locked(r, int(i))) return true;
    const Slot& s = r.slots[i];
    if (!own_holds || s.lane_holder_since_mono_ns < me.lane_holder_since_mono_ns ||
        (s.lane_holder_since_mono_ns == me.lane_holder_since_mono_ns && int(i) < own))
      other = int(i);
    return other < 0;
  });
  return other;
}

// The holder that became one first, of all lanes: the one job that may
// finish its iteration past what the lanes planned for it (it grew past its
// learned E), on the bytes really free. Two holders growing at once would
// each wait for the other's memory.
int first_holder_locked(const Region& r) {
  int first = -1;
  for_live_slots(r, [&](uint32_t i) {
    if (holds_lane_space_locked(r, int(i)) &&
        (first < 0 || r.slots[i].lane_holder_since_mono_ns < r.slots[first].lane_holder_since_mono_ns))
      first = int(i);
    return true;
  });
  return first;
}

// `own` becomes its lane's holder; former holders that no longer hold the
// space lose the title.
void take_lane_space_locked(Region& r, int own, uint64_t now) {
  Slot& me = r.slots[own];
  if (me.lane_holder_since_mono_ns == 0) me.lane_holder_since_mono_ns = now;
  for_live_slots(r, [&](uint32_t i) {
    Slot& s = r.slots[i];
    if (int(i) != own && s.lane == me.lane && s.lane_holder_since_mono_ns != 0 &&
        !holds_lane_space_locked(r, int(i)))
      s.lane_holder_since_mono_ns = 0;
    return true;
  });
}

// A holder whose ephemeral memory fell to the slack frees its lane's space.
void drop_lane_space_if_free(const RegionHeader& h, Slot& s) {
  if (s.lane_holder_since_mono_ns != 0 && ephemeral_now(s) <= lane_slack(h)) s.lane_holder_since_mono_ns = 0;
}

// Whether `jobs` (a lane plan) keeps every lane to one holder. Re-forming
// lanes under two jobs that each hold part of their lanes' space would
// leave each waiting for the other's part: such a re-forming waits until
// one of them has ended its iteration.
bool plan_keeps_holders_apart(const Region& r, const rules::LaneJob* jobs, int n) {
  int holder_of[kMaxLanes];
  for (int& h : holder_of) h = -1;
  for (int k = 0; k < n; ++k) {
    if (jobs[k].lane < 0 || jobs[k].lane >= int(kMaxLanes)) continue;
    if (!holds_lane_space_locked(r, jobs[k].id)) continue;
    if (holder_of[jobs[k].lane] >= 0) return false;
    holder_of[jobs[k].lane] = jobs[k].id;
  }
  return true;
}

bool tokens_follow_lanes(const RegionHeader& h) {
  return policy_is_known(h.policy) &&
         rules::tokens_per_lane(Policy(h.policy));
}

// Writes a plan's lanes back. Under pack a holder moved to another lane
// gives its old lane's token back and waits for its new one.
void apply_lanes(Region& r, const rules::LaneJob* jobs, int n,
                 const rules::LanePlan& plan) {
  RegionHeader& h = r.header;
  bool moved = false;
  for (int k = 0; k < n; ++k) {
    Slot& s = r.slots[jobs[k].id];
    uint32_t lane = jobs[k].lane >= 0 ? uint32_t(jobs[k].lane) : kNoLane;
    if (s.lane != lane) moved = true;
    s.lane = lane;
  }
  h.safety_bytes = plan.safety_bytes;
  h.lane_count = uint32_t(plan.lane_count);
  if (!moved || !tokens_follow_lanes(h)) return;
  rules::drop_tokens_of_moved_holders(
      int(kMaxLanes), [&](int k) { return h.tokens[k].holder != 0 && h.tokens[k].holder <= kMaxSlots; },
      [&](int k) {
        uint32_t lane = r.slots[h.tokens[k].holder - 1].lane;
        return lane < kMaxLanes ? int(lane) : rules::kNoLane;
      },
      [&](int k) { take_token_locked(r, k, int(h.tokens[k].holder) - 1, kJobWaiting, mono_now_ns()); });
  wake_waiters(h);
}

}  // namespace gshare::shm
