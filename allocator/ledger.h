// The per-process ledger of live device memory: every allocation gshare
// counted, so that a free gives back exactly what its allocation took and a
// free of a pointer gshare never saw passes through untouched.
//
// An open-addressing hash table (linear probing, backward-shift deletion) in
// memory from mmap, never malloc: it is used inside hooks, possibly while
// the program's own allocator is mid-call. Growth doubles the table under
// the ledger's lock. Process-private: other processes see only the totals
// in the arbiter.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace gshare::allocator {

// What a key names. Pointers and handles live in separate key spaces.
enum class AllocationKind : uint8_t {
  kDevice = 1,    // cuMemAlloc: key = device pointer
  kPitch,         // cuMemAllocPitch: key = device pointer
  kManaged,       // cuMemAllocManaged: key = pointer
  kPoolBlock,     // cuMemAllocAsync / FromPool: key = pointer; bytes = 0 (the pool is charged)
  kPhysical,      // cuMemCreate: key = handle; bytes charged until released *and* unmapped
  kMapping,       // cuMemMap: key = virtual address; `handle` = the physical handle
};

struct Allocation {
  uint64_t key = 0;
  uint64_t bytes = 0;       // bytes charged to the arbiter for this entry
  uint64_t birth_ns = 0;    // CLOCK_MONOTONIC at allocation
  uint64_t handle = 0;      // kMapping: the mapped physical handle; kPoolBlock: the pool
  uint64_t extent = 0;      // kMapping: bytes mapped; kPitch: the pitch
  uint64_t context = 0;     // CUcontext current at allocation (freed with it)
  uint32_t site = 0;        // allocation-site hash, 0 if unknown
  uint32_t birth_iteration = 0;  // the process's iteration count at allocation (allocator/classifier.h)
  uint8_t persistent = 0;   // counted in P (born from a persistent site, or promoted)
  int16_t device = -1;      // device ordinal the bytes are charged to
  AllocationKind kind = AllocationKind::kDevice;
  uint8_t released = 0;     // kPhysical: cuMemRelease was called
  uint32_t map_count = 0;   // kPhysical: live mappings of the handle
  // kDevice under paging (allocator/movable_memory.h): `key` is reserved
  // address space of `extent` bytes, backed by the physical `handle` while
  // resident; paged out, its contents wait in `host_copy` (pinned, kept for
  // the next page-out; allocator/host_copies.h, `host_registered` saying
  // how it was made) and `handle` is 0.
  uint8_t movable = 0;
  uint8_t paged = 0;
  uint8_t host_registered = 0;
  uint64_t host_copy = 0;
  // A movable allocation exported through CUDA IPC (allocator/memory_export.h)
  // is never paged again: `export_fd` is its physical memory's shareable
  // descriptor, handed (duplicated) to importers, and `export_serial` tells
  // its handles from those of a later allocation at the same address.
  uint8_t exported = 0;
  uint32_t export_serial = 0;
  int32_t export_fd = -1;
};

class Ledger {
 public:
  constexpr Ledger() = default;
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;
  ~Ledger();

  // False only if no memory could be had for the table; the caller must then
  // undo the allocation rather than lose track of it.
  bool insert(const Allocation& a);
  // Removes the entry of (space, key), copying it to *out. False if absent.
  bool remove(AllocationKind space, uint64_t key, Allocation* out);
  bool find(AllocationKind space, uint64_t key, Allocation* out) const;
  // Applies `update` to the entry in place, under the lock. False if absent.
  template <class Update>
  bool update(AllocationKind space, uint64_t key, Update&& update);

  // Removes every entry for which match(entry) holds and passes a copy of
  // each to fn, under the lock (fn may take the arbiter's lock, never the
  // ledger's). Returns how many.
  template <class Match, class Fn>
  size_t drain_if(Match&& match, Fn&& fn);

  // Calls fn(Allocation&) for every entry, under the lock. fn may change
  // an entry's class fields, never its key, kind, device or bytes.
  template <class Fn>
  void for_each(Fn&& fn);

  size_t size() const;
  // Bytes charged to `device` by entries of every kind.
  uint64_t bytes_on_device(int device) const;

  // Structural check for tests: every entry reachable from its home slot,
  // sizes and totals consistent.
  bool is_valid(char* why, size_t why_len) const;

  // A fork()ed child keeps the parent's table but owns none of its memory.
  void clear_after_fork();

 private:
  static constexpr int kMaxDevices = 64;
  // Small: promotion by age reads every cell at each release point
  // (allocator/classifier.cpp), so a job with few allocations reads few.
  // The table doubles as it fills.
  static constexpr size_t kInitialCapacity = 256;

  size_t home(AllocationKind space, uint64_t key) const;
  long index_of(AllocationKind space, uint64_t key) const;
  bool grow();
  void erase_at(size_t index);

  mutable pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  Allocation* table_ = nullptr;  // kind == 0 marks an empty cell
  size_t capacity_ = 0;          // power of two
  size_t size_ = 0;
  uint64_t device_bytes_[kMaxDevices] = {};
};

// Key spaces: pointer kinds share one, handles and mappings have their own.
inline AllocationKind key_space(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kPhysical:
    case AllocationKind::kMapping: return kind;
    default: return AllocationKind::kDevice;
  }
}

template <class Update>
bool Ledger::update(AllocationKind space, uint64_t key, Update&& update) {
  pthread_mutex_lock(&mutex_);
  long i = index_of(space, key);
  if (i >= 0) {
    Allocation& a = table_[i];
    int device = a.device;
    uint64_t before = a.bytes;
    update(a);
    if (device >= 0 && device < kMaxDevices) device_bytes_[device] += a.bytes - before;
  }
  pthread_mutex_unlock(&mutex_);
  return i >= 0;
}

template <class Fn>
void Ledger::for_each(Fn&& fn) {
  pthread_mutex_lock(&mutex_);
  for (size_t i = 0; i < capacity_; ++i)
    if (table_[i].kind != AllocationKind{}) fn(table_[i]);
  pthread_mutex_unlock(&mutex_);
}

template <class Match, class Fn>
size_t Ledger::drain_if(Match&& match, Fn&& fn) {
  pthread_mutex_lock(&mutex_);
  size_t drained = 0;
  for (size_t i = 0; i < capacity_;) {
    Allocation& a = table_[i];
    if (a.kind == AllocationKind{} || !match(a)) {
      ++i;
      continue;
    }
    Allocation copy = a;
    if (copy.device >= 0 && copy.device < kMaxDevices) device_bytes_[copy.device] -= copy.bytes;
    erase_at(i);  // may pull a later entry into i: look at i again
    fn(copy);
    ++drained;
  }
  pthread_mutex_unlock(&mutex_);
  return drained;
}

}  // namespace gshare::allocator
