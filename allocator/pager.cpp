#include "allocator/pager.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "allocator/admission.h"
#include "allocator/classifier.h"
#include "allocator/devices.h"
#include "allocator/host_copies.h"
#include "allocator/movable_memory.h"
#include "allocator/page_requests.h"
#include "allocator/tracked_memory.h"
#include "base/background_thread.h"
#include "base/clock.h"
#include "base/driver_api.h"
#include "base/log.h"
#include "base/saturating.h"
#include "base/tunables.h"
#include "scheduler/launch_detours.h"
#include "scheduler/token.h"
#include "shm/futex.h"
#include "shm/host_room.h"
#include "shm/lane_space.h"
#include "shm/tokens.h"

namespace gshare::allocator {

using shm::Arbiter;
using shm::MemoryClass;
using shm::Region;
using shm::Slot;

namespace {

constexpr double MiB = 1024.0 * 1024.0;
using tunables::kCacheFirstNs;
using tunables::kDrainWaitNs;
using tunables::kPageInHoldNs;
using tunables::kPagerPollNs;
using tunables::kPollNs;
// Ledger marks (Allocation::paged): paged out, and as which class its
// bytes left the arbiter, so that they come back as the same class.
constexpr uint8_t kPagedEphemeral = 1;
constexpr uint8_t kPagedPersistent = 2;

uint64_t g_host_limit = 0;                // set at cuInit
uint64_t g_wait_ns = 600'000'000'000;     // GSHARE_ADMIT_TIMEOUT_S: a page-in's longest wait
std::atomic<uint64_t> g_paged_devices{0};  // bit d: device d has memory off the GPU
std::atomic<int64_t> g_in_flight{0};       // threads inside guarded driver calls
std::atomic<bool> g_pager_started{false};
std::atomic<bool> g_told_host_limit{false};
// Per device, the pager thread's only (prepare_host_copy): no host copies
// made ahead before this time; and, plus one, the job's movable bytes when
// a look found every allocation with its copy (0: look again), so that the
// pager, woken at every hand-over, reads the ledger again only once they
// change. (An allocation freed and one of its size made between two looks
// go unseen: its page-out pins it, as without copies made ahead.)
uint64_t g_prepare_after_ns[64] = {};
uint64_t g_all_copied_at[64] = {};

uint64_t bit_of(int device) { return device >= 0 && device < 64 ? uint64_t(1) << device : 0; }

// The movable allocations of one device, copied out of the ledger so that
// the copies run without its lock. mmap'd: hooks never call malloc.
struct Range {
  uint64_t pointer, size, handle, host, context;
  uint8_t paged, persistent, host_registered;
};
class Ranges {
 public:
  explicit Ranges(size_t capacity) : capacity_(capacity) {
    if (capacity_ == 0) return;
    void* p = mmap(nullptr, capacity_ * sizeof(Range), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) items_ = static_cast<Range*>(p);
  }
  ~Ranges() {
    if (items_) munmap(items_, capacity_ * sizeof(Range));
  }
  Ranges(const Ranges&) = delete;
  Ranges& operator=(const Ranges&) = delete;
  bool ok() const { return capacity_ == 0 || items_ != nullptr; }
  void add(const Range& r) {
    if (items_ && count_ < capacity_) items_[count_++] = r;
  }
  size_t size() const { return count_; }
  Range& operator[](size_t i) { return items_[i]; }

