#include "shm/snapshot.h"

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "shm/layout.h"
#include "shm/liveness.h"
#include "shm/region.h"

namespace gshare::shm {

namespace {

std::string bounded_string(const char* chars, size_t capacity) {
  return std::string(chars, strnlen(chars, capacity));
}

// Copies the header and slots while no writer is inside a write section.
// After many failed tries a torn copy is still used: every value is shown,
// never used as an index, so a torn read only makes one frame imprecise.
void copy_consistent(const Region& live, Region* copy) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    uint32_t before = live.header.seq.load(std::memory_order_acquire);
    if (before & 1u) continue;
    memcpy(static_cast<void*>(copy), &live, sizeof(Region));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (live.header.seq.load(std::memory_order_relaxed) == before) return;
  }
  memcpy(static_cast<void*>(copy), &live, sizeof(Region));
}

GpuSnapshot snapshot_region(const std::string& path) {
  GpuSnapshot gpu;
  gpu.path = path;
  RegionFile file;
  char error[kErrorChars];
  if (!open_region_read_only(path.c_str(), &file, error, sizeof error)) {
    gpu.error = error;
    return gpu;
  }
  std::vector<unsigned char> storage(sizeof(Region));
  Region* copy = reinterpret_cast<Region*>(storage.data());
  copy_consistent(*file.region, copy);
  gpu.uuid = bounded_string(copy->header.gpu_uuid, kUuidChars);
  gpu.capacity_bytes = copy->header.capacity_bytes;
  gpu.repairs = copy->header.repairs;
  gpu.reclaimed_slots = copy->header.reclaimed_slots;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const Slot& s = copy->slots[i];
    if (s.state != kSlotLive) continue;
    if (liveness_of(file.fd, kLivenessByteBase + i) == Liveness::kDead) continue;
    ProcessSnapshot p;
    p.slot = i;
    p.generation = s.generation;
    p.pid = s.pid;
    p.uid = s.uid;
    p.command = bounded_string(s.command, kCommandChars);
    p.attach_unix_ns = s.attach_unix_ns;
    p.quota_bytes = s.quota_bytes;
    p.reserved_bytes = s.reserved_bytes;
    p.allocated_bytes = s.allocated_bytes;
    p.context_bytes = s.context_bytes;
    p.used_bytes = s.allocated_bytes + s.context_bytes;
    p.peak_reserved_bytes = s.peak_reserved_bytes;
    p.allocation_count = s.allocation_count;
    p.denied_count = s.denied_count;
    p.launches = s.launches.load(std::memory_order_relaxed);
    p.syncs = s.syncs.load(std::memory_order_relaxed);
    gpu.reserved_bytes += s.reserved_bytes;
    gpu.processes.push_back(std::move(p));
  }
  close_region(&file);
  return gpu;
}

bool is_region_name(const char* name) {
  return strncmp(name, "gshare-", 7) == 0 && strstr(name, ".tmp.") == nullptr;
}

}  // namespace

std::vector<GpuSnapshot> snapshot_regions(const std::string& dir) {
  std::vector<GpuSnapshot> gpus;
  DIR* d = opendir(dir.c_str());
  if (!d) return gpus;
  while (dirent* entry = readdir(d)) {
    if (!is_region_name(entry->d_name)) continue;
    gpus.push_back(snapshot_region(dir + "/" + entry->d_name));
  }
  closedir(d);
  std::sort(gpus.begin(), gpus.end(),
            [](const GpuSnapshot& a, const GpuSnapshot& b) { return a.path < b.path; });
  return gpus;
}

}  // namespace gshare::shm
