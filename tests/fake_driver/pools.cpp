// Stream-ordered allocation: memory pools, cuMemAllocAsync, cuMemFreeAsync.
//
// A pool has reserved bytes (charged to its device) and used bytes (handed
// out). An allocation is served from the pool's free reserved bytes when they
// suffice; otherwise the pool grows by the allocation's size rounded up to
// FAKE_CUDA_POOL_CHUNK (if the device is full it first gives back its free
// bytes and tries once more). Freeing returns bytes to the pool; reserved
// bytes stay until a synchronisation (stream, event, context) brings them down
// to the release threshold, or cuMemPoolTrimTo. Addresses are not
// sub-allocated: every allocation still has its own mapping.
#include "fake_cuda_internal.h"

namespace fakecuda {

namespace {

// Caller holds S().mu. Releases free reserved bytes so that
// reserved >= max(used, keep).
void trim_locked(CUmemPoolHandle_st* p, uint64_t keep) {
  const uint64_t floor = p->used > keep ? p->used : keep;
  if (p->reserved > floor) {
    uncharge(p->device, p->reserved - floor);
    p->reserved = floor;
  }
}

CUresult pool_alloc(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool_or_null,
                    CUstream hStream) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(hStream, &st);
  if (rc != CUDA_SUCCESS) return rc;
  CUmemPoolHandle_st* p = pool_or_null;
  if (p == nullptr) {
    p = find_device(st->ctx->device)->current_pool;
  } else if (s.pools.count(p) == 0 || p->destroyed) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Grow if the free reserved bytes do not suffice.
  if (p->reserved - p->used < bytesize) {
    const uint64_t chunk = s.cfg.pool_chunk;
    if (bytesize > UINT64_MAX - chunk) return CUDA_ERROR_OUT_OF_MEMORY;
    const uint64_t grow = (bytesize + chunk - 1) / chunk * chunk;
    if (p->props.maxSize != 0 && p->reserved + grow > p->props.maxSize) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!charge(p->device, grow)) {
      trim_locked(p, 0);
      if (!charge(p->device, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->reserved += grow;
    if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
  }
  void* mem = map_memory(bytesize);
  if (mem == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  p->used += bytesize;
  if (p->used > p->used_high) p->used_high = p->used;
  Alloc a;
  a.base = reinterpret_cast<uintptr_t>(mem);
  a.size = bytesize;
  a.map_len = bytesize;
  a.charged = 0;  // the pool's reservation carries the charge
  a.kind = AllocKind::kPool;
  a.device = p->device;
  a.ctx = st->ctx;
  a.pool = p;
  a.buffer_id = s.next_id++;
  s.allocs[a.base] = a;
  *dptr = static_cast<CUdeviceptr>(a.base);
  return CUDA_SUCCESS;
}

CUresult free_async(CUdeviceptr dptr, CUstream hStream) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUstream_st> st;
  Alloc a;
  {
    State& s = S();
    std::lock_guard<std::mutex> g(s.mu);
    rc = stream_locked(hStream, &st);
    if (rc != CUDA_SUCCESS) return rc;
    auto it = s.allocs.find(static_cast<uintptr_t>(dptr));
    if (dptr == 0 || it == s.allocs.end() || it->second.kind == AllocKind::kHost) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // The bytes go back to the pool (or device) now; the mapping goes away in
    // stream order, after the work queued before this free.
    a = take_alloc_locked(it);
    if (st->capture_graph) {
      // Captured frees are applied at capture time (README.md). The mapping
      // is kept (costing address space only) so that captured copies into
      // it stay harmless when the graph runs.
      return CUDA_SUCCESS;
    }
  }
  Work w;
  w.kind = Work::kCall;
  w.call = [base = a.base, len = a.map_len] {
    unmap_memory(reinterpret_cast<void*>(base), len);
  };
  return submit(st, std::move(w));
}

}  // namespace

void pool_return_locked(CUmemPoolHandle_st* p, uint64_t bytes) {
  p->used = p->used > bytes ? p->used - bytes : 0;
  if (p->destroyed) trim_locked(p, 0);
}

void release_pool_memory(int device) {
  std::lock_guard<std::mutex> g(S().mu);
  for (CUmemPoolHandle_st* p : S().pools) {
    if (p->device == device && !p->destroyed) trim_locked(p, p->release_threshold);
  }
}

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return pool_alloc(dptr, bytesize, nullptr, hStream);
}
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return pool_alloc(dptr, bytesize, nullptr, hStream);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return pool_alloc(dptr, bytesize, pool, hStream);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                              CUmemoryPool pool, CUstream hStream) {
  return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream);
}
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream);
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || poolProps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (find_device(poolProps->location.id) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUmemPoolHandle_st* p = new CUmemPoolHandle_st();
  p->device = poolProps->location.id;
  p->props = *poolProps;
  s.pools.insert(p);
  *pool = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (pool == nullptr || s.pools.count(pool) == 0 || pool->is_default) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Outstanding allocations stay valid; their bytes are uncharged when freed.
  pool->destroyed = true;
  trim_locked(pool, 0);
  s.pools.erase(pool);
  Device* d = find_device(pool->device);
  if (d->current_pool == pool) d->current_pool = d->default_pool;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  if (pool == nullptr || S().pools.count(pool) == 0) return CUDA_ERROR_INVALID_VALUE;
  trim_locked(pool, minBytesToKeep);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  if (pool == nullptr || S().pools.count(pool) == 0) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      pool->reuse_follow_event_dependencies = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      pool->reuse_allow_opportunistic = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      pool->reuse_allow_internal_dependencies = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      pool->release_threshold = *static_cast<cuuint64_t*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:  // only resetting is allowed
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->reserved_high = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->used_high = pool->used;
      return CUDA_SUCCESS;
    default:  // the *_CURRENT attributes are read-only
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  if (pool == nullptr || S().pools.count(pool) == 0) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      *static_cast<int*>(value) = pool->reuse_follow_event_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      *static_cast<int*>(value) = pool->reuse_allow_opportunistic;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *static_cast<int*>(value) = pool->reuse_allow_internal_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *static_cast<cuuint64_t*>(value) = pool->release_threshold;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = pool->reserved_high;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = pool->used;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = pool->used_high;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = d->default_pool;  // never changes after cuInit
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *pool = d->current_pool;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  Device* d = find_device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (pool == nullptr || S().pools.count(pool) == 0 || pool->device != dev) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  d->current_pool = pool;
  return CUDA_SUCCESS;
}

}  // extern "C"
