#include "allocator/call_site.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>

namespace gshare::allocator {

namespace {

constexpr int kSiteFrames = 4;         // return addresses outside `skip` that make a site
constexpr int kMaxWalk = 16;           // frames looked at, skipped ones included
constexpr int kMaxLeadingFrames = 8;   // the unwinder's own frames before the caller's

// FNV-1a over the return addresses as 64-bit words.
class SiteHash {
 public:
  // Takes the next frame's return address; false once the site is complete.
  bool add(uintptr_t ip, const CodeRange& skip) {
    if (skip.contains(ip)) return true;
    hash_ = (hash_ ^ uint64_t(ip)) * 0x100000001b3ull;
    return ++taken_ < kSiteFrames;
  }
  uint32_t value() const {
    if (taken_ == 0) return 0;
    uint32_t site = uint32_t(hash_ ^ (hash_ >> 32));
    return site ? site : 1;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
  int taken_ = 0;
};

__thread SiteWalkCounts t_counts;

// --- steps: return address -> distance to the caller's stack pointer ---
//
// A slot's word is (distance << 2) | state. Distance kEnd: the unwinder
// found no caller there (the stack's end, or code without unwind tables).

constexpr uint64_t kUnseen = 0, kSeenOnce = 1, kConfirmed = 2, kVaries = 3, kStateMask = 3;
constexpr uint64_t kEnd = 0;
constexpr uint64_t kMaxStep = 1ull << 24;  // a larger frame is not cached

struct StepSlot {
  std::atomic<uintptr_t> return_address{0};  // 0: free; set once, never changed
  std::atomic<uint64_t> step{0};
};
constexpr int kStepSlotBits = 12;
constexpr uint32_t kStepSlots = 1u << kStepSlotBits;
constexpr uint32_t kMaxProbes = 32;  // then the address is not cached
StepSlot g_steps[kStepSlots];

StepSlot* find_step_slot(uintptr_t ip, bool insert) {
  uint32_t i = uint32_t((uint64_t(ip) * 0x9e3779b97f4a7c15ull) >> (64 - kStepSlotBits));
  for (uint32_t n = 0; n < kMaxProbes; ++n, i = (i + 1) & (kStepSlots - 1)) {
    StepSlot& slot = g_steps[i];
    uintptr_t held = slot.return_address.load(std::memory_order_relaxed);
    if (held == 0) {
      if (!insert) return nullptr;
      if (slot.return_address.compare_exchange_strong(held, ip, std::memory_order_relaxed))
        return &slot;
      // Another thread took the slot: `held` is now its address.
    }
    if (held == ip) return &slot;
  }
  return nullptr;
}

// The step of `ip` if two unwound walks agreed on it.
bool confirmed_step(uintptr_t ip, uint64_t* distance) {
  const StepSlot* slot = find_step_slot(ip, false);
  if (!slot) return false;
  uint64_t word = slot->step.load(std::memory_order_relaxed);
  if ((word & kStateMask) != kConfirmed) return false;
  *distance = word >> 2;
  return true;
}

// An unwound walk stepped from `ip` by `distance`; `usable` false: by a step
// the cached walk cannot repeat. A second, different step makes it kVaries.
void observe_step(uintptr_t ip, uint64_t distance, bool usable) {
  StepSlot* slot = find_step_slot(ip, true);
  if (!slot) return;
  uint64_t word = slot->step.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t state = word & kStateMask, next;
    if (state == kVaries || (state == kConfirmed && usable && word >> 2 == distance)) return;
    if (!usable || (state != kUnseen && word >> 2 != distance)) next = kVaries;
    else next = distance << 2 | (state == kUnseen ? kSeenOnce : kConfirmed);
    if (slot->step.compare_exchange_weak(word, next, std::memory_order_relaxed)) return;
  }
}

// --- the calling thread's stack ---

// [low, high): the thread's own stack, all of it readable while the thread
// lives. Empty while not known.
struct StackBounds {
  uintptr_t low;
  uintptr_t high;
  uint32_t lookups;  // reads of /proc/self/maps by this thread
};
__thread StackBounds t_stack;
// A thread whose stack cannot be known (a fiber's, one it supplied) stops
// looking; the main thread's stack may grow below what was read.
constexpr uint32_t kMaxStackLookups = 8;

// One line of /proc/self/maps, as far as a stack's bounds go.
struct Mapping {
  uintptr_t begin = 0, end = 0;
  char perms[4] = {};
  bool main_stack = false;  // named "[stack]"
};

constexpr uint64_t chars_tag(const char* s) {
  uint64_t tag = 0;
  for (; *s; ++s) tag = tag << 8 | uint8_t(*s);
  return tag;
}

unsigned hex_digit(char c) { return c <= '9' ? unsigned(c - '0') : unsigned(c - 'a' + 10); }

// The mapping that holds `address` and the line before it, from
// /proc/self/maps read with read(2) into a small buffer: no malloc, no
// stdio, any line length.
bool find_mapping(uintptr_t address, Mapping* holding, Mapping* below) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[512];
  Mapping line, previous;
  int field = 0;  // 0 begin, 1 end, 2 perms, 3 the rest
  int perm_chars = 0;
  uint64_t last_chars = 0;  // the line's last eight characters
  bool found = false;
  while (!found) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !found; ++i) {
      char c = buffer[i];
      if (c == '\n') {
        line.main_stack = last_chars == chars_tag(" [stack]");
        if (line.begin <= address && address < line.end) {
          *holding = line;
          *below = previous;
          found = true;
        }
        previous = line;
        line = Mapping();
        field = perm_chars = 0;
        last_chars = 0;
        continue;
      }
      last_chars = last_chars << 8 | uint8_t(c);
      if (field == 0 && c == '-') field = 1;
      else if (field == 0) line.begin = line.begin << 4 | hex_digit(c);
      else if (field == 1 && c == ' ') field = 2;
      else if (field == 1) line.end = line.end << 4 | hex_digit(c);
      else if (field == 2 && c == ' ') field = 3;
      else if (field == 2 && perm_chars < 4) line.perms[perm_chars++] = c;
    }
  }
  close(fd);
  return found;
}

