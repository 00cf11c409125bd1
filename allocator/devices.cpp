#include "allocator/devices.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "allocator/context_memory.h"
#include "base/driver_api.h"
#include "base/log.h"
#include "scheduler/token.h"
#include "shm/region.h"

namespace gshare::allocator {

namespace detail {
Device* g_devices = nullptr;
std::atomic<uint64_t> g_attached_mask{0};
std::atomic<shm::Slot*> g_only_slot{nullptr};
}
using detail::g_only_slot;

namespace {
alignas(Device) unsigned char g_device_storage[sizeof(Device) * kMaxDevices];
}

namespace {

Options g_options;
pthread_mutex_t g_attach_mutex = PTHREAD_MUTEX_INITIALIZER;
void (*g_on_attach)() = nullptr;

// /proc/self/stat field 22: with the pid, it tells a reused pid apart.
uint64_t process_start_ticks() {
  char buffer[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buffer, sizeof buffer - 1);
  close(fd);
  if (n <= 0) return 0;
  buffer[n] = '\0';
  const char* p = strrchr(buffer, ')');  // the command may contain spaces
  if (!p) return 0;
  int field = 2;
  for (++p; *p && field < 22; ++p)
    if (*p == ' ') ++field;
  return strtoull(p, nullptr, 10);
}

// The command line, arguments joined by spaces, truncated to fit a slot.
void process_command(char* out, size_t out_len) {
  snprintf(out, out_len, "?");
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, out_len - 1);
  close(fd);
  if (n <= 0) return;
  out[n] = '\0';
  for (ssize_t i = 0; i < n - 1; ++i)
    if (out[i] == '\0') out[i] = ' ';
}

void update_only_slot() {
  shm::Slot* only = nullptr;
  int count = 0;
  for_each_attached_device([&](Device& d) {
    ++count;
    only = d.account.slot();
  });
  g_only_slot.store(count == 1 ? only : nullptr, std::memory_order_release);
}

void attach_region(Device& d, uint64_t quota) {
  shm::RegionAccess access{g_options.dir, g_options.group[0] ? g_options.group : nullptr};
  shm::RegionFile file;
  char error[shm::kErrorChars];
  if (!shm::open_or_create_region(access, d.uuid, d.physical_bytes, &file, error, sizeof error)) {
    GSHARE_ERROR("%s. This process runs alone on GPU %s: its quota (%llu bytes) still holds, "
                 "but other gshare processes do not see it",
                 error, d.uuid, (unsigned long long)quota);
    d.account.use_local(quota, d.physical_bytes);
    return;
  }
  shm::Arbiter arbiter(file);
  char command[shm::kCommandChars];
  process_command(command, sizeof command);
  shm::SlotIdentity who{int32_t(getpid()), uint32_t(getuid()), process_start_ticks(), command,
                        quota};
  if (!arbiter.claim_slot(who)) {
    // claim_slot fails on a full table and on a lock that cannot be taken:
    // say which.
    if (shm::region_lock_unusable(file, error, sizeof error))
      GSHARE_ERROR("%s. This process runs alone on GPU %s: its quota (%llu bytes) still holds, "
                   "but other gshare processes do not see it",
                   error, d.uuid, (unsigned long long)quota);
    else
      GSHARE_ERROR("the process table of %s is full (%u processes). This process runs alone on "
                   "GPU %s: its quota still holds, but other gshare processes do not see it",
                   file.path, shm::kMaxSlots, d.uuid);
    d.account.use_local(quota, d.physical_bytes);
    return;
  }
  // The job's scheduling settings are in the slot before its first launch.
  scheduler::join_token(arbiter, scheduler::job_settings(g_options), d.uuid);
  d.account.use_arbiter(arbiter, file.region->header.capacity_bytes);
  GSHARE_INFO("GPU %s: slot %d in %s, quota %llu bytes", d.uuid, arbiter.own_slot(), file.path,
              (unsigned long long)quota);
}

Device* attach(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices || !detail::g_devices) return nullptr;
  Device& d = detail::g_devices[ordinal];
  if (d.attached.load(std::memory_order_acquire)) return &d;
  pthread_mutex_lock(&g_attach_mutex);
  if (!d.attached.load(std::memory_order_relaxed)) {
    const DriverApi& api = driver();
    CUdevice handle;
    CUuuid uuid;
    size_t physical = 0;
    if (api.device_get(&handle, ordinal) == CUDA_SUCCESS &&
        api.device_get_uuid(&uuid, handle) == CUDA_SUCCESS &&
        api.device_total_mem(&physical, handle) == CUDA_SUCCESS) {
      d.ordinal = ordinal;
      format_uuid(uuid, d.uuid, sizeof d.uuid);
      d.physical_bytes = physical;
      uint64_t quota = quota_for(physical);
      attach_region(d, quota);
      d.attached.store(true, std::memory_order_release);
      detail::g_attached_mask.fetch_or(uint64_t(1) << ordinal, std::memory_order_release);
      update_only_slot();
      refresh_context_bytes(d);
      if (g_on_attach) g_on_attach();
    }
  }
  pthread_mutex_unlock(&g_attach_mutex);
  return d.attached.load(std::memory_order_acquire) ? &d : nullptr;
}

}  // namespace

void configure_devices(const Options& options, void (*on_attach)()) {
  g_options = options;
  g_on_attach = on_attach;
  if (detail::g_devices) return;
  Device* devices = reinterpret_cast<Device*>(g_device_storage);
  for (int i = 0; i < kMaxDevices; ++i) new (&devices[i]) Device();
  detail::g_devices = devices;
}

uint64_t quota_for(uint64_t physical_bytes) {
  return quota_on_gpu(g_options.mem_limit, physical_bytes);
}

void drain_current_context() {
  if (driver().ctx_synchronize) driver().ctx_synchronize();
}

void format_uuid(const CUuuid& uuid, char* out, size_t out_len) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  snprintf(out, out_len,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

Device* current_device() {
  CUdevice ordinal;
  if (driver().ctx_get_device(&ordinal) != CUDA_SUCCESS) return nullptr;
  return attach(int(ordinal));
}

Device* device_at(int ordinal) { return attach(ordinal); }

Device* attached_device(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices || !detail::g_devices) return nullptr;
  Device& d = detail::g_devices[ordinal];
  return d.attached.load(std::memory_order_acquire) ? &d : nullptr;
}

Device* attached_device_by_uuid(const char* uuid) {
  Device* found = nullptr;
  for_each_attached_device([&](Device& d) {
    if (!found && strcmp(d.uuid, uuid) == 0) found = &d;
  });
  return found;
}

uint64_t process_launches() {
  uint64_t total = 0;
  for_each_attached_device([&](Device& device) {
    if (shm::Slot* slot = device.account.slot()) total += slot->launches.load(std::memory_order_relaxed);
  });
  return total;
}

void forget_devices_after_fork() {
  g_attach_mutex = PTHREAD_MUTEX_INITIALIZER;
  for_each_attached_device([](Device& d) {
    d.account.forget_after_fork();
    d.attached.store(false, std::memory_order_relaxed);
  });
  detail::g_attached_mask.store(0, std::memory_order_relaxed);
  g_only_slot.store(nullptr, std::memory_order_relaxed);
}

}  // namespace gshare::allocator
