// Movable allocations: under GSHARE_PAGING=on, cuMemAlloc's memory is
// address space reserved once and backed by physical memory that can be
// taken away and given back at the same address (the driver's virtual
// memory management: reserve, create, map, set access). A switched-out
// job's memory can then wait in host memory (allocator/pager.h) while every
// pointer the program holds stays valid.
//
// What moves: cuMemAlloc allocations of at least one granule (2 MiB on
// current GPUs) whose rounding up to whole granules wastes at most 1/16,
// which covers the segments of PyTorch's and JAX's caching allocators. The
// rounded size is what the GPU gives, so it is what gshare charges.
// What stays resident, counted as it is today: smaller or oddly sized
// cuMemAlloc memory (rounding would waste more than paging could win),
// pitched and managed memory, stream-ordered pool memory (the pool, not
// the program, owns its physical memory), the program's own cuMemCreate
// memory and graph memory nodes. A movable allocation exported with
// cuIpcGetMemHandle stops moving from then on (allocator/memory_export.h):
// another process may be using it at any time.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "allocator/ledger.h"
#include "base/options.h"

namespace gshare::allocator {

struct Device;

void configure_movable_memory(const Options& options);
namespace detail {
extern bool g_paging;  // GSHARE_PAGING, set once at cuInit
}
inline bool paging_enabled() { return detail::g_paging; }

// The bytes a movable allocation of `bytes` takes on `device`, or 0 when
// such an allocation stays an ordinary one (see above).
uint64_t movable_size(Device& device, uint64_t bytes);

// cuMemAlloc's replacement: reserves `size` bytes of address space and
// backs them. On success *pointer is the address and *handle the physical
// memory behind it.
CUresult allocate_movable(Device& device, uint64_t size, CUdeviceptr* pointer, uint64_t* handle);

// The whole of a movable cuMemAlloc: classify, admit (may wait), reserve
// and back `size` bytes, record them in the ledger as movable.
CUresult allocate_movable_tracked(Device& device, uint64_t size, CUdeviceptr* pointer);

// Backs `size` bytes at `pointer` with new physical memory readable and
// writable by `device` (a page-in), or takes the backing away (a page-out:
// the address space stays reserved).
CUresult back_range(int device, CUdeviceptr pointer, uint64_t size, uint64_t* handle);

// Maps physical memory `handle` at `pointer`, readable and writable by
// `device`; nothing stays mapped on failure. back_range's second half, and
// how an importer maps memory another process exported.
CUresult map_for_device(int device, CUdeviceptr pointer, uint64_t size, uint64_t handle);
void unback_range(CUdeviceptr pointer, uint64_t size, uint64_t handle);

// The movable allocation of this process that `address` lies in, copied
// to *out; false if none.
bool find_movable(uint64_t address, Allocation* out);

// Whether the pager may move `a`, an entry of `device`: movable and not
// exported.
inline bool pageable(const Allocation& a, int device) {
  return a.kind == AllocationKind::kDevice && a.movable && !a.exported && a.device == device;
}

// Frees a movable allocation whose ledger entry was taken out: its backing
// if resident, its export's descriptor, and its address space. Its host copy is the caller's to
// free, once the bytes are given back (free_entry_host_copy, pager.h).
CUresult free_movable(const Allocation& entry);

// Held while a movable allocation is made or freed, and by the pager for a
// whole page-out or page-in, so that neither sees an allocation half made
// or half gone. Taken before the ledger's lock and the region's.
void lock_movable_memory();
bool try_lock_movable_memory();
void unlock_movable_memory();

// The lock for a scope, when `needed`.
class MovableMemoryLock {
 public:
  explicit MovableMemoryLock(bool needed) : held_(needed) {
    if (held_) lock_movable_memory();
  }
  ~MovableMemoryLock() {
    if (held_) unlock_movable_memory();
  }
  MovableMemoryLock(const MovableMemoryLock&) = delete;
  MovableMemoryLock& operator=(const MovableMemoryLock&) = delete;

 private:
  bool held_;
};

}  // namespace gshare::allocator
