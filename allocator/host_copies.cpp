#include "allocator/host_copies.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>

#include "base/driver_api.h"

namespace gshare::allocator {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPerThread = size_t(1) << 30;  // a toucher per GiB
constexpr int kMaxTouchers = tunables::kPageOutTouchers;

struct Span {
  char* begin;
  size_t bytes;
};

void* touch(void* argument) {
  const Span* span = static_cast<const Span*>(argument);
  volatile char* p = span->begin;
  for (size_t at = 0; at < span->bytes; at += kPage) p[at] = 0;
  return nullptr;
}

// Faults every page of [memory, memory + bytes) in, from up to
// kMaxTouchers threads for large sizes (the kernel zeroes pages on one
// core each, and a page-out of tens of GB waits for all of them).
void fault_in(char* memory, size_t bytes, int max_touchers) {
  const size_t most = size_t(std::clamp(max_touchers, 1, kMaxTouchers));
  const int threads = int(std::min<size_t>(most, std::max<size_t>(1, bytes / kPerThread)));
  const size_t share = (bytes / size_t(threads) + kPage - 1) / kPage * kPage;
  Span spans[kMaxTouchers];
  pthread_t ids[kMaxTouchers];
  bool started[kMaxTouchers] = {};
  for (int t = 0; t < threads; ++t) {
    const size_t from = std::min(bytes, size_t(t) * share);
    spans[t] = {memory + from, std::min(share, bytes - from)};
    if (t > 0) started[t] = pthread_create(&ids[t], nullptr, touch, &spans[t]) == 0;
  }
  touch(&spans[0]);
  for (int t = 1; t < threads; ++t) {
    if (started[t]) pthread_join(ids[t], nullptr);
    else touch(&spans[t]);  // no thread: this one does its share
  }
}

}  // namespace

HostCopy make_host_copy(size_t bytes, int max_touchers) {
  HostCopy copy;
  const DriverApi& api = driver();
  if (api.mem_host_register && api.mem_host_unregister) {
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) {
      madvise(memory, bytes, MADV_HUGEPAGE);  // advice only: fine where refused
      fault_in(static_cast<char*>(memory), bytes, max_touchers);
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
