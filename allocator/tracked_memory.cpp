#include "allocator/tracked_memory.h"

#include <time.h>

#include <atomic>

#include "allocator/pager.h"
#include "allocator/pools.h"
#include "base/driver_api.h"
#include "base/log.h"

namespace gshare::allocator {

namespace {
// Constant-initialised and never destroyed: hooks may run before any
// constructor and after main returns, in any order (and a function-local
// static would drag in the C++ exception runtime for its guard).
union NeverDestroyed {
  constexpr NeverDestroyed() : ledger() {}
  ~NeverDestroyed() {}
  Ledger ledger;
};
constinit NeverDestroyed g_ledger;
}  // namespace

Ledger& ledger() { return g_ledger.ledger; }

CUresult refuse(Device& device, const char* call, uint64_t bytes,
                const shm::ReserveResult& why) {
  const double MiB = 1024.0 * 1024.0;
  if (why.status == shm::ReserveStatus::kOverCapacity || why.status == shm::ReserveStatus::kInadmissible)
    device.account.note_denied();
  switch (why.status) {
    case shm::ReserveStatus::kOverQuota:
      GSHARE_WARN("%s of %.1f MiB on GPU %s refused: over this process's quota "
                  "(%.1f MiB of %.1f MiB in use; GSHARE_MEM_LIMIT)",
                  call, double(bytes) / MiB, device.uuid, double(why.in_use_bytes) / MiB,
                  double(why.limit_bytes) / MiB);
      // What the ledger holds beside it: where the two differ, a free was
      // missed (or memory is held outside the ledger: pools, the context).
      GSHARE_DEBUG("GPU %s: this process's ledger holds %.1f MiB in %zu allocations", device.uuid,
                   double(ledger().bytes_on_device(device.ordinal)) / MiB, ledger().size());
      break;
    case shm::ReserveStatus::kOverCapacity:
      GSHARE_WARN("%s of %.1f MiB on GPU %s refused: the GPU is full "
                  "(%.1f MiB of %.1f MiB reserved by gshare processes)",
                  call, double(bytes) / MiB, device.uuid, double(why.in_use_bytes) / MiB,
                  double(why.limit_bytes) / MiB);
      break;
    case shm::ReserveStatus::kInadmissible:
      GSHARE_WARN("%s of %.1f MiB on GPU %s refused: the safety condition fails, "
                  "sum(P) + sum over lanes of max(E) would be %.1f MiB of %.1f MiB "
                  "(short by %.1f MiB)",
                  call, double(bytes) / MiB, device.uuid, double(why.in_use_bytes) / MiB,
                  double(why.limit_bytes) / MiB,
                  double(why.in_use_bytes - why.limit_bytes) / MiB);
      break;
    case shm::ReserveStatus::kLaneBusy:
      GSHARE_WARN("%s of %.1f MiB on GPU %s refused: another job of its lane holds the lane's "
                  "ephemeral memory (GSHARE_ADMIT_TIMEOUT_S)",
                  call, double(bytes) / MiB, device.uuid);
      break;
    default:
      GSHARE_ERROR("%s of %.1f MiB on GPU %s refused: the arbiter is unusable", call,
                   double(bytes) / MiB, device.uuid);
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void record(Device& device, AllocationKind kind, uint64_t key, uint64_t bytes, uint64_t handle,
            const Birth& birth) {
  Allocation a;
  a.key = key;
  a.bytes = bytes;
  a.site = birth.site;
  a.birth_iteration = birth.iteration;
  a.persistent = birth.kind == shm::MemoryClass::kPersistent;
  a.birth_ns = mono_now_ns();
  a.handle = handle;
  a.device = int16_t(device.ordinal);
  a.kind = kind;
  CUcontext context = nullptr;
  if (kind != AllocationKind::kPhysical && kind != AllocationKind::kMapping)
    driver().ctx_get_current(&context);
  a.context = reinterpret_cast<uint64_t>(context);
  if (!ledger().insert(a))
    GSHARE_ERROR("ledger full: %llu bytes at %#llx stay counted until this process exits",
                 (unsigned long long)bytes, (unsigned long long)key);
}

void release_entry(const Allocation& entry) {
  note_death(entry);
  Device* device = attached_device(entry.device);
  if (!device) return;
  if (entry.kind == AllocationKind::kPoolBlock) {
    // The pool keeps the memory; its charge follows the pool's size.
    device->account.release(0, 1);
    note_pool_block_freed(*device);
    return;
  }
  if (entry.movable) {
    note_paged_entry_freed(*device, entry);
    // Paged out, its bytes already left the arbiter.
    if (entry.paged) {
      device->account.release(0, 1);
      return;
    }
  }
  device->account.release(entry.bytes, 1, class_of(entry));
}

void forget_context_allocations(CUcontext context) {
  if (!context) return;
  uint64_t key = reinterpret_cast<uint64_t>(context);
  // Movable memory belongs to no context: gshare frees it itself.
  MovableMemoryLock lock(paging_enabled());
  size_t forgotten = ledger().drain_if(
      [key](const Allocation& a) {
        return a.context == key && a.kind != AllocationKind::kPhysical &&
               a.kind != AllocationKind::kMapping;
      },
      [](const Allocation& a) {
        if (!a.movable) {
          release_entry(a);
          return;
        }
        free_movable(a);
        release_entry(a);
        free_entry_host_copy(a);
      });
  if (forgotten > 0) GSHARE_INFO("context %p destroyed with %zu live allocations", context, forgotten);
  forget_context_pools(context);
}

namespace {
std::atomic<CUcontext> g_primary_contexts[kMaxDevices];
}

void remember_primary_context(int device, CUcontext context) {
  if (device >= 0 && device < kMaxDevices) g_primary_contexts[device].store(context);
}

CUcontext primary_context(int device) {
  return device >= 0 && device < kMaxDevices ? g_primary_contexts[device].load() : nullptr;
}

}  // namespace gshare::allocator
