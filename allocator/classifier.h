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
// gives P directly, and one that caches but does not answer is measured by
// emptying its cache once at a boundary (allocator/framework_classes.h).
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

// In a fork()ed child: everything learned was the parent's (the
// framework's figures too, allocator/framework_classes.h).
void forget_classes_after_fork();

}  // namespace gshare::allocator
