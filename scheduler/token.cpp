#include "scheduler/token.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <new>

#include "base/clock.h"
#include "base/cpus.h"
#include "base/log.h"
#include "base/tunables.h"
#include "rules/turn_room.h"
#include "shm/futex.h"
#include "shm/host_room.h"
#include "shm/lane_space.h"
#include "shm/region.h"
#include "shm/tokens.h"

namespace gshare::scheduler {

// The policies decide; this file applies their decisions to the region.
using namespace rules;

using shm::Arbiter;
using shm::kMaxSlots;
using shm::Region;
using shm::RegionHeader;
using shm::Slot;

namespace {

using tunables::kMaxSleepNs;
using tunables::kMidIterationIdleNs;
using tunables::kMinSleepNs;
using tunables::kLendAfterNs;

uint64_t ms_to_ns(double ms) { return uint64_t(ms * 1e6); }

// JobSettings::host_limit_bytes of this process (the same on every GPU).
std::atomic<uint64_t> g_host_limit_bytes{UINT64_MAX};

Policy region_policy(const RegionHeader& h) {
  return policy_is_known(h.policy) ? Policy(h.policy) : Policy::kFair;
}

// The token a slot's job launches under: its lane's under pack, else the
// GPU's one token.
int token_index(const Region& r, int slot) {
  if (!tokens_per_lane(region_policy(r.header))) return 0;
  uint32_t lane = r.slots[slot].lane;
  return lane < shm::kMaxLanes ? int(lane) : 0;
}

using tunables::kProbeNs;

uint64_t remaining_ns(const Slot& s) {
  if (s.expected_ns != 0) return s.expected_ns > s.served_ns ? s.expected_ns - s.served_ns : 0;
  if (s.expected_iters == 0) return kForever;
  uint64_t iteration = s.iteration_ns.load(std::memory_order_relaxed);
  if (iteration == 0) return s.served_ns < kProbeNs ? 0 : kForever;
  uint64_t done = s.iterations.load(std::memory_order_relaxed);
  return done >= s.expected_iters ? 0 : (s.expected_iters - done) * iteration;
}

// The live jobs of a region, as the policies see them.
struct JobTable {
  Job jobs[kMaxSlots];
  int index_of_slot[kMaxSlots];
  int count = 0;
  // Filled for next_in_line: who runs after the holder, for a prefetch,
  // rather than who is granted the token now (pick_locked).
  bool ahead = false;

  Job* of_slot(int slot) { return index_of_slot[slot] >= 0 ? &jobs[index_of_slot[slot]] : nullptr; }
  int index(int slot) const { return slot >= 0 ? index_of_slot[slot] : -1; }
};

// The GPU's page-in rate in bytes per second: what its page-ins took so
// far, or kAssumedPageInBytesPerS before any. 0 while no live job on it has
// ever been paged out: paging is not active.
double page_in_rate(const Region& r) {
  uint64_t bytes = 0, ns = 0, page_outs = 0;
  for (const Slot& s : r.slots) {
    if (s.state != shm::kSlotLive) continue;
    bytes += s.paged_in_bytes;
    ns += s.page_in_copy_ns;
    page_outs += s.page_outs;
  }
  if (page_outs == 0) return 0;
  if (ns == 0 || bytes == 0) return double(tunables::kAssumedPageInBytesPerS);
  return double(bytes) / (double(ns) / 1e9);
}

// Whether the job wants the token or holds it: active on fair's clock.
bool wants_token(const Slot& s) { return s.job_state == shm::kJobWaiting || s.job_state == shm::kJobRunning; }

// Whether the slot's job is a newcomer waiting in an allocation for room:
// one that has not run yet (no iteration ended, never paged out), whose
// memory is still being set up. (Under the lock.)
bool newcomer_waits(const Slot& s) {
  return s.admission != shm::kAdmitted && s.page_outs == 0 && s.iterations.load(std::memory_order_relaxed) == 0;
}

// Whether the slot's job pages in on demand (marked paging in by its own
// page-in, which waits for its turn and room, then copies), not by a
// prefetch's copy. Read racily where the lock is not held.
bool pages_in_on_demand(const Slot& s) {
  return __atomic_load_n(&s.residency, __ATOMIC_RELAXED) == shm::kPagingIn &&
         !__atomic_load_n(&s.prefetch_copying, __ATOMIC_RELAXED);
}

// GSHARE_IDLE_MS of the slot's job (100 ms where a slot has none).
uint64_t idle_time_of(const Slot& s) { return s.idle_ns ? s.idle_ns : 100'000'000; }

// The median of the measured switch costs of the jobs in `t` (0 if none
// is measured yet).
uint64_t median_switch_cost(const JobTable& t) {
  uint64_t costs[kMaxSlots];
  int n = 0;
  for (int i = 0; i < t.count; ++i)
    if (t.jobs[i].switch_cost_ns != 0) costs[n++] = t.jobs[i].switch_cost_ns;
  if (n == 0) return 0;
  std::nth_element(costs, costs + n / 2, costs + n);
  return costs[n / 2];
}

// What moving the job's memory takes at the GPU's page-in rate `rate`
// (> 0): all of it, out now or not. At most an hour, whatever a slot says.
uint64_t swap_ns_of(const Slot& s, double rate) {
  const double ns = (double(s.paged_out_bytes) + double(s.movable_bytes)) / rate * 1e9;
  return uint64_t(std::min(ns, 3600e9));
}

// Whether a job marked waiting is not: switched out at its slice's end
// (waiting, so that it goes on when it next launches), it has had no thread
// waiting for the token since, for its idle time. It is working on the CPU
// or has stopped using the GPU; a grant would sit unused until a waiter
// found it idle, and on fair's clock it would stay active with the vtime it
// had, ahead of or behind jobs that ran meanwhile.
bool waits_in_name_only(const Slot& s, uint64_t now) {
  if (s.job_state != shm::kJobWaiting || s.token_waits.load(std::memory_order_relaxed) != 0) return false;
  const uint64_t idle_ns = idle_time_of(s);
  return s.wait_since_mono_ns != 0 && now > s.wait_since_mono_ns && now - s.wait_since_mono_ns >= idle_ns;
}

// How many live jobs each lane holds.
void count_lane_members(const Region& r, uint32_t* members) {
  for (uint32_t l = 0; l < shm::kMaxLanes; ++l) members[l] = 0;
  for (const Slot& s : r.slots)
    if (s.state == shm::kSlotLive && s.lane < shm::kMaxLanes) ++members[s.lane];
}

// --- Shared turns (token.h) ---

// Whether any job runs beside the holder of token `k`.
bool any_beside_locked(const Region& r, int k) {
  for (uint32_t i = 0; i < kMaxSlots; ++i)
    if (r.slots[i].beside && r.slots[i].state == shm::kSlotLive && token_index(r, int(i)) == k) return true;
  return false;
}

// Whether the job of `s` shares a turn only as one of a pair: it keeps
// the GPU busy (not host-bound) and asks to share all the same, with
// GSHARE_SHARED_TURNS=pairs, or with gaps while its kernels leave the GPU
// gaps by its own measure (runtime/leaves_gaps.h; rules/turn_room.h).
bool shares_as_pair(const Slot& s) {
  if (s.host_bound.load(std::memory_order_relaxed) != 0) return false;
  return s.shares_turns == shm::kSharesInPairs ||
         (s.shares_turns == shm::kSharesWhereGaps && s.leaves_gaps.load(std::memory_order_relaxed) != 0);
}

// Whether the job of `s` asks to share turns: GSHARE_SHARED_TURNS not
// off, and host-bound by its own measure (runtime/host_bound.h); or as
// one of a pair.
bool wants_shared_turn(const Slot& s) {
  return (s.shares_turns != shm::kSharesNone && s.host_bound.load(std::memory_order_relaxed) != 0) ||
         shares_as_pair(s);
}

// A job's GPU share in its own turns, thousandths (runtime/gpu_busy.h);
// 0: not measured.
uint64_t gpu_busy(const Slot& s) { return s.gpu_busy_permille.load(std::memory_order_relaxed); }

// Who may share a turn of token `k` now (token.h, beside): what every
// such decision needs, gathered once under the lock.
class TurnSharing {
 public:
  TurnSharing(const Region& r, int k) : r_(r), k_(k) {
    count_lane_members(r, members_);
    open_ = k == 0 && region_policy(r.header) == Policy::kFair && page_in_rate(r) == 0 && no_sharer_shares_lane();
    for (uint32_t i = 0; i < kMaxSlots; ++i) {
      const Slot& s = r.slots[i];
      if (!s.beside || s.state != shm::kSlotLive || token_index(r, int(i)) != k) continue;
      beside_++;
      beside_busy_ += gpu_busy(s);
      beside_pair_ = beside_pair_ || shares_as_pair(s);
    }
  }

  // The seats of the turn of `holder` still free (rules/turn_room.h: as
  // many jobs as CPUs, their GPU shares within one GPU; two with a job
  // that shares as one of a pair), given to the jobs
  // that could share it, least fair time first: those waiting for the
  // token, and `also` (a job about to ask; -1: none). Returns their waiter
  // bits; `*also_seated` says whether `also` has one. Fair among jobs
  // beside one another as between turns: whoever has run least sits first.
  uint32_t seat(int holder, int also, bool* also_seated) const {
    int candidates[kMaxSlots];
    int n = 0;
    for (uint32_t i = 0; i < kMaxSlots; ++i) {
      const Slot& s = r_.slots[i];
      if (s.state != shm::kSlotLive || s.beside || int(i) == holder || token_index(r_, int(i)) != k_) continue;
      const bool asks = int(i) == also || s.token_waits.load(std::memory_order_relaxed) != 0;
      if (asks && together(holder, int(i))) candidates[n++] = int(i);
    }
    std::sort(candidates, candidates + n,
              [&](int a, int b) { return r_.slots[a].vtime_ns < r_.slots[b].vtime_ns; });
    uint32_t jobs = 1 + beside_;
    uint64_t busy = beside_busy_ + gpu_busy(r_.slots[holder]);
    bool pair = beside_pair_ || shares_as_pair(r_.slots[holder]);
    uint32_t bits = 0;
    if (also_seated) *also_seated = false;
    for (int j = 0; j < n; ++j) {
      const uint64_t more = gpu_busy(r_.slots[candidates[j]]);
      const bool more_pair = pair || shares_as_pair(r_.slots[candidates[j]]);
      if (!rules::turn_has_room(jobs + 1, usable_cpus(), busy + more, more_pair)) break;
      jobs++;
      busy += more;
      pair = more_pair;
      bits |= shm::waiter_bit(candidates[j]);
      if (candidates[j] == also && also_seated) *also_seated = true;
    }
    return bits;
  }

