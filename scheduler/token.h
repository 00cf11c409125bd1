// The launch token of one GPU, kept in the GPU's arbiter region.
//
// A job may launch while its slot's gate is open (shm/layout.h, GateBits).
// There is no daemon: every decision is taken under the region's lock by a
// process that needs one, with the policy functions of rules/policy.h.
//
//   waiter   a job that wants to launch and does not hold the token sleeps
//            on the region's futex. It wakes when the token changes hands,
//            at the holder's slice end, to check whether the holder went idle
//            or died, and at least every 250 ms. Whoever wakes decides.
//   holder   launches freely until a waiter finds its slice over and sets
//            kGateYield; the holder then hands over at its next iteration
//            boundary (scheduler/iterations.h), or once the slice has run
//            GSHARE_SLICE_MAX_MS past its end.
//   idle     a holder whose launch count stands still for its GSHARE_IDLE_MS,
//            with no thread inside a host sync, loses the token.
//   dead     a dead holder's slot is freed by whoever notices (shm/arbiter):
//            the token goes back at once.
//   switch   a grant of the token to another job than the one that held it
//            (or to any job when nobody held it): what the region counts as
//            a handover. Its cost is the time from the grant to the new
//            holder's first kernel or graph launch after it, on the
//            monotonic clock: everything the new holder does before its
//            work can reach the GPU, such as waiting for its ephemeral
//            memory to be admitted while the previous holder gives back
//            its framework cache (allocator/admission.h). The grant opens
//            the gate with kGateFirstLaunch, which sends that launch to
//            the slow path (the fast path wants the gate exactly open);
//            there note_first_launch records the cost and clears the bit.
//            A grant to the holder again is no switch; a switch whose job
//            loses the token before it launches records nothing.
//   beside   under fair (GSHARE_SHARED_TURNS, gaps by default), a job whose host work
//            leaves the GPU mostly idle (host-bound: its waits for the GPU
//            are a small share of the time it runs, runtime/host_bound.h)
//            shares the turn of a holder of the same weight
//            that is host-bound too: its gate opens while the holder holds
//            the token, and it is charged for that time as the holder is.
//            Exclusive turns would leave the GPU idle through such jobs'
//            host work, and let only one of them run its host code at a
//            time. With gaps, a busy job whose kernels leave the GPU gaps
//            (runtime/leaves_gaps.h) shares turns too, two to a turn: the
//            other fills its gaps, as natively. A grant to a job that
//            shares no turn closes the gates of the jobs beside (mid-step:
//            their memory is their own lane's), so a job that keeps the GPU
//            full still has its turns alone. Only while every job that
//            shares has a lane of its own; never under another policy,
//            paging or strict handovers.
#pragma once

#include <cstdint>

#include "base/options.h"
#include "rules/policy.h"
#include "shm/arbiter.h"

