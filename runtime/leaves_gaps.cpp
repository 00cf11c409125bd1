#include "runtime/leaves_gaps.h"

#include <atomic>

#include "allocator/devices.h"
#include "base/clock.h"
#include "rules/leaves_gaps.h"
#include "runtime/host_bound.h"

namespace gshare::runtime {

namespace {
struct Judged {
  const shm::Slot* slot = nullptr;  // another slot (a new attach): nothing yet
  rules::GapsState state;
};
Judged g_judged[allocator::kMaxDevices];
}  // namespace

void judge_leaves_gaps(int ordinal, shm::Slot& slot, uint32_t busy_permille) {
  if (ordinal < 0 || ordinal >= allocator::kMaxDevices) return;
  Judged& j = g_judged[ordinal];
  if (j.slot != &slot) j = {&slot, {}};
  const uint64_t now = mono_now_ns();
  const bool host_bound = slot.host_bound.load(std::memory_order_relaxed) != 0;
  rules::note_gpu_share(&j.state, busy_permille, own_turn_wait_permille(ordinal), host_bound, now);
  // Only gaps asks for it: pairs pairs every busy job, on and off none.
  const bool pairs = slot.shares_turns == shm::kSharesWhereGaps && !host_bound && rules::shares_in_pairs(&j.state, now);
  if ((slot.leaves_gaps.load(std::memory_order_relaxed) != 0) != pairs)
    slot.leaves_gaps.store(pairs ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace gshare::runtime
