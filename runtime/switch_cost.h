// What a switch to this job costs beyond the work it then does, measured
// by the job itself for the policies' turn length (rules::slice_length).
//
// A switch between jobs of one lane hands their ephemeral memory over: the
// last holder gives its cache back before the grant, and this job
// allocates its iteration's memory anew, or waits for it. With iterations
// of tens of milliseconds that can cost as much as an iteration, and turns
// of one iteration each would spend half the GPU on switching. The cost is
//   the switch's own (the grant, or the last holder's give-back, to this
//   job's first launch: Slot::last_switch_ns)
// + the time this job then spends in its memory calls (the driver's, and
//   waits for memory) until its next iteration boundary.
// A job's first turn is measured whole, from its first launch to its
// hand-over: its memory calls then (its set-up's allocations with its first
// iterations', all new) are the first guess at what a switch to it costs,
// published as it hands over, so that its second turn is sized by it; later
// switches wear it down. And a job that empties its cache before handing
// over will allocate as much again when its turn comes back: the
// emptying's time counts as the cost of a switch to it at once. The figure is
// published in Slot::switch_cost_ns: a costlier switch raises it at once,
// a cheaper one lowers it by a quarter. Jobs that keep their memory across a switch (jobs
// of different lanes) measure next to nothing and keep the quantum.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/clock.h"
#include "scheduler/token.h"
#include "shm/layout.h"

namespace gshare::runtime {

extern std::atomic<bool> g_measuring_switch_cost;

// At the first launch of a turn, with what note_first_launch recorded.
void begin_switch_cost(shm::Slot* slot, const scheduler::SwitchRecord& record);
// At an iteration boundary: ends an open measure and publishes it (a first
// turn's only once it has lasted tunables::kMaxTurnNs).
void end_switch_cost();
// As the job hands its token over: ends a first turn's measure and
// publishes it.
void end_first_turn_cost(shm::Slot* slot);
// From the upkeep thread, each tick, the iterations counted so far: for a
// loop whose iterations come from its launches (`from_launches`: it never
// syncs), an open measure ends once their count moves.
void end_switch_cost_if_iterated(uint64_t iterations, bool from_launches);
// A fork()ed child measures nothing of its parent's switch.
void forget_switch_cost_after_fork();
// Its cache emptied before a hand-over, in `ns`.
void note_give_back_before_switch(shm::Slot* slot, uint64_t ns);
void add_memory_call_ns(uint64_t ns);

// Around each memory hook: its time counts while a measure is open. Two
// clock reads then; one relaxed load otherwise.
class MemoryCallTime {
 public:
  MemoryCallTime() : start_(g_measuring_switch_cost.load(std::memory_order_relaxed) ? mono_now_ns() : 0) {}
  ~MemoryCallTime() {
    if (start_ != 0) add_memory_call_ns(mono_now_ns() - start_);
  }
  MemoryCallTime(const MemoryCallTime&) = delete;
  MemoryCallTime& operator=(const MemoryCallTime&) = delete;

 private:
  uint64_t start_;
};

}  // namespace gshare::runtime
