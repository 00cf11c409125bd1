#include "shm/host_room.h"

#include <unistd.h>

#include <atomic>

#include "base/log.h"
#include "base/saturating.h"

namespace gshare::shm {

namespace {

// The host's memory in bytes; 0 if unknown. Learnt once into a
// constant-initialised word (no guarded static: this runs inside hooks).
uint64_t host_memory_bytes() {
  static std::atomic<uint64_t> learnt{0};
  uint64_t bytes = learnt.load(std::memory_order_relaxed);
  if (bytes != 0) return bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
  learnt.store(bytes, std::memory_order_relaxed);
  return bytes;
}

}  // namespace

uint64_t host_limit_ceiling(uint64_t host_bytes) { return host_bytes - host_bytes / 8; }

uint64_t host_limit_or_default(uint64_t given_bytes) {
  const uint64_t host = host_memory_bytes();
  if (given_bytes == 0) return host != 0 ? host / 2 : UINT64_MAX;
  if (host == 0 || given_bytes <= host_limit_ceiling(host)) return given_bytes;
  static std::atomic<bool> told{false};
  if (!told.exchange(true))
    GSHARE_WARN("GSHARE_HOST_MEM_LIMIT=%.1f GiB is more than this host can pin (%.1f GiB of memory): "
                "paging holds its host copies to %.1f GiB. Pinned memory cannot be swapped out, and "
                "past that the kernel would kill processes for memory",
                double(given_bytes) / double(1ull << 30), double(host) / double(1ull << 30),
                double(host_limit_ceiling(host)) / double(1ull << 30));
  return host_limit_ceiling(host);
}

uint64_t HostRoom::need_of(const Slot& s) { return saturating_sub(s.movable_bytes, s.host_paging_bytes); }

bool HostRoom::fits(const Slot& s, uint64_t added, bool freeing_kept) const {
  const uint64_t own = s.residency == kResident ? s.host_paging_bytes : 0;
  return saturating_add(saturating_add(held, added), need_of(s)) <=
         saturating_add(limit, freeing_kept ? saturating_sub(kept, own) : 0);
}

HostRoom host_room(const Region& r, uint64_t limit) {
  HostRoom room;
  room.limit = limit;
  for (const Slot& s : r.slots) {
    if (s.state != kSlotLive) continue;
    room.held = saturating_add(room.held, s.host_paging_bytes);
    if (s.residency == kResident) room.kept = saturating_add(room.kept, s.host_paging_bytes);
  }
  return room;
}

}  // namespace gshare::shm
