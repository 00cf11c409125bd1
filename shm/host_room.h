// Pinned host memory for paging, all of a GPU's jobs together, against
// GSHARE_HOST_MEM_LIMIT: what a page-out would add, and whether it fits.
// Read by the jobs that ask for room (allocator/page_requests.h) and by
// the token's picks (scheduler/token.cpp), which pass over a paged-out job
// only while no swap could bring it back.
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace gshare::shm {

// GSHARE_HOST_MEM_LIMIT's bytes as given, 0 meaning its default: half of
// the host's memory. A limit past host_limit_ceiling is held to it, with
// one warning: on an H200 host of 125 GiB, a limit of 215 GiB let paged-out
// jobs pin 106 GB of copies, and the kernel killed two jobs for memory.
uint64_t host_limit_or_default(uint64_t given_bytes);

// The most host memory paging may pin on a host of `host_bytes`: all but
// an eighth, which the jobs' own processes and the system need.
uint64_t host_limit_ceiling(uint64_t host_bytes);

struct HostRoom {
  uint64_t limit = 0;  // 0: none read yet
  uint64_t held = 0;   // pinned host memory the live jobs hold for paging
  uint64_t kept = 0;   // of it, what resident jobs keep as copies (freed when asked)
  // The host memory `s`'s page-out adds: its own kept copies are used
  // again, and it needs the rest.
  static uint64_t need_of(const Slot& s);
  // Whether `s`'s page-out fits beside `added` bytes asked for already,
  // with the copies other resident jobs keep freed for it, or without.
  bool fits(const Slot& s, uint64_t added, bool freeing_kept = true) const;
};

// Under the region's lock, or without it as a hint.
HostRoom host_room(const Region& r, uint64_t limit);

}  // namespace gshare::shm
