#include "allocator/in_use_window.h"

namespace gshare::allocator {

using tunables::kInUseIterations;
using tunables::kInUseWindow;
using tunables::kPersistentStepBytes;
using tunables::kReleaseBytes;
using tunables::kSteadyAnswers;

bool InUseWindow::record(uint64_t in_use, uint64_t held, uint64_t current_p, uint64_t iteration, uint64_t* p) {
  if (count_ > 0) {
    uint64_t last = values_[(next_ + kInUseWindow - 1) % kInUseWindow];
    bool agrees = last < in_use + kReleaseBytes && in_use < last + kReleaseBytes;
    steady_ = agrees ? steady_ + 1 : 0;
    if (last >= in_use + kReleaseBytes || steady_ + 1 >= kSteadyAnswers) settled_ = true;
  }
  values_[next_] = in_use;
  iterations_[next_] = iteration;
  next_ = (next_ + 1) % kInUseWindow;
  if (count_ < kInUseWindow) count_++;
  uint64_t least = UINT64_MAX;
  for (int i = 0; i < count_; ++i) {
    // Aged out: answers of more than kInUseIterations iterations ago, and
    // those from before the loop's first iteration (a model's set-up) once
    // two iterations have passed.
    if (iterations_[i] + kInUseIterations < iteration || (iterations_[i] == 0 && iteration >= 2)) continue;
    least = values_[i] < least ? values_[i] : least;
  }
  // What stayed at the latest rest is held at rest, whatever the answers
  // say: cached blocks a live one keeps in its segment cannot go back.
  if (rest_iteration_ + kInUseIterations >= iteration && rest_ > least) least = rest_;
  uint64_t candidate = least < held ? least : held;
  uint64_t step = current_p / 100 > kPersistentStepBytes ? current_p / 100 : kPersistentStepBytes;
  uint64_t moved = candidate > current_p ? candidate - current_p : current_p - candidate;
  if (candidate > current_p && !settled_ && count_ < kInUseWindow) return false;
  if (moved > step || (count_ == 1 && moved > 0)) {
    *p = candidate;
    return true;
  }
  return false;
}

bool InUseWindow::record_rest(uint64_t in_use, uint64_t current_p, uint64_t iteration, uint64_t* p) {
  rest_ = in_use;
  rest_iteration_ = iteration;
  settled_ = true;
  return record(in_use, in_use, current_p, iteration, p);
}

}  // namespace gshare::allocator
