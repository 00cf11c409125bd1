// A consistent, read-only copy of every gshare region in a directory, for
// gshare-top and the tests. Reading never writes to a region and never takes
// its lock: it copies under the region's seqlock and checks each owner's
// liveness lock itself, so a dead process disappears from the view at once,
// even before a participant reclaims its slot.
//
// Times that run on (the holder's token time, a waiter's current wait) are
// brought up to the moment of the copy, `GpuSnapshot::sampled_mono_ns`, so a
// job that has held the token for minutes without a handover (fifo) does not
// look idle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shm/layout.h"

namespace gshare::shm {

struct ProcessSnapshot {
  uint32_t slot = 0;
  uint32_t generation = 0;
  int32_t pid = 0;
  uint32_t uid = 0;
  std::string command;
  uint64_t attach_unix_ns = 0;
  uint64_t quota_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t context_bytes = 0;
  uint64_t used_bytes = 0;  // allocated + context: what the process holds on the GPU
  uint64_t peak_reserved_bytes = 0;
  uint64_t allocation_count = 0;
  uint64_t denied_count = 0;
  uint64_t launches = 0;
  uint64_t syncs = 0;

  // --- scheduling (rules/policy.h has the vocabulary) ---
  JobState job_state = kJobIdle;   // a corrupt value reads as idle
  bool holds_token = false;        // the GPU's holder is this slot, in this generation
  bool beside = false;             // runs beside the holder, in its turn (shared turns)
  bool host_bound = false;         // its waits for the GPU are a small share of the time it runs
  bool leaves_gaps = false;        // busy, its kernels leaving the GPU gaps: shares turns two at a time
  double gpu_wait_share = 0;       // that share at its latest judgement, 0..1
  double gpu_busy_share = 0;       // its kernels' share of its own turns, 0..1; 0: not measured
  uint32_t weight = 0;             // GSHARE_WEIGHT
  int32_t priority = 0;            // GSHARE_PRIORITY
  std::string handover_mode;       // "overlap", "strict" or "unknown"
  std::string shared_turns;        // GSHARE_SHARED_TURNS: "off", "on", "pairs" or "unknown"
  uint64_t expected_ns = 0;        // GSHARE_EXPECTED_SECONDS; 0: not given
  uint64_t expected_iters = 0;     // GSHARE_EXPECTED_ITERS; 0: not given
  uint64_t served_ns = 0;          // token time received, up to the copy
  uint64_t vtime_ns = 0;           // fair's clock: served / weight, as lifted on becoming active
  uint64_t granted = 0;            // times given the token
  // Switches to this job that reached its first launch, and their cost:
  // grant to first launch (scheduler/token.h).
  uint64_t switches = 0;
  uint64_t switch_ns = 0;          // in all
  uint64_t last_switch_ns = 0;     // the latest one's; 0 before the first
  // What a switch to it costs, memory handed over included, over recent switches
  // (runtime/switch_cost.h): its turns last 40 times that, up to 10 s.
  uint64_t switch_cost_ns = 0;
  uint64_t switch_memory_ns = 0;  // the part of it that is memory handed over
  uint64_t waiting_ns = 0;         // time spent waiting for the token, the current wait included
  double share_10s = 0;            // 0..1: of the last 10 s, the share it held the token
  uint64_t iterations = 0;         // iterations detected
  uint64_t iteration_ns = 0;       // the latest iteration's length; 0: none detected
  uint32_t iteration_launches = 0; // launches per iteration; 0: unknown
  std::string iteration_source;    // how iterations were found: "syncs", "launches", "unknown"

