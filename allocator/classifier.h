// Persistent or ephemeral: each allocation's class, learned from its
// lifetime against the iteration boundaries of scheduler/iterations.h
// (docs/DESIGN.md, §5.4 "Persistent and ephemeral memory"; the Salus paper).
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
// at least kReleaseBytes (32 MiB) since the boundary before, or any
// boundary of a process that neither frees nor allocates that much for
// kQuietBoundaries (8) boundaries running. Boundaries found from syncs may fall mid-iteration (a
// forward pass that reads a value back, freeing only a small temporary);
// memory held across such a boundary is not persistent for that, and the
// frees at an iteration's end tell the real boundaries apart.
// Everything else a job reserves (not yet classified, ephemeral, a pool's
// or a caching allocator's free memory) counts as ephemeral: reserved = P +
// ephemeral, always.
//
// Sites. What is learned is kept by allocation site, a hash of a few return
// addresses of the allocating call (allocator/call_site.h, only on
// allocation calls): an allocation from a site whose allocations have all
// turned out persistent is persistent at birth, so it never inflates E
// (allocator/site_classes.h).
//
// Provisional. Until two release points have been classified the figures are
// provisional (gshare-top marks them): P lacks what has not yet lived two
// iterations, and E is the running peak of everything else.
//
// Caching allocators (PyTorch's, CuPy's pools, XLA's BFC) keep freed
// memory in segments that live forever: by lifetime alone those segments
// are persistent, P is the whole cache and E is near zero. Such a
// framework says what its own allocator holds (allocator/framework_counts.h),
// and once it does, P comes from that instead of lifetimes:
//
//   in use  = what the process holds beyond its context, less what the
//             framework holds cached (reserved but not allocated);
//   P       = the least in use over the last kInUseWindow answers, taken
//             at boundaries.
//
// A loop may sync mid-iteration, with its activations alive, but at least
// one boundary of an iteration (the loss read after the step) has them
// freed, and the least value is that one. P falls with any answer, but
// rises only once the answers have shown an iteration's end (in use
// falling by kReleaseBytes or more from one answer to the next), or three
// answers running agreed (a loop that syncs only at rest), or the window
// is full: the first answers may all come from the middle of an
// iteration, and a P that counted its activations would make the job look
// settled there, and switched out holding them. E stays the peak of what
// the process holds beyond P per iteration: the cache regrows to it. Limit: a
// loop that never syncs with its activations freed reads them as
// persistent. At an iteration boundary gshare has the framework empty its
// cache once (allocator/framework_caches.h) so that a set-up's cache does
// not count in E, and again whenever another job in the lane needs the
// memory (allocator/admission.h).
//
// A caching framework that does not answer is measured by that first
// emptying: what survives it is P, and memory born after it is not
// promoted by age. One that answers is not: until it caches, lifetimes
// are right, and an emptying may come mid-step (iterations found from
// syncs may be out of phase), where it would make live memory persistent.
// Later emptyings give memory back without measuring: they may come
// mid-iteration, where what survives is in use only until the iteration
// ends.
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

// Whether this process has a framework cache (one was emptied, or a
// framework answered with its figures).
bool has_framework_cache();

// A framework's answer (allocator/framework_counts.h), on Python's main
// thread: the figures of each framework for each device. From the first
// answer on, P comes from these (above).
struct FrameworkCount;
void note_framework_counts(const FrameworkCount* counts, int n);

void forget_classes_after_fork();

}  // namespace gshare::allocator