  // Whether the job of `slot` may share a turn with others: it asks to
  // (wants_shared_turn: host-bound, or one of a pair), hands
  // over under overlap, its memory on the GPU and admitted, and alone in
  // its lane (lane-mates take turns with one ephemeral space: beside each
  // other one would only wait for the other's).
  bool allows(int slot) const {
    const Slot& s = r_.slots[slot];
    if (!open_ || !asks_to_share(s)) return false;
    if (s.handover_mode != shm::kHandoverOverlap || s.residency != shm::kResident || s.admission != shm::kAdmitted)
      return false;
    return s.lane >= shm::kMaxLanes || members_[s.lane] <= 1;
  }

  // Whether the jobs of slots `a` and `b` may run in one turn: both may
  // share, at equal weights. Within a shared turn the jobs share the GPU as
  // they would natively, so fair's weights would not hold between them.
  bool together(int a, int b) const {
    return allows(a) && allows(b) && r_.slots[a].weight == r_.slots[b].weight;
  }

 private:
  static bool asks_to_share(const Slot& s) {
    return s.state == shm::kSlotLive && wants_shared_turn(s);
  }

  // Turns are shared only under fair, without paging (a job beside would
  // need its memory resident), and while no host-bound job that asks to
  // share shares its lane (more jobs than lanes): identical jobs some of
  // which share turns while others take theirs alone are not treated
  // alike (among 64 host-bound PyTorch jobs on an H200, 49 in one lane,
  // the 15 with lanes of their own shared turns, and the slowest job made
  // 0.52 of the fastest's steps).
  bool no_sharer_shares_lane() const {
    for (uint32_t i = 0; i < kMaxSlots; ++i) {
      const Slot& s = r_.slots[i];
      if (asks_to_share(s) && token_index(r_, int(i)) == k_ && s.lane < shm::kMaxLanes && members_[s.lane] > 1)
        return false;
    }
    return true;
  }