  // --- memory classes, lanes, admission (allocator/classifier.h, rules/lanes.h) ---
  uint64_t persistent_bytes = 0;   // P: context + allocations classified persistent
  uint64_t ephemeral_bytes = 0;    // E: peak ephemeral bytes per iteration
  bool memory_provisional = true;  // fewer than two iterations classified: P and E may still move
  uint32_t class_iterations = 0;
  int32_t lane = -1;               // -1: not placed yet
  std::string admission;           // "admitted", "waiting for admission", "waiting for memory", "waiting for lane"
  uint64_t admission_wait_ns = 0;  // the current wait so far; 0 when admitted
  uint64_t admission_bytes = 0;    // the allocation that waits
  uint64_t admission_short_bytes = 0;  // by how much it does not fit
  uint64_t admission_waits = 0;    // waits so far
  uint64_t admission_timeouts = 0; // waits that gave up (GSHARE_ADMIT_TIMEOUT_S)
  int32_t blocked_by_pid = -1;     // while waiting: the job holding what it waits for; -1: none known
  int32_t blocked_by_slot = -1;
  uint64_t released_bytes = 0;     // cached bytes given back on request
  // Paging to host memory (allocator/pager.h).
  std::string residency;           // "resident", "paging out", "paged out", "paging in"
  uint64_t paged_out_bytes = 0;    // device bytes now in host memory
  uint64_t host_paging_bytes = 0;  // pinned host memory held for paging
  uint64_t page_outs = 0;
  uint64_t page_ins = 0;
  uint64_t paging_ns = 0;          // time spent copying and mapping, both ways
  uint64_t page_in_wait_ns = 0;    // its page-ins' waits for turn and room
  uint64_t prefetches = 0;         // page-ins done ahead of its turn
  uint64_t paged_in_bytes = 0;     // bytes copied back in, in all
  uint64_t page_in_copy_ns = 0;    // the time those copies took
};

// One lane: the jobs that take turns with one ephemeral space.
struct LaneSnapshot {
  int32_t lane = 0;
  std::vector<uint32_t> slots;     // members, by slot
  uint64_t ephemeral_bytes = 0;    // the lane's space: its members' largest E
  int32_t holder_slot = -1;        // under pack: the lane token's holder; -1: none
};

struct GpuSnapshot {
  std::string path;
  std::string uuid;
  std::string error;  // non-empty: the region could not be read (foreign, corrupt)
  uint64_t capacity_bytes = 0;
  uint64_t reserved_bytes = 0;  // Σ over live processes (dead ones excluded)
  uint64_t repairs = 0;
  uint64_t reclaimed_slots = 0;
  uint64_t admission_timeouts = 0;  // allocations that gave up waiting, ended jobs included
  uint64_t admission_waits = 0;     // allocations that had to wait, ended jobs included
  uint64_t sampled_mono_ns = 0;  // CLOCK_MONOTONIC right after the copy: "now" of the times below

  // --- the launch token ---
  std::string policy = "unknown";  // policy_name, "unknown" before one is set
  int32_t holder_slot = -1;        // slot of the live process holding the token; -1: nobody
  int32_t watcher_slot = -1;       // slot of the live waiter watching the holder; -1: nobody
  uint64_t handovers = 0;          // times the token changed hands
  uint64_t loans = 0;              // times a holder working on the host lent the token
  uint64_t vtime_floor_ns = 0;     // the least vtime of the active jobs, never lowered (fair, prefetch)
  // Switches that reached the new holder's first launch, and their cost,
  // since the region was created (ended jobs included).
  uint64_t switches = 0;
  uint64_t switch_ns_total = 0;
  uint64_t switch_ns_max = 0;
  uint64_t slice_start_mono_ns = 0;
  uint64_t slice_end_mono_ns = 0;  // UINT64_MAX: the slice has no end (fifo)

  // --- lanes and the safety condition, over live processes ---
  uint64_t safety_bytes = 0;       // Σ P + Σ_lanes max E (a job without a lane counts as one)
  uint32_t memory_waiters = 0;     // processes blocked in an allocation
  std::vector<LaneSnapshot> lanes; // by lane number
  std::vector<ProcessSnapshot> processes;  // live processes only, by slot
};

// "idle", "waiting", "running".
const char* job_state_name(JobState state);

// Every region file "gshare-*" in `dir`, sorted by path.
std::vector<GpuSnapshot> snapshot_regions(const std::string& dir);

// The share of the GPU that `slot` received lately, 0..1: its token time in
// the last kShareSeconds seconds (shm/layout.h) over the length of that
// window. The buckets cover the monotonic seconds now-9 .. now, the last one
// only up to `now_mono_ns`, so the window is 9 s plus the part of the current
// second gone by: a job that held the token throughout reads 1, not 0.9.
// Buckets stamped with any other second are stale and count 0. A job that
// attached (at `attached_mono_ns`; 0: unknown) within the window is measured
// over its own lifetime, but at least 1 s: a job 2 s old that held the
// token for 1 s reads 0.5 rather than 0.1, and one a moment old does not
// jump to 1 on its first slice. A holder's time since `accounted_mono_ns` is
// in no bucket yet; `holds_token` adds it.
double recent_token_share(const Slot& slot, bool holds_token, uint64_t attached_mono_ns,
                          uint64_t now_mono_ns);

}  // namespace gshare::shm
