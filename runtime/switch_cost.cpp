#include "runtime/switch_cost.h"

#include <algorithm>

#include "base/log.h"
#include "base/tunables.h"

namespace gshare::runtime {

std::atomic<bool> g_measuring_switch_cost{false};

namespace {
std::atomic<shm::Slot*> g_slot{nullptr};
std::atomic<uint64_t> g_switch_ns{0};
std::atomic<uint64_t> g_memory_ns{0};
// The open measure is the job's first turn (switch_cost.h): it ends at the
// hand-over, or once the turn has lasted kMaxTurnNs.
std::atomic<bool> g_first_turn{false};
std::atomic<uint64_t> g_first_turn_began_ns{0};
uint64_t g_iterations_seen = 0;  // end_switch_cost_if_iterated's, upkeep thread only
}  // namespace

void begin_switch_cost(shm::Slot* slot, const scheduler::SwitchRecord& record) {
  // A measure still open lost its turn before a boundary: what it saw
  // since is not one switch's cost.
  g_measuring_switch_cost.store(false, std::memory_order_relaxed);
  if (!record.recorded) return;
  const bool first = record.switches < 2;
  g_first_turn.store(first, std::memory_order_relaxed);
  g_first_turn_began_ns.store(mono_now_ns(), std::memory_order_relaxed);
  g_slot.store(slot, std::memory_order_relaxed);
  g_switch_ns.store(first ? 0 : record.cost_ns, std::memory_order_relaxed);
  g_memory_ns.store(0, std::memory_order_relaxed);
  g_measuring_switch_cost.store(true, std::memory_order_release);
}

void add_memory_call_ns(uint64_t ns) { g_memory_ns.fetch_add(ns, std::memory_order_relaxed); }

namespace {
// A costly switch counts at once; cheap ones wear its figure down by a
// quarter each: the turns must pay for the costly switches, and one
// switch that found the memory free says little of the next.
void publish(shm::Slot* slot, uint64_t cost) {
  cost = std::min(cost, tunables::kMaxTurnNs);  // no turn grows past it, nor need a cost
  uint64_t last = slot->switch_cost_ns.load(std::memory_order_relaxed);
  slot->switch_cost_ns.store(std::max(cost, last - last / 4), std::memory_order_relaxed);
}
}  // namespace

void note_give_back_before_switch(shm::Slot* slot, uint64_t ns) {
  if (slot && ns > slot->switch_cost_ns.load(std::memory_order_relaxed)) publish(slot, ns);
}

namespace {
// Closes a first turn's measure and publishes it.
void end_first_turn(shm::Slot* slot) {
  if (!g_first_turn.exchange(false, std::memory_order_relaxed)) return;
  if (!g_measuring_switch_cost.exchange(false, std::memory_order_acq_rel) || !slot) return;
  uint64_t cost = g_memory_ns.load(std::memory_order_relaxed);
  publish(slot, cost);
  GSHARE_DEBUG("its first turn cost this job %.1f ms in memory calls: the first guess at a switch's cost",
               double(cost) / 1e6);
}
}  // namespace

void end_first_turn_cost(shm::Slot* slot) {
  if (g_first_turn.load(std::memory_order_relaxed) && slot == g_slot.load(std::memory_order_relaxed))
    end_first_turn(slot);
}

void end_switch_cost() {
  if (g_first_turn.load(std::memory_order_relaxed)) {
    // A first turn goes on to its hand-over, or ends once it has lasted a
    // whole turn (a job that never hands over measures nothing more).
    if (mono_now_ns() - g_first_turn_began_ns.load(std::memory_order_relaxed) >= tunables::kMaxTurnNs)
      end_first_turn(g_slot.load(std::memory_order_relaxed));
    return;
  }
  if (!g_measuring_switch_cost.exchange(false, std::memory_order_acq_rel)) return;
  shm::Slot* slot = g_slot.load(std::memory_order_relaxed);
  if (!slot) return;
  uint64_t cost = g_switch_ns.load(std::memory_order_relaxed) + g_memory_ns.load(std::memory_order_relaxed);
  publish(slot, cost);
  GSHARE_DEBUG("a switch to this job cost %.1f ms (%.1f ms to its first launch, %.1f ms in memory calls)",
               double(cost) / 1e6, double(g_switch_ns.load(std::memory_order_relaxed)) / 1e6,
               double(g_memory_ns.load(std::memory_order_relaxed)) / 1e6);
}

void end_switch_cost_if_iterated(uint64_t iterations, bool from_launches) {
  if (from_launches && iterations != g_iterations_seen) end_switch_cost();
  g_iterations_seen = iterations;
}

void forget_switch_cost_after_fork() {
  g_measuring_switch_cost.store(false);
  g_first_turn.store(false);
  g_slot.store(nullptr);
  g_iterations_seen = 0;
}

}  // namespace gshare::runtime