  const Region& r_;
  int k_;
  uint32_t members_[shm::kMaxLanes];
  bool open_ = false;
  uint32_t beside_ = 0;       // jobs beside the holder of token k_
  uint64_t beside_busy_ = 0;  // their GPU shares, thousandths
  bool beside_pair_ = false;  // one of them shares as one of a pair
};

// The live jobs that compete for token `k`. A job that waits in name only
// becomes idle here: it competes again, placed on fair's clock anew
// (rules::activate), when it next asks for the token.
void gather_locked(const Arbiter& arbiter, int k, JobTable& t) {
  Region& r = *arbiter.region();
  const uint64_t now = mono_now_ns();
  const Policy policy = region_policy(r.header);
  const double rate = page_in_rate(r);
  // Lane-mates per lane: only a job that shares its lane hands memory over
  // at a switch (Arbiter::hands_memory_over), counted once here.
  uint32_t members[shm::kMaxLanes];
  count_lane_members(r, members);
  bool adapts[kMaxSlots] = {};
  int takers = 0;  // the active jobs: rules::quantum_among
  int asking[kMaxSlots];  // active jobs that ask to share turns
  int asks = 0;
  t.count = 0;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    t.index_of_slot[i] = -1;
    Slot& s = r.slots[i];
    if (s.state != shm::kSlotLive || !arbiter.slot_is_live(int(i))) continue;
    if (token_index(r, int(i)) != k) continue;
    if (waits_in_name_only(s, now) && r.header.tokens[k].holder != i + 1) {
      s.job_state = shm::kJobIdle;
      s.wait_since_mono_ns = 0;
    }
    Job& j = t.jobs[t.count];
    j.id = int(i);
    j.active = wants_token(s);
    j.arrival_ns = s.arrival_mono_ns;
    j.weight = s.weight ? s.weight : 1;
    j.priority = s.priority;
    j.served_ns = s.served_ns;
    j.vtime_ns = s.vtime_ns;
    j.away_ns = s.accounted_mono_ns == 0 ? kForever : now > s.accounted_mono_ns ? now - s.accounted_mono_ns : 0;
    j.remaining_ns = remaining_ns(s);
    j.switch_cost_ns = s.switch_cost_ns.load(std::memory_order_relaxed);
    // What its switches cost in memory counts only while they still move
    // memory: a job measured in a shared lane (provisional jobs all share
    // one) and since alone in its own, or one whose lane-mates need none
    // of its memory, gives nothing back, and turns lengthened by the old
    // figure would be the grain of every other job's share.
    const bool moves_memory =
        s.lane < shm::kMaxLanes && members[s.lane] > 1 && shm::lane_needs_its_memory(r.header, s);
    j.switch_memory_ns = moves_memory ? s.switch_memory_ns.load(std::memory_order_relaxed) : 0;
    if (rate > 0) {
      // While paging is active a switch to this job moves its memory (one
      // job's out, its own in), whether or not a prefetch hides that: its
      // turns are long enough for the copies to finish behind them.
      const uint64_t swap_ns = swap_ns_of(s, rate);
      j.switch_cost_ns = std::max(j.switch_cost_ns, swap_ns);
      j.switch_memory_ns = std::max(j.switch_memory_ns, swap_ns);
      // Its place in prefetch's order counts all of its memory, out now or
      // not: weighed by what is out, a job paged out for the next job's
      // room would rank differently at once, become next itself, be
      // prefetched back and be asked out again, without end.
      j.bring_back_ns = swap_ns;
    }
    j.quantum_ns = s.quantum_ns;
    adapts[t.count] = s.quantum_adapts != 0;
    takers += j.active ? 1 : 0;
    if (j.active && wants_shared_turn(s)) asking[asks++] = int(i);
    t.index_of_slot[i] = t.count++;
  }
  // Jobs that share turns take fewer turns than they are: a round of turns
  // is as long for 64 jobs twelve to a turn as for six jobs alone, and
  // the quantum need not shrink as for 64 (a shrunk one ends every shared
  // turn's runs beside it five times as often).
  if (asks > 1) {
    const TurnSharing sharing(r, k);
    int sharers = 0, paired = 0;
    uint64_t sharers_busy = 0;
    for (int a = 0; a < asks; ++a) {
      if (!sharing.allows(asking[a])) continue;
      if (shares_as_pair(r.slots[asking[a]])) {
        paired++;
        continue;
      }
      sharers++;
      sharers_busy += gpu_busy(r.slots[asking[a]]);
    }
    takers = rules::turns_in_round(takers, sharers, sharers_busy, usable_cpus(), paired);
  }
  // A switch's cost past the memory it moves is the new holder waking (the
  // grant to its first launch): the machine's load, not the job's own, and
  // measured noisily, 0.1 to 3 ms among 64 processes. Each job's turn is
  // set by the jobs' median of it, not by its own figure: turns of 20 ms
  // for one job and 40 ms for another, equal on fair's clock, would give
  // the first twice the switches, and the steps each switch costs.
  const uint64_t woken_ns = median_switch_cost(t);
  for (int n = 0; n < t.count; ++n) {
    Job& j = t.jobs[n];
    j.switch_cost_ns = std::max(woken_ns, j.switch_memory_ns);
    j.quantum_ns = rules::quantum_among(j.quantum_ns, adapts[n], takers);
    j.turn_ns = slice_length(policy, j);
  }
}

// Whether the job of `slot` asks for the token now: a thread of it waits
// for the token (Slot::token_waits) or for memory, or it is mid-iteration
// with memory its lane needs (it must run to end that iteration, and asks
// as soon as it launches).
bool asks_for_token(const Arbiter& arbiter, int slot) {
  const Slot& s = arbiter.region()->slots[slot];
  return s.token_waits.load(std::memory_order_relaxed) != 0 || s.admission != shm::kAdmitted ||
         arbiter.holds_unsettled_memory(slot) || arbiter.holds_awaited_lane_space(slot);
}

// The policy's pick among the active jobs of `t`, except that an active
// job holding its lane's ephemeral space while a lane-mate waits for it
// (Arbiter::holds_awaited_lane_space) goes first: only it can end the
// iteration that frees it (the resource order, README "How it works").
// Failing that, while a job other than the holder (`current`) is
// mid-iteration holding memory its lane needs (holds_unsettled_memory),
// only such jobs are picked: the others could not finish an iteration
// beside it. (A holder mid-iteration keeps the token anyway, and hands
// over once it is not, or at its slice's limit.)
int pick_restricted_locked(Policy policy, JobTable& t, int current, const bool* only) {
  bool was_active[kMaxSlots];
  for (int i = 0; i < t.count; ++i) {
    was_active[i] = t.jobs[i].active;
    t.jobs[i].active = only[i];
  }
  int next = pick_next(policy, t.jobs, t.count, current);
  for (int i = 0; i < t.count; ++i) t.jobs[i].active = was_active[i];
  return next;
}

int pick_among_locked(const Arbiter& arbiter, Policy policy, JobTable& t, int current) {
  bool holders[kMaxSlots] = {};
  bool unsettled[kMaxSlots] = {};
  bool any_holder = false, any_unsettled = false;
  for (int i = 0; i < t.count; ++i) {
    if (i == current || !t.jobs[i].active) continue;
    holders[i] = arbiter.holds_awaited_lane_space(t.jobs[i].id);
    unsettled[i] = arbiter.holds_unsettled_memory(t.jobs[i].id);
    any_holder = any_holder || holders[i];
    any_unsettled = any_unsettled || unsettled[i];
  }
  if (any_holder) return pick_restricted_locked(policy, t, current, holders);
  if (any_unsettled) return pick_restricted_locked(policy, t, current, unsettled);
  return pick_next(policy, t.jobs, t.count, current);
}

// pick_among_locked, leaving out the jobs that wait for their lane's space
// while a lane-mate holds it (Arbiter::waits_for_held_lane_locked) unless
// `lane_waiters_too`: a grant would only have them fail and step aside
// again, and the token would pass from one such waiter to the next, tens
// of thousands of times a second, away from the job that is to free the
// space. Only the holder's slice end counts them: there the holder gives
// its space back and hands over (end_slice).
//
// Nor, while another job asks for the token (asks_for_token), a job that
// waits in name only so far: switched out or lending, it has not asked
// again since (it works on the host between launches, or has stopped). A
// grant would sit unused while the others wait; it competes again, in its
// place on the policy's order, as soon as it asks. (fifo keeps its order
// of arrival, and priority its order of priorities: a higher job is
// preferred even between its requests, and lends at its syncs instead.)
int pick_locked(const Arbiter& arbiter, Policy policy, JobTable& t, int current, bool lane_waiters_too = false) {
  bool parked[kMaxSlots] = {};
  if (!lane_waiters_too) {
    for (int i = 0; i < t.count; ++i) {
      if (i == current || !t.jobs[i].active || !arbiter.waits_for_held_lane_locked(t.jobs[i].id)) continue;
      parked[i] = true;
      t.jobs[i].active = false;
    }
  }
  // Nor, while a job whose memory is on the GPU asks for the token, a job
  // whose memory is out and not yet back: holding the token, it would only
  // wait for room (keep_token_for_room: up to a second at each grant) while
  // the job that could run waits too. Its pager brings its memory back
  // ahead of its turn (a prefetch, when it is next in line: not parked
  // there), and then it competes as any resident job. Nor a job whose
  // page-out is under way: granted, it would give the page-out up, and the
  // job that asked for the room would go on waiting. (fifo keeps its
  // order of arrival. Under priority only a resident job of the same
  // priority or higher parks it: a higher job's turn is its room, made by
  // pages out of the job it stopped. Among equal priorities, which share
  // as fair does, a job granted while its page-out was under way gave the
  // page-out up at every grant, and a newcomer waiting for the room it
  // would make waited for the others to end.)
  //
  // For one of its turns at most, where a swap could bring it back: a job
  // away from the GPU that long (since it last held the token, or since it
  // came) competes as any other, and its grant pages it in on demand, room
  // made by paging a resident job out. (Its own turn: 40 times what a switch
  // to it costs, so that the swap its grant forces comes no more often
  // than its turns pay for.) Where no prefetch brings it back
  // (prefetch off, or a swap past the host limit without the copies
  // resident jobs keep) it would otherwise wait for the resident jobs to
  // end: under fair, two jobs of four ran to their end before the others
  // ran at all. Where no resident job's page-out fits the host-memory
  // limit, even with the kept copies freed, a grant would only hold the
  // token while nothing can make its room: it waits for jobs to end.
  // (Nor one whose memory is on its way out or being copied back by a
  // prefetch: that ends by itself, soon, and the copy is the holder's cue
  // to run on.)
  if (!t.ahead && policy != Policy::kFifo) {
    const Region& r = *arbiter.region();
    const uint64_t now = mono_now_ns();
    auto out = [&](int i) {
      const uint32_t residency = r.slots[t.jobs[i].id].residency;
      return residency == shm::kPagedOut || residency == shm::kPagingIn || residency == shm::kPagingOut;
    };
    // Read at the first job out that has been away a turn: most picks
    // (nothing paged out, or no resident job asking) need neither.
    bool weighed = false, swap_fits = false;
    int newcomers = 0;
    auto weigh = [&] {
      weighed = true;
      const shm::HostRoom host = shm::host_room(r, g_host_limit_bytes.load(std::memory_order_relaxed));
      for (int i = 0; i < t.count; ++i) {
        const Slot& s = r.slots[t.jobs[i].id];
        swap_fits = swap_fits || (s.residency == shm::kResident && s.movable_bytes != 0 && host.fits(s, 0));
        if (newcomer_waits(s)) ++newcomers;
      }
    };
    auto away_a_turn = [&](int i) {
      const Slot& s = r.slots[t.jobs[i].id];
      // Out, or waiting for its turn to page in (a demand page-in waits
      // for the token marked paging in); not paging out, nor copying back.
      const bool waits_out = s.residency == shm::kPagedOut || pages_in_on_demand(s);
      const uint64_t since = s.accounted_mono_ns != 0 ? s.accounted_mono_ns : s.arrival_mono_ns;
      if (!waits_out || now <= since || now - since < t.jobs[i].turn_ns) return false;
      if (!weighed) weigh();
      // Room that a newcomer waits for goes to it first: paged out to make
      // it, a job granted back after its turn took it back, and the
      // newcomer waited for the others to end. Only a newcomer's: jobs
      // that have run wait in allocations too (a framework's next step,
      // its cache given back at the switch), and counted, the paged-out
      // ones passed each other over while the resident jobs took turn
      // after turn (on an H200, a job waited 61 s while another ran three
      // turns). As gshare-sim (tools/sim_paging.cpp, passed_over).
      return swap_fits && newcomers <= (newcomer_waits(s) ? 1 : 0);
    };
    bool resident_asks = false;
    int32_t top_resident = INT32_MIN;  // the highest priority of a resident job that asks
    // So does a holder that waits with its token for room (to be admitted,
    // or to page in): granted at the end of that holder's slice, the job
    // paging out for it took the token, paged back in, and the room was
    // gone. Its wait is bounded (keep_token_for_room).
    if (current >= 0) {
      const Slot& h = r.slots[t.jobs[current].id];
      if (h.admission != shm::kAdmitted || pages_in_on_demand(h)) {
        resident_asks = true;
        top_resident = t.jobs[current].priority;
      }
    }
    for (int i = 0; i < t.count; ++i) {
      if (i == current || !t.jobs[i].active || out(i) || !asks_for_token(arbiter, t.jobs[i].id)) continue;
      resident_asks = true;
      top_resident = std::max(top_resident, t.jobs[i].priority);
    }
    for (int i = 0; resident_asks && i < t.count; ++i) {
      if (i == current || !t.jobs[i].active || !out(i) || away_a_turn(i)) continue;
      if (policy == Policy::kPriority && t.jobs[i].priority > top_resident) continue;
      parked[i] = true;
      t.jobs[i].active = false;
    }
  }
  if (policy != Policy::kFifo && policy != Policy::kPriority) {
    bool asks[kMaxSlots] = {};
    bool any_asks = false, any_silent = false;
    for (int i = 0; i < t.count; ++i) {
      if (i == current || !t.jobs[i].active) continue;
      asks[i] = asks_for_token(arbiter, t.jobs[i].id);
      any_asks = any_asks || asks[i];
      any_silent = any_silent || !asks[i];
    }
    for (int i = 0; any_asks && any_silent && i < t.count; ++i) {
      if (i == current || !t.jobs[i].active || asks[i]) continue;
      parked[i] = true;
      t.jobs[i].active = false;
    }
  }
  int next = pick_among_locked(arbiter, policy, t, current);
  for (int i = 0; i < t.count; ++i)
    if (parked[i]) t.jobs[i].active = true;
  return next;
}

// The pick at the end of the holder's slice. Under fair (and pack) a job
// less than a quantum ahead of the holder on the fair clock goes next
// rather than the holder again: a slice ends past its quantum, at the
// holder's next iteration boundary, and where the jobs' clocks started
// less than that overshoot apart, least-vtime alone would give every
// slice twice its length. The clocks stay within two quanta of each other.
int pick_at_slice_end_locked(const Arbiter& arbiter, Policy policy, JobTable& t, int current) {
  int next = pick_locked(arbiter, policy, t, current, true);
  // (prefetch's own rule keeps the clocks within a turn: rules/policy.h.)
  if (next != current || current < 0 || (policy != Policy::kFair && policy != Policy::kPack)) return next;
  // Among the jobs the pick leaves in (not parked: a job whose page-out is
  // under way for the holder, granted here, took the room back).
  Job& holder = t.jobs[current];
  const uint64_t within = holder.vtime_ns + holder.quantum_ns;
  const bool was_active = holder.active;
  holder.active = false;
  const int other = pick_locked(arbiter, policy, t, current, true);
  holder.active = was_active;
  if (other >= 0 && other != current && t.jobs[other].vtime_ns < within) return other;
  return next;
}

// Whether the holder, its turn over, goes on a while rather than hand
// over to `next`: `next`'s prefetch is copying its memory back, and a
// grant now would have it wait for the rest of the copy holding the token
// while the GPU idles. For one more turn's length at most: a copy of what
// fits on a GPU ends in seconds. The copy's end wakes the waiters
// (allocator/pager.cpp).
bool holder_goes_on_for_copy(const Region& r, const JobTable& t, int current, int next, uint64_t now) {
  if (current < 0 || next < 0 || next == current) return false;
  const Slot& n = r.slots[t.jobs[next].id];
  if (n.residency != shm::kPagingIn || !n.prefetch_copying) return false;
  const shm::Token& token = r.header.tokens[token_index(r, t.jobs[current].id)];
  if (token.slice_end_mono_ns == kForever || token.slice_end_mono_ns < token.slice_start_mono_ns) return false;
  return now < token.slice_end_mono_ns || now - token.slice_end_mono_ns < token.slice_end_mono_ns - token.slice_start_mono_ns;
}

// The slot holding token `k`, or -1. A holder whose slot was freed or
// reused since the grant holds nothing.
int holder_slot_locked(const Arbiter& arbiter, int k) {
  shm::Token& token = arbiter.region()->header.tokens[k];
  if (token.holder == 0 || token.holder > kMaxSlots) return -1;
  int slot = int(token.holder) - 1;
  const Slot& s = arbiter.region()->slots[slot];
  if (s.state != shm::kSlotLive || s.generation != token.holder_generation) {
    shm::forget_gone_holder_locked(token);
    return -1;
  }
  return slot;
}

// Adds [from, to) of token time to the per-second share buckets.
void add_share(Slot& s, uint64_t from, uint64_t to) {
  while (from < to) {
    uint64_t second = from / 1'000'000'000;
    uint64_t end = std::min(to, (second + 1) * 1'000'000'000);
    int bucket = int(second % shm::kShareSeconds);
    if (s.share_second[bucket] != uint32_t(second)) {
      s.share_second[bucket] = uint32_t(second);
      s.share_us[bucket] = 0;
    }
    s.share_us[bucket] += uint32_t((end - from) / 1000);
    from = end;
  }
}

// Raises the GPU's vtime floor to the least vtime of the active jobs
// (rules::activate), from `table` when given, else from the slots.
void raise_vtime_floor_locked(Arbiter& arbiter, int k, const JobTable* table) {
  RegionHeader& h = arbiter.region()->header;
  if (!keeps_vtime_floor(region_policy(h))) return;
  uint64_t least = rules::kForever;
  if (table) {
    least = least_active_vtime(table->jobs, table->count);
  } else {
    const Region& r = *arbiter.region();
    for (uint32_t i = 0; i < kMaxSlots; ++i) {
      const Slot& s = r.slots[i];
      if (s.state != shm::kSlotLive || token_index(r, int(i)) != k) continue;
      if (wants_token(s)) least = std::min(least, s.vtime_ns);
    }
  }
  if (least != rules::kForever && least > h.vtime_floor_ns) h.vtime_floor_ns = least;
}

// Time the holder of token `k` (`slot`) ran while no other job asked for
// the token took nothing from anyone: on fair's clock its lead over the
// jobs that wait in name only (switched out and working on the host, or
// waiting for a start) grows to one quantum at most. Carried whole, such a
// lead (a last warm-up step run alone while 63 jobs waited for their start)
// would cost it its turns until all of them caught up: seconds among many
// jobs. `vtime` is its clock charged, `before` what it was.
void cap_unopposed_lead_locked(const Arbiter& arbiter, int k, int slot, uint64_t before, uint64_t* vtime) {
  const Region& r = *arbiter.region();
  if (!keeps_vtime_floor(region_policy(r.header))) return;
  uint64_t least = rules::kForever;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (int(i) == slot || s.state != shm::kSlotLive || token_index(r, int(i)) != k || !wants_token(s)) continue;
    if (asks_for_token(arbiter, int(i))) return;  // someone waited for this time
    least = std::min(least, s.vtime_ns);
  }
  if (least == rules::kForever) return;  // alone: the floor follows it
  const uint64_t cap = least + r.slots[slot].quantum_ns;
  if (*vtime > cap) *vtime = std::max(before, cap);
}

// Whether the job of `slot`, holding token `k` or beside its holder, runs
// in a pair's turn: it and the other job share as ones of a pair
// (shares_as_pair). Two busy jobs in one turn share the GPU's time, about
// half each, so each is charged half the turn: charged in full, a pair of
// jobs that keep the GPU full made about 0.6 of the steps of jobs in turns
// of their own on an H200 (Jain 0.956). A host-bound job in a turn is
// charged in full, as in any shared turn.
bool in_pair_turn_locked(const Arbiter& arbiter, int k, int slot) {
  const Region& r = *arbiter.region();
  const Slot& s = r.slots[slot];
  if (!shares_as_pair(s)) return false;
  const int holder = holder_slot_locked(arbiter, k);
  if (holder < 0) return false;
  if (s.beside) return holder != slot && shares_as_pair(r.slots[holder]);
  if (holder != slot) return false;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& o = r.slots[i];
    if (o.beside && o.state == shm::kSlotLive && int(i) != slot && token_index(r, int(i)) == k && shares_as_pair(o))
      return true;
  }
  return false;
}

