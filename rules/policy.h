// The scheduling policies: who may launch on a GPU next.
//
// Pure code over a small state (the jobs below) and times passed in, never
// read from a clock: the same functions decide live, over the arbiter
// region (scheduler/token.cpp), and in gshare-sim and the unit tests,
// under a virtual clock. docs/DESIGN.md, §7 "Time-slicing".
//
// Vocabulary
//   job      one process on one GPU (all its threads share it).
//   active   the job wants the GPU: it holds the token or waits for it.
//   holder   the job that holds the token: the only one that may launch.
//   slice    one uninterrupted turn of the holder. When its length is up the
//            policy is asked again, at the holder's next iteration boundary.
//   served   GPU time a job has received: time it held the token.
//   vtime    served / weight, the fair clock: fair runs the job that is
//            furthest behind. A job that becomes active starts no further
//            behind than the least of the others, so time spent idle is not
//            owed back to it.
#pragma once

#include <cstdint>

#include "base/policy_names.h"

namespace gshare::rules {

// Whether each lane (rules/lanes.h) has its own token: jobs of
// different lanes then run at once.
inline bool tokens_per_lane(Policy policy) { return policy == Policy::kPack; }

inline constexpr uint64_t kForever = UINT64_MAX;  // no slice end, or no estimate

struct Job {
  int id = -1;               // slot index live, trace index in the simulator
  bool active = false;
  uint64_t arrival_ns = 0;   // when the job arrived: fifo's order, every tie-break
  uint32_t weight = 1;       // fair: share of GPU time, >= 1
  int32_t priority = 0;      // priority: larger runs first
  uint64_t served_ns = 0;
  uint64_t vtime_ns = 0;
  uint64_t remaining_ns = kForever;  // srtf: expected GPU time left
  // What a switch to this job has cost beyond its work (the last holder's
  // cache going back, this job's memory allocated anew): 0 when nothing
  // is known or a switch costs nothing measurable.
  uint64_t switch_cost_ns = 0;
  // The part of it that is memory handed over; the rest (the grant to the
  // first launch: a process waking, which an overloaded CPU stretches to
  // milliseconds) lengthens a turn only to twice its base.
  uint64_t switch_memory_ns = 0;
  // prefetch: the GPU time one turn gives this job (its slice length,
  // rules::slice_length), and what bringing its memory back from host
  // memory takes: all of it, whether it is out now or not (0: it has none
  // that moves), so that a job's place does not change as it is paged out
  // and in.
  uint64_t turn_ns = 0;
  uint64_t bring_back_ns = 0;
  // The quantum its turns start from, before its weight and its switch
  // costs (rules::quantum_among).
  uint64_t quantum_ns = 0;
  // How long the job has been away from the GPU: since its token time was
  // last counted; kForever if it never held the token (rules::activate).
  uint64_t away_ns = kForever;
};

// prefetch's weight of a job: reward minus penalty, both over the same
// window (one round of turns), so that only their difference matters:
// the compute its turn gives minus the time its memory takes to come back.
int64_t paging_weight(const Job& job);

// The job that should hold the token now, or -1 when none is active.
// `holder` is the index of the current holder if it is still active (its
// slice has just ended, or a job arrived), else -1. An index into `jobs`.
//   fifo      the holder keeps it; otherwise the earliest arrival
//   fair      the least vtime; on a tie another job before the holder
//   srtf      the least remaining time (no estimate counts as longest);
//             on a tie the holder keeps it
//   priority  the highest priority; equal priorities share as fair does
//   pack      as fair, among the jobs of one lane (the caller passes those)
//   prefetch  by turns: the jobs not yet served in this round (less than one
//             turn ahead of the furthest behind on the fair clock) are due;
//             after a holder of high weight (paging_weight: at least the
//             active jobs' mean) the due job of least weight, after one of
//             low weight the due job of most: a long compute hides a long
//             page-in, and a job with little to bring back follows a short
//             one. The holder keeps the token only when no other is due;
//             with no holder, the most weight first. Nothing paged out, it
//             is fair by turns (all penalties 0).
// Remaining ties go to the earlier arrival, then the lower id.
int pick_next(Policy policy, const Job* jobs, int count, int holder);

// The quantum a job's turns start from, among `takers` active jobs. One the
// user chose (`adapts` false) is kept. The default shrinks once more jobs
// take turns than tunables::kRoundNs holds at it, so that each job's turn
// comes round within about that time, down to tunables::kMinQuantumNs:
// over a window of seconds a job's steps vary from turn to turn, and only
// more turns average that out (docs/DESIGN.md §7.2).
uint64_t quantum_among(uint64_t quantum_ns, bool adapts, int takers);

// How long a slice granted to `job` lasts before the policy is asked again.
// kForever for fifo: the holder runs until it goes idle or exits. Else the
// policy's quantum (job.quantum_ns; fair's and pack's times the weight), or
// longer where a switch to the job is costly: at least
// tunables::kTurnPerSwitchCost times its switch cost, up to
// tunables::kMaxTurnNs (or the quantum, if that is longer).
uint64_t slice_length(Policy policy, const Job& job);

// Whether `candidate`, which has just become active, takes the GPU from the
// holder at once instead of at the end of the holder's slice: priority
// only, for a strictly higher priority.
bool preempts_now(Policy policy, const Job& holder, const Job& candidate);

// Whether `job` must keep its in-flight work small while it runs: under
// priority, when a live job of higher priority (active or not) could wake
// at any moment and must then start within about one of this job's kernels.
bool bounds_in_flight(Policy policy, const Job& job, const Job* live, int count);

// The holder ran `ns`: adds it to served and vtime.
void charge(Job& job, uint64_t ns);

// `jobs[index]` becomes active: it starts no further behind on the fair
// clock than one of its turns (turn_ns on its clock) behind the least vtime
// of the other active jobs (under priority, of those of its own priority: a
// starved lower job is no reference), nor behind `floor_ns`: the highest
// the least vtime of the active jobs has been (RegionHeader::vtime_floor_ns),
// which remembers what jobs ran while this one was away even when none is
// active as it comes back. Without it, jobs that come when all others are
// idle (at a common start, after setting up one after another) keep the
// vtime they had, however far behind, and run ahead of the others until
// they catch up. Nor does it start more than one turn ahead of that least
// vtime: what it ran while the others were away (set up, warmed up, while
// they idled) took nothing from them, and carried as a lead it would cost
// the job its turns until they caught up. The turn either way keeps the
// place of a job idle only between two of its iterations; one away for
// tunables::kLongIdleNs or more starts level with that least vtime.
void activate(Policy policy, Job* jobs, int count, int index, uint64_t floor_ns = 0);

// The least vtime of the active jobs (kForever if none is active).
uint64_t least_active_vtime(const Job* jobs, int count);

// Whether `policy` keeps a GPU-wide vtime floor: those with one token whose
// order follows vtime (fair, prefetch). Under pack each lane's token has its
// own clock; under priority each priority its own.
bool keeps_vtime_floor(Policy policy);

}  // namespace gshare::rules