bool perms_are(const Mapping& m, const char (&perms)[5]) {
  for (int i = 0; i < 4; ++i)
    if (m.perms[i] != perms[i]) return false;
  return true;
}

// Learns the bounds of the stack that holds `sp`, if it is this thread's
// own: the main thread's [stack], or a glibc thread's stack block, which
// has a guard page below and the thread's descriptor (the thread pointer)
// at its top. Bounding by these, not by whatever mapping holds `sp`, keeps
// out memory that could be unmapped later (a neighbouring mapping merged
// into the same line).
[[gnu::noinline]] bool learn_stack_bounds(uintptr_t sp) {
  if (t_stack.lookups >= kMaxStackLookups) return false;
  ++t_stack.lookups;
  Mapping holding, below;
  if (!find_mapping(sp, &holding, &below) || holding.perms[0] != 'r' || holding.perms[1] != 'w')
    return false;
  const uintptr_t thread_pointer = uintptr_t(__builtin_thread_pointer());
  if (holding.main_stack) {
    t_stack.low = holding.begin;
    t_stack.high = holding.end;
  } else if (below.end == holding.begin && perms_are(below, "---p") && sp < thread_pointer &&
             thread_pointer <= holding.end) {
    t_stack.low = holding.begin;
    t_stack.high = thread_pointer;
  } else {
    return false;
  }
  return sp >= t_stack.low && sp < t_stack.high;
}

bool on_known_stack(uintptr_t sp) {
  return (sp >= t_stack.low && sp < t_stack.high) || learn_stack_bounds(sp);
}

// --- the walks ---
//
// A frame is (ip, sp): the return address into a function, and that
// function's stack pointer at the call (the callee's CFA). The caller's
// frame is (*(sp + step - 8), sp + step), x86-64's return-address slot.

#if defined(__x86_64__)
bool walk_cached(const CodeRange& skip, uintptr_t ip, uintptr_t sp, uint32_t* site) {
  const uintptr_t top = t_stack.high;
  SiteHash hash;
  for (int walked = 1; hash.add(ip, skip) && walked < kMaxWalk; ++walked) {
    uint64_t step;
    if (!confirmed_step(ip, &step)) return false;
    if (step == kEnd) break;
    // A confirmed step is a multiple of 8, at least 8: the read lies in
    // [sp, top), which starts above the current stack pointer.
    if (sp + step > top) return false;
    sp += step;
    ip = *reinterpret_cast<const uintptr_t*>(sp - 8);
    // Never a confirmed caller (the outermost frame's step is kEnd): the
    // step was wrong here, and the word read is not a return address.
    if (ip == 0) return false;
  }
  *site = hash.value();
  return true;
}
#else
bool walk_cached(const CodeRange&, uintptr_t, uintptr_t, uint32_t*) { return false; }
#endif

