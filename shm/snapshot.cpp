#include "shm/snapshot.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "rules/lanes.h"
#include "rules/policy.h"
#include "shm/liveness.h"
#include "shm/region.h"

namespace gshare::shm {

namespace {

constexpr uint64_t kNsPerSecond = 1000000000;
constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kUsPerSecond = 1000000;

std::string bounded_string(const char* chars, size_t capacity) {
  return std::string(chars, strnlen(chars, capacity));
}

// Time from `since` to `now`; 0 when `since` is unset (0) or later than
// `now`, which only a corrupt value can be: writers stamp before we read
// the clock.
uint64_t elapsed_since(uint64_t since, uint64_t now) {
  return since != 0 && since <= now ? now - since : 0;
}

// Copies the header and slots while no writer is inside a write section.
// The file is read, not mapped: its owner, maybe another user, may truncate
// it at any time, which fails a read where a mapping would fault (SIGBUS).
// After many failed tries a torn copy is still used: every value is shown,
// never used as an index, so a torn read only makes one frame imprecise.
// False if the file shrank.
bool copy_consistent(int fd, Region* copy) {
  const off_t seq_offset = reinterpret_cast<const char*>(&copy->header.seq) -
                           reinterpret_cast<const char*>(copy);
  for (int attempt = 0; attempt < 200; ++attempt) {
    uint32_t before = 0, after = 0;
    if (!read_exactly(fd, &before, sizeof before, seq_offset)) return false;
    if (before & 1u) continue;
    if (!read_exactly(fd, copy, sizeof(Region), 0)) return false;
    if (!read_exactly(fd, &after, sizeof after, seq_offset)) return false;
    if (after == before) return true;
  }
  return read_exactly(fd, copy, sizeof(Region), 0);
}

const char* policy_text(uint32_t policy) {
  if (!policy_is_known(policy)) return "unknown";
  return policy_name(Policy(policy));
}

const char* handover_mode_name(uint32_t mode) {
  switch (mode) {
    case kHandoverOverlap: return "overlap";
    case kHandoverStrict: return "strict";
  }
  return "unknown";
}

const char* shares_turns_name(uint32_t shares) {
  switch (shares) {
    case kSharesNone: return "off";
    case kSharesHostBound: return "on";
    case kSharesInPairs: return "pairs";
    case kSharesWhereGaps: return "gaps";
  }
  return "unknown";
}

const char* iteration_source_name(uint32_t source) {
  switch (source) {
    case kIterationsFromSyncs: return "syncs";
    case kIterationsFromLaunches: return "launches";
  }
  return "unknown";
}

const char* admission_name(uint32_t state) {
  switch (state) {
    case kWaitingForAdmission: return "waiting for admission";
    case kWaitingForMemory: return "waiting for memory";
    case kWaitingForLane: return "waiting for lane";
  }
  return "admitted";
}

void copy_memory_classes(const Slot& s, uint64_t now_mono_ns, ProcessSnapshot* p) {
  p->persistent_bytes = persistent_of(s);
  p->ephemeral_bytes = ephemeral_of(s);
  p->class_iterations = s.class_iterations;
  p->memory_provisional = s.class_iterations < 2;
  p->lane = s.lane < kMaxLanes ? int32_t(s.lane) : -1;
  p->admission = admission_name(s.admission);
  p->admission_wait_ns = s.admission != kAdmitted ? elapsed_since(s.admission_since_mono_ns, now_mono_ns) : 0;
  p->admission_bytes = s.admission != kAdmitted ? s.admission_bytes : 0;
  p->admission_short_bytes = s.admission != kAdmitted ? s.admission_short_bytes : 0;
  p->admission_waits = s.admission_waits;
  p->admission_timeouts = s.admission_timeouts;
  p->blocked_by_slot = s.admission != kAdmitted && s.blocked_by >= 1 && s.blocked_by <= kMaxSlots
                           ? int32_t(s.blocked_by - 1) : -1;
  p->released_bytes = s.released_bytes;
  static const char* const kResidency[] = {"resident", "paging out", "paged out", "paging in"};
  p->residency = s.residency < 4 ? kResidency[s.residency] : "unknown";
  p->paged_out_bytes = s.paged_out_bytes;
  p->host_paging_bytes = s.host_paging_bytes;
  p->page_outs = s.page_outs;
  p->page_ins = s.page_ins;
  p->paging_ns = s.paging_ns;
  p->page_in_wait_ns = s.page_in_wait_ns;
  p->prefetches = s.prefetches;
  p->paged_in_bytes = s.paged_in_bytes;
  p->page_in_copy_ns = s.page_in_copy_ns;
}

// Lanes and the condition's sum, recomputed over the live processes only.
void summarise_lanes(const RegionHeader& h, GpuSnapshot* gpu) {
  std::vector<rules::LaneJob> jobs;
  for (const ProcessSnapshot& p : gpu->processes) {
    rules::LaneJob j;
    j.id = int(p.slot);
    j.persistent = p.persistent_bytes;
    j.ephemeral = p.ephemeral_bytes;
    j.lane = p.lane;
    jobs.push_back(j);
    if (p.lane < 0) continue;
    auto it = std::find_if(gpu->lanes.begin(), gpu->lanes.end(),
                           [&](const LaneSnapshot& l) { return l.lane == p.lane; });
    if (it == gpu->lanes.end()) {
      LaneSnapshot lane;
      lane.lane = p.lane;
      const Token& token = h.tokens[p.lane];
      lane.holder_slot = -1;
      if (gpu->policy == "pack" && token.holder >= 1 && token.holder <= kMaxSlots) {
        for (const ProcessSnapshot& q : gpu->processes)
          if (q.slot + 1 == token.holder && q.holds_token) lane.holder_slot = int32_t(q.slot);
      }
      gpu->lanes.push_back(lane);
      it = gpu->lanes.end() - 1;
    }
    it->slots.push_back(p.slot);
    it->ephemeral_bytes = std::max(it->ephemeral_bytes, p.ephemeral_bytes);
  }
  std::sort(gpu->lanes.begin(), gpu->lanes.end(),
            [](const LaneSnapshot& a, const LaneSnapshot& b) { return a.lane < b.lane; });
  gpu->safety_bytes = rules::safety_bytes(jobs.data(), int(jobs.size()));
  gpu->memory_waiters = h.memory_waiters;
}

JobState checked_job_state(uint32_t value) {
  return value == kJobWaiting || value == kJobRunning ? JobState(value) : kJobIdle;
}

// When the job attached, on the monotonic clock. The scheduler stamps
// arrival_mono_ns; a slot it has not stamped (0) still has the wall-clock
// attach time, carried over by the distance between the two clocks now.
uint64_t attached_mono_ns(const Slot& s, uint64_t now_mono_ns, uint64_t now_unix_ns) {
  if (s.arrival_mono_ns != 0) return s.arrival_mono_ns;
  uint64_t age_ns = elapsed_since(s.attach_unix_ns, now_unix_ns);
  return age_ns != 0 && age_ns < now_mono_ns ? now_mono_ns - age_ns : 0;
}

void copy_scheduling(const RegionHeader& h, const Slot& s, uint32_t index, uint64_t now_mono_ns,
                     uint64_t now_unix_ns, ProcessSnapshot* p) {
  p->job_state = checked_job_state(s.job_state);
  // A holder whose generation differs was granted to an earlier owner of
  // the slot, who is gone: nobody valid holds the token then.
  for (const Token& token : h.tokens)
    if (token.holder == index + 1 && token.holder_generation == s.generation) p->holds_token = true;
  p->beside = s.beside != 0;
  p->host_bound = s.host_bound.load(std::memory_order_relaxed) != 0;
  p->leaves_gaps = s.leaves_gaps.load(std::memory_order_relaxed) != 0;
  p->gpu_wait_share = std::min(1.0, s.gpu_wait_permille.load(std::memory_order_relaxed) / 1000.0);
  p->gpu_busy_share = std::min(1.0, s.gpu_busy_permille.load(std::memory_order_relaxed) / 1000.0);
  p->weight = s.weight;
  p->priority = s.priority;
  p->handover_mode = handover_mode_name(s.handover_mode);
  p->shared_turns = shares_turns_name(s.shares_turns);
  p->expected_ns = s.expected_ns;
  p->expected_iters = s.expected_iters;
  // The holder's time since accounted_mono_ns is in no counter yet.
  uint64_t unaccounted_ns = p->holds_token || p->beside ? elapsed_since(s.accounted_mono_ns, now_mono_ns) : 0;
  p->served_ns = s.served_ns + unaccounted_ns;
  p->vtime_ns = s.vtime_ns;
  p->granted = s.granted;
  p->switches = s.switches;
  p->switch_ns = s.switch_ns;
  p->last_switch_ns = s.last_switch_ns;
  p->switch_cost_ns = s.switch_cost_ns.load(std::memory_order_relaxed);
  p->switch_memory_ns = s.switch_memory_ns.load(std::memory_order_relaxed);
  p->waiting_ns = s.wait_ns + elapsed_since(s.wait_since_mono_ns, now_mono_ns);
  uint64_t attached_ns = attached_mono_ns(s, now_mono_ns, now_unix_ns);
  p->share_10s = recent_token_share(s, p->holds_token, attached_ns, now_mono_ns);
  p->iterations = s.iterations.load(std::memory_order_relaxed);
  p->iteration_ns = s.iteration_ns.load(std::memory_order_relaxed);
  p->iteration_launches = s.iteration_launches.load(std::memory_order_relaxed);
  p->iteration_source = iteration_source_name(s.iteration_source.load(std::memory_order_relaxed));
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
  if (!copy_consistent(file.fd, copy)) {
    gpu.error = path + ": the file shrank while it was read";
    close_region(&file);
    return gpu;
  }
  // After the copy, so no stamp in it is later than "now".
  const uint64_t now_mono_ns = mono_now_ns();
  const uint64_t now_unix_ns = unix_now_ns();
  const RegionHeader& h = copy->header;
  gpu.uuid = bounded_string(h.gpu_uuid, kUuidChars);
  gpu.capacity_bytes = h.capacity_bytes;
  gpu.repairs = h.repairs;
  gpu.reclaimed_slots = h.reclaimed_slots;
  gpu.admission_timeouts = h.admission_timeouts;
  gpu.admission_waits = h.admission_waits;
  gpu.sampled_mono_ns = now_mono_ns;
  gpu.policy = policy_text(h.policy);
  gpu.handovers = h.handovers;
  gpu.loans = h.loans;
  gpu.vtime_floor_ns = h.vtime_floor_ns;
  gpu.switches = h.switches;
  gpu.switch_ns_total = h.switch_ns_total;
  gpu.switch_ns_max = h.switch_ns_max;
  gpu.slice_start_mono_ns = h.tokens[0].slice_start_mono_ns;
  gpu.slice_end_mono_ns = h.tokens[0].slice_end_mono_ns;
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
    copy_scheduling(h, s, i, now_mono_ns, now_unix_ns, &p);
    copy_memory_classes(s, now_mono_ns, &p);
    // Only a live process can hold the token: a dead holder's token waits
    // for reclaim, and nobody may launch with it meanwhile.
    if (p.holds_token && h.tokens[0].holder == i + 1) gpu.holder_slot = int32_t(i);
    if (h.token_watcher.load(std::memory_order_relaxed) == i + 1) gpu.watcher_slot = int32_t(i);
    gpu.reserved_bytes += s.reserved_bytes;
    gpu.processes.push_back(std::move(p));
  }
  for (ProcessSnapshot& p : gpu.processes)
    for (const ProcessSnapshot& q : gpu.processes)
      if (int32_t(q.slot) == p.blocked_by_slot) p.blocked_by_pid = q.pid;
  summarise_lanes(h, &gpu);
  close_region(&file);
  return gpu;
}

// Not a region being created nor one of another layout being removed
// (shm/region.h).
bool is_region_name(const char* name) {
  return strncmp(name, "gshare-", 7) == 0 && strstr(name, kCreatingMark) == nullptr &&
         strstr(name, kRemovingMark) == nullptr;
}

}  // namespace