// Charges the job of `slot`, which holds token `k` or runs beside its
// holder, for its token time up to `now` (half of it in a pair's turn),
// and raises the vtime floor. The holder is charged before a job joins or
// leaves its turn, so that each stretch is charged as it was shared.
void charge_locked(Arbiter& arbiter, int k, int slot, JobTable* table, uint64_t now) {
  Slot& s = arbiter.region()->slots[slot];
  if (now <= s.accounted_mono_ns) return;
  // Granted while its memory was out, it waits for room and copies: no
  // turn of its own yet (restart_turn starts it), and no GPU time used.
  if (s.residency == shm::kPagingIn) {
    s.accounted_mono_ns = now;
    return;
  }
  Job job;
  job.weight = s.weight ? s.weight : 1;
  job.served_ns = s.served_ns;
  job.vtime_ns = s.vtime_ns;
  const uint64_t ran = now - s.accounted_mono_ns;
  charge(job, in_pair_turn_locked(arbiter, k, slot) ? ran / 2 : ran);
  cap_unopposed_lead_locked(arbiter, k, slot, s.vtime_ns, &job.vtime_ns);
  add_share(s, s.accounted_mono_ns, now);
  s.served_ns = job.served_ns;
  s.vtime_ns = job.vtime_ns;
  s.accounted_mono_ns = now;
  if (table) {
    if (Job* j = table->of_slot(slot)) {
      j->served_ns = s.served_ns;
      j->vtime_ns = s.vtime_ns;
      j->remaining_ns = remaining_ns(s);
    }
  }
  raise_vtime_floor_locked(arbiter, k, table);
}

// Charges the holder of token `k` for its token time up to `now`.
void account_locked(Arbiter& arbiter, int k, JobTable* table, uint64_t now) {
  const int slot = holder_slot_locked(arbiter, k);
  if (slot >= 0) charge_locked(arbiter, k, slot, table, now);
}

// Charges the jobs beside the holder of token `k` up to `now`, while it
// still holds: a grant to another must not charge their time as shared
// with the new holder (a pair's is charged by halves).
void account_beside_locked(Arbiter& arbiter, int k, JobTable* table, uint64_t now) {
  const Region& r = *arbiter.region();
  for (uint32_t i = 0; i < kMaxSlots; ++i)
    if (r.slots[i].beside && r.slots[i].state == shm::kSlotLive && token_index(r, int(i)) == k)
      charge_locked(arbiter, k, int(i), table, now);
}

// The job of `s` starts launching at `now`, granted the token or beside
// its holder: its wait for the token ends, and its token time counts from
// now.
void start_running_locked(Slot& s, uint64_t now) {
  if (s.wait_since_mono_ns != 0 && now > s.wait_since_mono_ns) s.wait_ns += now - s.wait_since_mono_ns;
  s.wait_since_mono_ns = 0;
  s.job_state = shm::kJobRunning;
  s.accounted_mono_ns = now;
}

// The job of `s` stops launching at `now`: its gate closes and it becomes
// `after`; one left waiting waits from now.
void stop_running_locked(Slot& s, shm::JobState after, uint64_t now) {
  s.gate.store(shm::kGateClosed, std::memory_order_release);
  s.job_state = after;
  if (after == shm::kJobWaiting) s.wait_since_mono_ns = now;
}

// --- Shared turns: runs beside the holder ---

// The job of `slot` runs beside the job of `holder` from `now`: its gate
// opens, and it is charged for its token time as the holder is. Both count
// a shared run (Slot::shared_runs).
void begin_beside_locked(Region& r, int slot, int holder, uint64_t now) {
  Slot& s = r.slots[slot];
  start_running_locked(s, now);
  s.shared_runs.fetch_add(1, std::memory_order_relaxed);
  r.slots[holder].shared_runs.fetch_add(1, std::memory_order_relaxed);
  s.beside = 1;
  s.switched_in_mono_ns = 0;  // no switch of the token: nothing to measure
  s.gate.store(shm::kGateOpen, std::memory_order_release);
  shm::wake_waiters_with(r.header, shm::waiter_bit(slot));
}

// The job of `slot` stops running beside the holder: charged up to `now`,
// its gate closed mid-step if it must be (its memory is its own lane's), it
// becomes `after`.
void end_beside_locked(Arbiter& arbiter, int k, int slot, shm::JobState after, uint64_t now) {
  Slot& s = arbiter.region()->slots[slot];
  const int holder = holder_slot_locked(arbiter, k);
  if (holder >= 0 && holder != slot) charge_locked(arbiter, k, holder, nullptr, now);
  charge_locked(arbiter, k, slot, nullptr, now);
  s.beside = 0;
  stop_running_locked(s, after, now);
}

// Ends every run beside the holder of token `k` that no longer holds: the
// holder does not share its turn (the token went to a job that keeps the
// GPU busy), or the job itself no longer may. A job granted the token is
// no longer beside anyone. With no holder, jobs beside stay.
void settle_beside_locked(Arbiter& arbiter, int k, uint64_t now) {
  Region& r = *arbiter.region();
  if (!any_beside_locked(r, k)) return;  // the usual case: nothing to settle
  const TurnSharing sharing(r, k);
  const int holder = holder_slot_locked(arbiter, k);
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = r.slots[i];
    if (!s.beside) continue;
    if (s.state != shm::kSlotLive || int(i) == holder) {
      s.beside = 0;
      continue;
    }
    if (token_index(r, int(i)) != k) continue;
    if (holder >= 0 ? !sharing.together(holder, int(i)) : !sharing.allows(int(i)))
      end_beside_locked(arbiter, k, int(i), shm::kJobWaiting, now);
  }
}

// Ends every run beside a holder of token `k`: a new turn begins.
void end_all_beside_locked(Arbiter& arbiter, int k, uint64_t now) {
  Region& r = *arbiter.region();
  if (!any_beside_locked(r, k)) return;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = r.slots[i];
    if (!s.beside || token_index(r, int(i)) != k) continue;
    if (s.state != shm::kSlotLive)
      s.beside = 0;
    else
      end_beside_locked(arbiter, k, int(i), shm::kJobWaiting, now);
  }
}

// Wakes the waiters of token `k` that have a seat in the turn of its
// holder, the job of `holder`: each joins it at its own decision
// (join_turn_locked).
void wake_sharers_locked(Region& r, int k, int holder) {
  const uint32_t bits = TurnSharing(r, k).seat(holder, -1, nullptr);
  if (bits) shm::wake_waiters_with(r.header, bits);
}

// The asker (this process's job) joins the turn of token `k`'s holder, if
// both share turns: it runs beside the holder from now. Returns whether it
// did.
bool join_turn_locked(Arbiter& arbiter, int k, uint64_t now) {
  Region& r = *arbiter.region();
  const int own = arbiter.own_slot();
  const Slot& me = r.slots[own];
  if (!wants_shared_turn(me) || me.beside || (me.gate.load(std::memory_order_relaxed) & shm::kGateOpen)) return false;
  const int holder = holder_slot_locked(arbiter, k);
  if (holder < 0 || holder == own || !(r.slots[holder].gate.load(std::memory_order_relaxed) & shm::kGateOpen))
    return false;
  bool seated = false;
  TurnSharing(r, k).seat(holder, own, &seated);
  if (!seated) return false;
  charge_locked(arbiter, k, holder, nullptr, now);
  begin_beside_locked(r, own, holder, now);
  GSHARE_DEBUG("token %d: runs beside pid %d in its turn", k, int(r.slots[holder].pid));
  return true;
}

// The holder of token `k` handed over at its slice's end to a job that
// shares its turn, as it does itself: it goes on beside the new holder
// rather than wait to join it at its next launch.
void stay_beside_locked(Arbiter& arbiter, int k, int old, uint64_t now) {
  Region& r = *arbiter.region();
  const int holder = holder_slot_locked(arbiter, k);
  if (old < 0 || holder < 0 || holder == old || !wants_shared_turn(r.slots[old])) return;
  bool seated = false;
  TurnSharing(r, k).seat(holder, old, &seated);
  if (!seated) return;
  charge_locked(arbiter, k, holder, nullptr, now);
  begin_beside_locked(r, old, holder, now);
}

// A turn is as long as the holder's switch cost says now (`turn`), not
// only at its grant: a cost measured in this very turn (its memory
// allocated anew) lengthens a slice that has not yet run that long.
// Returns whether it did. A slice without end stays so.
bool lengthen_slice_locked(shm::Token& token, uint64_t turn, uint64_t now) {
  if (turn == rules::kForever || token.slice_end_mono_ns == UINT64_MAX) return false;
  const uint64_t end = token.slice_start_mono_ns + turn;
  if (end <= now || end <= token.slice_end_mono_ns) return false;
  token.slice_end_mono_ns = end;
  return true;
}

// The slot that may take token `k` back at its next launch, or -1: no
// loan. A loan older than the lender's idle time is over (the lender
// competes as usual when it comes back).
int loan_lender_locked(const Region& r, int k, uint64_t now) {
  const int lender = shm::lender_of_locked(r, k);
  return lender >= 0 && now - r.header.tokens[k].lent_mono_ns < idle_time_of(r.slots[lender]) ? lender : -1;
}

// The holder's gate: open; bounded under priority while a higher job
// exists; and, while the switch that made it the holder waits for its
// first launch, marked so that launch takes the slow path and is measured.
// (A borrower is not bounded: on a GPU a step is many short kernels, and
// one in flight at a time would leave the GPU waiting on the borrower's
// host between them. The lender taking the token back starts beside the
// borrower's queued tail, as any job does under overlap.)
uint32_t open_gate_for(Policy policy, const JobTable& t, const Job& job, const Slot& s) {
  uint32_t gate = shm::kGateOpen;
  if (bounds_in_flight(policy, job, t.jobs, t.count)) gate |= shm::kGateBounded;
  if (s.switched_in_mono_ns != 0) gate |= shm::kGateFirstLaunch;
  return gate;
}