struct UnwoundFrame {
  uintptr_t ip;
  uintptr_t sp;
  bool after_signal;  // interrupted by a signal: the frame below is a signal trampoline
};

struct Unwinding {
  const CodeRange* skip;
  uintptr_t return_address;  // the caller's frame, where the site starts
  uintptr_t frame_top;
  SiteHash hash;
  UnwoundFrame frames[kMaxWalk];  // from the caller's frame on; ip 0 ends the stack
  int count = 0;
  int leading = 0;
  bool started = false;
  bool stopped = false;  // by on_frame, not by the stack's end
};

_Unwind_Reason_Code on_frame(_Unwind_Context* context, void* argument) {
  Unwinding& u = *static_cast<Unwinding*>(argument);
  int before_instruction = 0;
  const uintptr_t ip = _Unwind_GetIPInfo(context, &before_instruction);
  const uintptr_t sp = _Unwind_GetCFA(context);
  if (!u.started) {
    u.started = ip == u.return_address && sp == u.frame_top;
    if (!u.started) return ++u.leading < kMaxLeadingFrames ? _URC_NO_REASON : _URC_NORMAL_STOP;
  }
  u.frames[u.count++] = {ip, sp, before_instruction != 0};
  if (ip == 0 || !u.hash.add(ip, *u.skip) || u.count == kMaxWalk) {
    u.stopped = true;
    return _URC_NORMAL_STOP;
  }
  return _URC_NO_REASON;
}

// Records the steps an unwound walk took, for the cached walk. Each is
// checked against the stack: the caller's return address must be the word
// just below its stack pointer. Frames off the thread's known stack teach
// nothing.
void learn_steps(const Unwinding& u, bool at_stack_end) {
  const uintptr_t low = t_stack.low, high = t_stack.high;
  for (int i = 0; i + 1 < u.count; ++i) {
    const UnwoundFrame& frame = u.frames[i];
    const UnwoundFrame& caller = u.frames[i + 1];
    if (caller.ip == 0) {  // the outermost frame (_start, clone)
      observe_step(frame.ip, kEnd, true);
      continue;
    }
    if (frame.sp < low || caller.sp > high) continue;
    const uint64_t step = caller.sp - frame.sp;
    const bool usable = caller.sp > frame.sp && step >= 8 && step % 8 == 0 && step < kMaxStep &&
                        !caller.after_signal &&
                        *reinterpret_cast<const uintptr_t*>(caller.sp - 8) == caller.ip;
    observe_step(frame.ip, step, usable);
  }
  if (at_stack_end && u.count > 0 && u.frames[u.count - 1].ip != 0)
    observe_step(u.frames[u.count - 1].ip, kEnd, true);
}

[[gnu::noinline]] uint32_t walk_unwound(const CodeRange& skip, uintptr_t return_address,
                                        uintptr_t frame_top) {
  Unwinding u;
  u.skip = &skip;
  u.return_address = return_address;
  u.frame_top = frame_top;
  _Unwind_Reason_Code result = _Unwind_Backtrace(on_frame, &u);
  if (!u.started) return 0;
  learn_steps(u, result == _URC_END_OF_STACK && !u.stopped);
  return u.hash.value();
}

}  // namespace

// noipa: its own frame, so that its return address and CFA are its caller's
// call.
[[gnu::noipa]] uint32_t call_site(const CodeRange& skip, SiteWalk walk) {
  const uintptr_t return_address = uintptr_t(__builtin_return_address(0));
  const uintptr_t frame_top = uintptr_t(__builtin_dwarf_cfa());
  uint32_t site;
  if (on_known_stack(frame_top) && walk == SiteWalk::kCached &&
      walk_cached(skip, return_address, frame_top, &site)) {
    ++t_counts.cached;
    return site;
  }
  ++t_counts.unwound;
  return walk_unwound(skip, return_address, frame_top);
}

SiteWalkCounts site_walk_counts() { return t_counts; }

}  // namespace gshare::allocator
