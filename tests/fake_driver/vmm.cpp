// Virtual memory management: cuMemCreate / cuMemMap / cuMemUnmap /
// cuMemRelease and address reservations.
//
// Physical memory (cuMemCreate) is charged to its device when created and
// uncharged once it is both released and unmapped everywhere, like the real
// driver. Address reservations are PROT_NONE MAP_NORESERVE mappings and are
// never charged. cuMemMap maps fresh anonymous memory over the range, so two
// mappings of one handle do not share contents (not emulated) until it is
// exported: cuMemExportToShareableHandle (POSIX file descriptor, for memory
// created with that handle type requested) moves its contents into a memfd
// and maps every mapping of it shared; that memfd is the descriptor, and
// cuMemImportFromShareableHandle in another process maps the same pages,
// uncharged (the exporter's device pays for them). FAKE_CUDA_NO_SHAREABLE=1
// refuses the handle type, as some containers' drivers do.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_cuda_internal.h"

namespace fakecuda {

namespace {

constexpr size_t kGranularity = 2ULL << 20;  // 2 MiB, like a real GPU

// FAKE_CUDA_VMM_TRACE: one line per successful create, map, set-access,
// unmap and release, "<pid> <call> <address> <bytes>" (create and release:
// the handle for the address), so that a test can count how many calls
// moving memory takes, and of what size.
void trace_vmm(const char* call, uint64_t address, uint64_t bytes) {
  static const int fd = [] {
    const char* path = std::getenv("FAKE_CUDA_VMM_TRACE");
    return path != nullptr && *path ? ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  }();
  if (fd < 0) return;
  char line[96];
  const int n = std::snprintf(line, sizeof line, "%d %s %llu %llu\n", int(::getpid()), call,
                              (unsigned long long)address, (unsigned long long)bytes);
  if (n > 0 && ::write(fd, line, size_t(n)) < 0) {
    // A lost line only weakens a test's evidence, never the driver.
  }
}

bool valid_prop(const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
         find_device(prop->location.id) != nullptr;
}

// Caller holds S().mu. The reservation containing [p, p+len), or null.
Reservation* reservation_locked(uintptr_t p, size_t len) {
  State& s = S();
  auto it = s.reservations.upper_bound(p);
  if (it == s.reservations.begin()) return nullptr;
  --it;
  Reservation& r = it->second;
  if (p < r.base || p - r.base >= r.size || len > r.size - (p - r.base)) return nullptr;
  return &r;
}

// Caller holds S().mu. Frees a physical allocation released and unmapped.
void drop_phys_locked(std::map<CUmemGenericAllocationHandle, PhysAlloc>::iterator ph) {
  if (!ph->second.imported) uncharge(ph->second.device, ph->second.size);
  if (ph->second.memfd >= 0) ::close(ph->second.memfd);
  S().phys.erase(ph);
}

// Caller holds S().mu. Drops one mapping: the range goes back to PROT_NONE
// and the physical allocation loses a mapping (freed if also released).
void unmap_locked(std::map<uintptr_t, Mapping>::iterator it) {
  State& s = S();
  const Mapping m = it->second;
  s.mappings.erase(it);
  ::mmap(reinterpret_cast<void*>(m.base), m.size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  auto ph = s.phys.find(m.handle);
  if (ph == s.phys.end()) return;
  if (--ph->second.mappings <= 0 && ph->second.released) drop_phys_locked(ph);
}

// Caller holds S().mu. Mappings within [p, p+len): false if one only
// partly overlaps the range.
bool mappings_in_locked(uintptr_t p, size_t len,
                        std::vector<std::map<uintptr_t, Mapping>::iterator>* out) {
  State& s = S();
  auto it = s.mappings.upper_bound(p);
  if (it != s.mappings.begin()) {
    auto prev = std::prev(it);
    if (prev->second.base + prev->second.size > p) it = prev;
  }
  for (; it != s.mappings.end() && it->second.base < p + len; ++it) {
    const Mapping& m = it->second;
    if (m.base < p || m.base + m.size > p + len) return false;
    out->push_back(it);
  }
  return true;
}

}  // namespace

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity,
                                               const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (granularity == nullptr || !valid_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
      option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                             const CUmemAllocationProp* prop, unsigned long long flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr || !valid_prop(prop) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) {
    const char* refuse = std::getenv("FAKE_CUDA_NO_SHAREABLE");
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        (refuse != nullptr && std::strcmp(refuse, "1") == 0))
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (!charge(prop->location.id, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  PhysAlloc ph;
  ph.size = size;
  ph.device = prop->location.id;
  ph.prop = *prop;
  const CUmemGenericAllocationHandle h = s.next_phys_handle++;
  s.phys[h] = ph;
  *handle = h;
  trace_vmm("create", h, size);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.phys.find(handle);
  if (it == s.phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  trace_vmm("release", handle, it->second.size);
  if (it->second.mappings <= 0) drop_phys_locked(it);  // otherwise freed by the last unmap
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  (void)addr;  // only a hint for the real driver too
  if (ptr == nullptr || flags != 0 || size == 0 || size % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (alignment == 0) alignment = kGranularity;
  if ((alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (size > SIZE_MAX - alignment) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t len = size + alignment;
  void* m = ::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t raw = reinterpret_cast<uintptr_t>(m);
  const uintptr_t base = (raw + alignment - 1) & ~(static_cast<uintptr_t>(alignment) - 1);
  // Give back the unaligned head and the unused tail.
  if (base > raw) ::munmap(m, base - raw);
  const uintptr_t end = base + size;
  if (raw + len > end) ::munmap(reinterpret_cast<void*>(end), raw + len - end);
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  Reservation r;
  r.base = base;
  r.size = size;
  s.reservations[base] = r;
  *ptr = static_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.reservations.find(static_cast<uintptr_t>(ptr));
  if (it == s.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::map<uintptr_t, Mapping>::iterator> inside;
  mappings_in_locked(it->second.base, it->second.size, &inside);
  for (auto m : inside) unmap_locked(m);
  ::munmap(reinterpret_cast<void*>(it->second.base), it->second.size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  const uintptr_t p = static_cast<uintptr_t>(ptr);
  if (flags != 0 || size == 0 || size % kGranularity != 0 || p % kGranularity != 0 ||
      offset % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto ph = s.phys.find(handle);
  if (ph == s.phys.end() || ph->second.released) return CUDA_ERROR_INVALID_HANDLE;
  if (offset > ph->second.size || size > ph->second.size - offset) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (reservation_locked(p, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The range must not overlap an existing mapping.
  auto it = s.mappings.lower_bound(p);
  if (it != s.mappings.end() && it->second.base < p + size) return CUDA_ERROR_INVALID_VALUE;
  if (it != s.mappings.begin()) {
    auto prev = std::prev(it);
    if (prev->second.base + prev->second.size > p) return CUDA_ERROR_INVALID_VALUE;
  }
  void* m = ph->second.memfd >= 0
                ? ::mmap(reinterpret_cast<void*>(p), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                         ph->second.memfd, off_t(offset))
                : ::mmap(reinterpret_cast<void*>(p), size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ph->second.memfd < 0) advise_huge_pages(m, size);
  Mapping mp;
  mp.base = p;
  mp.size = size;
  mp.offset = offset;
  mp.handle = handle;
  s.mappings[p] = mp;
  ++ph->second.mappings;
  trace_vmm("map", p, size);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  const uintptr_t p = static_cast<uintptr_t>(ptr);
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (reservation_locked(p, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::map<uintptr_t, Mapping>::iterator> inside;
  if (!mappings_in_locked(p, size, &inside) || inside.empty()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto m : inside) unmap_locked(m);
  trace_vmm("unmap", p, size);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                size_t count) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long flags = 0;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        find_device(desc[i].location.id) == nullptr) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    flags = desc[i].flags;
  }
  const uintptr_t p = static_cast<uintptr_t>(ptr);
  if (size > UINTPTR_MAX - p) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  std::vector<std::map<uintptr_t, Mapping>::iterator> inside;
  if (!mappings_in_locked(p, size, &inside) || inside.empty()) return CUDA_ERROR_INVALID_VALUE;
  // The whole range must be mapped, without holes.
  uintptr_t next = p;
  for (auto m : inside) {
    if (m->second.base != next) return CUDA_ERROR_INVALID_VALUE;
    next = m->second.base + m->second.size;
  }
  if (next != p + size) return CUDA_ERROR_INVALID_VALUE;
  for (auto m : inside) m->second.access = flags;
  trace_vmm("access", p, size);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                CUdeviceptr ptr) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || find_device(location->id) == nullptr) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  const uintptr_t p = static_cast<uintptr_t>(ptr);
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.mappings.upper_bound(p);
  if (it == s.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (p < it->second.base || p - it->second.base >= it->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *flags = it->second.access;
  return CUDA_SUCCESS;
}

// Only POSIX file descriptors, of memory created asking for them.
CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType,
                                              unsigned long long flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (shareableHandle == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto ph = s.phys.find(handle);
  if (ph == s.phys.end() || ph->second.released) return CUDA_ERROR_INVALID_HANDLE;
  PhysAlloc& phys = ph->second;
  if (!phys.imported && !(phys.prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return CUDA_ERROR_INVALID_VALUE;
  if (phys.memfd < 0) {
    // The contents move into the memfd, and each mapping onto it.
    char name[32];
    std::snprintf(name, sizeof name, "fake-cuda-dev%d", phys.device);
    int fd = ::memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, off_t(phys.size)) != 0) {
      if (fd >= 0) ::close(fd);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (auto& [base, m] : s.mappings) {
      if (m.handle != handle) continue;
      if (::pwrite(fd, reinterpret_cast<void*>(m.base), m.size, off_t(m.offset)) != ssize_t(m.size) ||
          ::mmap(reinterpret_cast<void*>(m.base), m.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                 off_t(m.offset)) == MAP_FAILED) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    phys.memfd = fd;
  }
  int out = ::fcntl(phys.memfd, F_DUPFD_CLOEXEC, 0);
  if (out < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(shareableHandle) = out;
  return CUDA_SUCCESS;
}

// A descriptor cuMemExportToShareableHandle made, in this process or
// another: its memfd's name says the device. The caller keeps its descriptor.
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                CUmemAllocationHandleType shHandleType) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = int(reinterpret_cast<intptr_t>(osHandle));
  char link[64], target[128] = {};
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  int device = -1;
  struct stat st {};
  if (::readlink(link, target, sizeof target - 1) < 0 ||
      std::sscanf(target, "/memfd:fake-cuda-dev%d", &device) != 1 || find_device(device) == nullptr ||
      ::fstat(fd, &st) != 0 || st.st_size <= 0 || size_t(st.st_size) % kGranularity != 0)
    return CUDA_ERROR_INVALID_VALUE;
  const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  PhysAlloc ph;
  ph.size = size_t(st.st_size);
  ph.device = device;
  ph.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ph.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ph.prop.location.id = device;
  ph.prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  ph.memfd = own;
  ph.imported = true;
  const CUmemGenericAllocationHandle h = s.next_phys_handle++;
  s.phys[h] = ph;
  *handle = h;
  trace_vmm("import", h, ph.size);
  return CUDA_SUCCESS;
}

}  // extern "C"