// What a grant of token `k` to `slot` wakes: that job and the token's
// watcher (TokenWatcher), or every waiter if none watches. A watcher
// granted the token names its successor as it stops waiting.
void wake_for_grant_locked(Region& r, int k, int slot) {
  const uint32_t watcher = r.header.token_watcher.load(std::memory_order_relaxed);
  if (k == 0 && watcher != 0 && watcher <= kMaxSlots)
    shm::wake_waiters_with(r.header, shm::waiter_bit(slot) | shm::waiter_bit(int(watcher) - 1));
  else
    shm::wake_waiters(r.header);
}

// Gives token `k` to the job at `index`; the holder, if any, becomes
// `old_holder_state`.
void grant_locked(Arbiter& arbiter, int k, JobTable& t, int index, shm::JobState old_holder_state,
                  uint64_t now) {
  Region& r = *arbiter.region();
  RegionHeader& h = r.header;
  Policy policy = region_policy(h);
  int old = holder_slot_locked(arbiter, k);
  if (old >= 0) {
    account_locked(arbiter, k, &t, now);
    account_beside_locked(arbiter, k, &t, now);
    Slot& o = r.slots[old];
    stop_running_locked(o, old_holder_state, now);
    if (old != t.jobs[index].id) o.switched_in_mono_ns = 0;  // never launched in its turn: nothing to record
  }
  Job& job = t.jobs[index];
  Slot& s = r.slots[job.id];
  if (s.beside) {
    // It ran beside the holder until now: charged for that first.
    charge_locked(arbiter, k, job.id, &t, now);
    s.beside = 0;
  }
  start_running_locked(s, now);
  s.granted++;
  // A job found idle that takes its token back before any other job held
  // it goes on with the slice it had: no new turn, no switch. A slice that
  // ended meanwhile ends now, so that the job hands over at its next
  // boundary and its slice's limit (GSHARE_SLICE_MAX_MS) counts from here:
  // the time it sat idle was not spent looking for a boundary.
  const bool resumes = old < 0 && s.idle_slice_end_mono_ns != 0 && s.idle_at_handovers == h.handovers;
  const uint64_t turn = slice_length(policy, job);
  shm::give_token_locked(r, k, job.id, now, turn);
  if (resumes) {
    h.tokens[k].slice_start_mono_ns = s.idle_slice_start_mono_ns;
    h.tokens[k].slice_end_mono_ns = std::max(s.idle_slice_end_mono_ns, now);
    GSHARE_DEBUG("token %d: back to pid %d, its slice resumed", k, int(s.pid));
  } else {
    GSHARE_DEBUG("token %d: to pid %d from pid %d, a turn of %.0f ms", k, int(s.pid),
                 old >= 0 ? int(r.slots[old].pid) : 0, turn == kForever ? -1.0 : double(turn) / 1e6);
  }
  s.idle_slice_end_mono_ns = 0;
  if (old != job.id && !resumes) {
    // A switch (token.h): its cost runs from now, or from when the last
    // holder began to hand over (giving its cache back first), to the new
    // holder's first launch, which the gate's kGateFirstLaunch sends to
    // note_first_launch.
    h.handovers++;
    uint64_t began = old >= 0 ? r.slots[old].handover_began_mono_ns : 0;
    s.switched_in_mono_ns = began != 0 && began <= now ? began : now;
  }
  s.gate.store(open_gate_for(policy, t, job, s), std::memory_order_release);
  wake_for_grant_locked(r, k, job.id);
  // A new holder's turn starts with nobody beside it: its seats go to the
  // jobs that ask, least fair time first (TurnSharing::seat), not to those
  // that sat beside the last holder. Kept from turn to turn, they ran on
  // while the others had only their own turns (on an H200, among 16
  // host-bound jobs the slowest made 0.09 of the fastest's steps). A job
  // that resumes its own turn keeps them, as far as they may stay.
  if (old != job.id)
    end_all_beside_locked(arbiter, k, now);
  else
    settle_beside_locked(arbiter, k, now);
  if (wants_shared_turn(s)) wake_sharers_locked(r, k, job.id);
}

// Whom a waiter found idle: the holder it watched, as of which grant. The
// verdict is about that grant only: by the time the waiter has the lock the
// token may have moved, and the new holder must not pay for the old one.
struct IdleVerdict {
  int slot = -1;  // -1: nobody found idle
  uint64_t granted = 0;
  bool on_host = false;  // idle only on the GPU, briefly: lend, do not take
};

// Whether a holder's token is lent while it works on the host: not under
// priority, whose holder lends at its syncs to lower priorities only
// (lend_while_idle), and not while paging is active (a loan would page a
// job in for a few milliseconds).
bool lends(const Region& r) { return region_policy(r.header) != Policy::kPriority && page_in_rate(r) == 0; }

// The holder found working on the host (`verdict`) lends token `k` to the
// job the policy picks among the others, if any: the borrower runs until
// the lender launches again (take_back_locked).
void lend_locked(Arbiter& arbiter, int k, JobTable& t, int holder, uint64_t now) {
  Region& r = *arbiter.region();
  Job* lender = t.of_slot(holder);
  if (!lender) return;
  lender->active = false;
  const int next = pick_locked(arbiter, region_policy(r.header), t, -1);
  lender->active = true;
  if (next < 0) return;
  GSHARE_DEBUG("token %d: pid %d lends it while it works on the host", k, int(r.slots[holder].pid));
  shm::note_loan_locked(r, k, holder, now);
  grant_locked(arbiter, k, t, next, shm::kJobWaiting, now);
}

// The lender of token `k`, asking for it as it launches again, takes it
// back from the borrower, with its own slice moved on by the loan's
// length: a turn counts only the time its job held the token, so that a
// job working on the host between short steps runs several steps a turn
// instead of waiting a turn for each. A loan older than the lender's idle
// time is over: the lender competes as usual.
bool take_back_locked(Arbiter& arbiter, int k, JobTable& t, uint64_t now) {
  Region& r = *arbiter.region();
  const int own = arbiter.own_slot();
  if (loan_lender_locked(r, k, now) != own || holder_slot_locked(arbiter, k) == own || t.index(own) < 0)
    return false;
  grant_locked(arbiter, k, t, t.index(own), shm::kJobWaiting, now);
  shm::resume_lender_slice_locked(r.header.tokens[k], now);
  return true;
}

// The one place a token moves on a waiter's initiative.
void decide_locked(Arbiter& arbiter, int k, uint64_t now, IdleVerdict idle) {
  JobTable t;
  Region& r = *arbiter.region();
  RegionHeader& h = r.header;
  shm::Token& token = h.tokens[k];
  Policy policy = region_policy(h);
  gather_locked(arbiter, k, t);
  account_locked(arbiter, k, &t, now);
  if (take_back_locked(arbiter, k, t, now)) return;
  settle_beside_locked(arbiter, k, now);
  if (join_turn_locked(arbiter, k, now)) return;
  int holder = holder_slot_locked(arbiter, k);
  if (holder >= 0 && t.index(holder) < 0) holder = -1;  // dead, or moved to another lane
  bool holder_idle = holder >= 0 && holder == idle.slot && r.slots[holder].granted == idle.granted;
  if (holder_idle && idle.on_host) {
    // A turn shared by several jobs is not lent: the others fill the
    // holder's host work, and a loan would end their runs beside it.
    if (!any_beside_locked(r, k)) lend_locked(arbiter, k, t, holder, now);
    return;
  }
  if (holder_idle) {
    t.of_slot(holder)->active = false;
    // Kept, should the job take the token back before any other does: a
    // job that idles mid-step while the others wait for what it holds (its
    // lane's memory) would otherwise start a new turn at each step and
    // never reach the end of one, where it hands over.
    Slot& idle_holder = r.slots[holder];
    idle_holder.idle_slice_start_mono_ns = token.slice_start_mono_ns;
    idle_holder.idle_slice_end_mono_ns = token.slice_end_mono_ns;
    idle_holder.idle_at_handovers = h.handovers;
    shm::take_token_locked(r, k, holder, shm::kJobIdle, now);
    holder = -1;
  }
  if (holder < 0) {
    int next = pick_locked(arbiter, policy, t, -1);
    if (next >= 0) grant_locked(arbiter, k, t, next, shm::kJobIdle, now);
    return;
  }
  int current = t.index(holder);
  int best = pick_locked(arbiter, policy, t, current);
  if (best != current && preempts_now(policy, t.jobs[current], t.jobs[best])) {
    grant_locked(arbiter, k, t, best, shm::kJobWaiting, now);
    return;
  }
  Slot& s = r.slots[holder];
  uint32_t gate = s.gate.load(std::memory_order_relaxed);
  if (now >= token.slice_end_mono_ns)
    lengthen_slice_locked(token, slice_length(policy, t.jobs[current]), now);
  if (now >= token.slice_end_mono_ns && (gate & shm::kGateOpen) && !(gate & shm::kGateYield)) {
    best = pick_at_slice_end_locked(arbiter, policy, t, current);
    // Going on for the next job's copy, its slice is not renewed: the
    // waiters look again when the copy ends.
    const bool for_copy = holder_goes_on_for_copy(r, t, current, best, now);
    // A holder inside a sync that ends an iteration has all its work
    // queued: under overlap the next job starts now, beside its tail.
    bool at_boundary = s.boundary_waits.load(std::memory_order_relaxed) != 0 &&
                       s.handover_mode == shm::kHandoverOverlap;
    if (best != current && !for_copy && at_boundary && !arbiter.holds_unsettled_memory(holder)) {
      grant_locked(arbiter, k, t, best, shm::kJobWaiting, now);
      stay_beside_locked(arbiter, k, holder, now);
      return;
    }
    if (for_copy) {
    } else if (best != current) {
      gate |= shm::kGateYield;
    } else {
      shm::renew_slice_locked(token, now, slice_length(policy, t.jobs[current]));
    }
  }
  // A higher-priority job may have come or gone since the grant. The other
  // bits stay: kGateFirstLaunch only its owner clears, under this lock.
  if (gate & shm::kGateOpen)
    gate = (gate & ~uint32_t(shm::kGateBounded)) |
           (open_gate_for(policy, t, t.jobs[current], s) & shm::kGateBounded);
  s.gate.store(gate, std::memory_order_release);
}

// What taking the token from an idle holder would cost this waiter (`me`)
// past the grant, under paging: its memory is out, and a swap (its memory
// back, room made by paging another job out) comes before its first
// kernel. A holder that stands still a moment on the host (a first step's
// set-up, an evaluation) would otherwise lose the token after 100 ms to a
// job that then stalls the GPU for seconds, and take it back the same
// way: in one H200 run jobs in their first steps swapped four times in
// 7 s. Waiting as long as the swap would take, a waiter loses at most
// that much when the holder has truly stopped. 0 when its memory is on
// the GPU; a turn's longest at most.
uint64_t takeover_swap_ns(const Region& r, const Slot& me) {
  if (me.residency == shm::kResident) return 0;
  const double rate = page_in_rate(r);
  return rate > 0 ? std::min(swap_ns_of(me, rate), tunables::kMaxTurnNs) : 0;
}

