// What a switch to this job costs beyond the work it then does, measured
// by the job itself for the policies' turn length (rules::slice_length).
//
// A switch between jobs of one lane hands their ephemeral memory over: the
// last holder gives its cache back before the grant, and this job
// allocates its iteration's memory anew, or waits for it. With iterations
// of tens of milliseconds that can cost as much as an iteration, and turns
// of one iteration each would spend half the GPU on switching. The cost of
// a turn's switch is the larger of
//   what it measured: the switch's own (the grant, or the last holder's
//   give-back, to this job's first launch: Slot::last_switch_ns; none for
//   a job's first turn) and the time this job then spends in its memory
//   calls (the driver's, and waits for memory) until its next iteration
//   boundary;
//   and what the next switch will cost it: in a shared lane it gives back
//   all it holds beyond P before a lane-mate runs, and allocates it again
//   in its next turn, at the driver's rate as this job has measured it
//   (allocator/allocation_rate.h). Known at every boundary, a turn before
//   it is paid: a turn's first boundary may come before its iteration has
//   allocated all it will (a model's set-up syncs, a sync mid-way through
//   a first step), and a later one completes the figure.
// It is published in Slot::switch_cost_ns at the turn's boundaries and
// wherever the job is about to hand over, each time it has grown, and the
// turn lengthens with it (scheduler::keep_turn_if_longer); beside it, in
// Slot::switch_memory_ns, the part that is memory (the memory calls, what
// it would allocate again, a give-back before its hand-over), the only part
// that lengthens a turn past twice its base (rules::slice_length). At the start of
// each turn the figure drops by a quarter: a costly switch counts at once,
// and cheap ones wear it down (jobs that keep their memory across a
// switch, of different lanes, measure next to nothing and keep the
// quantum). A job that empties its cache before handing over will allocate
// as much again when its turn comes back: the emptying's time, and what
// allocating those bytes again takes, count as the cost of a switch to it
// at once.
//
// A job's first turn is published only at its hand-over (or once it has
// lasted tunables::kMaxTurnNs): it stays as short as the quantum, so that
// every job reaches its model's set-up early and is admitted its weights
// while no job holds an iteration's memory; its set-up's allocations count,
// a first guess that later switches wear down.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/clock.h"
#include "scheduler/token.h"
#include "shm/layout.h"

namespace gshare::runtime {

extern std::atomic<bool> g_measuring_switch_cost;

// At the first launch of a turn, with what note_first_launch recorded:
// opens the turn's measure.
void begin_switch_cost(shm::Slot* slot, const scheduler::SwitchRecord& record);
// At an iteration boundary: publishes the figure if it has grown, and
// closes the turn's measure. `reallocation_ns`: what the job would take to
// allocate again what it gives back at a switch (in a shared lane, all it
// holds beyond P).
void publish_switch_cost(uint64_t reallocation_ns);
// The same where the holder may hand over mid-iteration (its slice past
// its limit): only `reallocation_ns` counts, and the measure stays open.
void publish_switch_cost_mid_iteration(uint64_t reallocation_ns);
// As the job hands its token over: publishes the turn's measure and closes it.
void end_turn_cost(shm::Slot* slot, uint64_t reallocation_ns);
// From the upkeep thread, each tick, the iterations counted so far: for a
// loop whose iterations come from its launches (`from_launches`: it never
// syncs), each move of their count is a boundary.
void publish_switch_cost_if_iterated(uint64_t iterations, bool from_launches, uint64_t reallocation_ns);
// Whether a switch has made this job the holder yet: before, it has no
// figure to publish (a job alone never has).
bool switch_cost_tracked();
// A fork()ed child measures nothing of its parent's switch.
void forget_switch_cost_after_fork();
// Its cache emptied before a hand-over, in `ns`, and allocated again in
// its next turn.
void note_give_back_before_switch(shm::Slot* slot, uint64_t ns);
void add_memory_call_ns(uint64_t ns);

// Around each memory hook: its time counts while a measure is open, less
// what it waited for the token inside (an ephemeral allocation waits for
// its turn, and other jobs' turns are no cost of this job's switch). Two
// clock reads then; one relaxed load otherwise.
class MemoryCallTime {
 public:
  MemoryCallTime() : start_(g_measuring_switch_cost.load(std::memory_order_relaxed) ? mono_now_ns() : 0) {
    if (start_ != 0) waited_ = scheduler::token_wait_ns_of_thread();
  }
  ~MemoryCallTime() {
    if (start_ == 0) return;
    const uint64_t took = mono_now_ns() - start_;
    const uint64_t waited = scheduler::token_wait_ns_of_thread() - waited_;
    if (took > waited) add_memory_call_ns(took - waited);
  }
  MemoryCallTime(const MemoryCallTime&) = delete;
  MemoryCallTime& operator=(const MemoryCallTime&) = delete;

 private:
  uint64_t start_;
  uint64_t waited_ = 0;
};

}  // namespace gshare::runtime
