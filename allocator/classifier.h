// Persistent or ephemeral: each allocation's class, learned from its
// lifetime against the iteration boundaries of scheduler/iterations.h
// (DESIGN.md, "Memory"; the Salus paper).
//
//   persistent  lives across iterations: weights, optimizer state,
//               framework state. Counted in the job's P.
//   ephemeral   born and dead within an iteration: activations,
//               workspaces. The job's E is the peak of these per iteration.
//
// The rule. An allocation still alive at the second boundary after its
// birth is persistent (one boundary may fall between an ephemeral buffer's
// birth and its free: a loop frees its activations after the sync that
// ends the iteration). Everything else a job reserves (not yet classified,
// ephemeral, a pool's or a caching allocator's free memory) counts as
// ephemeral: reserved = P + ephemeral, always.
//
// Sites. What is learned is kept by allocation site, a hash of a few return
// addresses of the allocating call (libunwind, only on allocation calls):
// an allocation from a site whose allocations have all turned out
// persistent is persistent at birth, so it never inflates E.
//
// Provisional. Until two boundaries have been classified the figures are
// provisional (gshare-top marks them): P lacks what has not yet lived two
// iterations, and E is the running peak of everything else.
//
// Caching allocators (PyTorch's, CuPy's pools) keep freed memory in
// segments that live forever: seen from the driver those segments are
// persistent, P is the whole cache and E is near zero. That is safe (no job
// is promised memory another holds), and allocator/admission.h asks a
// switched-out job to give its cache back when a job in its lane needs it.
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

// The site and class of an allocation being made by the calling thread.
Birth classify_birth();

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

void forget_classes_after_fork();

}  // namespace gshare::allocator