// What a waiter knows about the holder's activity: its launch count, and
// since when it has stood still. A new grant restarts the clock, even to
// the same job with the same count: a job granted the token again must get
// its idle time from now, not from before it last lost the token.
struct HolderWatch {
  int slot = -1;
  uint32_t generation = 0;
  uint64_t granted = 0;
  uint64_t launches = 0;
  uint64_t still_since = 0;
  bool asked_for_cache = false;  // during this stillness
  bool lend_asked = false;       // during this stillness

  // Whether the holder has been idle for its idle time; `left` gets how long
  // until it would be. A holder in the middle of an iteration (`mid`:
  // Arbiter::holds_unsettled_memory) gets kMidIterationIdleNs at least: a
  // first iteration's host gaps (lazy module loading, library set-up) are
  // long, and the next job could not finish beside its memory. What it
  // holds may be only cache, though (a pool's free memory, a framework's):
  // `ask_for_cache` is set once it has stood still for its usual idle time,
  // and the caller asks for that cache back; then it is idle as usual.
  // `patience_ns`: what taking the token costs the waiter beyond a grant
  // (its memory to bring back); the holder must stand still that long too.
  bool idle(int holder, const Slot& s, uint64_t now, uint64_t* left, bool mid, bool* ask_for_cache,
            uint64_t patience_ns) {
    uint64_t launched = s.launches.load(std::memory_order_relaxed);
    bool busy = s.gpu_waits.load(std::memory_order_relaxed) != 0;
    if (holder != slot || s.generation != generation || s.granted != granted ||
        launched != launches || busy) {
      slot = holder;
      generation = s.generation;
      granted = s.granted;
      launches = launched;
      still_since = now;
      asked_for_cache = false;
      lend_asked = false;
    }
    uint64_t usual_ns = idle_time_of(s);
    uint64_t idle_ns = std::max(mid ? std::max(usual_ns, kMidIterationIdleNs) : usual_ns, patience_ns);
    uint64_t still = now - still_since;
    *ask_for_cache = mid && !busy && still >= usual_ns && !asked_for_cache;
    if (*ask_for_cache) asked_for_cache = true;
    *left = still >= idle_ns ? 0 : idle_ns - still;
    if (mid && !asked_for_cache && still < usual_ns) *left = usual_ns - still;
    return !busy && still >= idle_ns;
  }

  // After idle(): whether the holder works on the host, its GPU idle: it
  // has stood still for kLendAfterNs, outside any sync, with nothing it
  // launched still queued (its last host sync came after its last
  // launch). `left` gets how long until it could have: a holder busy on
  // the GPU now may be on the host a few milliseconds later, and the
  // watcher looks again then, not at the slice's end (a job that runs a
  // 3 ms step and works 30 ms on the host would hold the token through its
  // host work, its turn over before the watcher looked). Never a holder
  // with memory its lane needs (`unsettled`: Arbiter::holds_unsettled_memory;
  // a lane-mate could not run its iteration beside it), nor one whose
  // handovers are strict: taking the token back, it would find the
  // borrower's last kernel still running.
  bool on_host(const Slot& s, uint64_t now, bool unsettled, uint64_t* left) {
    *left = kMaxSleepNs;
    if (lend_asked || unsettled || s.handover_mode != shm::kHandoverOverlap) return false;
    *left = kLendAfterNs;
    // Inside a sync, not yet awake from its wait for the grant (a loaded
    // machine takes milliseconds to wake a job), or waiting in an
    // allocation for memory (with its token, for page-outs or caches it
    // asked for): not on the host.
    if (s.gpu_waits.load(std::memory_order_relaxed) != 0 || s.token_waits.load(std::memory_order_relaxed) != 0 ||
        s.admission != shm::kAdmitted)
      return false;
    // Nor one that has not launched since the switch that made it the
    // holder: it is waking, or took the token only to try an allocation
    // again (a lane's space held by a lane-mate). Two such jobs lent the
    // token to each other thousands of times a second, each taking it
    // only to fail and step aside, while the lane-mate that held the
    // space waited for a turn.
    if (s.switched_in_mono_ns != 0) return false;
    if (s.launches_at_sync.load(std::memory_order_relaxed) != launches) return false;
    const uint64_t still = now - still_since;
    if (still < kLendAfterNs) {
      *left = kLendAfterNs - still;
      return false;
    }
    lend_asked = true;  // once a stillness: with nobody to lend to, asking again changes nothing
    return true;
  }
};

// The one waiter that watches token 0's holder (RegionHeader::token_watcher)
// for as long as it waits: for its slice's end, for a holder gone idle,
// and for one working on the host (a loan). The other waiters of token 0
// leave the slice's end and loans to it: they sleep until a grant to them,
// a wider change (shm::wake_waiters), or the holder would count as idle,
// each at its own pace. Among 64 jobs each waiting alike,
// 63 woke at every slice's end and again at every grant, and the new
// holder waited for a CPU behind them: a switch took 1 ms over the fake
// driver on 2 cores, 0.14 ms among 8 jobs. A waiter whose memory is out
// (paging) does not watch: it is patient with an idle holder for its own
// swap's length. A watcher that is gone, or no longer waits, is replaced
// by the next waiter that looks; one that stops waiting wakes a successor.
// Lanes' tokens (pack) have no watcher: all their waiters look.
class TokenWatcher {
 public:
  enum Role { kWatching, kRelieved, kUnwatched };

  TokenWatcher(Arbiter& arbiter, int own) : arbiter_(arbiter), r_(*arbiter.region()), me_(uint32_t(own) + 1) {}
  ~TokenWatcher() { step_down(); }
  TokenWatcher(const TokenWatcher&) = delete;
  TokenWatcher& operator=(const TokenWatcher&) = delete;

  // This waiter's part now, waiting for token `k`; `eligible`: its memory
  // is on the GPU.
  Role role(int k, bool eligible) {
    if (k != 0) return kUnwatched;
    uint32_t watcher = r_.header.token_watcher.load(std::memory_order_relaxed);
    if (watcher == me_) {
      if (eligible) return kWatching;
      step_down();
      return kUnwatched;
    }
    if (watcher != 0 && watcher <= kMaxSlots) {
      const int slot = int(watcher) - 1;
      const Slot& s = r_.slots[slot];
      if (s.token_waits.load(std::memory_order_relaxed) != 0 && token_index(r_, slot) == 0 &&
          arbiter_.slot_is_live(slot))
        return kRelieved;
    }
    if (!eligible) return kUnwatched;
    return r_.header.token_watcher.compare_exchange_strong(watcher, me_, std::memory_order_relaxed) ? kWatching
                                                                                                     : kUnwatched;
  }

 private:
  // Leaves the role, if this waiter has it, and wakes one waiter of token
  // 0 whose memory is on the GPU to take it (all, if none is).
  void step_down() {
    uint32_t me = me_;
    if (!r_.header.token_watcher.compare_exchange_strong(me, 0, std::memory_order_relaxed)) return;
    for (uint32_t i = 0; i < kMaxSlots; ++i) {
      const Slot& s = r_.slots[i];
      if (i + 1 == me_ || s.state != shm::kSlotLive || s.token_waits.load(std::memory_order_relaxed) == 0 ||
          s.residency != shm::kResident || token_index(r_, int(i)) != 0)
        continue;
      shm::wake_waiters_with(r_.header, shm::waiter_bit(int(i)));
      return;
    }
    shm::wake_waiters(r_.header);
  }

  Arbiter& arbiter_;
  Region& r_;
  uint32_t me_;
};

// The holder's slot as the token names it; a racy read, only a hint: what
// counts is decided under the lock.
int holder_hint(const shm::Token& token) {
  uint32_t field = token.holder;
  return field >= 1 && field <= kMaxSlots ? int(field) - 1 : -1;
}

// The holder's slice is over and nobody has asked it to yield yet. A
// holder that is draining (gate closed) or already asked needs no second
// decision.
bool slice_end_unasked(const shm::Token& token, const Slot& holder, uint64_t now) {
  uint32_t gate = holder.gate.load(std::memory_order_relaxed);
  return now >= token.slice_end_mono_ns && (gate & shm::kGateOpen) && !(gate & shm::kGateYield);
}

}  // namespace

bool slice_past_limit(const shm::Token& token, const Slot& holder, uint64_t now) {
  return token.slice_end_mono_ns != kForever && now >= token.slice_end_mono_ns &&
         now - token.slice_end_mono_ns >= holder.slice_max_ns;
}

namespace {

// The job wants the token: it becomes active (waiting) if it was idle.
void mark_waiting_locked(Arbiter& arbiter, uint64_t now) {
  Region& r = *arbiter.region();
  Slot& me = r.slots[arbiter.own_slot()];
  if (me.job_state != shm::kJobIdle) return;
  JobTable t;
  const int k = token_index(r, arbiter.own_slot());
  // The holder's clock first: one that kept the token while nobody asked
  // (the others asleep at a start barrier) may be charged for up to an
  // upkeep tick of that (account_token_time leaves its idle time out only
  // from the tick after), and the job coming back is placed against the clock
  // as it stands after that charge, not before: among 64 jobs a holder
  // 250 ms ahead waits six rounds of turns for its first.
  account_locked(arbiter, k, nullptr, now);
  gather_locked(arbiter, k, t);
  int index = t.index(arbiter.own_slot());
  if (index >= 0) {
    const Policy policy = region_policy(r.header);
    activate(policy, t.jobs, t.count, index, keeps_vtime_floor(policy) ? r.header.vtime_floor_ns : 0);
    me.vtime_ns = t.jobs[index].vtime_ns;
  }
  me.job_state = shm::kJobWaiting;
  me.wait_since_mono_ns = now;
}

}  // namespace

JobSettings job_settings(const Options& o) {
  JobSettings s;
  s.policy = o.policy;
  s.policy_given = o.policy_given;
  s.quantum_ns = ms_to_ns(o.quantum_ms);
  s.quantum_adapts = !o.quantum_given;
  s.idle_ns = ms_to_ns(o.idle_ms);
  s.slice_max_ns = ms_to_ns(o.slice_max_ms);
  s.expected_ns = uint64_t(o.expected_seconds * 1e9);
  s.expected_iters = o.expected_iters;
  s.weight = o.weight;
  s.priority = o.priority;
  s.strict_handover = o.strict_handover;
  s.shared_turns = o.shared_turns;
  s.host_limit_bytes = shm::host_limit_or_default(o.host_mem_limit_bytes);
  return s;
}

