#include "scheduler/launch_gate.h"

#include "allocator/pools.h"
#include "intercept/driver_api.h"

namespace gshare::scheduler {

std::atomic<int> g_captures_in_progress{0};

void note_capture_begun() { g_captures_in_progress.fetch_add(1, std::memory_order_relaxed); }

void note_capture_ended() {
  int now = g_captures_in_progress.load(std::memory_order_relaxed);
  while (now > 0 && !g_captures_in_progress.compare_exchange_weak(now, now - 1)) {
  }
}

void forget_captures_after_fork() { g_captures_in_progress.store(0); }

bool stream_is_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!driver().stream_is_capturing || driver().stream_is_capturing(stream, &status) != CUDA_SUCCESS)
    return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void before_launch_slow(CUstream stream) {
  if (g_captures_in_progress.load(std::memory_order_relaxed) != 0 && stream_is_capturing(stream))
    return;
  allocator::Device* device = allocator::current_device();
  if (!device) return;
  if (shm::Slot* slot = device->account.slot())
    slot->launches.fetch_add(1, std::memory_order_relaxed);
}

void after_host_sync() {
  allocator::for_each_attached_device([](allocator::Device& device) {
    if (shm::Slot* slot = device.account.slot())
      slot->syncs.fetch_add(1, std::memory_order_relaxed);
    allocator::refresh_pool_charges_if_freed(device);
  });
}

}  // namespace gshare::scheduler
