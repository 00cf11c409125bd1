#include "allocator/pools.h"

#include <pthread.h>

#include <atomic>

#include "allocator/admission.h"
#include "allocator/devices.h"
#include "allocator/tracked_memory.h"
#include "base/driver_api.h"
#include "base/log.h"

namespace gshare::allocator {

namespace {

// One charged pool. `pool` null with `graph` set is a device's graph memory.
// All-zero is an unused entry, so the table costs no loaded data.
struct PoolCharge {
  CUmemoryPool pool = nullptr;
  int device = 0;
  bool used = false;
  bool graph = false;
  uint64_t charged = 0;
};

constexpr int kMaxPools = 256;
PoolCharge g_pools[kMaxPools];
pthread_mutex_t g_pools_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_freed_since_refresh[kMaxDevices];

struct Locked {
  Locked() { pthread_mutex_lock(&g_pools_mutex); }
  ~Locked() {
    if (held) pthread_mutex_unlock(&g_pools_mutex);
  }
  void unlock() {
    pthread_mutex_unlock(&g_pools_mutex);
    held = false;
  }
  bool held = true;
};

bool pool_attribute(CUmemoryPool pool, CUmemPool_attribute attribute, uint64_t* value) {
  cuuint64_t v = 0;
  if (!driver().mem_pool_get_attribute ||
      driver().mem_pool_get_attribute(pool, attribute, &v) != CUDA_SUCCESS)
    return false;
  *value = v;
  return true;
}

bool graph_reserved_bytes(int device, uint64_t* value) {
  cuuint64_t v = 0;
  if (!driver().device_get_graph_mem_attribute ||
      driver().device_get_graph_mem_attribute(CUdevice(device), CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
                                              &v) != CUDA_SUCCESS)
    return false;
  *value = v;
  return true;
}

PoolCharge* find_charge(CUmemoryPool pool, int device, bool graph) {
  for (PoolCharge& c : g_pools)
    if (c.used && c.device == device && c.pool == pool && c.graph == graph) return &c;
  return nullptr;
}

PoolCharge* add_charge(CUmemoryPool pool, int device, bool graph) {
  for (PoolCharge& c : g_pools) {
    if (c.used) continue;
    c = PoolCharge{pool, device, true, graph, 0};
    return &c;
  }
  return nullptr;
}

// Moves a pool's charge to `now` bytes: releases a shrink, charges a growth.
void settle(Device& device, PoolCharge& charge, uint64_t now) {
  if (now < charge.charged) device.account.release(charge.charged - now, 0);
  if (now > charge.charged) device.account.force_charge(now - charge.charged);
  charge.charged = now;
}

void refresh_locked(Device& device) {
  for (PoolCharge& c : g_pools) {
    if (!c.used || c.device != device.ordinal || c.graph) continue;
    uint64_t now = 0;
    if (!pool_attribute(c.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now)) {
      settle(device, c, 0);  // the pool is gone (destroyed, or its context)
      c = PoolCharge{};
      continue;
    }
    settle(device, c, now);
  }
  uint64_t graph_now = 0;
  if (graph_reserved_bytes(device.ordinal, &graph_now)) {
    PoolCharge* c = find_charge(nullptr, device.ordinal, true);
    if (!c && graph_now > 0) c = add_charge(nullptr, device.ordinal, true);
    if (c) settle(device, *c, graph_now);
  }
}

}  // namespace

CUresult allocate_from_pool_with(Device& device, CUmemoryPool pool, CUstream stream,
                                 uint64_t bytes, const char* name, PoolCall call, void* state) {
  if (!pool && (!driver().device_get_mem_pool ||
                driver().device_get_mem_pool(&pool, CUdevice(device.ordinal)) != CUDA_SUCCESS))
    pool = nullptr;
  bool measurable;
  {
    Locked lock;
    measurable = pool && (find_charge(pool, device.ordinal, false) || add_charge(pool, device.ordinal, false));
  }
  if (!measurable) {
    // Not measurable (no pool handle, or too many pools): charge the block
    // itself like a plain allocation; the free gives it back.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      GSHARE_WARN("cannot track a stream-ordered pool on GPU %s; its blocks are charged one by one",
                  device.uuid);
    return allocate_tracked(device, AllocationKind::kDevice, name, bytes,
                            [&](uint64_t* key) {
                              CUdeviceptr p = 0;
                              CUresult r = call(state, &p);
                              *key = p;
                              return r;
                            });
  }
  uint64_t refused_since = 0;
  for (;;) {
    // Bring the charge up to date first (on first sight of a pool, this
    // charges what it already holds), then admit what the pool cannot serve
    // from its own free memory: a pool's growth is ephemeral (its cache),
    // and it waits and takes turns like any allocation (allocator/
    // admission.h). Not under the lock: a wait answers requests to trim.
    uint64_t need = 0;
    {
      Locked lock;
      PoolCharge* charge = find_charge(pool, device.ordinal, false);
      if (!charge) charge = add_charge(pool, device.ordinal, false);
      if (!charge) return CUDA_ERROR_OUT_OF_MEMORY;  // the table filled meanwhile
      uint64_t reserved = charge->charged, used = 0;
      pool_attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
      pool_attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
      settle(device, *charge, reserved);
      uint64_t free_in_pool = reserved > used ? reserved - used : 0;
      need = bytes > free_in_pool ? bytes - free_in_pool : 0;
    }
    if (need > 0) {
      shm::ReserveResult granted = admit(device, name, need, 0, shm::MemoryClass::kEphemeral);
      if (granted.status != shm::ReserveStatus::kGranted) return refuse(device, name, bytes, granted);
    } else {
      take_turn_without_memory(device);
    }
    Locked lock;
    PoolCharge* charge = find_charge(pool, device.ordinal, false);
    if (!charge) charge = add_charge(pool, device.ordinal, false);
    if (!charge) {
      device.account.rollback(need);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUdeviceptr pointer = 0;
    CUresult result = call(state, &pointer);
    if (result != CUDA_SUCCESS) {
      device.account.rollback(need);
      if (result != CUDA_ERROR_OUT_OF_MEMORY) return result;
      lock.unlock();
      if (!wait_after_driver_refused(device, name, need > 0 ? need : bytes, &refused_since)) return result;
      continue;
    }
    uint64_t after = charge->charged;
    pool_attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &after);
    uint64_t grown = after > charge->charged ? after - charge->charged : 0;
    uint64_t covered = grown < need ? grown : need;
    device.account.commit(covered, 1);
    device.account.rollback(need - covered);
    charge->charged += covered;
    if (grown > covered) {
      shm::ReserveResult extra = device.account.reserve_in_turn(grown - covered);
      if (extra.status != shm::ReserveStatus::kGranted) {
        // The pool grew in a chunk larger than what fits: undo the block, give
        // the chunk back to the GPU, and refuse like any allocation over limit.
        device.account.release(0, 1);
        driver().mem_free_async(pointer, stream);
        driver().stream_synchronize(stream);
        uint64_t in_use = 0;
        pool_attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &in_use);
        driver().mem_pool_trim_to(pool, in_use);
        uint64_t now = charge->charged;
        pool_attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now);
        settle(device, *charge, now);
        return refuse(device, name, bytes, extra);
      }
      device.account.commit(grown - covered, 0);
      charge->charged += grown - covered;
    }
    record(device, AllocationKind::kPoolBlock, pointer, 0, reinterpret_cast<uint64_t>(pool));
    return CUDA_SUCCESS;
  }
}