namespace gshare::scheduler {

// A job's scheduling settings in the units the token uses. Made only by
// job_settings, from the options: their defaults are the options' own
// (base/options.h), written once.
struct JobSettings {
  Policy policy{};
  bool policy_given = false;
  uint64_t quantum_ns = 0;
  bool quantum_adapts = false;  // not chosen: shrinks among many jobs
  uint64_t idle_ns = 0;
  uint64_t slice_max_ns = 0;
  uint64_t expected_ns = 0;
  uint64_t expected_iters = 0;
  uint32_t weight = 0;
  int32_t priority = 0;
  bool strict_handover = false;
  SharedTurns shared_turns = SharedTurns::kOff;  // GSHARE_SHARED_TURNS
  // GSHARE_HOST_MEM_LIMIT, resolved: whether a swap could bring a paged-out
  // job back (one that none could is passed over while resident jobs ask).
  uint64_t host_limit_bytes = 0;
};

JobSettings job_settings(const Options& options);

// Writes the job's settings into its newly claimed slot. The first live
// process on a GPU sets the GPU's policy; a later one that asked for another
// gets one warning naming both.
void join_token(shm::Arbiter& arbiter, const JobSettings& settings, const char* gpu_uuid);

// Blocks until this job holds its token (the GPU's, or its lane's under
// pack), or until `deadline_ns` (monotonic), when it stops waiting and
// returns false. `while_waiting`, if given, runs at every wake-up: a
// waiter answers requests to give back cached memory (allocator/admission.h).
bool wait_for_token(shm::Arbiter& arbiter, void (*while_waiting)() = nullptr,
                    uint64_t deadline_ns = UINT64_MAX);

// Nanoseconds the calling thread has spent in wait_for_token so far: a
// memory call's time, less what it waited for its turn inside, is what it
// cost (runtime/switch_cost.h).
uint64_t token_wait_ns_of_thread();

// The same for all of the process's threads together up to `now`
// (monotonic), waits under way included: the time the job did not run
// (runtime/host_bound.h).
uint64_t token_wait_ns_of_process(uint64_t now);

// In a forked child: no thread of it waits for the token.
void forget_token_waits_after_fork();

// Whether the holder's slice has run GSHARE_SLICE_MAX_MS past its end:
// then it ends at the holder's next launch or sync, mid-iteration or not.
bool slice_past_limit(const shm::Token& token, const shm::Slot& holder, uint64_t now);

// The holder is at a point where it may hand over (its slice is over, and it
// is at an iteration boundary or past the slice's limit). Gives the token to
// the job the policy picks, which may be this one again. Under strict
// handover, `drain` runs first, with the gate closed. A holder with
// unsettled memory (Arbiter::holds_unsettled_memory) keeps the token and
// yields at a later boundary, or once the slice is past its limit. (Idle, it loses the token like any job: it
// may never come back. If it does, it is served first, and a job that
// waits for the memory it holds steps aside for it.)
void end_slice(shm::Arbiter& arbiter, void (*drain)());

// The holder is about to allocate ephemeral memory while it holds none (it
// is between iterations): if asked to yield, it hands over here, before
// the allocation, as it would at an iteration boundary.
void end_slice_between_iterations(shm::Arbiter& arbiter, void (*drain)());

// The holder, asked to yield, is where it could hand over: if its turn,
// sized anew by the switch cost it has measured since the ask
// (runtime/switch_cost.h), has not run out, the ask is withdrawn and the
// slice runs to the turn's end; returns whether it was. The ask came from a
// waiter that saw the cost as it stood then: a job's first iteration after
// a switch allocates its memory anew, and only its boundary publishes what
// that cost. Takes the lock.
bool keep_turn_if_longer(shm::Arbiter& arbiter);

// The holder's memory is back after it waited for room (and copied) with
// the token (allocator/pager.h): its turn runs from now, in full. Takes
// the lock; nothing if it does not hold its token.
void restart_turn(shm::Arbiter& arbiter);

// The holder's work is drained (a host sync returned). Under priority it
// lends the GPU to a waiting lower-priority job until it launches again.
void lend_while_idle(shm::Arbiter& arbiter);

// The job cannot go on (it waits for memory held by a job that must run to
// free it): it hands its token on if it holds it. With `still_waiting` it
// stays a contender (the policy may grant it the token again, and counts
// it when the holder's slice ends); otherwise it stops competing until its
// next wait_for_token.
void step_aside(shm::Arbiter& arbiter, bool still_waiting = false);

// This job's verdicts on sharing changed (runtime/host_bound.h,
// runtime/leaves_gaps.h): the shared turn it is in is settled now, each
// run beside a holder that may no longer have it ended (its own, or the
// others' beside it). Otherwise only a waiter's decision would: two jobs,
// one beside the other, would share on while neither waits. Takes the lock.
void settle_shared_turn(shm::Arbiter& arbiter);

// The slot of the job that the policy would run after the current holder
// of this job's token (at the end of the holder's slice, or once it goes
// idle if it would keep the token then), or -1 when nobody holds it or
// nobody else wants it. What the pager prefetches for (allocator/pager.h).
// Takes the lock.
int next_in_line(shm::Arbiter& arbiter);

// Whether the job holding this job's token is paging in on demand: it
// waits for room, or copies into the room it got. The room goes to it
// first, and a prefetch of whoever runs after it waits (allocator/pager.h).
// A racy read, without the lock.
bool holder_pages_in(const shm::Arbiter& arbiter);

// Whether this job holds its token now, or runs beside its holder (a racy
// read: for decisions the owner alone makes about itself).
bool holds_token(const shm::Arbiter& arbiter);

// Whether any job shares a turn of this job's token now: runs beside its
// holder (this job too). A racy read, without the lock: for measures that
// others' kernels would spoil (runtime/gpu_busy.h).
bool turn_shared_now(const shm::Arbiter& arbiter);

// Whether a turn of this job's token could be shared at all now: the
// region's policy is fair, the job launches under the GPU's first token
// and hands over under overlap, and another job is live on the GPU. A
// racy read, without the lock: what a measure for shared turns needs
// before it costs a job anything (runtime/gpu_busy.h), so that a job
// alone, under another policy or under strict handover is never timed.
bool turns_may_be_shared(const shm::Arbiter& arbiter);

// The token this job launches under.
const shm::Token& own_token(const shm::Arbiter& arbiter);

// The launch that passed a gate with kGateFirstLaunch, at `now`: records
// the cost of the switch that made this job the holder (Slot::switch_ns,
// RegionHeader::switch_ns_total) and clears the bit, so that the job's
// next launches take the fast path again. Takes the lock; once per switch.
// Says what it recorded, if anything (another thread may have been first).
struct SwitchRecord {
  bool recorded = false;
  uint64_t switches = 0;  // this job's switches so far, this one included
  uint64_t cost_ns = 0;
};
SwitchRecord note_first_launch(shm::Arbiter& arbiter, uint64_t now);

// This job begins to hand over, giving its cache back first, at `now`: a
// switch's cost runs from there (grant_locked). 0: the hand-over is over.
// Takes the lock.
void note_handover_began(shm::Arbiter& arbiter, uint64_t now);

// Counts the holder's token time so far: gshare-top's share and fair's
// clock stay current during a long slice. Called by the upkeep thread.
// `idle`: the holder has neither launched nor synchronised since the last
// call, nor waits for its work: the time since is not charged. A job keeps
// the token while nobody else wants it, and on fair's clock a job that sat
// idle with it (its set-up done, waiting for a common start) would come
// back that much ahead of the others; jobs placed against it as they
// arrive would inherit the lead.
void account_token_time(shm::Arbiter& arbiter, bool idle = false);

}  // namespace gshare::scheduler
