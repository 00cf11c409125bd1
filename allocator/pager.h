// Paging to host memory: under GSHARE_PAGING=on, a job that is not running
// can be asked to give its movable memory (allocator/movable_memory.h) to
// a job that waits for room; it is copied to pinned host memory and its
// physical memory released. The job gets it back, at the same addresses,
// before it touches device memory again.
//
// Who pages a job out. A job whose reservation waits (the safety condition
// would fail, or the bytes are held) asks jobs that hold movable memory
// and no token (switched out, idle, or itself waiting for memory)
// for room: enough of them, idle ones first, then the ones holding the
// most (allocator/page_requests.h). Each asked job's pager thread pages it out,
// unless it holds a token by then: a running job is never paged out.
//
// How. The page-out closes the job's device work first: every launch,
// copy and memset of the process passes `begin_device_work`, which counts
// the calls inside the driver and refuses to start while the job is paged
// (or being paged) out. The pager waits for the calls inside to end,
// drains the job's contexts, copies each movable allocation to its pinned
// host copy on a stream of its own (one batch, one sync), unmaps and
// releases the physical memory and gives the bytes back to the arbiter. A
// paged-out job's P and E leave the safety condition (shm/lane_space.cpp):
// only resident jobs share the GPU.
//
// Coming back. The next device work of a paged-out job pages it in first,
// in the calling thread. It waits for its turn, then, holding the token,
// for room for all of its bytes, both classes or neither, asking jobs that
// are not running to page out (pager.cpp, wait_for_room: the one exception
// to the resource order, memory before the token; the room comes from
// pagers, which need no token, and a token held so with no page-out under
// way for it goes on after kPageInHoldNs). It then maps new physical
// memory at the same addresses and copies its data back, and its turn runs
// from then. Only then does the call go on: a kernel never runs against
// memory that is not there.
//
// Prefetch. A paged-out job next in line gets all of its movable memory
// back ahead of its turn from its pager thread (its own stream), room made
// by paging out a job that is not running: not while another job waits in
// an allocation (for 2 s at most), nor while the holder of the token pages
// in on demand. The holder whose turn ends goes on until that copy ends.
//
// Host memory. Pinned host copies are kept for the allocation's life, so
// that later page-outs cost no pinning; the jobs of one GPU hold at most
// GSHARE_HOST_MEM_LIMIT of them together. A page-out that would pass it
// first asks resident jobs to free the copies they keep, then tries again;
// with none to ask it is not made (one warning), and the job stays
// resident.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "allocator/ledger.h"
#include "base/options.h"
#include "shm/arbiter.h"

namespace gshare::allocator {

struct Device;

void configure_pager(const Options& options);

// Starts the thread that answers page-out requests (once; at the first
// device attached when paging is on).
void start_pager();
void forget_pager_after_fork();

// Around a driver call that may touch device memory: pages the process in
// first if it is paged out (which may wait for memory, at most
// GSHARE_ADMIT_TIMEOUT_S). `entered` false: the call must not be made, and
// `result` says why (CUDA_ERROR_OUT_OF_MEMORY: the memory did not come
// back). Without paging it costs one load.
struct DeviceWork {
  bool entered = false;
  CUresult result = CUDA_SUCCESS;
};
DeviceWork begin_device_work();
void end_device_work(const DeviceWork& work);

// Whether some of this process's movable memory is not on the GPU now.
bool paged_out();

// Residency before new memory: a job whose memory is paged out comes
// back (in its turn, with room for all of it: page_in_all) before it is
// admitted more. Otherwise it could hold part of the GPU while it waits for
// the rest, and the room it waits for could be the memory a resident job's
// iteration needs: both would wait for ever. CUDA_SUCCESS, or the error
// its page-in gave.
CUresult page_in_before_allocating();

// GSHARE_HOST_MEM_LIMIT, else half the host's memory: the pinned host
// memory that the paged jobs of one GPU may hold together.
uint64_t paging_host_limit();

// Whether this process's pager is about to page it out and waits for its
// framework's cache first: a thread of the job answering a request for
// its cache (admission.h) then empties it even mid-step, since the job is
// switched out and all of its memory is about to move anyway.
bool page_out_waits_for_cache();

// `bytes` more (or fewer) resident movable bytes on `device`.
void note_movable_resident(Device& device, int64_t bytes);
// A movable allocation was freed, resident or paged out: its share of the
// paging figures goes.
void note_paged_entry_freed(Device& device, const Allocation& entry);
// Then its pinned host copy, if it kept one, and that copy's bytes under
// GSHARE_HOST_MEM_LIMIT. Apart, and last: unpinning tens of GB takes about
// a second, and the device memory is given back before it, not after.
void free_entry_host_copy(const Allocation& entry);

}  // namespace gshare::allocator
