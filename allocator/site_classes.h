// What each allocation site's allocations turned out to be (a site is a
// hash of the allocating call's return addresses, allocator/call_site.h):
// an allocation from a site whose allocations have all turned out
// persistent is persistent at birth, so it never inflates E
// (allocator/classifier.h).
#pragma once

#include <cstdint>

namespace gshare::allocator {

// The site of the calling thread's allocation, frames inside gshare left
// out (they are hooks, not sites).
uint32_t stack_site();

// One allocation from `site` turned out persistent, or ephemeral.
void count_site(uint32_t site, bool persistent);

// Whether allocations from `site` are persistent at birth: all so far were,
// and the process has freed device memory at all (until it has, every site
// looks persistent: a caching framework allocates from one site and frees
// nothing before its cache is first emptied).
bool site_is_persistent(uint32_t site);

// The process freed device memory.
void note_process_frees();

// In a forked child: the locks start free, and the child has freed nothing.
void forget_sites_after_fork();

}  // namespace gshare::allocator
