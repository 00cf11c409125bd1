// A consistent, read-only copy of every gshare region in a directory, for
// gshare-top and the tests. Reading never writes to a region and never takes
// its lock: it copies under the region's seqlock and checks each owner's
// liveness lock itself, so a dead process disappears from the view at once,
// even before a participant reclaims its slot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

struct GpuSnapshot {
  std::string path;
  std::string uuid;
  std::string error;  // non-empty: the region could not be read (foreign, corrupt)
  uint64_t capacity_bytes = 0;
  uint64_t reserved_bytes = 0;  // Σ over live processes (dead ones excluded)
  uint64_t repairs = 0;
  uint64_t reclaimed_slots = 0;
  std::vector<ProcessSnapshot> processes;  // live processes only, by slot
};

// Every region file "gshare-*" in `dir`, sorted by UUID.
std::vector<GpuSnapshot> snapshot_regions(const std::string& dir);

}  // namespace gshare::shm
