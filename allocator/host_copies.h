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
};

// `bytes` of pinned host memory, or pointer 0 when neither way worked.
// Faulted in by up to `max_touchers` threads (one per GiB).
HostCopy make_host_copy(size_t bytes, int max_touchers = tunables::kPageOutTouchers);

// Gives a copy made by make_host_copy back.
void free_host_copy(const HostCopy& copy, size_t bytes);

}  // namespace gshare::allocator