const char* job_state_name(JobState state) {
  switch (state) {
    case kJobIdle: return "idle";
    case kJobWaiting: return "waiting";
    case kJobRunning: return "running";
  }
  return "idle";
}

double recent_token_share(const Slot& slot, bool holds_token, uint64_t attached_mono_ns,
                          uint64_t now_mono_ns) {
  const uint64_t now_second = now_mono_ns / kNsPerSecond;
  const uint64_t oldest_second =
      now_second >= uint64_t(kShareSeconds - 1) ? now_second - (kShareSeconds - 1) : 0;
  const uint64_t window_start_ns = oldest_second * kNsPerSecond;

  uint64_t held_ns = 0;
  for (int i = 0; i < kShareSeconds; ++i) {
    // Stamps are the low 32 bits of the second; the distance back from now
    // survives that truncation.
    uint64_t seconds_ago = uint32_t(uint32_t(now_second) - slot.share_second[i]);
    if (seconds_ago >= uint64_t(kShareSeconds) || seconds_ago > now_second) continue;
    // A stamp in another bucket than its second's is not what it claims.
    if ((now_second - seconds_ago) % kShareSeconds != uint64_t(i)) continue;
    held_ns += std::min<uint64_t>(slot.share_us[i], kUsPerSecond) * kNsPerUs;
  }
  if (holds_token && slot.accounted_mono_ns != 0)
    held_ns += elapsed_since(std::max(slot.accounted_mono_ns, window_start_ns), now_mono_ns);

  uint64_t window_ns = now_mono_ns - window_start_ns;
  if (attached_mono_ns > window_start_ns && attached_mono_ns <= now_mono_ns)
    window_ns = now_mono_ns - attached_mono_ns;
  window_ns = std::max(window_ns, kNsPerSecond);
  return std::min(1.0, double(held_ns) / double(window_ns));
}

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
