#include "allocator/host_copies.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>

#include "base/driver_api.h"

namespace gshare::allocator {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPerThread = size_t(1) << 30;  // a toucher per GiB
constexpr size_t kPiece = size_t(64) << 20;     // faulted in at a time; the pace is read between
constexpr int kMaxTouchers = tunables::kPageOutTouchers;

// Memory being faulted in, a piece at a time by whichever thread comes.
struct Faulting {
  char* memory;
  size_t bytes;
  std::atomic<size_t> next{0};  // the offset of the next piece
  std::atomic<bool> stop{false};
};

// Faults in one piece; false when none is left.
bool fault_piece(Faulting& f) {
  if (f.stop.load(std::memory_order_relaxed)) return false;
  const size_t at = f.next.fetch_add(kPiece, std::memory_order_relaxed);
  if (at >= f.bytes) return false;
  volatile char* p = f.memory + at;
  const size_t end = std::min(kPiece, f.bytes - at);
  for (size_t offset = 0; offset < end; offset += kPage) p[offset] = 0;
  return true;
}

void* toucher(void* argument) {
  Faulting& f = *static_cast<Faulting*>(argument);
  while (fault_piece(f)) {
  }
  return nullptr;
}

// Faults every page of [memory, memory + bytes) in, from up to
// `max_touchers` threads for large sizes (the kernel zeroes pages on one
// core each, and a page-out of tens of GB waits for all of them), more
// once `pace` says hurry. False if it said stop.
bool fault_in(char* memory, size_t bytes, int max_touchers, PaceCheck pace) {
  const int wanted = int(std::min<size_t>(kMaxTouchers, std::max<size_t>(1, bytes / kPerThread)));
  Faulting f{memory, bytes};
  pthread_t ids[kMaxTouchers];
  int started = 0;
  auto start_touchers = [&](int total) {
    while (started + 1 < total && pthread_create(&ids[started], nullptr, toucher, &f) == 0) ++started;
  };
  start_touchers(std::min(wanted, std::clamp(max_touchers, 1, kMaxTouchers)));
  bool hurried = false;
  while (fault_piece(f)) {
    if (!pace.read) continue;
    const Pace now = pace.read(pace.context);
    if (now == Pace::kStop) f.stop.store(true, std::memory_order_relaxed);
    if (now == Pace::kHurry && !hurried) {
      hurried = true;
      start_touchers(wanted);
    }
  }
  for (int t = 0; t < started; ++t) pthread_join(ids[t], nullptr);
  return !f.stop.load(std::memory_order_relaxed);
}

}  // namespace

HostCopy make_host_copy(size_t bytes, int max_touchers, PaceCheck pace) {
  HostCopy copy;
  const DriverApi& api = driver();
  if (api.mem_host_register && api.mem_host_unregister) {
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) {
      madvise(memory, bytes, MADV_HUGEPAGE);  // advice only: fine where refused
      if (!fault_in(static_cast<char*>(memory), bytes, max_touchers, pace)) {
        munmap(memory, bytes);
        copy.stopped = true;
        return copy;
      }
      if (api.mem_host_register(memory, bytes, 0) == CUDA_SUCCESS) {
        copy.pointer = reinterpret_cast<uint64_t>(memory);
        copy.registered = true;
        return copy;
      }
      munmap(memory, bytes);
    }
  }
  void* pinned = nullptr;
  if (api.mem_host_alloc && api.mem_host_alloc(&pinned, bytes, 0) == CUDA_SUCCESS)
    copy.pointer = reinterpret_cast<uint64_t>(pinned);
  return copy;
}

void free_host_copy(const HostCopy& copy, size_t bytes) {
  if (copy.pointer == 0) return;
  const DriverApi& api = driver();
  void* memory = reinterpret_cast<void*>(copy.pointer);
  if (copy.registered) {
    if (api.mem_host_unregister) api.mem_host_unregister(memory);
    munmap(memory, bytes);
  } else if (api.mem_free_host) {
    api.mem_free_host(memory);
  }
}

}  // namespace gshare::allocator
