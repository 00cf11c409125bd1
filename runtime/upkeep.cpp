#include "runtime/upkeep.h"

#include <time.h>

#include <algorithm>
#include <atomic>

#include "allocator/context_memory.h"
#include "allocator/devices.h"
#include "allocator/pager.h"
#include "allocator/pools.h"
#include "base/background_thread.h"
#include "base/log.h"
#include "base/tunables.h"
#include "runtime/launch_gate.h"

namespace gshare::runtime {

using namespace allocator;

namespace {
std::atomic<bool> g_started{false};
using tunables::kTickNs;
using tunables::kTicksPerRefresh;
using tunables::kMinTicksPerContextRefresh;
using tunables::kMaxTicksPerContextRefresh;

void* upkeep_loop(void*) {
  unsigned context_every = kMinTicksPerContextRefresh, context_next = 0;
  for (unsigned tick = 0;; ++tick) {
    timespec pause{0, kTickNs};
    nanosleep(&pause, nullptr);
    bool refresh_context = tick >= context_next;
    bool context_changed = false;
    for_each_attached_device([&](Device& d) {
      if (d.account.shared() && d.account.arbiter().has_dead_slots()) {
        int reclaimed = d.account.arbiter().reclaim_dead_slots();
        if (reclaimed > 0)
          GSHARE_INFO("GPU %s: reclaimed %d dead process(es)", d.uuid, reclaimed);
      }
      if (refresh_context && refresh_context_bytes(d)) context_changed = true;
      if (tick % kTicksPerRefresh == 0) refresh_pool_charges(d);
    });
    if (refresh_context) {
      context_every = context_changed ? kMinTicksPerContextRefresh
                                      : std::min(context_every * 2, kMaxTicksPerContextRefresh);
      context_next = tick + context_every;
    }
    scheduler_tick();
  }
  return nullptr;
}
}  // namespace

void start_upkeep() {
  allocator::start_pager();  // with paging on: answers page-out requests
  if (g_started.exchange(true)) return;
  if (!start_background_thread(upkeep_loop, "gshare-upkeep")) {
    GSHARE_WARN("cannot start the upkeep thread: dead processes are reclaimed only when "
                "this process allocates");
    g_started.store(false);
  }
}

void forget_upkeep_after_fork() { g_started.store(false); }

}  // namespace gshare::runtime
