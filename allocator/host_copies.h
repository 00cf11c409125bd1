// Pinned host memory for page-outs (allocator/pager.h).
//
// cuMemHostAlloc pins at about 2.2 GB/s on an H100 host (measured with
// bench/paging/pin_rate.py); so a first page-out of tens of GB took tens of
// seconds. Anonymous memory advised to use transparent huge pages, faulted
// in by several threads (one write per 4 KiB page) and then registered
// with cuMemHostRegister pins at about 18 GB/s on the same host, and
// copies at the same rate. That is the way taken; cuMemHostAlloc is the
// fallback where registering fails. Either way the copy is page-locked
// and the GPU's copy engines read and write it directly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/tunables.h"

namespace gshare::allocator {

struct HostCopy {
  uint64_t pointer = 0;
  bool registered = false;  // mmap + cuMemHostRegister; else cuMemHostAlloc
  bool stopped = false;     // pointer 0: the pace said stop (Pace::kStop)
};

// How a copy made ahead of need goes on, asked between the pieces it
// faults in: steady with its few threads, or in a hurry with a page-out's
// (its job is asked to page out, and the page-out needs the copy), or not
// at all (its job is asked to give host memory up).
enum class Pace { kSteady, kHurry, kStop };
struct PaceCheck {
  Pace (*read)(const void* context) = nullptr;  // nullptr: always steady
  const void* context = nullptr;
};

// `bytes` of pinned host memory, or pointer 0 when neither way worked (or
// `pace` said stop). Faulted in by up to `max_touchers` threads (one per
// GiB), up to kPageOutTouchers once `pace` says hurry.
HostCopy make_host_copy(size_t bytes, int max_touchers = tunables::kPageOutTouchers, PaceCheck pace = {});

// Gives a copy made by make_host_copy back.
void free_host_copy(const HostCopy& copy, size_t bytes);

}  // namespace gshare::allocator
