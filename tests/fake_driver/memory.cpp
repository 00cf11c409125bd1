// Device, managed and host memory; copies and memsets; pointer queries.
//
// Device pointers are host addresses of MAP_NORESERVE anonymous mappings, so
// a fake GiB costs no RAM until touched, and copies are plain memcpy. Every
// allocation is recorded (base -> Alloc) so that frees and copies of unknown
// pointers fail like on the real driver, and its bytes are charged to the
// device's shared table so that capacity is shared across processes.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "fake_cuda_internal.h"

namespace fakecuda {

// Huge pages where the kernel allows them (advice only): paging tests fill
// and drop gigabytes of fake device memory, and 4 KiB faults made that a
// CPU core's work, slowing every test beside them on a 2-core machine.
void advise_huge_pages(void* p, size_t len) { ::madvise(p, len, MADV_HUGEPAGE); }

void* map_memory(size_t len) {
  if (len == 0) return nullptr;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (len > SIZE_MAX - page) return nullptr;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  advise_huge_pages(p, len);
  return p;
}

void unmap_memory(void* p, size_t len) {
  if (p != nullptr && len != 0) ::munmap(p, len);
}

Alloc* find_alloc_locked(uintptr_t p, size_t len) {
  State& s = S();
  auto it = s.allocs.upper_bound(p);
  if (it == s.allocs.begin()) return nullptr;
  --it;
  Alloc& a = it->second;
  if (p < a.base || p - a.base >= std::max<size_t>(a.size, 1)) return nullptr;
  if (len > a.size - (p - a.base)) return nullptr;  // runs past the end
  return &a;
}

bool in_mapping_locked(uintptr_t p, size_t len) {
  State& s = S();
  auto it = s.mappings.upper_bound(p);
  if (it == s.mappings.begin()) return false;
  --it;
  const Mapping& m = it->second;
  if (p < m.base || p - m.base >= m.size) return false;
  return len <= m.size - (p - m.base);
}

Alloc take_alloc_locked(std::map<uintptr_t, Alloc>::iterator it) {
  Alloc a = it->second;
  S().allocs.erase(it);
  if (a.kind == AllocKind::kPool) {
    pool_return_locked(a.pool, a.size);
  } else if (a.charged != 0) {
    uncharge(a.device, a.charged);
  }
  return a;
}

void free_alloc_locked(std::map<uintptr_t, Alloc>::iterator it) {
  Alloc a = take_alloc_locked(it);
  unmap_memory(reinterpret_cast<void*>(a.base), a.map_len);
}

namespace {

// Allocates `size` bytes of `kind` for the current context, charging
// `charged` bytes to its device. Returns the new base in *out.
CUresult allocate(size_t size, size_t charged, AllocKind kind, uintptr_t* out) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (out == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  CUctx_st* ctx = nullptr;
  rc = current_ctx_locked(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (charged != 0 && !charge(ctx->device, charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = map_memory(size);
  if (p == nullptr) {
    if (charged != 0) uncharge(ctx->device, charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Alloc a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size;
  a.map_len = size;
  a.charged = charged;
  a.kind = kind;
  a.device = ctx->device;
  a.ctx = ctx;
  a.buffer_id = s.next_id++;
  s.allocs[a.base] = a;
  *out = a.base;
  return CUDA_SUCCESS;
}

// True if [p, p+n) is fake device-visible memory (any recorded allocation or
// a cuMemMap'ped range). Caller holds S().mu.
bool is_device_range_locked(uintptr_t p, size_t n) {
  return find_alloc_locked(p, n) != nullptr || in_mapping_locked(p, n);
}

// What one side of a copy is: fake device memory (checked), host memory or a
// unified-address pointer (either; not checkable), or absent (memset).
enum class Side { kDevice, kHost, kUnified, kNone };

struct CopyCheck {
  CUresult rc = CUDA_SUCCESS;
  CUctx_st* ctx = nullptr;
  std::shared_ptr<CUstream_st> stream;  // when a stream was given
};

// Validates a copy (or a memset: src_side == kNone) of n bytes and resolves
// the current context and, if want_stream, the stream.
CopyCheck check_copy(uintptr_t dst, Side dst_side, uintptr_t src, Side src_side,
                     size_t n, bool want_stream, CUstream h) {
  CopyCheck c;
  c.rc = check_init();
  if (c.rc != CUDA_SUCCESS) return c;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  c.rc = current_ctx_locked(&c.ctx);
  if (c.rc != CUDA_SUCCESS) return c;
  if (want_stream) {
    c.rc = stream_locked(h, &c.stream);
    if (c.rc != CUDA_SUCCESS) return c;
  }
  if (n == 0) return c;
  auto side_ok = [&](uintptr_t p, Side side) {
    if (side == Side::kNone) return true;
    if (p == 0) return false;
    if (side == Side::kDevice) return is_device_range_locked(p, n);
    return true;  // host (or unified host) memory cannot be checked
  };
  if (!side_ok(dst, dst_side) || !side_ok(src, src_side)) c.rc = CUDA_ERROR_INVALID_VALUE;
  return c;
}

// Sleeps as long as `n` bytes take at `mb_per_s` MB/s (0: not at all).
void wait_bytes_at(size_t n, uint64_t mb_per_s) {
  if (mb_per_s == 0 || n == 0) return;
  std::this_thread::sleep_for(
      std::chrono::nanoseconds(static_cast<uint64_t>(double(n) * 1e3 / double(mb_per_s))));
}

// A copy between host and device memory takes n bytes over the link's
// bandwidth (FAKE_CUDA_COPY_MBPS; 0: instant), as a GPU's copy engine does:
// paging a job out and in must cost time for its overlap to be seen.
void wait_out_copy(Side ds, Side ss, size_t n) {
  const bool crosses = (ds == Side::kDevice && ss == Side::kHost) ||
                       (ds == Side::kHost && ss == Side::kDevice);
  if (crosses) wait_bytes_at(n, S().cfg.copy_mb_per_s);  // set at cuInit, read-only since
}

// Pinning host memory takes its bytes over FAKE_CUDA_PIN_MBPS (0: instant):
// a real driver pins a few GB/s, far slower than it copies, and paging
// that pins anew at a switch must show that cost.
void wait_out_pinning(size_t n) { wait_bytes_at(n, S().cfg.pin_mb_per_s); }  // read-only since cuInit
// And unpinning over FAKE_CUDA_UNPIN_MBPS: tens of GB take a real driver
// about a second, and a free that waits for it must show that.
void wait_out_unpinning(size_t n) { wait_bytes_at(n, S().cfg.unpin_mb_per_s); }  // read-only since cuInit

// Synchronous copy on the legacy default stream (waits for the context's
// blocking streams) or the per-thread default stream (waits for it only).
CUresult copy_sync(uintptr_t dst, Side ds, uintptr_t src, Side ss, size_t n, bool ptds) {
  CopyCheck c = check_copy(dst, ds, src, ss, n, /*want_stream=*/false, nullptr);
  if (c.rc != CUDA_SUCCESS) return c.rc;
  if (ptds) {
    std::shared_ptr<CUstream_st> st;
    {
      std::lock_guard<std::mutex> g(S().mu);
      st = default_stream_locked(c.ctx);
    }
    wait_idle(st.get());
  } else {
    sync_context(c.ctx, /*blocking_only=*/true);
  }
  if (n != 0) {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  }
  wait_out_copy(ds, ss, n);
  return CUDA_SUCCESS;
}

CUresult copy_async(uintptr_t dst, Side ds, uintptr_t src, Side ss, size_t n, CUstream h) {
  CopyCheck c = check_copy(dst, ds, src, ss, n, /*want_stream=*/true, h);
  if (c.rc != CUDA_SUCCESS) return c.rc;
  if (n == 0) return CUDA_SUCCESS;
  Work w;
  w.kind = Work::kCall;
  w.call = [dst, src, n, ds, ss] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    wait_out_copy(ds, ss, n);
  };
  return submit(c.stream, std::move(w));
}

// Fills count elements of elem_size bytes with value's low bytes.
void fill(uintptr_t dst, uint32_t value, size_t elem_size, size_t count) {
  if (elem_size == 1) {
    std::memset(reinterpret_cast<void*>(dst), static_cast<int>(value & 0xFF), count);
    return;
  }
  unsigned char* p = reinterpret_cast<unsigned char*>(dst);
  for (size_t i = 0; i < count; ++i) std::memcpy(p + i * elem_size, &value, elem_size);
}

CUresult memset_common(uintptr_t dst, uint32_t value, size_t elem_size, size_t count,
                       bool async, CUstream h, bool ptds) {
  if (count != 0 && dst % elem_size != 0) return CUDA_ERROR_INVALID_VALUE;
  if (count > SIZE_MAX / elem_size) return CUDA_ERROR_INVALID_VALUE;
  const size_t n = count * elem_size;
  CopyCheck c = check_copy(dst, Side::kDevice, 0, Side::kNone, n, async, h);
  if (c.rc != CUDA_SUCCESS) return c.rc;
  if (async) {
    if (n == 0) return CUDA_SUCCESS;
    Work w;
    w.kind = Work::kCall;
    w.call = [dst, value, elem_size, count] { fill(dst, value, elem_size, count); };
    return submit(c.stream, std::move(w));
  }
  if (ptds) {
    std::shared_ptr<CUstream_st> st;
    {
      std::lock_guard<std::mutex> g(S().mu);
      st = default_stream_locked(c.ctx);
    }
    wait_idle(st.get());
  } else {
    sync_context(c.ctx, /*blocking_only=*/true);
  }
  if (n != 0) fill(dst, value, elem_size, count);
  return CUDA_SUCCESS;
}

uintptr_t U(CUdeviceptr p) { return static_cast<uintptr_t>(p); }
uintptr_t H(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

// ===========================================================================
// Allocation
// ===========================================================================
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = 0;
  rc = allocate(bytesize, bytesize, AllocKind::kDevice, &p);
  if (rc == CUDA_SUCCESS) *dptr = static_cast<CUdeviceptr>(p);
  // A GPU's driver maps new memory page by page: tens of GiB take a
  // quarter of a second (FAKE_CUDA_ALLOC_US_PER_GIB).
  const uint64_t us_per_gib = S().cfg.alloc_us_per_gib;  // set at cuInit, read-only since
  if (rc == CUDA_SUCCESS && us_per_gib != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(
        static_cast<uint64_t>(double(us_per_gib) * double(bytesize) / double(1ULL << 30))));
  return rc;
}

CUresult CUDAAPI cuMemAlloc(fake_deviceptr_v1* dptr, unsigned int bytesize) {
  (void)dptr;
  (void)bytesize;
  return CUDA_ERROR_NOT_SUPPORTED;  // 32-bit device pointers are not emulated
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (WidthInBytes > SIZE_MAX - 511) return CUDA_ERROR_INVALID_VALUE;
  const size_t pitch = (WidthInBytes + 511) / 512 * 512;
  if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t size = pitch * Height;
  uintptr_t p = 0;
  rc = allocate(size, size, AllocKind::kDevice, &p);
  if (rc == CUDA_SUCCESS) {
    *dptr = static_cast<CUdeviceptr>(p);
    *pPitch = pitch;
  }
  return rc;
}

CUresult CUDAAPI cuMemAllocPitch(fake_deviceptr_v1*, unsigned int*, unsigned int,
                                 unsigned int, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uintptr_t p = 0;
  rc = allocate(bytesize, bytesize, AllocKind::kManaged, &p);
  if (rc == CUDA_SUCCESS) *dptr = static_cast<CUdeviceptr>(p);
  return rc;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == 0) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> g(S().mu);
  auto it = S().allocs.find(U(dptr));
  if (it == S().allocs.end() || it->second.kind == AllocKind::kHost) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  free_alloc_locked(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(fake_deviceptr_v1) { return CUDA_ERROR_NOT_SUPPORTED; }

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  CUctx_st* ctx = nullptr;
  rc = current_ctx_locked(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  Device* d = find_device(ctx->device);
  const uint64_t used = d->file.used();
  *total = static_cast<size_t>(d->total);
  *free = static_cast<size_t>(used >= d->total ? 0 : d->total - used);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(unsigned int* free, unsigned int* total) {
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t f = 0, t = 0;
  CUresult rc = cuMemGetInfo_v2(&f, &t);
  if (rc == CUDA_SUCCESS) {
    *free = static_cast<unsigned int>(std::min<size_t>(f, UINT_MAX));
    *total = static_cast<unsigned int>(std::min<size_t>(t, UINT_MAX));
  }
  return rc;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  uintptr_t base = 0;
  size_t size = 0;
  if (Alloc* a = find_alloc_locked(U(dptr), 0)) {
    base = a->base;
    size = a->size;
  } else {
    auto it = S().mappings.upper_bound(U(dptr));
    if (it == S().mappings.begin()) return CUDA_ERROR_NOT_FOUND;
    --it;
    if (U(dptr) < it->second.base || U(dptr) - it->second.base >= it->second.size) {
      return CUDA_ERROR_NOT_FOUND;
    }
    base = it->second.base;
    size = it->second.size;
  }
  if (pbase != nullptr) *pbase = static_cast<CUdeviceptr>(base);
  if (psize != nullptr) *psize = size;
  return CUDA_SUCCESS;
}

// Exports only memory cuMemAlloc made, as the real driver: address space
// of cuMemAddressReserve backed by cuMemMap is refused. The handle holds
// the allocation's base; nothing opens it here.
CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  Alloc* a = find_alloc_locked(U(dptr), 0);
  if (a == nullptr || a->kind != AllocKind::kDevice) return CUDA_ERROR_INVALID_VALUE;
  *handle = CUipcMemHandle{};
  const uint64_t base = a->base;
  static_assert(sizeof base <= sizeof handle->reserved, "handle too small");
  std::memcpy(handle->reserved, &base, sizeof base);
  return CUDA_SUCCESS;
}

// Opening the driver's own handles is not emulated: a handle of cuMemAlloc
// memory names memory of another process's address space here.
CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle, unsigned int) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  return pdptr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, flags);
}

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr) {
  CUresult rc = check_init();
  return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemGetAddressRange(fake_deviceptr_v1*, unsigned int*, fake_deviceptr_v1) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ===========================================================================
// Host memory (page-locked in the real driver; plain mappings here)
// ===========================================================================
CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pp == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((Flags & ~static_cast<unsigned int>(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                          CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uintptr_t p = 0;
  rc = allocate(bytesize, /*charged=*/0, AllocKind::kHost, &p);
  if (rc == CUDA_SUCCESS) {
    *pp = reinterpret_cast<void*>(p);
    wait_out_pinning(bytesize);
  }
  return rc;
}

CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto it = S().allocs.find(H(p));
    if (p == nullptr || it == S().allocs.end() || it->second.kind != AllocKind::kHost) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    bytes = it->second.size;
    free_alloc_locked(it);
  }
  wait_out_unpinning(bytes);
  return CUDA_SUCCESS;
}

// Registered host memory: the range is only remembered (nothing to pin),
// so that unregistering what was never registered is refused as the
// driver does.
CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (p == nullptr || bytesize == 0 || (Flags & ~0xFu) != 0) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> g(S().mu);
    if (!S().registered_host.emplace(H(p), bytesize).second) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  wait_out_pinning(bytesize);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostUnregister(void* p) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto it = p == nullptr ? S().registered_host.end() : S().registered_host.find(H(p));
    if (it == S().registered_host.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    bytes = it->second;
    S().registered_host.erase(it);
  }
  wait_out_unpinning(bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pdptr == nullptr || p == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  Alloc* a = find_alloc_locked(H(p), 0);
  if (a == nullptr || a->kind != AllocKind::kHost) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = static_cast<CUdeviceptr>(H(p));
  return CUDA_SUCCESS;
}

// ===========================================================================
// Copies
// ===========================================================================
CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  return copy_sync(U(dstDevice), Side::kDevice, H(srcHost), Side::kHost, ByteCount, false);
}
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost,
                                      size_t ByteCount) {
  return copy_sync(U(dstDevice), Side::kDevice, H(srcHost), Side::kHost, ByteCount, true);
}
CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_sync(H(dstHost), Side::kHost, U(srcDevice), Side::kDevice, ByteCount, false);
}
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_sync(H(dstHost), Side::kHost, U(srcDevice), Side::kDevice, ByteCount, true);
}
CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_sync(U(dstDevice), Side::kDevice, U(srcDevice), Side::kDevice, ByteCount, false);
}
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount) {
  return copy_sync(U(dstDevice), Side::kDevice, U(srcDevice), Side::kDevice, ByteCount, true);
}
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return copy_sync(U(dst), Side::kUnified, U(src), Side::kUnified, ByteCount, false);
}
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return copy_sync(U(dst), Side::kUnified, U(src), Side::kUnified, ByteCount, true);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost,
                                      size_t ByteCount, CUstream hStream) {
  return copy_async(U(dstDevice), Side::kDevice, H(srcHost), Side::kHost, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void* srcHost,
                                           size_t ByteCount, CUstream hStream) {
  return cuMemcpyHtoDAsync_v2(dstDevice, srcHost, ByteCount, hStream);
}
// Into pageable host memory an "async" copy returns only once it is done,
// as a real driver's does (it stages through memory of its own): the
// caller waits there for the stream's earlier work, as PyTorch's `.item()`
// waits for its step's kernels.
static bool pinned_host_locked(uintptr_t p) {
  auto it = S().allocs.upper_bound(p);
  if (it != S().allocs.begin()) {
    --it;
    if (it->second.kind == AllocKind::kHost && p < it->second.base + it->second.size) return true;
  }
  auto reg = S().registered_host.upper_bound(p);
  if (reg == S().registered_host.begin()) return false;
  --reg;
  return p < reg->first + reg->second;
}

static CUresult copy_to_host_async(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream, bool ptds) {
  CUresult rc = copy_async(H(dstHost), Side::kHost, U(srcDevice), Side::kDevice, ByteCount, hStream);
  if (rc != CUDA_SUCCESS || ByteCount == 0) return rc;
  bool pinned;
  {
    std::lock_guard<std::mutex> g(S().mu);
    pinned = pinned_host_locked(H(dstHost));
  }
  return pinned ? rc : synchronize_stream(hStream, ptds);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream) {
  return copy_to_host_async(dstHost, srcDevice, ByteCount, hStream, false);
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dstHost, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream) {
  return copy_to_host_async(dstHost, srcDevice, ByteCount, hStream, true);
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream) {
  return copy_async(U(dstDevice), Side::kDevice, U(srcDevice), Side::kDevice, ByteCount,
                    hStream);
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream) {
  return cuMemcpyDtoDAsync_v2(dstDevice, srcDevice, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                               CUstream hStream) {
  return copy_async(U(dst), Side::kUnified, U(src), Side::kUnified, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                    CUstream hStream) {
  return cuMemcpyAsync(dst, src, ByteCount, hStream);
}

// Legacy 32-bit-pointer copies.
CUresult CUDAAPI cuMemcpyHtoD(fake_deviceptr_v1, const void*, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemcpyDtoH(void*, fake_deviceptr_v1, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemcpyDtoD(fake_deviceptr_v1, fake_deviceptr_v1, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(fake_deviceptr_v1, const void*, unsigned int, CUstream) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void*, fake_deviceptr_v1, unsigned int, CUstream) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ===========================================================================
// Memset
// ===========================================================================
CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  return memset_common(U(dstDevice), uc, 1, N, false, nullptr, false);
}
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  return memset_common(U(dstDevice), uc, 1, N, false, nullptr, true);
}
CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  return memset_common(U(dstDevice), us, 2, N, false, nullptr, false);
}
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return memset_common(U(dstDevice), ui, 4, N, false, nullptr, false);
}
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return memset_common(U(dstDevice), ui, 4, N, false, nullptr, true);
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream) {
  return memset_common(U(dstDevice), uc, 1, N, true, hStream, false);
}
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                      CUstream hStream) {
  return cuMemsetD8Async(dstDevice, uc, N, hStream);
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream) {
  return memset_common(U(dstDevice), ui, 4, N, true, hStream, false);
}
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                       CUstream hStream) {
  return cuMemsetD32Async(dstDevice, ui, N, hStream);
}
CUresult CUDAAPI cuMemsetD8(fake_deviceptr_v1, unsigned char, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemsetD32(fake_deviceptr_v1, unsigned int, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ===========================================================================
// Pointer attributes
// ===========================================================================
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                       CUdeviceptr ptr) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);

  // What the pointer is: a recorded allocation, or a cuMemMap'ped range.
  Alloc view;
  unsigned long long handle_types = 0;
  if (Alloc* a = find_alloc_locked(U(ptr), 0)) {
    view = *a;
  } else {
    auto it = s.mappings.upper_bound(U(ptr));
    if (it == s.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    const Mapping& m = it->second;
    if (U(ptr) < m.base || U(ptr) - m.base >= m.size) return CUDA_ERROR_INVALID_VALUE;
    auto ph = s.phys.find(m.handle);
    view.base = m.base;
    view.size = m.size;
    view.kind = AllocKind::kDevice;
    view.device = ph != s.phys.end() ? ph->second.device : 0;
    view.ctx = nullptr;
    view.buffer_id = m.handle;
    if (ph != s.phys.end()) handle_types = ph->second.prop.requestedHandleTypes;
  }
  const bool host = view.kind == AllocKind::kHost;

  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = view.ctx;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host && view.kind != AllocKind::kManaged) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(U(ptr));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = view.buffer_id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = view.kind == AllocKind::kManaged ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = view.device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = view.kind == AllocKind::kDevice && view.ctx != nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(view.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = view.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      *static_cast<unsigned long long*>(data) = handle_types;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<CUmemoryPool*>(data) = view.pool;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // extern "C"
