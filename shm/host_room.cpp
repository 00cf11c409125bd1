#include "shm/host_room.h"

#include <unistd.h>

#include "base/saturating.h"

namespace gshare::shm {

uint64_t host_limit_or_default(uint64_t given_bytes) {
  if (given_bytes != 0) return given_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : UINT64_MAX;
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
