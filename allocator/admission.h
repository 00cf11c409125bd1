// Admission: an allocation that does not fit waits instead of failing.
//
// The arbiter (shm/arbiter.h) answers a reservation at once; this is what
// an allocation hook does with the answer:
//
//   over quota     the job's own limit: CUDA_ERROR_OUT_OF_MEMORY at once.
//   inadmissible   the safety condition ΣP + Σ_lanes max E <= C would fail
//                  (rules/lanes.h). The job steps aside from the launch
//                  token, so that it blocks nobody, and waits for others to
//                  shrink or leave. Under paging it waits for the token
//                  instead (also over capacity): with it, it asks the jobs
//                  then not running to page out (allocator/page_requests.h).
//   over capacity  the condition holds, but the bytes are held now: by the
//                  running job of its lane (a turn), or as cache by a job
//                  that is switched out. The cache holders are asked to
//                  give it back; if the bytes are in real use by a job that
//                  is not running, a waiter that holds no ephemeral memory
//                  itself steps aside so that job can finish its iteration
//                  and free them. One that holds some keeps its turn: a job
//                  given the turn could take part of what it still needs,
//                  and each would wait for the other's part. Jobs whose E
//                  is not yet known share one lane (rules/lanes.h), so
//                  they take turns from their first allocation.
//
// Should every job that holds memory be waiting for admission, the one that
// has waited longest is admitted on the bytes really free alone (shm/
// arbiter.cpp says why this can happen). Either wait prints one message,
// ends when the reservation is granted, and
// after GSHARE_ADMIT_TIMEOUT_S gives up with CUDA_ERROR_OUT_OF_MEMORY and a
// message naming the condition that failed and by how much.
//
// Turns. Ephemeral memory (and memory not yet classified) belongs to the
// running job: a job that does not hold its token (the GPU's, or under pack
// its lane's) waits for it before allocating any, when another job shares
// that token. Two jobs that take turns then never each hold part of the
// same ephemeral space while waiting for the rest (which could deadlock
// them). A job alone with its token allocates at once.
//
// Giving back. A job asked for its cache (Slot::release_requests) gives
// back the free memory of its stream-ordered pools at its next wait for the
// token or allocation, or within a quarter second from the upkeep thread.
#pragma once

#include <cstdint>

#include "base/options.h"
#include "shm/arbiter.h"

namespace gshare::allocator {

struct Device;

void configure_admission(const Options& options);

// Reserves `bytes` of class `kind` on `device`; with `allocations` > 0 they
// also count as allocated (reserve_allocation). Waits as described above.
// `call` names the driver call in messages.
shm::ReserveResult admit(Device& device, const char* call, uint64_t bytes, uint32_t allocations,
                         shm::MemoryClass kind);

// An ephemeral allocation that needs no new memory (a stream-ordered pool
// serving it from its own free memory) still takes its turn, as above: two
// jobs of one lane never each hold part of its space.
void take_turn_without_memory(Device& device);

// The driver refused an allocation that gshare had admitted: memory gshare
// does not see is in use (a process that just exited and whose memory the
// driver has not yet freed, another program, the driver's own). Waits like
// an allocation over capacity (asking for cache back and, under paging, for
// page-outs of jobs that are not running; stepping aside) until
// the driver reports `bytes` free, or GSHARE_ADMIT_TIMEOUT_S. True: try the
// allocation again. `started_ns` (0 at first) keeps the wait's start across
// tries.
bool wait_after_driver_refused(Device& device, const char* call, uint64_t bytes,
                               uint64_t* started_ns);

// Answers requests from other jobs to give back cached memory, on every
// attached device. Cheap when there are none. From the upkeep thread and
// allocation paths: pools only; a process with a framework cache leaves
// the answer to a hook thread, which can have the framework empty it.
void answer_release_requests();
// The same from a wait for the token or a host sync, where the frameworks'
// caches can be emptied too (allocator/framework_caches.h).
void answer_release_requests_from_hook();
// The same from the upkeep thread's tick, which also watches whether the
// job sits quiet (no launch and no wait for the token or memory) with
// `launches` launched so far: a job quiet for tunables::kQuietRestNs
// counts as at rest, its framework's cache free to empty even mid-step.
void answer_release_requests_from_upkeep(uint64_t launches, uint64_t now_ns);

// After a host sync that ended an iteration: a job that no longer holds
// its token and shares its lane gives its framework cache and its
// stream-ordered pools' free memory back now, so the
// lane's next job finds the ephemeral space free. (Asked later, it could be
// blocked inside the framework's own allocator, where the cache cannot be
// emptied.) Whether a framework's cache was emptied.
bool give_back_cache_when_switched_out();

// The holder, asked to yield at an iteration boundary, holds memory the
// next job may need (shm::Arbiter::holds_unsettled_memory): it gives its
// framework cache and its pools' free memory back first, from this hook
// thread. Whatever stays is in
// real use, and the job keeps its turn until it is not. Whether a
// framework's cache was emptied; `freed_bytes`, if given, gets what went
// back in all.
bool give_back_cache_before_switch(uint64_t* freed_bytes = nullptr);

// At an iteration boundary, while other jobs wait for memory or for
// admission: the caches go back (the framework's and the pools' free
// memory), even from the running job. Its next iteration grows them again
// only in its turn; meanwhile a waiter that is mid-iteration can finish its
// own. Waiters for a lane's space do not count: the hand-over gives the
// cache back when their turn comes.
void give_back_cache_to_waiters();

}  // namespace gshare::allocator
