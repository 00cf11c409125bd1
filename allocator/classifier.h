// Persistent or ephemeral: each allocation's class, and the job's P and E
// published in its slot (docs/DESIGN.md, §5.4; the Salus paper).
//
//   persistent  lives across iterations: weights, optimizer state. P.
//   ephemeral   born and dead within an iteration: activations,
//               workspaces. E is the peak of these per iteration.
//
// By lifetime: an allocation alive at the second release point after its
// birth is persistent (a release point is a boundary by which the process
// freed kReleaseBytes, or any boundary of a process quiet for
// kQuietBoundaries); the first of them may fall between an activation's
// birth and its free. By site (allocator/site_classes.h): a site whose
// allocations all turned out persistent gives persistent births. A caching
// framework that answers with its own figures (allocator/framework_counts.h)
// gives P directly: the least in use over its recent answers, which rises
// only once the answers have shown an iteration's end. One that caches but
// does not answer is measured by emptying its cache once at a boundary.
// Everything not persistent counts as ephemeral: reserved = P + ephemeral.
// Until two release points are classified the figures are provisional.
#pragma once

#include <cstdint>

#include "allocator/ledger.h"
#include "base/tunables.h"
#include "shm/arbiter.h"

namespace gshare::allocator {

struct Device;

struct Birth {
  uint32_t site = 0;
  uint32_t iteration = 0;
  shm::MemoryClass kind = shm::MemoryClass::kEphemeral;
};

// The site and class of an allocation of `bytes` being made by the calling
// thread. Below kSiteMinBytes no site is taken (base/tunables.h).
using tunables::kSiteMinBytes;
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
// At an iteration boundary, the framework's cache just emptied (before a
// switch, or switched out): what the process still holds is P
// (InUseWindow::record_rest). Only where P comes from a framework's
// figures.
void note_cache_emptied_at_boundary();

void forget_classes_after_fork();

}  // namespace gshare::allocator