void join_token(Arbiter& arbiter, const JobSettings& settings, const char* gpu_uuid) {
  g_host_limit_bytes.store(settings.host_limit_bytes, std::memory_order_relaxed);
  Policy asked = settings.policy, running = asked;
  bool differs = false;
  arbiter.update([&] {
    Region& r = *arbiter.region();
    Slot& s = r.slots[arbiter.own_slot()];
    s.weight = settings.weight;
    s.priority = settings.priority;
    s.handover_mode = settings.strict_handover ? shm::kHandoverStrict : shm::kHandoverOverlap;
    s.shares_turns = settings.shared_turns == SharedTurns::kPairs       ? shm::kSharesInPairs
                     : settings.shared_turns == SharedTurns::kGaps      ? shm::kSharesWhereGaps
                     : settings.shared_turns == SharedTurns::kHostBound ? shm::kSharesHostBound
                                                                        : shm::kSharesNone;
    s.quantum_ns = settings.quantum_ns;
    s.quantum_adapts = settings.quantum_adapts ? 1 : 0;
    s.idle_ns = settings.idle_ns;
    s.slice_max_ns = settings.slice_max_ns;
    s.expected_ns = settings.expected_ns;
    s.expected_iters = settings.expected_iters;
    s.arrival_mono_ns = mono_now_ns();
    s.job_state = shm::kJobIdle;
    bool alone = true;
    for (uint32_t i = 0; i < kMaxSlots && alone; ++i)
      if (int(i) != arbiter.own_slot() && arbiter.slot_is_live(int(i))) alone = false;
    // The policy belongs to the GPU: the first process sets it, and a region
    // left behind by earlier processes does not bind a new first one.
    if (alone || !policy_is_known(r.header.policy)) r.header.policy = uint32_t(asked);
    running = Policy(r.header.policy);
    differs = running != asked;
  });
  if (differs && settings.policy_given)
    GSHARE_WARN("GSHARE_POLICY=%s asked, but GPU %s already runs under %s (set by the first "
                "process on it); using %s",
                policy_name(asked), gpu_uuid, policy_name(running), policy_name(running));
}

namespace {
thread_local uint64_t t_token_wait_ns = 0;

// All threads' waits for the token: those over, and those under way (how
// many, and the sum of their starts), under one process-local lock, so that
// a reader sees both at once.
struct ProcessTokenWaits {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  uint64_t over_ns = 0;
  uint64_t waiting = 0;
  uint64_t began_sum_ns = 0;

  void begin(uint64_t at) {
    pthread_mutex_lock(&mutex);
    waiting++;
    began_sum_ns += at;
    pthread_mutex_unlock(&mutex);
  }
  void end(uint64_t began, uint64_t at) {
    pthread_mutex_lock(&mutex);
    waiting--;
    began_sum_ns -= began;
    over_ns += at - began;
    pthread_mutex_unlock(&mutex);
  }
  uint64_t total(uint64_t at) {
    pthread_mutex_lock(&mutex);
    const uint64_t ongoing = waiting * at > began_sum_ns ? waiting * at - began_sum_ns : 0;
    const uint64_t all = over_ns + ongoing;
    pthread_mutex_unlock(&mutex);
    return all;
  }
};
ProcessTokenWaits g_token_waits;

// Adds a wait's time to the thread's total however the wait returns, and
// marks the thread in its slot as inside the wait (Slot::token_waits) from
// `count` on (wait_for_token says when).
struct CountTokenWait {
  explicit CountTokenWait(Slot& slot) : slot(slot) { g_token_waits.begin(began); }
  void count() {
    if (counted) return;
    slot.token_waits.fetch_add(1, std::memory_order_relaxed);
    counted = true;
  }
  ~CountTokenWait() {
    if (counted) slot.token_waits.fetch_sub(1, std::memory_order_relaxed);
    const uint64_t now = mono_now_ns();
    t_token_wait_ns += now - began;
    g_token_waits.end(began, now);
  }
  Slot& slot;
  uint64_t began = mono_now_ns();
  bool counted = false;
};
}  // namespace

uint64_t token_wait_ns_of_thread() { return t_token_wait_ns; }

uint64_t token_wait_ns_of_process(uint64_t now) { return g_token_waits.total(now); }

void forget_token_waits_after_fork() {
  // The child has one thread, in no wait; the lock may have been held by
  // a thread that did not come along.
  new (&g_token_waits) ProcessTokenWaits();
}

bool wait_for_token(Arbiter& arbiter, void (*while_waiting)(), uint64_t deadline_ns) {
  Region& r = *arbiter.region();
  RegionHeader& h = r.header;
  const int own = arbiter.own_slot();
  Slot& me = r.slots[own];
  HolderWatch watch;
  CountTokenWait counted(me);
  TokenWatcher watcher(arbiter, own);
  const uint64_t began = counted.began;
  // A job coming back after a silence (idle, or waiting in name only) is
  // counted as asking only once the holder's clock is charged up to now,
  // at the first decision below: the time the holder ran while none asked
  // is charged capped (account_locked).
  if (me.job_state != shm::kJobIdle && !waits_in_name_only(me, began)) counted.count();
  for (bool first = true;; first = false) {
    uint32_t seen = h.token_futex.load(std::memory_order_acquire);
    if (me.gate.load(std::memory_order_acquire) & shm::kGateOpen) {
      if (!first) GSHARE_DEBUG("got the token after %.3f s", double(mono_now_ns() - began) / 1e9);
      return true;
    }
    if (while_waiting) while_waiting();
    uint64_t now = mono_now_ns();
    if (now >= deadline_ns) {
      step_aside(arbiter);  // stops waiting; gives the token on should it have come meanwhile
      return false;
    }
    // Lanes may be re-formed while we wait: look up our token every time.
    const shm::Token& token = h.tokens[token_index(r, own)];
    // A waiter found idle (its grant came while it slept) asks again.
    bool decide = first || me.job_state == shm::kJobIdle;
    bool idle = false, on_host = false;
    uint64_t idle_left = kMaxSleepNs;
    const uint64_t patience = takeover_swap_ns(r, me);
    const TokenWatcher::Role role = watcher.role(token_index(r, own), patience == 0);
    int holder = holder_hint(token);
    if (holder < 0 || !arbiter.slot_is_live(holder)) {
      decide = true;
    } else if (holder != own) {
      // Mid-iteration only once it has iterated: a program that allocates
      // and then idles, without an iteration's end, holds what it holds.
      const Slot& h_slot = r.slots[holder];
      const bool unsettled = arbiter.holds_unsettled_memory(holder);
      bool mid = h_slot.class_iterations > 0 && unsettled;
      bool ask_for_cache = false;
      idle = watch.idle(holder, h_slot, now, &idle_left, mid, &ask_for_cache, patience);
      if (ask_for_cache) arbiter.update([&] { r.slots[holder].release_requests++; });
      if (!idle && lends(r) && role == TokenWatcher::kWatching) {
        uint64_t lend_left;
        on_host = watch.on_host(h_slot, now, unsettled, &lend_left);
        idle_left = std::min(idle_left, lend_left);
      }
      // A host-bound job may join a host-bound holder's turn (shared turns).
      const bool could_join = wants_shared_turn(me) && wants_shared_turn(h_slot);
      decide = decide || idle || on_host || could_join || slice_end_unasked(token, r.slots[holder], now);
    }
    if (decide) {
      arbiter.update([&] {
        if (!counted.counted) {
          account_locked(arbiter, token_index(r, own), nullptr, now);
          counted.count();
        }
        mark_waiting_locked(arbiter, now);
        IdleVerdict verdict;
        if (idle || on_host) {
          verdict = {holder, watch.granted, on_host && !idle};
          const Slot& h_slot = r.slots[holder];
          GSHARE_DEBUG("holder pid %d %s: still %.0f ms, %llu launches, admission %u, residency %u",
                       int(h_slot.pid), idle ? "idle" : "on the host", double(now - watch.still_since) / 1e6,
                       (unsigned long long)watch.launches, h_slot.admission, h_slot.residency);
        }
        decide_locked(arbiter, token_index(r, own), now, verdict);
      });
    }
    // Sleep until the holder's slice ends (the decision may have renewed
    // it), it would count as idle, or a wake (the futex word changes: a
    // decision that moved the token returns at once). A waiter the watcher
    // relieves leaves the slice's end to it; it still looks when the holder
    // would count as idle, at its own pace: should the watcher die, the
    // others find out within an idle time and one takes its place (a
    // waiter behind a dead watcher that slept 250 ms waited 305 ms, not
    // 100, for a holder that had stopped).
    uint64_t sleep = std::min(kMaxSleepNs, idle_left);
    uint64_t slice_end = token.slice_end_mono_ns;
    if (slice_end > now && role != TokenWatcher::kRelieved) sleep = std::min(sleep, slice_end - now);
    sleep = std::min(sleep, deadline_ns - now);
    shm::futex_wait_bits(&h.token_futex, seen, std::max(sleep, kMinSleepNs), shm::waiter_bit(own));
  }
}

void end_slice_between_iterations(Arbiter& arbiter, void (*drain)()) {
  Slot* slot = arbiter.slot();
  uint32_t gate = slot->gate.load(std::memory_order_acquire);
  if ((gate & shm::kGateOpen) && (gate & shm::kGateYield) && !arbiter.holds_unsettled_memory(arbiter.own_slot()))
    end_slice(arbiter, drain);
}

void end_slice(Arbiter& arbiter, void (*drain)()) {
  JobTable t;
  Region& r = *arbiter.region();
  int own = arbiter.own_slot();
  Slot& me = r.slots[own];
  bool must_drain = false;
  auto hand_over = [&](bool drained) {
    uint64_t now = mono_now_ns();
    int k = token_index(r, own);
    if (holder_slot_locked(arbiter, k) != own) return;
    // Mid-iteration it yields at a later boundary, unless the slice is past
    // its limit: every slice ends within GSHARE_SLICE_MAX_MS of its end.
    if (!drained && arbiter.holds_unsettled_memory(own) && !slice_past_limit(r.header.tokens[k], me, now))
      return;
    Policy policy = region_policy(r.header);
    gather_locked(arbiter, k, t);
    account_locked(arbiter, k, &t, now);
    int current = t.index(own);
    int next = pick_at_slice_end_locked(arbiter, policy, t, current);
    if (holder_goes_on_for_copy(r, t, current, next, now)) {
      // The next job's memory is being copied back: this one runs on, its
      // slice not renewed, until the copy ends (decide_locked asks again).
      me.gate.fetch_and(~uint32_t(shm::kGateYield), std::memory_order_acq_rel);
      return;
    }
    if (next < 0 || next == current) {
      // Nobody else should run: a new slice, no handover (a switch to this
      // job that has not reached its first launch stays to be measured).
      shm::renew_slice_locked(r.header.tokens[k], now, slice_length(policy, t.jobs[current]));
      me.gate.store(open_gate_for(policy, t, t.jobs[current], me),
                    std::memory_order_release);
      return;
    }
    if (me.handover_mode == shm::kHandoverStrict && !drained) {
      me.gate.store(shm::kGateClosed, std::memory_order_release);
      must_drain = true;
      return;
    }
    grant_locked(arbiter, k, t, next, shm::kJobWaiting, now);
    stay_beside_locked(arbiter, k, own, now);
  };
  arbiter.update([&] { hand_over(false); });
  if (!must_drain) return;
  me.gpu_waits.fetch_add(1, std::memory_order_relaxed);  // busy, not idle, while draining
  drain();
  me.gpu_waits.fetch_sub(1, std::memory_order_relaxed);
  arbiter.update([&] { hand_over(true); });
}

