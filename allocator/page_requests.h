// Who asks whom for room under paging (allocator/pager.h): a job whose
// memory does not fit asks jobs that are not running to page out, and may
// keep its token while that room is on its way. The pager threads of the
// jobs asked answer; this is only the asking.
#pragma once

#include <cstdint>

#include "shm/arbiter.h"

namespace gshare::allocator {

// From a wait for memory on `arbiter` that is `short_bytes` short: asks
// jobs that hold movable memory and no token, are not running and are not
// still copying, until what they hold covers the shortfall; at most every
// kAskPageOutAgainNs, counting the room already on its way. `asked_at_ns`
// (0 at first) keeps the time of the last ask across calls. Does nothing
// without paging. Whom first: idle jobs (they may not come back for long),
// then the one whose turn ended last (by turns, it runs again last), then
// the largest; the job the policy runs next (scheduler::next_in_line)
// only when no other will do. Each is also asked for its cache
// (Slot::release_requests), which its pager waits for before the copies.
// With `kept_copies_only` (a prefetch's ask), only jobs whose page-out
// needs no host memory beyond what is free under GSHARE_HOST_MEM_LIMIT are
// asked, none of the copies other jobs keep freed for it: a swap that must
// pin anew costs seconds of host work and another job's kept copy, more
// than a prefetch ahead of need may spend; that swap waits for the job's
// turn.
void ask_for_page_outs(shm::Arbiter& arbiter, uint64_t short_bytes, uint64_t* asked_at_ns,
                       bool kept_copies_only = false);

// A page-out needs `need_bytes` more pinned host memory than the GPU's
// paged jobs leave under GSHARE_HOST_MEM_LIMIT: asks resident jobs that
// keep host copies of their memory (a faster next page-out) to free that
// much of them, the largest keepers first, each for what is still missing
// (Slot::host_release_bytes), so that copies nobody needs stay. Says
// whether any was asked, or is still answering an earlier ask.
bool ask_for_host_copies(shm::Arbiter& arbiter, uint64_t need_bytes);

// Whether another job is paging out, or has been asked to and not yet
// answered and its copy fits the host-memory limit beside the others'
// (the copies resident jobs keep counted as freeable): room on its way.
bool room_on_its_way(const shm::Arbiter& arbiter);

// The exception to the resource order under paging: a job that holds its
// token and waits for room may keep the token while page-outs are under way
// for it (the room comes from pagers, which need no token), and for at most
// kPageInHoldNs with none (a page-out asked of a job whose copy would pass
// the host-memory limit is none: room_on_its_way). True:
// keep waiting with the token; `held_since` (0 at first) keeps the time
// across calls.
bool keep_token_for_room(shm::Arbiter& arbiter, uint64_t* held_since, uint64_t now);

}  // namespace gshare::allocator