 private:
  Range* items_ = nullptr;
  size_t capacity_ = 0, count_ = 0;
};

// The device's movable allocations that are resident (`paged` false) or
// paged out (`paged` true). Call with the movable-memory lock held.
void collect(int device, bool paged, Ranges* out) {
  ledger().for_each([&](Allocation& a) {
    if (!pageable(a, device) || (a.paged != 0) != paged) return;
    out->add({a.key, a.extent, a.handle, a.host_copy, a.context, a.paged, a.persistent, a.host_registered});
  });
}

size_t count_movable(int device) {
  size_t n = 0;
  ledger().for_each([&](Allocation& a) {
    if (pageable(a, device)) ++n;
  });
  return n;
}

// A stream of its own in `context`, for one batch of copies.
struct CopyStream {
  CUstream stream = nullptr;
  bool pushed = false;
  explicit CopyStream(uint64_t context) {
    const DriverApi& api = driver();
    pushed = api.ctx_push_current(reinterpret_cast<CUcontext>(context)) == CUDA_SUCCESS;
    if (pushed && api.stream_create(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) stream = nullptr;
  }
  ~CopyStream() {
    const DriverApi& api = driver();
    if (stream && api.stream_destroy) api.stream_destroy(stream);
    CUcontext ignored;
    if (pushed) api.ctx_pop_current(&ignored);
  }
  bool ok() const { return stream != nullptr; }
};

// Waits until no thread is inside a guarded driver call; false after
// kDrainWaitNs.
bool wait_for_calls_inside() {
  const uint64_t deadline = mono_now_ns() + kDrainWaitNs;
  while (g_in_flight.load(std::memory_order_seq_cst) != 0) {
    if (mono_now_ns() > deadline) return false;
    timespec pause{0, 20'000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

// Every context the ranges were allocated in finishes its queued work.
void drain_contexts(Ranges& ranges) {
  const DriverApi& api = driver();
  uint64_t drained[8];
  int n = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    uint64_t c = ranges[i].context;
    if (c == 0 || std::find(drained, drained + n, c) != drained + n) continue;
    if (n < 8) drained[n++] = c;
    if (api.ctx_push_current(reinterpret_cast<CUcontext>(c)) != CUDA_SUCCESS) continue;
    api.ctx_synchronize();
    CUcontext ignored;
    api.ctx_pop_current(&ignored);
  }
}

}  // namespace

uint64_t paging_host_limit() { return shm::host_limit_or_default(g_host_limit); }

namespace {

// Reserves `bytes` more pinned host memory for this job within the GPU's
// limit, all jobs together. Past it, the resident jobs that keep host
// copies are asked to free them (the caller is asked again for room
// shortly, and tries again); with none to ask, false and one warning.
bool reserve_host_bytes(Device& device, uint64_t bytes, bool ask = true) {
  if (bytes == 0) return true;
  Arbiter& arbiter = device.account.arbiter();
  Region& r = *arbiter.region();
  const uint64_t limit = paging_host_limit();
  uint64_t held = 0;
  bool ok = false;
  arbiter.update([&] {
    for (const Slot& s : r.slots)
      if (s.state == shm::kSlotLive) held += s.host_paging_bytes;
    ok = held + bytes <= limit;
    if (ok) arbiter.slot()->host_paging_bytes += bytes;
  });
  if (ok) return true;
  if (!ask) return false;
  if (ask_for_host_copies(arbiter, held + bytes - limit)) {
    GSHARE_INFO("GPU %s: a page-out waits for resident jobs to free their host copies", device.uuid);
    return false;
  }
  if (!g_told_host_limit.exchange(true))
    GSHARE_WARN("GPU %s: paging this job out needs %.1f MiB more host memory, but the paged "
                "jobs of this GPU already hold %.1f MiB of %.1f MiB (GSHARE_HOST_MEM_LIMIT): "
                "it stays on the GPU",
                device.uuid, double(bytes) / MiB, double(held) / MiB, double(limit) / MiB);
  return false;
}

void give_back_host_bytes(Device& device, uint64_t bytes) {
  if (bytes == 0 || !device.account.shared()) return;
  Arbiter& arbiter = device.account.arbiter();
  arbiter.update([&] {
    Slot& s = *arbiter.slot();
    s.host_paging_bytes = saturating_sub(s.host_paging_bytes, bytes);
  });
}

void set_residency(Arbiter& arbiter, shm::Residency residency) {
  arbiter.update([&] { arbiter.slot()->residency = residency; });
}

// Copies each range to its pinned host copy (made now for a range that
// has none) on a stream of its own, after the job's queued work: one
// batch, one sync. False if any step failed; copies made so far stay with
// their allocations.
bool copy_out(Device& device, Ranges& ranges) {
  const DriverApi& api = driver();
  drain_contexts(ranges);
  CopyStream copies(ranges[0].context);
  if (!copies.ok()) return false;
  for (size_t i = 0; i < ranges.size(); ++i) {
    Range& range = ranges[i];
    if (range.host == 0) {
      const HostCopy host = make_host_copy(range.size);
      if (host.pointer == 0) {
        GSHARE_WARN("GPU %s: no pinned host memory for a page-out (%.1f MiB): the job stays on the GPU",
                    device.uuid, double(range.size) / MiB);
        return false;
      }
      range.host = host.pointer;
      range.host_registered = host.registered;
      ledger().update(AllocationKind::kDevice, range.pointer, [&](Allocation& a) {
        a.host_copy = host.pointer;
        a.host_registered = host.registered;
      });
    }
    if (api.memcpy_dtoh_async(reinterpret_cast<void*>(range.host), range.pointer, range.size,
                              copies.stream) != CUDA_SUCCESS)
      return false;
  }
  return api.stream_synchronize(copies.stream) == CUDA_SUCCESS;
}

// The ranges, copied out, give their physical memory back; the ledger
// marks them paged, as the class their bytes leave the arbiter as.
void release_copied(Arbiter& arbiter, Ranges& ranges) {
  uint64_t persistent = 0, ephemeral = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    Range& range = ranges[i];
    unback_range(range.pointer, range.size, range.handle);
    (range.persistent ? persistent : ephemeral) += range.size;
    const uint8_t mark = range.persistent ? kPagedPersistent : kPagedEphemeral;
    ledger().update(AllocationKind::kDevice, range.pointer, [&](Allocation& a) {
      a.paged = mark;
      a.handle = 0;
    });
  }
  if (persistent) arbiter.release(persistent, 0, MemoryClass::kPersistent);
  if (ephemeral) arbiter.release(ephemeral, 0, MemoryClass::kEphemeral);
}

// A page-out asks for the job's cache too (ask_for_page_outs): a thread of
// the job answers that (admission.h), emptying its framework's cache at
// rest, and what it frees is not copied. Waits up to kCacheFirstNs for the
// answer; a job that never answers (no framework, or busy mid-step) is
// paged out as it is.
std::atomic<bool> g_waits_for_cache{false};
void wait_for_cache_first(Device& device) {
  const Slot* slot = device.account.slot();
  const uint64_t deadline = mono_now_ns() + kCacheFirstNs;
  g_waits_for_cache.store(true);
  // The job's threads that wait for the token answer at their wake-ups.
  shm::wake_waiters(device.account.arbiter().region()->header);
  while (__atomic_load_n(&slot->release_requests, __ATOMIC_RELAXED) !=
             __atomic_load_n(&slot->release_acks, __ATOMIC_RELAXED) &&
         mono_now_ns() < deadline) {
    timespec pause{0, 5'000'000};
    nanosleep(&pause, nullptr);
  }
  g_waits_for_cache.store(false);
}

// Pages `device`'s movable memory out, if this job holds no token. Runs on
// the pager thread.
void page_out(Device& device) {
  if (!device.account.shared()) return;
  Arbiter& arbiter = device.account.arbiter();
  Region& r = *arbiter.region();
  const uint64_t bit = bit_of(device.ordinal);
  // Marked as paging out from the start, unless it holds a token: while a
  // resident job asks for the token, one whose page-out is under way is
  // not granted it (scheduler/token.cpp). Else its turn could come back
  // while it waits for its cache and its calls inside, and the page-out,
  // found holding the token, would be given up: a job waiting to be
  // admitted, whose room only page-outs make, waited for two jobs taking
  // turns to end.
  bool marked = false;
  arbiter.update([&] {
    marked = !shm::holds_any_token(r.header, uint32_t(arbiter.own_slot()));
    if (marked) arbiter.slot()->residency = shm::kPagingOut;
  });
  if (!marked) return;
  wait_for_cache_first(device);
  lock_movable_memory();
  Ranges ranges(count_movable(device.ordinal));
  if (!ranges.ok()) {
    unlock_movable_memory();
    const bool out = g_paged_devices.load(std::memory_order_seq_cst) & bit;
    set_residency(arbiter, out ? shm::kPagedOut : shm::kResident);
    return;
  }
  collect(device.ordinal, false, &ranges);
  // Device work stops here: new calls wait, and those inside end first.
  const uint64_t before = g_paged_devices.fetch_or(bit, std::memory_order_seq_cst);
  bool going = ranges.size() > 0 && wait_for_calls_inside();
  // Under the lock, so that no grant slips in between: a job that holds a
  // token runs, and is never paged out (fifo and priority grant it even
  // while its page-out is under way).
  if (going)
    arbiter.update([&] { going = !shm::holds_any_token(r.header, uint32_t(arbiter.own_slot())); });
  uint64_t new_host = 0, total = 0;
  for (size_t i = 0; going && i < ranges.size(); ++i) {
    total += ranges[i].size;
    if (ranges[i].host == 0) new_host += ranges[i].size;
  }
  if (going && !reserve_host_bytes(device, new_host)) going = false;
  // From here on it moves memory (paging_ns); before, it waited for the
  // job's cache and for its calls inside, up to a second each.
  const uint64_t copy_began = mono_now_ns();
  if (going) arbiter.update([&] { arbiter.slot()->page_out_copying = 1; });
  if (going) going = copy_out(device, ranges);
  if (!going) {
    // Host copies made so far stay with their allocations, counted; the
    // host bytes reserved for the rest go back.
    uint64_t unused = 0;
    for (size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].host == 0) unused += ranges[i].size;
    if (new_host) give_back_host_bytes(device, std::min(unused, new_host));
    if (!(before & bit)) g_paged_devices.fetch_and(~bit, std::memory_order_seq_cst);
    arbiter.update([&] {
      arbiter.slot()->page_out_copying = 0;
      arbiter.slot()->residency = before & bit ? shm::kPagedOut : shm::kResident;
    });
    unlock_movable_memory();
    return;
  }
  release_copied(arbiter, ranges);
  const uint64_t took = mono_now_ns() - copy_began;
  arbiter.update([&] {
    Slot& s = *arbiter.slot();
    s.paged_out_bytes += total;
    s.residency = shm::kPagedOut;
    s.page_out_copying = 0;
    s.page_outs++;
    s.paging_ns += took;
    shm::wake_waiters(r.header);
  });
  note_movable_resident(device, -int64_t(total));
  unlock_movable_memory();
  GSHARE_INFO("GPU %s: paged out %.1f MiB in %zu allocations in %.1f ms (%.1f MiB of it into new host copies)",
              device.uuid, double(total) / MiB, ranges.size(), double(took) / 1e6, double(new_host) / MiB);
}

// Frees host copies this job keeps of its resident memory, at least
// `want` bytes of them (0: all), asked by a job whose page-out needs that
// host memory (ask_for_host_copies). Runs on the pager thread.
void free_host_copies(Device& device, uint64_t want) {
  uint64_t freed = 0, taken = 0;
  lock_movable_memory();
  Ranges kept(count_movable(device.ordinal));
  // Unhooked from the ledger under its lock, freed after it: the driver
  // call must not hold up the hooks that take the ledger's lock.
  ledger().for_each([&](Allocation& a) {
    if (want != 0 && taken >= want) return;
    if (!pageable(a, device.ordinal) || a.paged || a.host_copy == 0 || !kept.ok()) return;
    kept.add({a.key, a.extent, 0, a.host_copy, a.context, 0, 0, a.host_registered});
    taken += a.extent;
    a.host_copy = 0;
    a.host_registered = 0;
  });
  for (size_t i = 0; i < kept.size(); ++i) {
    free_host_copy({kept[i].host, kept[i].host_registered != 0}, kept[i].size);
    freed += kept[i].size;
  }
  unlock_movable_memory();
  give_back_host_bytes(device, freed);
  if (freed) {
    // The host memory is wanted elsewhere: made again at once, it would
    // only be asked for again.
    if (device.ordinal >= 0 && device.ordinal < 64) {
      g_prepare_after_ns[device.ordinal] = mono_now_ns() + tunables::kHostCopyPauseNs;
      g_all_copied_at[device.ordinal] = 0;
    }
    GSHARE_INFO("GPU %s: freed %.1f MiB of host copies for another job's page-out", device.uuid,
                double(freed) / MiB);
  }
}

// Whether this GPU's jobs take turns through host memory, or are about to:
// a job is paged out (or on its way), or waits for the safety condition,
// which page-outs make hold. Read without the lock: a hint.
bool paging_under_way(const Region& r) {
  bool under_way = false;
  shm::for_live_slots(r, [&](uint32_t i) {
    const Slot& s = r.slots[i];
    if (__atomic_load_n(&s.paged_out_bytes, __ATOMIC_RELAXED) != 0 ||
        __atomic_load_n(&s.residency, __ATOMIC_RELAXED) != shm::kResident ||
        __atomic_load_n(&s.admission, __ATOMIC_RELAXED) == shm::kWaitingForAdmission)
      under_way = true;
    return !under_way;
  });
  return under_way;
}

// The pace of a copy made ahead for the job of `context` (its Slot): in a
// hurry once it is asked to page out (the page-out needs the copy, and
// the job that asked waits for it: on an H200 a page-out waited about 9 s
// for a 49 GB copy made ahead with two threads); stopped once it is asked
// to give host memory up (another job's page-out needs it).
Pace copy_ahead_pace(const void* context) {
  const Slot& s = *static_cast<const Slot*>(context);
  if (__atomic_load_n(&s.host_release_requests, __ATOMIC_RELAXED) !=
      __atomic_load_n(&s.host_release_acks, __ATOMIC_RELAXED))
    return Pace::kStop;
  if (__atomic_load_n(&s.page_out_requests, __ATOMIC_RELAXED) !=
      __atomic_load_n(&s.page_out_acks, __ATOMIC_RELAXED))
    return Pace::kHurry;
  return Pace::kSteady;
}

// Makes the host copy of one resident allocation that has none yet, the
// largest, while the job runs: a job's first page-out otherwise pins all
// of its memory while the job coming in waits (seconds for tens of GB).
// Only while paging is under way on the GPU, within GSHARE_HOST_MEM_LIMIT
// without asking anyone for theirs, and not for a while after this job
// was asked to free its copies. One allocation per look, and that one
// hurried or stopped by a request (copy_ahead_pace), so that the pager
// stays quick to answer. Runs on the pager thread.
void prepare_host_copy(Device& device) {
  Arbiter& arbiter = device.account.arbiter();
  const Slot* slot = arbiter.slot();
  if (device.ordinal < 0 || device.ordinal >= 64 || mono_now_ns() < g_prepare_after_ns[device.ordinal]) return;
  if (__atomic_load_n(&slot->residency, __ATOMIC_RELAXED) != shm::kResident) return;
  if (!paging_under_way(*arbiter.region())) return;
  const uint64_t movable = __atomic_load_n(&slot->movable_bytes, __ATOMIC_RELAXED) + 1;
  if (g_all_copied_at[device.ordinal] == movable) return;
  Range pick{};
  lock_movable_memory();
  ledger().for_each([&](Allocation& a) {
    if (!pageable(a, device.ordinal) || a.paged || a.host_copy != 0 || a.extent <= pick.size) return;
    pick = {a.key, a.extent, 0, 0, a.context, 0, 0, 0};
  });
  unlock_movable_memory();
  if (pick.size == 0) g_all_copied_at[device.ordinal] = movable;
  if (pick.size == 0 || !reserve_host_bytes(device, pick.size, /*ask=*/false)) return;
  const DriverApi& api = driver();
  HostCopy host;
  if (api.ctx_push_current(reinterpret_cast<CUcontext>(pick.context)) == CUDA_SUCCESS) {
    // Fewer touchers than a page-out's: the job computes meanwhile.
    host = make_host_copy(pick.size, tunables::kPrepareTouchers, PaceCheck{copy_ahead_pace, slot});
    CUcontext ignored;
    api.ctx_pop_current(&ignored);
  }
  bool attached = false;
  if (host.pointer != 0) {
    lock_movable_memory();
    ledger().update(AllocationKind::kDevice, pick.pointer, [&](Allocation& a) {
      if (!a.movable || a.exported || a.paged || a.host_copy != 0 || a.extent != pick.size) return;
      a.host_copy = host.pointer;
      a.host_registered = host.registered;
      attached = true;
    });
    unlock_movable_memory();
  }
  if (attached) return;
  // Freed meanwhile, stopped, or no pinned memory: nothing kept.
  free_host_copy(host, pick.size);
  give_back_host_bytes(device, pick.size);
  if (host.pointer == 0 && !host.stopped)
    g_prepare_after_ns[device.ordinal] = mono_now_ns() + tunables::kHostCopyPauseNs;
}

// What of `device`'s memory is out now, by class ([0] ephemeral, [1]
// persistent). Call with the movable-memory lock held.
void paged_bytes_locked(const Device& device, uint64_t want[2]) {
  want[0] = want[1] = 0;
  ledger().for_each([&](Allocation& a) {
    if (a.kind == AllocationKind::kDevice && a.movable && a.paged && a.device == device.ordinal)
      want[a.paged == kPagedPersistent] += a.extent;
  });
}

// The same, taking the lock.
void paged_bytes(const Device& device, uint64_t want[2]) {
  lock_movable_memory();
  paged_bytes_locked(device, want);
  unlock_movable_memory();
}

// Reserves what comes back, both classes or neither: a job paging in
// never holds part of its room while it waits for the rest.
shm::ReserveResult reserve_both(DeviceAccount& account, const uint64_t want[2]) {
  shm::ReserveResult r{shm::ReserveStatus::kGranted, 0, 0};
  if (want[1]) r = account.reserve(want[1], MemoryClass::kPersistent);
  if (r.status != shm::ReserveStatus::kGranted) return r;
  if (want[0]) r = account.reserve(want[0], MemoryClass::kEphemeral);
  if (r.status != shm::ReserveStatus::kGranted && want[1])
    account.rollback(want[1], MemoryClass::kPersistent);
  return r;
}

uint64_t short_by(const shm::ReserveResult& r, uint64_t bytes) {
  if (r.status == shm::ReserveStatus::kInadmissible) return saturating_sub(r.in_use_bytes, r.limit_bytes);
  return saturating_sub(r.in_use_bytes + bytes, r.limit_bytes);
}

// Waits for this job's turn, then until `want` can be reserved, asking
// jobs that are not running to page out. A paged-out job comes back only in
// its turn: paged in while another runs, it would wait beside it holding
// memory, the first to be paged out again for a third. This is the one
// exception to the resource order (memory before the token), and it
// cannot deadlock: the room it waits for holding the token comes from
// pagers, which need no token. Held for kPageInHoldNs with no page-out
// under way for it, the token goes on. False at the deadline.
bool wait_for_room(Device& device, uint64_t want[2], uint64_t deadline) {
  DeviceAccount& account = device.account;
  Arbiter& arbiter = account.arbiter();
  Region& r = *arbiter.region();
  uint64_t asked_at = 0, held_since = 0;
  bool told = false;
  shm::ReserveResult result{shm::ReserveStatus::kOverCapacity, r.header.capacity_bytes,
                            r.header.reserved_bytes};
  for (;;) {
    uint64_t now = mono_now_ns();
    // A prefetch may have brought part back meanwhile (prefetch below).
    paged_bytes(device, want);
    if (want[0] + want[1] == 0) return true;
    if (!scheduler::holds_token(arbiter)) {
      held_since = 0;
      if (now >= deadline) break;
      // As a contender: the policy's decisions (a holder's slice end, an
      // idle holder) are taken by waiters.
      scheduler::wait_for_token(arbiter, answer_release_requests_from_hook, deadline);
      continue;
    }
    uint32_t seen = r.header.token_futex.load(std::memory_order_acquire);
    result = reserve_both(account, want);
    if (result.status == shm::ReserveStatus::kGranted) return true;
    if (result.status == shm::ReserveStatus::kOverQuota ||
        result.status == shm::ReserveStatus::kArbiterBroken || now >= deadline)
      break;
    const uint64_t short_bytes = short_by(result, want[0] + want[1]);
    if (!told) {
      GSHARE_INFO("GPU %s: paging in %.1f MiB waits for room (%.1f MiB short)", device.uuid,
                  double(want[0] + want[1]) / MiB, double(short_bytes) / MiB);
      told = true;
    }
    ask_for_page_outs(arbiter, short_bytes, &asked_at);
    answer_release_requests_from_hook();
    if (arbiter.has_dead_slots()) arbiter.reclaim_dead_slots();
    if (keep_token_for_room(arbiter, &held_since, now))
      shm::futex_wait(&r.header.token_futex, seen, std::min(kPollNs, deadline - now));
    else
      scheduler::step_aside(arbiter, /*still_waiting=*/true);
  }
  refuse(device, "page-in", want[0] + want[1], result);
  return false;
}

// Backs each range with new physical memory at its address and copies its
// host copy back, on a stream of its own: one batch, one sync. *backed:
// how many ranges have memory again (all of them on success).
CUresult copy_in(Device& device, Ranges& ranges, size_t* backed) {
  const DriverApi& api = driver();
  CopyStream copies(ranges.size() ? ranges[0].context : 0);
  CUresult result = CUDA_SUCCESS;
  for (; *backed < ranges.size(); ++*backed) {
    Range& range = ranges[*backed];
    result = back_range(device.ordinal, range.pointer, range.size, &range.handle);
    if (result != CUDA_SUCCESS) return result;
    if (!copies.ok() || api.memcpy_htod_async(range.pointer, reinterpret_cast<const void*>(range.host),
                                              range.size, copies.stream) != CUDA_SUCCESS) {
      ++*backed;
      return CUDA_ERROR_UNKNOWN;
    }
  }
  if (copies.ok() && api.stream_synchronize(copies.stream) != CUDA_SUCCESS) return CUDA_ERROR_UNKNOWN;
  return result;
}

// Brings `device`'s paged-out memory back. From a thread about to touch
// device memory (`prefetch` false): it waits for its turn and for room. From
// the pager thread, ahead of the job's turn (`prefetch` true): only if the
// room is free now, taking nothing from anyone; CUDA_ERROR_NOT_READY if
// not, with how much room is missing in *short_bytes. Either way
// CUDA_ERROR_NOT_READY also when the driver refused memory gshare had
// admitted: page_in_all waits for it and tries again.
CUresult page_in(Device& device, bool prefetch, uint64_t* short_bytes = nullptr) {
  Arbiter& arbiter = device.account.arbiter();
  const uint64_t started = mono_now_ns();
  // Busy while it pages in, like a thread in a host sync: a job that holds
  // its token for this launches nothing meanwhile, and must not lose it as
  // idle (scheduler/token.h), nor be asked for its memory.
  GpuBusy busy(arbiter.slot());
  // What is out, by class: what is reserved below. Frees and a prefetch
  // make it less meanwhile; the surplus goes back after the copies.
  uint64_t want[2];
  paged_bytes(device, want);
  const MemoryClass classes[2] = {MemoryClass::kEphemeral, MemoryClass::kPersistent};
  if (prefetch) {
    // Both classes, all or nothing (reserve_both), so a waiting job never
    // holds part of its lane's space while it waits for the rest. Many
    // frameworks' memory is classified from their own figures, not per
    // allocation, so their persistent memory can be ephemeral by class.
    if (want[0] + want[1] == 0) return CUDA_ERROR_NOT_READY;
    const shm::ReserveResult reserved = reserve_both(device.account, want);
    if (reserved.status != shm::ReserveStatus::kGranted) {
      if (short_bytes && reserved.status != shm::ReserveStatus::kOverQuota)
        *short_bytes = short_by(reserved, want[0] + want[1]);
      return CUDA_ERROR_NOT_READY;
    }
    // Marked copying in one step with the residency: a holder whose turn
    // is over goes on until the copy ends, not handing the GPU to a job
    // whose memory is half back (scheduler/token.cpp).
    arbiter.update([&] {
      arbiter.slot()->residency = shm::kPagingIn;
      arbiter.slot()->prefetch_copying = 1;
    });
  } else {
    set_residency(arbiter, shm::kPagingIn);
    if (!wait_for_room(device, want, started + g_wait_ns)) {
      const uint64_t waited = mono_now_ns() - started;
      arbiter.update([&] { arbiter.slot()->page_in_wait_ns += waited; });
      set_residency(arbiter, shm::kPagedOut);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  // From here on it moves memory (paging_ns); before, it waited.
  const uint64_t room_at = mono_now_ns();
  lock_movable_memory();
  Ranges ranges(count_movable(device.ordinal));
  collect(device.ordinal, true, &ranges);
  uint64_t restored[2] = {0, 0};
  size_t backed = 0;
  const uint64_t copy_began = mono_now_ns();
  CUresult result = ranges.ok() ? copy_in(device, ranges, &backed) : CUDA_ERROR_OUT_OF_MEMORY;
  const uint64_t copy_ns = mono_now_ns() - copy_began;
  for (size_t i = 0; i < backed; ++i) {
    Range& range = ranges[i];
    restored[range.paged == kPagedPersistent] += range.size;
    // Back as the class its bytes were reserved as.
    ledger().update(AllocationKind::kDevice, range.pointer, [&](Allocation& a) {
      a.persistent = range.paged == kPagedPersistent;
      a.paged = 0;
      a.handle = range.handle;
    });
  }
  // What was admitted but not restored (freed meanwhile, or failed) goes back.
  for (int k : {0, 1})
    if (want[k] > restored[k]) arbiter.rollback(want[k] - restored[k], classes[k]);
  const uint64_t total = restored[0] + restored[1];
  if (total) arbiter.commit(total, 0);
  const bool ok = backed == ranges.size() && result == CUDA_SUCCESS;
  // Frees meanwhile may have left nothing out.
  uint64_t still_out[2];
  paged_bytes_locked(device, still_out);
  const bool all = ok && still_out[0] + still_out[1] == 0;
  if (all) g_paged_devices.fetch_and(~bit_of(device.ordinal), std::memory_order_seq_cst);
  const uint64_t took = mono_now_ns() - room_at;
  // Its turn, if it waited for the room holding the token, runs from now.
  if (!prefetch && all) scheduler::restart_turn(arbiter);
  arbiter.update([&] {
    Slot& s = *arbiter.slot();
    s.paged_out_bytes = saturating_sub(s.paged_out_bytes, total);
    s.residency = all ? shm::kResident : shm::kPagedOut;
    s.prefetch_copying = 0;
    // The holder that went on while this copied hands over now.
    if (prefetch) shm::wake_waiters(arbiter.region()->header);
    if (all && total) s.page_ins++;
    s.paging_ns += took;
    s.page_in_wait_ns += room_at - started;
    if (ok && total) {
      // The page-in rate the prefetch policy weighs with.
      s.paged_in_bytes += total;
      s.page_in_copy_ns += copy_ns;
      if (prefetch) s.prefetches++;
    }
  });
  note_movable_resident(device, int64_t(total));
  unlock_movable_memory();
  if (!ok) {
    // The driver refused memory gshare had admitted (memory outside its
    // view in use, or released memory not yet reclaimed): the caller waits
    // for it and tries again. A prefetch just stops.
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return CUDA_ERROR_NOT_READY;
    GSHARE_WARN("GPU %s: paging in failed (error %d) after %.1f of %.1f MiB: the call that needed "
                "the memory gets CUDA_ERROR_OUT_OF_MEMORY",
                device.uuid, int(result), double(total) / MiB,
                double(want[0] + want[1]) / MiB);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (total)
    GSHARE_INFO("GPU %s: %s %.1f MiB in %.1f ms, after %.1f ms waiting for its turn and room", device.uuid,
                prefetch ? "prefetched" : "paged in", double(total) / MiB, double(took) / 1e6,
                double(room_at - started) / 1e6);
  return CUDA_SUCCESS;
}

// Pages every paged-out device back in, one thread at a time: the others
// wait for it here, then find their memory back.
pthread_mutex_t g_page_in_mutex = PTHREAD_MUTEX_INITIALIZER;
CUresult page_in_all() {
  CUresult result = CUDA_SUCCESS;
  pthread_mutex_lock(&g_page_in_mutex);
  for_each_attached_device([&](Device& device) {
    if (result != CUDA_SUCCESS || !device.account.shared()) return;
    if (!(g_paged_devices.load(std::memory_order_acquire) & bit_of(device.ordinal))) return;
    uint64_t refused_since = 0;
    // CUDA_ERROR_NOT_READY: the driver refused the memory (page_in); wait
    // for it like an allocation the driver refused, then go on.
    while ((result = page_in(device, /*prefetch=*/false)) == CUDA_ERROR_NOT_READY) {
      uint64_t want[2];
      paged_bytes(device, want);
      if (!wait_after_driver_refused(device, "page-in", want[0] + want[1], &refused_since)) {
        GSHARE_WARN("GPU %s: paging in %.1f MiB: the driver still refuses the memory after "
                    "GSHARE_ADMIT_TIMEOUT_S: the call that needed it gets CUDA_ERROR_OUT_OF_MEMORY",
                    device.uuid, double(want[0] + want[1]) / MiB);
        result = CUDA_ERROR_OUT_OF_MEMORY;
        break;
      }
    }
  });
  pthread_mutex_unlock(&g_page_in_mutex);
  return result;
}

// Prefetch: the paged-out job the policy runs next (scheduler::
// next_in_line) gets its memory back ahead of its turn, all or nothing,
// copying while the job that runs computes. Room it takes from no one
// running: if it is short, it asks jobs that are not running to page out
// (the job that ran before the runner, by turns: page_requests.h), so that
// their page-outs too overlap the runner's work. Restores of the pager and
// of a page-in are serialised by the movable-memory lock, and a page-in
// counts what is still out at every look.
bool g_prefetch = true;                      // GSHARE_PREFETCH
uint64_t g_prefetch_asked_ns[64] = {};       // per device: the pager thread's last ask
uint64_t g_prefetch_deferred_ns[64] = {};    // per device: since when it defers to waiters (0: not)
void prefetch(Device& device) {
  if (!g_prefetch) return;
  if (!(g_paged_devices.load(std::memory_order_acquire) & bit_of(device.ordinal))) return;
  Arbiter& arbiter = device.account.arbiter();
  const Slot* slot = arbiter.slot();
  if (__atomic_load_n(&slot->job_state, __ATOMIC_RELAXED) != shm::kJobWaiting) return;
  if (device.ordinal < 0 || device.ordinal >= 64) return;
  // A prefetch is ahead of need: room that a job blocked in an allocation
  // waits for (its own, or made for it by a page-out) goes to that job.
  // Taken by the job paged out to make it, prefetched back as next in line,
  // it left a job waiting to be admitted until the others ended.
  // For kPrefetchDeferNs at most, while the waiters stay.
  const uint32_t own_waits = __atomic_load_n(&slot->admission, __ATOMIC_RELAXED) != shm::kAdmitted ? 1 : 0;
  uint64_t& deferred_since = g_prefetch_deferred_ns[device.ordinal];
  if (__atomic_load_n(&arbiter.region()->header.memory_waiters, __ATOMIC_RELAXED) > own_waits) {
    const uint64_t now = mono_now_ns();
    if (deferred_since == 0) deferred_since = now;
    if (now - deferred_since < tunables::kPrefetchDeferNs) return;
  } else {
    deferred_since = 0;
  }
  // The holder paging in on demand waits for room that page-outs make for
  // it: a prefetch would take it back (the job paged out for it, next in
  // line, prefetched at once, and a second job paged out). Not bounded in
  // time like the deferral above: that page-in ends, with room or refused.
  if (scheduler::holder_pages_in(arbiter)) return;
  int nx = scheduler::next_in_line(arbiter);
  if (nx != arbiter.own_slot()) return;
  uint64_t short_bytes = 0;
  CUresult rr = page_in(device, /*prefetch=*/true, &short_bytes);
  if (rr == CUDA_ERROR_NOT_READY && short_bytes)
    ask_for_page_outs(arbiter, short_bytes, &g_prefetch_asked_ns[device.ordinal], /*kept_copies_only=*/true);
}

void* pager_loop(void*) {
  for (;;) {
    std::atomic<uint32_t>* word = nullptr;
    uint32_t seen = 0;
    for_each_attached_device([&](Device& device) {
      if (!device.account.shared()) return;
      Arbiter& arbiter = device.account.arbiter();
      Slot* slot = arbiter.slot();
      if (!slot) return;
      if (!word) {
        word = &arbiter.region()->header.token_futex;
        seen = word->load(std::memory_order_acquire);
      }
      uint32_t copies = __atomic_load_n(&slot->host_release_requests, __ATOMIC_RELAXED);
      if (copies != __atomic_load_n(&slot->host_release_acks, __ATOMIC_RELAXED)) {
        uint64_t want = 0;
        arbiter.update([&] {
          slot->host_release_acks = copies;
          want = slot->host_release_bytes;
        });
        free_host_copies(device, want);
      }
      uint32_t asked = __atomic_load_n(&slot->page_out_requests, __ATOMIC_RELAXED);
      if (asked != __atomic_load_n(&slot->page_out_acks, __ATOMIC_RELAXED)) {
        arbiter.update([&] { slot->page_out_acks = asked; });
        page_out(device);
      } else {
        prefetch(device);
        prepare_host_copy(device);
      }
    });
    if (word) shm::futex_wait(word, seen, kPagerPollNs);
    else {
      timespec pause{0, long(kPagerPollNs)};
      nanosleep(&pause, nullptr);
    }
  }
  return nullptr;
}

}  // namespace

void configure_pager(const Options& options) {
  g_host_limit = options.host_mem_limit_bytes;
  g_prefetch = options.prefetch;
  if (options.admit_timeout_s > 0) g_wait_ns = uint64_t(options.admit_timeout_s * 1e9);
  // Every launch passes begin_device_work: none takes the unchecked path.
  if (options.paging) scheduler::g_launch_detours.fetch_add(1, std::memory_order_relaxed);
}

void start_pager() {
  if (!paging_enabled() || g_pager_started.exchange(true)) return;
  if (!start_background_thread(pager_loop, "gshare-pager")) {
    GSHARE_WARN("cannot start the pager thread: this job is never paged out");
    g_pager_started.store(false);
  }
}

void forget_pager_after_fork() {
  g_pager_started.store(false);
  g_in_flight.store(0);
}

DeviceWork begin_device_work() {
  DeviceWork work;
  if (!paging_enabled()) return work;
  for (;;) {
    g_in_flight.fetch_add(1, std::memory_order_seq_cst);
    if (g_paged_devices.load(std::memory_order_seq_cst) == 0) {
      work.entered = true;
      if (Slot* slot = only_slot()) slot->last_device_work_mono_ns.store(mono_now_ns(), std::memory_order_relaxed);
      return work;
    }
    g_in_flight.fetch_sub(1, std::memory_order_seq_cst);
    work.result = page_in_all();
    if (work.result != CUDA_SUCCESS) return work;
  }
}

void end_device_work(const DeviceWork& work) {
  if (work.entered) g_in_flight.fetch_sub(1, std::memory_order_seq_cst);
}

bool paged_out() { return g_paged_devices.load(std::memory_order_relaxed) != 0; }

CUresult page_in_before_allocating() {
  if (!paging_enabled() || !paged_out()) return CUDA_SUCCESS;
  return page_in_all();
}

bool page_out_waits_for_cache() { return g_waits_for_cache.load(std::memory_order_relaxed); }



void note_movable_resident(Device& device, int64_t bytes) {
  Slot* slot = device.account.slot();
  if (!slot) return;
  if (bytes >= 0) __atomic_fetch_add(&slot->movable_bytes, uint64_t(bytes), __ATOMIC_RELAXED);
  else __atomic_fetch_sub(&slot->movable_bytes, uint64_t(-bytes), __ATOMIC_RELAXED);
}

void note_paged_entry_freed(Device& device, const Allocation& entry) {
  if (!device.account.shared()) return;
  if (!entry.paged) {
    // An exported allocation left the movable bytes when it was exported.
    if (!entry.exported) note_movable_resident(device, -int64_t(entry.extent));
    return;
  }
  Arbiter& arbiter = device.account.arbiter();
  arbiter.update([&] {
    Slot& s = *arbiter.slot();
    s.paged_out_bytes = saturating_sub(s.paged_out_bytes, entry.extent);
  });
}

void free_entry_host_copy(const Allocation& entry) {
  if (!entry.movable || !entry.host_copy) return;
  free_host_copy({entry.host_copy, entry.host_registered != 0}, entry.extent);
  if (Device* device = attached_device(entry.device)) give_back_host_bytes(*device, entry.extent);
}

}  // namespace gshare::allocator
