#include "allocator/page_requests.h"

#include <algorithm>
#include <atomic>

#include "allocator/movable_memory.h"
#include "allocator/pager.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/tunables.h"
#include "scheduler/token.h"
#include "shm/host_room.h"
#include "shm/tokens.h"

namespace gshare::allocator {

using shm::Arbiter;
using shm::Region;
using shm::Slot;
using tunables::kAskPageOutAgainNs;
using tunables::kPageInHoldNs;

namespace {

// Room on its way: page-outs under way, or asked for and not yet answered.
bool coming_from(const Slot& s) {
  return s.residency == shm::kPagingOut ||
         (s.residency == shm::kResident && __atomic_load_n(&s.page_out_requests, __ATOMIC_RELAXED) !=
                                               __atomic_load_n(&s.page_out_acks, __ATOMIC_RELAXED));
}

using shm::HostRoom;

HostRoom host_room(const Region& r) { return shm::host_room(r, paging_host_limit()); }

// The jobs that could give room by paging out, into `order`, best first;
// returns how many. Not running, movable memory on the GPU, no page-out
// asked of them already. One inside a host sync counts (the page-out drains
// its work first), and so does one that waits for memory itself: it
// touches none while it waits, and holding part of what it needs it could
// keep the runner from its own. Idle ones first (they may not come back
// for long), then as ask_for_page_outs says. Call under the region's lock.
int candidates_locked(const Arbiter& arbiter, int next, uint64_t now, int order[shm::kMaxSlots]) {
  const Region& r = *arbiter.region();
  int n = 0;
  for (uint32_t i = 0; i < shm::kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (int(i) == arbiter.own_slot() || s.state != shm::kSlotLive) continue;
    // Resident, or paged out in part (a prefetch brought its persistent
    // memory back ahead of its turn).
    if (s.residency != shm::kResident && s.residency != shm::kPagedOut) continue;
    if (s.movable_bytes == 0) continue;
    if (s.page_out_requests != s.page_out_acks) continue;
    if (s.job_state == shm::kJobRunning) continue;
    // Idle by the token, but still copying: not yet.
    if (s.job_state == shm::kJobIdle &&
        now - s.last_device_work_mono_ns.load(std::memory_order_relaxed) < s.idle_ns)
      continue;
    if (shm::holds_any_token(r.header, i)) continue;
    order[n++] = int(i);
  }
  std::sort(order, order + n, [&](int a, int b) {
    if ((a == next) != (b == next)) return b == next;
    const Slot& x = r.slots[a];
    const Slot& y = r.slots[b];
    const bool x_idle = x.job_state == shm::kJobIdle, y_idle = y.job_state == shm::kJobIdle;
    if (x_idle != y_idle) return x_idle;
    if (x.accounted_mono_ns != y.accounted_mono_ns) return x.accounted_mono_ns > y.accounted_mono_ns;
    return x.movable_bytes > y.movable_bytes;
  });
  return n;
}

uint64_t coming_locked(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  uint64_t coming = 0;
  for (uint32_t i = 0; i < shm::kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (int(i) != arbiter.own_slot() && s.state == shm::kSlotLive && coming_from(s))
      coming += s.movable_bytes;
  }
  return coming;
}

}  // namespace

bool room_on_its_way(const Arbiter& arbiter) {
  const Region& r = *arbiter.region();
  // Read without the lock: a hint, like the figures it weighs.
  const HostRoom host = host_room(r);
  for (uint32_t i = 0; i < shm::kMaxSlots; ++i) {
    const Slot& s = r.slots[i];
    if (int(i) == arbiter.own_slot() || s.state != shm::kSlotLive || !coming_from(s)) continue;
    // Asked, but its copy would pass the host-memory limit: that page-out
    // comes to nothing unless copies are freed first, and must not keep
    // a job waiting with the token for it.
    // Marked paging out, it may still be waiting for its cache and find
    // no host memory: only its copying counts then.
    if ((s.residency == shm::kPagingOut && s.page_out_copying) || host.fits(s, 0)) return true;
  }
  return false;
}

bool keep_token_for_room(Arbiter& arbiter, uint64_t* held_since, uint64_t now) {
  if (!paging_enabled() || !scheduler::holds_token(arbiter)) {
    *held_since = 0;
    return false;
  }
  if (*held_since == 0 || room_on_its_way(arbiter)) *held_since = now;
  if (now - *held_since <= kPageInHoldNs) return true;
  *held_since = 0;
  return false;
}

void ask_for_page_outs(Arbiter& arbiter, uint64_t short_bytes, uint64_t* asked_at_ns, bool kept_copies_only) {
  if (!paging_enabled()) return;
  const uint64_t now = mono_now_ns();
  if (*asked_at_ns != 0 && now - *asked_at_ns < kAskPageOutAgainNs) return;
  *asked_at_ns = now;
  Region& r = *arbiter.region();
  const int next = scheduler::next_in_line(arbiter);
  HostRoom limited;  // set when the host-memory limit held page-outs back
  arbiter.update([&] {
    // Room already on its way: only the rest is asked for.
    const uint64_t coming = coming_locked(arbiter);
    if (coming >= short_bytes) return;
    int order[shm::kMaxSlots];
    const int n = candidates_locked(arbiter, next, now, order);
    // A page-out past the host-memory limit is asked for all the same: its
    // pager asks resident jobs to free the copies they keep, and tries
    // again at the next ask. It does not count as room on its way
    // (room_on_its_way), and the first time none fits this job says why
    // it may wait.
    const HostRoom host = host_room(r);
    uint64_t asked = coming, added = 0;
    bool host_bound = false;
    for (int k = 0; k < n && asked < std::max<uint64_t>(short_bytes, 1); ++k) {
      Slot& s = r.slots[order[k]];
      if (kept_copies_only && !host.fits(s, added, /*freeing_kept=*/false)) continue;
      if (!host.fits(s, added)) host_bound = true;
      added += HostRoom::need_of(s);
      s.page_out_requests++;
      // Its framework's cache first (allocator/admission.h): free blocks
      // given back need no copy, and the page-out waits a moment for them.
      s.release_requests++;
      asked += s.movable_bytes;
    }
    if (asked > coming) shm::wake_waiters(r.header);
    if (host_bound) limited = host;
  });
  // Said once: the room could come from page-outs, but the host-memory
  // limit may keep them from happening, and then this job waits for jobs
  // to end.
  static std::atomic<bool> told{false};
  if (limited.limit != 0 && !told.exchange(true))
    GSHARE_WARN("waiting for %.1f MiB of GPU memory that only page-outs of other jobs could free, "
                "but their copies would pass GSHARE_HOST_MEM_LIMIT (%.1f of %.1f MiB of host "
                "memory held for paging): unless copies kept by resident jobs are freed, it "
                "waits for jobs to end",
                double(short_bytes) / (1024.0 * 1024.0), double(limited.held) / (1024.0 * 1024.0),
                double(limited.limit) / (1024.0 * 1024.0));
}

bool ask_for_host_copies(Arbiter& arbiter, uint64_t need_bytes) {
  Region& r = *arbiter.region();
  bool asked = false;
  arbiter.update([&] {
    // Resident jobs that keep copies, largest first: as few as will do are
    // asked, each for no more than is still missing, so that the copies
    // the others keep still spare them the pinning at their next page-out.
    int order[shm::kMaxSlots];
    int n = 0;
    uint64_t coming = 0;
    for (uint32_t i = 0; i < shm::kMaxSlots; ++i) {
      const Slot& s = r.slots[i];
      if (int(i) == arbiter.own_slot() || s.state != shm::kSlotLive) continue;
      if (s.residency != shm::kResident || s.host_paging_bytes == 0) continue;
      if (s.host_release_requests != s.host_release_acks) {
        // Asked before, not answered yet.
        coming += s.host_release_bytes ? std::min(s.host_release_bytes, s.host_paging_bytes)
                                       : s.host_paging_bytes;
        asked = true;
        continue;
      }
      order[n++] = int(i);
    }
    std::sort(order, order + n, [&](int a, int b) {
      return r.slots[a].host_paging_bytes > r.slots[b].host_paging_bytes;
    });
    for (int k = 0; k < n && coming < std::max<uint64_t>(need_bytes, 1); ++k) {
      Slot& s = r.slots[order[k]];
      const uint64_t want = need_bytes > coming ? need_bytes - coming : 0;
      s.host_release_bytes = want >= s.host_paging_bytes ? 0 : want;
      s.host_release_requests++;
      coming += std::min(want, s.host_paging_bytes);
      asked = true;
    }
    if (asked) shm::wake_waiters(r.header);
  });
  return asked;
}

}  // namespace gshare::allocator
