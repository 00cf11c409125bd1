// The allocator's tracked paths (allocator/tracked_memory.h) in one process,
// without the preload: the driver is a table of fakes (base/driver_api.h),
// the region a real file in a private directory. What is charged, recorded
// and given back around each driver call, and what a refusal leaves.
#include "allocator/tracked_memory.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "allocator/admission.h"
#include "allocator/devices.h"
#include "base/driver_api.h"
#include "base/log.h"
#include "base/options.h"

namespace {

using namespace gshare;
using allocator::AllocationKind;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// The driver: one 8 GiB GPU, whose free memory the test sets.
size_t g_free_bytes = 8 * kGiB;

DriverApi fake_driver() {
  DriverApi api{};
  api.ctx_get_current = [](CUcontext* context) {
    *context = reinterpret_cast<CUcontext>(0x1000);
    return CUDA_SUCCESS;
  };
  api.ctx_get_device = [](CUdevice* device) {
    *device = 0;
    return CUDA_SUCCESS;
  };
  api.device_get = [](CUdevice* device, int ordinal) {
    *device = ordinal;
    return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
  };
  api.device_get_uuid = [](CUuuid* uuid, CUdevice) {
    memset(uuid->bytes, 0x7e, sizeof uuid->bytes);
    return CUDA_SUCCESS;
  };
  api.device_total_mem = [](size_t* bytes, CUdevice) {
    *bytes = 8 * kGiB;
    return CUDA_SUCCESS;
  };
  api.mem_get_info = [](size_t* free_bytes, size_t* total) {
    *free_bytes = g_free_bytes;
    *total = 8 * kGiB;
    return CUDA_SUCCESS;
  };
  return api;
}

// Once per process: the fake driver, a private region directory, a 1 GiB
// quota and a 2 s admission timeout.
allocator::Device& device() {
  static allocator::Device* attached = [] {
    replace_driver(fake_driver());
    // Removed with what is in it as the process exits.
    static struct TemporaryDir {
      std::string path;
      TemporaryDir() {
        char pattern[] = "/tmp/gshare-tracked-XXXXXX";
        path = mkdtemp(pattern);
      }
      ~TemporaryDir() { std::filesystem::remove_all(path); }
    } dir;
    static std::string dir_var = "GSHARE_DIR=" + dir.path;
    const char* env[] = {dir_var.c_str(), "GSHARE_MEM_LIMIT=1GiB", "GSHARE_ADMIT_TIMEOUT_S=2",
                         "GSHARE_LOG=error", nullptr};
    static Options options;
    char error[256];
    if (!parse_options(const_cast<char**>(env), &options, error, sizeof error)) FAIL(error);
    set_log_level(options.log_level);
    allocator::configure_devices(options, nullptr);
    allocator::configure_admission(options);
    return allocator::device_at(0);
  }();
  REQUIRE(attached != nullptr);
  return *attached;
}

uint64_t g_next_pointer = 0x7000'0000'0000;

}  // namespace

TEST_CASE("a tracked allocation is charged and recorded, and its free gives the bytes back") {
  allocator::Device& d = device();
  const uint64_t before = d.account.reserved_bytes();
  uint64_t pointer = 0;
  CUresult result = allocator::allocate_tracked(d, AllocationKind::kDevice, "cuMemAlloc", 256 * kMiB,
                                                [&](uint64_t* key) {
                                                  *key = pointer = g_next_pointer += 256 * kMiB;
                                                  return CUDA_SUCCESS;
                                                });
  REQUIRE(result == CUDA_SUCCESS);
  CHECK(d.account.reserved_bytes() == before + 256 * kMiB);
  CHECK(d.account.allocated_bytes() >= 256 * kMiB);
  int frees = 0;
  CHECK(allocator::free_tracked(pointer, [&] { ++frees; return CUDA_SUCCESS; }) == CUDA_SUCCESS);
  CHECK(frees == 1);
  CHECK(d.account.reserved_bytes() == before);
}