void note_pool_block_freed(Device& device) {
  if (device.ordinal >= 0 && device.ordinal < kMaxDevices)
    g_freed_since_refresh[device.ordinal].store(true, std::memory_order_relaxed);
}

void refresh_pool_charges_if_freed(Device& device) {
  if (device.ordinal < 0 || device.ordinal >= kMaxDevices) return;
  if (!g_freed_since_refresh[device.ordinal].load(std::memory_order_relaxed)) return;
  g_freed_since_refresh[device.ordinal].store(false, std::memory_order_relaxed);
  refresh_pool_charges(device);
}

void refresh_pool_charges(Device& device) {
  Locked lock;
  refresh_locked(device);
}

uint64_t trim_pools(Device& device) {
  if (!driver().mem_pool_trim_to) return 0;
  Locked lock;
  uint64_t before = 0, after = 0;
  for (PoolCharge& c : g_pools) {
    if (!c.used || c.device != device.ordinal || c.graph) continue;
    before += c.charged;
    driver().mem_pool_trim_to(c.pool, 0);  // keeps what live blocks use
  }
  refresh_locked(device);
  for (const PoolCharge& c : g_pools)
    if (c.used && c.device == device.ordinal && !c.graph) after += c.charged;
  return before > after ? before - after : 0;
}

void forget_pool(CUmemoryPool pool) {
  Locked lock;
  for (PoolCharge& c : g_pools) {
    if (!c.used || c.pool != pool || c.graph) continue;
    if (Device* device = attached_device(c.device)) settle(*device, c, 0);
    c = PoolCharge{};
  }
}

void forget_context_pools(CUcontext) {
  // Pools belong to devices; a destroyed context may have taken a device's
  // default pool with it. Re-measuring every device settles whatever went.
  for_each_attached_device([](Device& device) { refresh_pool_charges(device); });
}

}  // namespace gshare::allocator