// This job's turn as the policy sizes it now (rules::slice_length), if it
// holds token `k`. Under the lock.
bool own_turn_locked(Arbiter& arbiter, int k, uint64_t* turn) {
  JobTable t;
  Region& r = *arbiter.region();
  const int own = arbiter.own_slot();
  if (holder_slot_locked(arbiter, k) != own) return false;
  gather_locked(arbiter, k, t);
  const int current = t.index(own);
  if (current < 0) return false;
  *turn = slice_length(region_policy(r.header), t.jobs[current]);
  return true;
}

bool keep_turn_if_longer(Arbiter& arbiter) {
  bool kept = false;
  arbiter.update([&] {
    Region& r = *arbiter.region();
    const int own = arbiter.own_slot();
    const int k = token_index(r, own);
    Slot& me = r.slots[own];
    const uint32_t gate = me.gate.load(std::memory_order_relaxed);
    if (!(gate & shm::kGateOpen) || !(gate & shm::kGateYield)) return;
    uint64_t turn = 0;
    if (!own_turn_locked(arbiter, k, &turn)) return;
    if (!lengthen_slice_locked(r.header.tokens[k], turn, mono_now_ns())) return;
    me.gate.store(gate & ~uint32_t(shm::kGateYield), std::memory_order_release);
    kept = true;
  });
  return kept;
}

void restart_turn(Arbiter& arbiter) {
  arbiter.update([&] {
    Region& r = *arbiter.region();
    const int own = arbiter.own_slot();
    const int k = token_index(r, own);
    if (holder_slot_locked(arbiter, k) != own) return;
    Slot& me = r.slots[own];
    const uint64_t now = mono_now_ns();
    me.accounted_mono_ns = now;  // the wait and the copy: not charged (account_locked)
    shm::Token& token = r.header.tokens[k];
    uint64_t turn = 0;
    if (token.slice_end_mono_ns == kForever || !own_turn_locked(arbiter, k, &turn)) return;
    shm::renew_slice_locked(token, now, turn);
    // An ask to yield made while it waited was about the turn that ended.
    const uint32_t gate = me.gate.load(std::memory_order_relaxed);
    if (gate & shm::kGateOpen) me.gate.store(gate & ~uint32_t(shm::kGateYield), std::memory_order_release);
  });
}

// Makes the holder inactive and gives its token to the next job, or to
// nobody. Under the lock.
static void step_aside_locked(Arbiter& arbiter, int k, JobTable& t, int current, uint64_t now,
                              bool still_waiting) {
  const shm::JobState after = still_waiting ? shm::kJobWaiting : shm::kJobIdle;
  t.jobs[current].active = false;
  int next = pick_locked(arbiter, region_policy(arbiter.region()->header), t, -1);
  if (next >= 0) {
    grant_locked(arbiter, k, t, next, after, now);
    return;
  }
  account_locked(arbiter, k, &t, now);
  shm::take_token_locked(*arbiter.region(), k, arbiter.own_slot(), after, now);
}

void lend_while_idle(Arbiter& arbiter) {
  Region& r = *arbiter.region();
  int own = arbiter.own_slot();
  // At every host sync of the holder: under any other policy, nothing more
  // (a job table is kilobytes to set up).
  if (region_policy(r.header) != Policy::kPriority) return;
  JobTable t;
  arbiter.update([&] {
    if (holder_slot_locked(arbiter, 0) != own || arbiter.holds_unsettled_memory(own)) return;
    uint64_t now = mono_now_ns();
    gather_locked(arbiter, 0, t);
    int current = t.index(own);
    if (current < 0) return;
    // Only to lower priorities: equal ones take turns by slices as usual.
    for (int i = 0; i < t.count; ++i) {
      if (i == current || !t.jobs[i].active) continue;
      if (t.jobs[i].priority >= t.jobs[current].priority) return;
    }
    t.jobs[current].active = false;
    int next = pick_locked(arbiter, Policy::kPriority, t, -1);
    if (next < 0) return;  // nobody waits: keep it
    grant_locked(arbiter, 0, t, next, shm::kJobIdle, now);
  });
}

void step_aside(Arbiter& arbiter, bool still_waiting) {
  JobTable t;
  Region& r = *arbiter.region();
  int own = arbiter.own_slot();
  arbiter.update([&] {
    int k = token_index(r, own);
    Slot& me = r.slots[own];
    uint64_t now = mono_now_ns();
    if (me.beside) {
      end_beside_locked(arbiter, k, own, still_waiting ? shm::kJobWaiting : shm::kJobIdle, now);
      return;
    }
    if (holder_slot_locked(arbiter, k) != own) {
      if (still_waiting) mark_waiting_locked(arbiter, now);
      else if (me.job_state == shm::kJobWaiting) me.job_state = shm::kJobIdle;
      return;
    }
    gather_locked(arbiter, k, t);
    int current = t.index(own);
    if (current >= 0) step_aside_locked(arbiter, k, t, current, now, still_waiting);
  });
}

void settle_shared_turn(Arbiter& arbiter) {
  Region& r = *arbiter.region();
  arbiter.update([&] { settle_beside_locked(arbiter, token_index(r, arbiter.own_slot()), mono_now_ns()); });
}

SwitchRecord note_first_launch(Arbiter& arbiter, uint64_t now) {
  Region& r = *arbiter.region();
  Slot& me = r.slots[arbiter.own_slot()];
  SwitchRecord record;
  bool locked = arbiter.update([&] {
    // Under the lock, like every other write of the gate: no decision can
    // store a gate read before this clear and bring the bit back.
    uint32_t gate = me.gate.fetch_and(~uint32_t(shm::kGateFirstLaunch), std::memory_order_acq_rel);
    if (!(gate & shm::kGateFirstLaunch) || me.switched_in_mono_ns == 0) return;  // another thread was first
    uint64_t cost = now > me.switched_in_mono_ns ? now - me.switched_in_mono_ns : 0;
    me.switched_in_mono_ns = 0;
    me.switches++;
    me.switch_ns += cost;
    me.last_switch_ns = cost;
    record = {true, me.switches, cost};
    RegionHeader& h = r.header;
    h.switches++;
    h.switch_ns_total += cost;
    h.switch_ns_max = std::max(h.switch_ns_max, cost);
  });
  // An unusable lock must not keep every launch on the slow path.
  if (!locked) me.gate.fetch_and(~uint32_t(shm::kGateFirstLaunch), std::memory_order_relaxed);
  return record;
}

void note_handover_began(Arbiter& arbiter, uint64_t now) {
  Slot& me = arbiter.region()->slots[arbiter.own_slot()];
  arbiter.update([&] { me.handover_began_mono_ns = now; });
}

void account_token_time(Arbiter& arbiter, bool idle) {
  arbiter.update([&] {
    const int own = arbiter.own_slot();
    int k = token_index(*arbiter.region(), own);
    Slot& me = arbiter.region()->slots[own];
    if (!me.beside && holder_slot_locked(arbiter, k) != own) return;
    const uint64_t now = mono_now_ns();
    if (idle) {
      if (now > me.accounted_mono_ns) me.accounted_mono_ns = now;
      return;
    }
    charge_locked(arbiter, k, own, nullptr, now);
  });
}

int next_in_line(Arbiter& arbiter) {
  int next_slot = -1;
  const int own = arbiter.own_slot();
  if (own < 0) return -1;
  const uint64_t now = mono_now_ns();
  arbiter.update([&] {
    Region& r = *arbiter.region();
    const Policy policy = region_policy(r.header);
    const int k = token_index(r, own);
    JobTable t;
    gather_locked(arbiter, k, t);
    t.ahead = true;
    const int holder = holder_slot_locked(arbiter, k);
    const int current = holder >= 0 ? t.index(holder) : -1;
    if (current < 0) return;  // nobody holds it: the next grant is now, not ahead
    // As at the end of the holder's slice: its turn counted in full.
    const shm::Token& token = r.header.tokens[k];
    if (token.slice_end_mono_ns != kForever && token.slice_end_mono_ns > now)
      charge(t.jobs[current], token.slice_end_mono_ns - now);
    int next = pick_at_slice_end_locked(arbiter, policy, t, current);
    if (next == current) {
      // The holder goes on: next is who follows it once it goes idle.
      t.jobs[current].active = false;
      next = pick_locked(arbiter, policy, t, -1);
    }
    if (next >= 0) next_slot = t.jobs[next].id;
  });
  return next_slot;
}

bool holder_pages_in(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  const int own = arbiter.own_slot();
  if (own < 0) return false;
  const shm::Token& token = r.header.tokens[token_index(r, own)];
  const int holder = holder_hint(token);
  if (holder < 0 || holder == own) return false;
  const Slot& s = r.slots[holder];
  if (__atomic_load_n(&s.state, __ATOMIC_RELAXED) != shm::kSlotLive ||
      __atomic_load_n(&s.generation, __ATOMIC_RELAXED) != __atomic_load_n(&token.holder_generation, __ATOMIC_RELAXED))
    return false;
  return pages_in_on_demand(s);
}

bool holds_token(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  int own = arbiter.own_slot();
  const shm::Token& token = r.header.tokens[token_index(r, own)];
  if (token.holder == uint32_t(own) + 1 && token.holder_generation == r.slots[own].generation) return true;
  const Slot& me = r.slots[own];
  return __atomic_load_n(&me.beside, __ATOMIC_RELAXED) && (me.gate.load(std::memory_order_relaxed) & shm::kGateOpen);
}

bool turns_may_be_shared(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  const int own = arbiter.own_slot();
  return region_policy(r.header) == Policy::kFair && token_index(r, own) == 0 &&
         r.slots[own].handover_mode == shm::kHandoverOverlap &&
         __atomic_load_n(&r.header.live_slots, __ATOMIC_RELAXED) > 1;
}

bool turn_shared_now(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  const int k = token_index(r, arbiter.own_slot());
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (__atomic_load_n(&s.beside, __ATOMIC_RELAXED) && __atomic_load_n(&s.state, __ATOMIC_RELAXED) == shm::kSlotLive &&
        token_index(r, int(i)) == k)
      return true;
  }
  return false;
}

const shm::Token& own_token(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  return r.header.tokens[token_index(r, arbiter.own_slot())];
}

}  // namespace gshare::scheduler
