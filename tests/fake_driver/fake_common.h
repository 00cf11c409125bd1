// Code shared by the fake CUDA driver (libcuda.so.1) and the fake NVML
// (libnvidia-ml.so.1): the environment that describes the fake devices, the
// deterministic device UUIDs, and the small shared file per device that holds
// every process's memory use so that device capacity is shared across
// processes like a real GPU's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fakegpu {

// ---------------------------------------------------------------------------
// Environment (README.md documents each variable)
// ---------------------------------------------------------------------------
struct Config {
  int devices = 1;                      // FAKE_CUDA_DEVICES
  uint64_t mem_bytes = 8ULL << 30;      // FAKE_CUDA_MEM
  std::string uuid_seed = "fake";       // FAKE_CUDA_UUID_SEED
  uint64_t ctx_bytes = 64ULL << 20;     // FAKE_CUDA_CTX_BYTES
  std::string dir = "/dev/shm";         // FAKE_CUDA_DIR
  std::string trace_path;               // FAKE_CUDA_TRACE ("" = off)
  uint64_t pool_chunk = 32ULL << 20;    // FAKE_CUDA_POOL_CHUNK
  uint64_t alloc_us_per_gib = 0;        // FAKE_CUDA_ALLOC_US_PER_GIB
  uint64_t copy_mb_per_s = 0;           // FAKE_CUDA_COPY_MBPS (0: instant)
  uint64_t pin_mb_per_s = 0;            // FAKE_CUDA_PIN_MBPS (0: instant)
  uint64_t unpin_mb_per_s = 0;          // FAKE_CUDA_UNPIN_MBPS (0: instant)
};

// Reads the FAKE_CUDA_* variables. A malformed value is reported on stderr
// (naming the variable) and the default is used instead.
Config read_config();

// Parses "1073741824", "512MiB", "8GiB", "4G", "64K"... Suffixes K/KiB, M/MiB,
// G/GiB, T/TiB are powers of 1024 (case-insensitive). False if malformed.
bool parse_size(const char* text, uint64_t* out);

// ---------------------------------------------------------------------------
// Device identity
// ---------------------------------------------------------------------------
// Device `index`'s 16-byte UUID for `seed`: the FNV-1a hash of
// "<seed>\0<index>", spread into two 64-bit halves (big-endian) by
// splitmix64's finaliser. Stable across runs, builds and processes; e.g. seed
// "fake", device 0 -> GPU-e9ce5372-27b0-f740-35a7-5b578f29e37e.
void device_uuid(const std::string& seed, int index, unsigned char out[16]);
// 32 lowercase hex digits (used in the shared file's name).
std::string uuid_hex(const unsigned char uuid[16]);
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and NVML print it.
std::string uuid_string(const unsigned char uuid[16]);

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------
// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot) and
// field 3 (state letter). False if the process does not exist.
bool read_proc_stat(int pid, char* state, uint64_t* start_time);

// True if (pid, start_time) names a process that is still running: it exists
// (kill(pid, 0) succeeds or fails with EPERM), is not a zombie, and started
// at start_time (so a recycled pid is not mistaken for the original).
bool process_alive(int pid, uint64_t start_time);

// ---------------------------------------------------------------------------
// The shared device file ${FAKE_CUDA_DIR}/fakecuda-<uuid-hex>
// ---------------------------------------------------------------------------
struct ProcessUsage {
  int pid;
  uint64_t used_bytes;
};

// One process's handle on one device's shared table. Every method is
// thread-safe (the table has a robust process-shared mutex) and never throws.
class DeviceFile {
 public:
  DeviceFile() = default;
  DeviceFile(const DeviceFile&) = delete;
  DeviceFile& operator=(const DeviceFile&) = delete;
  ~DeviceFile();  // unmaps; entries stay (they die with the process)

  // Maps the file, creating it race-free if it does not exist yet. On failure
  // returns false and says why in *error.
  bool open(const std::string& dir, const std::string& uuid_hex,
            std::string* error);
  bool is_open() const { return table_ != nullptr; }
  const std::string& path() const { return path_; }

  // Adds `bytes` to this process's entry if the device's total use (all live
  // processes) plus `bytes` stays within `total`. False (nothing changed)
  // when it would not fit, or when the table has no free entry.
  bool charge(uint64_t bytes, uint64_t total);
  // Returns `bytes` from this process's entry (clamped at zero). An entry that
  // reaches zero is freed.
  void uncharge(uint64_t bytes);
  // Sum of the entries of live processes; dead entries are dropped on the way.
  uint64_t used();
  // Live processes with a nonzero entry, in table order.
  std::vector<ProcessUsage> processes();

 private:
  struct Table;
  bool lock();
  void unlock();
  // Caller holds the lock. Drops dead entries and returns the live sum.
  uint64_t sweep_locked();
  // Caller holds the lock. Index of this process's entry, or -1.
  int find_own_locked();
  // Caller holds the lock. Appends the device's use to FAKE_CUDA_MEM_TRACE.
  void trace_locked();

  Table* table_ = nullptr;
  std::string path_;
  int mem_trace_fd_ = -1;
};

}  // namespace fakegpu
