// Persistent or ephemeral: each allocation's class, learned from its
// lifetime against the iteration boundaries of scheduler/iterations.h
// (DESIGN.md, "Memory"; the Salus paper).
//
//   persistent  lives across iterations: weights, optimizer state,
//               framework state. Counted in the job's P.
//   ephemeral   born and dead within an iteration: activations,
//               workspaces. The job's E is the peak of these per iteration.
//
// The rule. An allocation still alive at the second release point after
// its birth is persistent (one may fall between an ephemeral buffer's birth
// and its free: a loop frees its activations after the sync that ends the
// iteration). A release point is a boundary by which the process has freed
// memory since the boundary before, or any boundary of a process that
// frees nothing for kQuietBoundaries boundaries running. Boundaries found
// from syncs may fall mid-iteration (a forward pass that reads a value
// back); memory held across such a boundary is not persistent for that,
// and the frees at an iteration's end tell the real boundaries apart.
// Everything else a job reserves (not yet classified, ephemeral, a pool's
// or a caching allocator's free memory) counts as ephemeral: reserved = P +
// ephemeral, always.
//
// Sites. What is learned is kept by allocation site, a hash of a few return
// addresses of the allocating call (allocator/call_site.h, only on
// allocation calls): an allocation from a site whose allocations have all
// turned out persistent is persistent at birth, so it never inflates E.
//
// Provisional. Until two release points have been classified the figures are
// provisional (gshare-top marks them): P lacks what has not yet lived two
// iterations, and E is the running peak of everything else.
//
// Caching allocators (PyTorch's, CuPy's pools) keep freed memory in
// segments that live forever: by lifetime alone those segments are
// persistent, P is the whole cache and E is near zero. So once a process
// has been classified, gshare measures instead: at an iteration boundary it
// has the framework empty its cache (allocator/framework_caches.h). What
// survives is in use across the boundary: P. The cache regrows during the
// next iteration: E. From then on memory born after the last emptying is
// not promoted by age (a cache is long-lived by design). Later emptyings
// (another job in the lane needs the memory, allocator/admission.h) give
// memory back without measuring: they may come mid-iteration, where what
// survives is in use only until the iteration ends.
#pragma once

#include <cstdint>

#include "allocator/ledger.h"
#include "shm/arbiter.h"

namespace gshare::allocator {

struct Device;

struct Birth {
  uint32_t site = 0;
  uint32_t iteration = 0;
  shm::MemoryClass kind = shm::MemoryClass::kEphemeral;
};

// The site and class of an allocation of `bytes` being made by the calling
// thread. Below kSiteMinBytes no site is taken: small buffers hardly move P
// or E, and they are classified by age alone (a site costs tens of
// nanoseconds once its frames are cached, a few microseconds until then).
inline constexpr uint64_t kSiteMinBytes = 2ull << 20;
Birth classify_birth(uint64_t bytes);

// An allocation died: its site learns from how long it lived.
void note_death(const Allocation& entry);

// The process's iteration count is now `iterations`: promotes what has
// lived two boundaries and publishes each device's P and E. Cheap when the
// count has not moved.
void note_iterations(uint64_t iterations);

// The class an entry's bytes are counted in.
inline shm::MemoryClass class_of(const Allocation& entry) {
  return entry.persistent ? shm::MemoryClass::kPersistent : shm::MemoryClass::kEphemeral;
}

// The framework emptied its cache (allocator/framework_caches.h): what is
// still alive is persistent, and memory born from now on is not promoted by
// age. Call after the emptying, from the thread that did it.
void note_cache_emptied();

// Marks the frees that follow as a cache being emptied: their sites learn
// "ephemeral". Scoped.
struct EmptyingCache {
  EmptyingCache();
  ~EmptyingCache();
};

// From the second classified boundary on, a process with a framework cache
// has it emptied once to measure P and E. Runs it if due and possible here:
// call right after a host sync that ended an iteration, when the
// iteration's ephemeral memory is free.
void measure_framework_cache_if_due();

// Has the frameworks empty their caches (if this thread can) and, if that
// freed anything, notes it as above. Returns the bytes freed. Only the
// measuring emptying may promote: anywhere else, what survives may be a
// live iteration's memory.
uint64_t empty_framework_caches_and_measure();

// Has the frameworks empty their caches (if this thread can), to give the
// memory back to other jobs. Once the cache was measured, what survives
// and has lived two release points becomes persistent. Returns the bytes
// freed.
uint64_t give_back_framework_caches();

// Whether this process has a framework cache (one was emptied).
bool has_framework_cache();

void forget_classes_after_fork();

}  // namespace gshare::allocator
