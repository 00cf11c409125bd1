#include "allocator/memory_view.h"

#include "allocator/devices.h"
#include "base/saturating.h"

namespace gshare::allocator {

namespace {
uint64_t min3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t m = a < b ? a : b;
  return m < c ? m : c;
}
}  // namespace

MemoryView memory_view(const Device& device, uint64_t real_free) {
  const DeviceAccount& account = device.account;
  uint64_t total = account.quota_bytes();
  uint64_t own_headroom = saturating_sub(total, account.reserved_bytes());
  uint64_t gpu_headroom = saturating_sub(account.capacity_bytes(), account.gpu_reserved_bytes());
  return {min3(own_headroom, gpu_headroom, real_free), total};
}

MemoryView memory_view_unattached(uint64_t physical_bytes, uint64_t real_free) {
  uint64_t total = quota_for(physical_bytes);
  return {real_free < total ? real_free : total, total};
}

}  // namespace gshare::allocator
