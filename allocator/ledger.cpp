#include "allocator/ledger.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>

namespace gshare::allocator {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: pointers differ only in a few bits
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

Allocation* map_table(size_t capacity) {
  void* p = mmap(nullptr, capacity * sizeof(Allocation), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Allocation*>(p);  // zero-filled: all empty
}

bool same(const Allocation& a, AllocationKind space, uint64_t key) {
  return a.key == key && key_space(a.kind) == space;
}

}  // namespace

Ledger::~Ledger() {
  if (table_) munmap(table_, capacity_ * sizeof(Allocation));
}

size_t Ledger::home(AllocationKind space, uint64_t key) const {
  return size_t(mix(key ^ (uint64_t(space) << 56))) & (capacity_ - 1);
}

long Ledger::index_of(AllocationKind space, uint64_t key) const {
  if (!table_) return -1;
  for (size_t i = home(space, key);; i = (i + 1) & (capacity_ - 1)) {
    const Allocation& a = table_[i];
    if (a.kind == AllocationKind{}) return -1;
    if (same(a, space, key)) return long(i);
  }
}

bool Ledger::grow() {
  size_t capacity = capacity_ ? capacity_ * 2 : kInitialCapacity;
  Allocation* table = map_table(capacity);
  if (!table) return false;
  Allocation* old = table_;
  size_t old_capacity = capacity_;
  table_ = table;
  capacity_ = capacity;
  for (size_t i = 0; i < old_capacity; ++i) {
    const Allocation& a = old[i];
    if (a.kind == AllocationKind{}) continue;
    size_t j = home(key_space(a.kind), a.key);
    while (table_[j].kind != AllocationKind{}) j = (j + 1) & (capacity_ - 1);
    table_[j] = a;
  }
  if (old) munmap(old, old_capacity * sizeof(Allocation));
  return true;
}

bool Ledger::insert(const Allocation& a) {
  pthread_mutex_lock(&mutex_);
  bool ok = true;
  if ((size_ + 1) * 10 > capacity_ * 7) ok = grow();  // keep load below 0.7
  if (ok) {
    AllocationKind space = key_space(a.kind);
    size_t i = home(space, a.key);
    while (table_[i].kind != AllocationKind{} && !same(table_[i], space, a.key))
      i = (i + 1) & (capacity_ - 1);
    if (table_[i].kind != AllocationKind{}) {
      // The driver handed out a key we still hold: our record is stale
      // (freed behind our back). Replace it, keeping totals right.
      if (table_[i].device >= 0 && table_[i].device < kMaxDevices)
        device_bytes_[table_[i].device] -= table_[i].bytes;
      --size_;
    }
    table_[i] = a;
    ++size_;
    if (a.device >= 0 && a.device < kMaxDevices) device_bytes_[a.device] += a.bytes;
  }
  pthread_mutex_unlock(&mutex_);
  return ok;
}

void Ledger::erase_at(size_t index) {
  // Backward-shift deletion: pull later entries of the probe run into the
  // hole so that lookups never need tombstones.
  size_t hole = index;
  for (size_t i = (hole + 1) & (capacity_ - 1);; i = (i + 1) & (capacity_ - 1)) {
    Allocation& a = table_[i];
    if (a.kind == AllocationKind{}) break;
    size_t h = home(key_space(a.kind), a.key);
    // Move a into the hole if its home is not in (hole, i] cyclically.
    bool home_after_hole = (i > hole) ? (h > hole && h <= i) : (h > hole || h <= i);
    if (!home_after_hole) {
      table_[hole] = a;
      hole = i;
    }
  }
  table_[hole] = Allocation{};
  table_[hole].kind = AllocationKind{};
  --size_;
}

bool Ledger::remove(AllocationKind space, uint64_t key, Allocation* out) {
  pthread_mutex_lock(&mutex_);
  long i = index_of(space, key);
  if (i >= 0) {
    *out = table_[i];
    if (out->device >= 0 && out->device < kMaxDevices) device_bytes_[out->device] -= out->bytes;
    erase_at(size_t(i));
  }
  pthread_mutex_unlock(&mutex_);
  return i >= 0;
}

bool Ledger::find(AllocationKind space, uint64_t key, Allocation* out) const {
  pthread_mutex_lock(&mutex_);
  long i = index_of(space, key);
  if (i >= 0) *out = table_[i];
  pthread_mutex_unlock(&mutex_);
  return i >= 0;
}

size_t Ledger::size() const {
  pthread_mutex_lock(&mutex_);
  size_t n = size_;
  pthread_mutex_unlock(&mutex_);
  return n;
}

uint64_t Ledger::bytes_on_device(int device) const {
  if (device < 0 || device >= kMaxDevices) return 0;
  pthread_mutex_lock(&mutex_);
  uint64_t n = device_bytes_[device];
  pthread_mutex_unlock(&mutex_);
  return n;
}

void Ledger::clear_after_fork() {
  mutex_ = PTHREAD_MUTEX_INITIALIZER;  // another thread may have held it at fork
  if (table_) memset(static_cast<void*>(table_), 0, capacity_ * sizeof(Allocation));
  size_ = 0;
  memset(device_bytes_, 0, sizeof device_bytes_);
}

bool Ledger::is_valid(char* why, size_t why_len) const {
  pthread_mutex_lock(&mutex_);
  bool ok = true;
  size_t count = 0;
  uint64_t bytes[kMaxDevices] = {};
  for (size_t i = 0; i < capacity_ && ok; ++i) {
    const Allocation& a = table_[i];
    if (a.kind == AllocationKind{}) continue;
    ++count;
    if (a.device >= 0 && a.device < kMaxDevices) bytes[a.device] += a.bytes;
    if (index_of(key_space(a.kind), a.key) != long(i)) {
      snprintf(why, why_len, "entry %zu (key %#llx) is not reachable from its home", i,
               (unsigned long long)a.key);
      ok = false;
    }
  }
  if (ok && count != size_) {
    snprintf(why, why_len, "table holds %zu entries but size says %zu", count, size_);
    ok = false;
  }
  for (int d = 0; d < kMaxDevices && ok; ++d) {
    if (bytes[d] != device_bytes_[d]) {
      snprintf(why, why_len, "device %d: entries sum to %llu bytes, total says %llu", d,
               (unsigned long long)bytes[d], (unsigned long long)device_bytes_[d]);
      ok = false;
    }
  }
  pthread_mutex_unlock(&mutex_);
  return ok;
}

}  // namespace gshare::allocator
