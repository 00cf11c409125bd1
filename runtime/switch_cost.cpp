#include "runtime/switch_cost.h"

#include <algorithm>

#include "base/log.h"
#include "base/tunables.h"

namespace gshare::runtime {

std::atomic<bool> g_measuring_switch_cost{false};

namespace {
// The turn under way, from its first launch (begin_switch_cost).
std::atomic<shm::Slot*> g_slot{nullptr};
std::atomic<uint64_t> g_turn_began_ns{0};
// A job's first turn is published only at its hand-over (switch_cost.h).
std::atomic<bool> g_first_turn{false};
// The open measure: the switch's own cost, and the memory calls since.
std::atomic<uint64_t> g_switch_ns{0};
std::atomic<uint64_t> g_memory_ns{0};
uint64_t g_iterations_seen = 0;  // publish_switch_cost_if_iterated's, upkeep thread only

// Raises the published figures to `cost`, of which `memory` is memory
// handed over; no turn grows past kMaxTurnNs, nor need a cost.
void raise(shm::Slot* slot, uint64_t cost, uint64_t memory) {
  cost = std::min(cost, tunables::kMaxTurnNs);
  memory = std::min(memory, cost);
  if (cost > slot->switch_cost_ns.load(std::memory_order_relaxed))
    slot->switch_cost_ns.store(cost, std::memory_order_relaxed);
  if (memory > slot->switch_memory_ns.load(std::memory_order_relaxed))
    slot->switch_memory_ns.store(memory, std::memory_order_relaxed);
}

enum class At { kBoundary, kHandOver, kLaunch };

// Publishes what the turn's switch has cost so far, and what allocating
// again what the job would give back would (`reallocation_ns`). The
// measure closes at the turn's first boundary (its iteration's memory
// calls are behind it: later ones are the job's own work, not the
// switch's) or its hand-over; a first turn's at its hand-over, or once it
// has lasted kMaxTurnNs.
void publish(At at, uint64_t reallocation_ns) {
  shm::Slot* slot = g_slot.load(std::memory_order_relaxed);
  if (!slot) return;
  const bool first = g_first_turn.load(std::memory_order_relaxed);
  const bool long_ago = mono_now_ns() - g_turn_began_ns.load(std::memory_order_relaxed) >= tunables::kMaxTurnNs;
  if (first && at != At::kHandOver && !long_ago) return;
  const uint64_t before = slot->switch_cost_ns.load(std::memory_order_relaxed);
  // Mid-iteration the measure stays open and unpublished: what the job
  // waited for so far (memory a lane-mate or a page-out is to free) is not
  // yet a switch's whole cost, and only its iteration's memory, which it
  // will allocate again, is certain.
  uint64_t measured = 0, memory = 0;
  if ((at != At::kLaunch || long_ago) && g_measuring_switch_cost.load(std::memory_order_acquire)) {
    memory = g_memory_ns.load(std::memory_order_relaxed);
    measured = g_switch_ns.load(std::memory_order_relaxed) + memory;
    g_measuring_switch_cost.store(false, std::memory_order_relaxed);
  }
  raise(slot, std::max(measured, reallocation_ns), std::max(memory, reallocation_ns));
  if (first) g_first_turn.store(false, std::memory_order_relaxed);
  if (slot->switch_cost_ns.load(std::memory_order_relaxed) > before)
    GSHARE_DEBUG("a switch to this job costs %.1f ms: %.1f ms measured in its turn, %.1f ms to allocate again what "
                 "it would give back",
                 double(slot->switch_cost_ns.load(std::memory_order_relaxed)) / 1e6, double(measured) / 1e6,
                 double(reallocation_ns) / 1e6);
}
}  // namespace

void begin_switch_cost(shm::Slot* slot, const scheduler::SwitchRecord& record) {
  // A measure still open lost its turn before its hand-over was seen here.
  g_measuring_switch_cost.store(false, std::memory_order_relaxed);
  if (!record.recorded || !slot) return;
  const uint64_t last = slot->switch_cost_ns.load(std::memory_order_relaxed);
  slot->switch_cost_ns.store(last - last / 4, std::memory_order_relaxed);
  const uint64_t memory = slot->switch_memory_ns.load(std::memory_order_relaxed);
  slot->switch_memory_ns.store(memory - memory / 4, std::memory_order_relaxed);
  g_turn_began_ns.store(mono_now_ns(), std::memory_order_relaxed);
  g_slot.store(slot, std::memory_order_relaxed);
  // A job's first switch is its arrival: what it waited for then is no
  // switch's cost.
  const bool first = record.switches < 2;
  g_first_turn.store(first, std::memory_order_relaxed);
  g_switch_ns.store(first ? 0 : record.cost_ns, std::memory_order_relaxed);
  g_memory_ns.store(0, std::memory_order_relaxed);
  g_measuring_switch_cost.store(true, std::memory_order_release);
}

void add_memory_call_ns(uint64_t ns) { g_memory_ns.fetch_add(ns, std::memory_order_relaxed); }

void note_give_back_before_switch(shm::Slot* slot, uint64_t ns) {
  if (slot) raise(slot, ns, ns);
}

void publish_switch_cost(uint64_t reallocation_ns) { publish(At::kBoundary, reallocation_ns); }

void publish_switch_cost_mid_iteration(uint64_t reallocation_ns) { publish(At::kLaunch, reallocation_ns); }

void end_turn_cost(shm::Slot* slot, uint64_t reallocation_ns) {
  if (slot == g_slot.load(std::memory_order_relaxed)) publish(At::kHandOver, reallocation_ns);
}

void publish_switch_cost_if_iterated(uint64_t iterations, bool from_launches, uint64_t reallocation_ns) {
  if (from_launches && iterations != g_iterations_seen) publish(At::kBoundary, reallocation_ns);
  g_iterations_seen = iterations;
}

bool switch_cost_tracked() { return g_slot.load(std::memory_order_relaxed) != nullptr; }

void forget_switch_cost_after_fork() {
  g_measuring_switch_cost.store(false);
  g_first_turn.store(false);
  g_slot.store(nullptr);
  g_iterations_seen = 0;
}

}  // namespace gshare::runtime