TEST_CASE("an allocation over the quota never reaches the driver and leaves nothing charged") {
  allocator::Device& d = device();
  const uint64_t before = d.account.reserved_bytes();
  int calls = 0;
  CUresult result = allocator::allocate_tracked(d, AllocationKind::kDevice, "cuMemAlloc", 2 * kGiB,
                                                [&](uint64_t*) { ++calls; return CUDA_SUCCESS; });
  CHECK(result == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(calls == 0);
  CHECK(d.account.reserved_bytes() == before);
}

TEST_CASE("a driver's failure gives back what was charged for it") {
  allocator::Device& d = device();
  const uint64_t before = d.account.reserved_bytes();
  CUresult result = allocator::allocate_tracked(d, AllocationKind::kDevice, "cuMemAlloc", 64 * kMiB,
                                                [&](uint64_t*) { return CUDA_ERROR_INVALID_VALUE; });
  CHECK(result == CUDA_ERROR_INVALID_VALUE);
  CHECK(d.account.reserved_bytes() == before);
}

TEST_CASE("an allocation the driver refused for memory is retried once the memory is free") {
  // gshare admitted it, but memory outside gshare's view was in use: the
  // allocation waits until the driver reports the bytes free, then the
  // driver is asked again.
  allocator::Device& d = device();
  const uint64_t before = d.account.reserved_bytes();
  g_free_bytes = 0;
  int calls = 0;
  uint64_t pointer = 0;
  CUresult result = allocator::allocate_tracked(d, AllocationKind::kDevice, "cuMemAlloc", 128 * kMiB,
                                                [&](uint64_t* key) {
                                                  if (++calls == 1) {
                                                    g_free_bytes = 8 * kGiB;  // freed meanwhile
                                                    return CUDA_ERROR_OUT_OF_MEMORY;
                                                  }
                                                  *key = pointer = g_next_pointer += 128 * kMiB;
                                                  return CUDA_SUCCESS;
                                                });
  CHECK(result == CUDA_SUCCESS);
  CHECK(calls == 2);
  CHECK(d.account.reserved_bytes() == before + 128 * kMiB);
  allocator::free_tracked(pointer, [] { return CUDA_SUCCESS; });
  CHECK(d.account.reserved_bytes() == before);
}

TEST_CASE("a pitched allocation is charged what the driver took, more or less than the guess") {
  allocator::Device& d = device();
  const uint64_t before = d.account.reserved_bytes();
  for (uint64_t taken : {96 * kMiB, 160 * kMiB}) {  // the guess is 128 MiB
    INFO("the driver takes " << taken / kMiB << " MiB");
    uint64_t pointer = 0;
    int undone = 0;
    CUresult result = allocator::allocate_pitched_tracked(
        d, "cuMemAllocPitch", 128 * kMiB,
        [&](uint64_t* key, uint64_t* bytes) {
          *key = pointer = g_next_pointer += 256 * kMiB;
          *bytes = taken;
          return CUDA_SUCCESS;
        },
        [&](uint64_t) { ++undone; });
    REQUIRE(result == CUDA_SUCCESS);
    CHECK(undone == 0);
    CHECK(d.account.reserved_bytes() == before + taken);
    allocator::free_tracked(pointer, [] { return CUDA_SUCCESS; });
    CHECK(d.account.reserved_bytes() == before);
  }
}

TEST_CASE("a pitched allocation whose pitch takes it over the quota is freed again and refused") {
  allocator::Device& d = device();
  const uint64_t before = d.account.reserved_bytes();
  int undone = 0;
  CUresult result = allocator::allocate_pitched_tracked(
      d, "cuMemAllocPitch", 900 * kMiB,
      [&](uint64_t* key, uint64_t* bytes) {
        *key = g_next_pointer += kGiB;
        *bytes = 1100 * kMiB;  // past the 1 GiB quota
        return CUDA_SUCCESS;
      },
      [&](uint64_t) { ++undone; });
  CHECK(result == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(undone == 1);
  CHECK(d.account.reserved_bytes() == before);
}
