// P from a caching framework's own figures (allocator/framework_counts.h):
// each answer gives what the process really uses (what it holds less the
// framework's cache), and P is the least of that over the latest
// kInUseWindow answers of the last kInUseIterations iterations: the least
// is the loss read after a step, its activations freed (docs/DESIGN.md,
// §5.4). Answers from a model's set-up, before its weights and optimizer
// state were made, age out after its second iteration: a job with few
// answers an iteration would otherwise keep its set-up's P, count its
// weights as ephemeral, and not be seen between iterations for as long. Pure
// arithmetic over one device's answers; the classifier applies the P it
// gives.
#pragma once

#include <cstdint>

#include "base/tunables.h"

namespace gshare::allocator {

class InUseWindow {
 public:
  // An answer of `in_use` bytes, while the process holds `held` (beyond
  // its context), in its iteration `iteration` (0 while none is known),
  // and its P is `current_p`. Returns true with the new P in
  // *p when P should move: it falls with any answer, but rises only once
  // the answers have shown an iteration's end (falling by kReleaseBytes or
  // more from one to the next), kSteadyAnswers running agreed within
  // kReleaseBytes (a loop that syncs at rest), or the window is full: the
  // first answers may all come from the middle of an iteration. P moves
  // only by more than kPersistentStepBytes or 1%, since each move may
  // re-form lanes; the first answer moves it by any amount.
  bool record(uint64_t in_use, uint64_t held, uint64_t current_p, uint64_t iteration, uint64_t* p);
  // The process at an iteration boundary with its cache just emptied: all
  // it holds, `in_use`, is in use at rest, which is P. Until it rests again
  // (or for kInUseIterations iterations) P stays at least that, whatever
  // the answers say: they count as free the cached blocks that share a
  // segment with a live one, which no emptying gives back. P moves as
  // record() would move it, rising at once.
  bool record_rest(uint64_t in_use, uint64_t current_p, uint64_t iteration, uint64_t* p);

 private:
  uint64_t values_[tunables::kInUseWindow] = {};
  uint64_t iterations_[tunables::kInUseWindow] = {};  // each answer's iteration
  int count_ = 0;
  int next_ = 0;
  bool settled_ = false;  // P may rise
  int steady_ = 0;        // answers running that agree with the one before
  uint64_t rest_ = 0;     // held at the latest rest (record_rest)
  uint64_t rest_iteration_ = 0;
};

}  // namespace gshare::allocator
