// The site of an allocating call: a hash of the first four return addresses
// on the calling thread's stack that lie outside a given code range
// (gshare's own, so that hooks are not sites), at most 16 frames deep.
// allocator/classifier.h keys what it learns by it.
//
// How the stack is walked. Every allocation of 2 MiB or more takes a site,
// so the walk must cost far less than the microsecond gshare may add to a
// cuMemAlloc/cuMemFree pair, and nothing on it may lock or grow with the
// number of loaded objects.
//
//   unwound  libgcc's _Unwind_Backtrace (linked in statically), from the
//            unwind tables. Its FDE lookup is _dl_find_object (lock-free,
//            glibc >= 2.35, which libgshare.so needs anyway), but each
//            frame still costs ~130 ns of CFI interpretation: about 1 us a
//            site. (LLVM's libunwind, used before, took the loader lock
//            and walked the loaded objects for each frame: 2 to 10 us a
//            site, growing with the objects loaded.) It also learns each
//            frame's step: the distance from the frame's stack pointer to
//            its caller's (x86-64: the caller's return address is the word
//            just below that), checking that the word there is the return
//            address it found.
//   cached   the same steps from a process-wide, lock-free table of return
//            address -> step: about 20 ns for the whole walk. A return
//            address is used only once two unwound walks found the same
//            step for it; one whose step ever differed (alloca, realigned
//            stacks) or failed the check (signal frames) is never used
//            again.
//
// A walk takes the cached path when every frame it needs has a confirmed
// step and the calling thread's stack bounds are known, else the unwound
// one. The cached walk reads only words between the current stack pointer
// and the top of the thread's own stack, found once per thread from
// /proc/self/maps (read without malloc): the main thread's [stack], or a
// glibc thread's stack block (a guard page below, the thread pointer at
// its top). Elsewhere (a fiber's or a signal's alternate stack, a stack
// the program supplied) the walk is unwound. So a step that turns out
// wrong can only give a wrong site (a misclassification at birth), never a
// fault.
#pragma once

#include <cstdint>

namespace gshare::allocator {

// Code whose frames are not part of a site: [begin, end).
struct CodeRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool contains(uintptr_t address) const { return address >= begin && address < end; }
};

enum class SiteWalk {
  kCached,   // the cached steps where known, else unwound (what gshare uses)
  kUnwound,  // always unwound (tests compare the two)
};

// The site of the calling function's call, seen from its caller on: 0 if no
// frame outside `skip` was found. Thread-safe, never allocates, never locks.
uint32_t call_site(const CodeRange& skip, SiteWalk walk = SiteWalk::kCached);

// How the calling thread's walks went, for tests.
struct SiteWalkCounts {
  uint64_t cached = 0;
  uint64_t unwound = 0;
};
SiteWalkCounts site_walk_counts();

}  // namespace gshare::allocator
