// The few NVML types gshare uses, as NVML's public ABI defines them (the
// CUDA toolkit ships no nvml.h). Layouts are fixed by NVIDIA's ABI.
#pragma once

namespace gshare::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorArgumentVersionMismatch = 25;

using Device = struct nvmlDevice_st*;

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
inline constexpr unsigned int kMemoryV2Version = unsigned(sizeof(MemoryV2)) | (2u << 24);

struct ProcessInfo {  // nvmlProcessInfo_t, as filled by *_v3 process queries
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

}  // namespace gshare::nvml
