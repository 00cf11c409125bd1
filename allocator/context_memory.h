// The driver's own device memory for this process's contexts: code of
// loaded modules, local memory, printf buffers, cuBLAS/cuDNN handles. It
// is real memory on the GPU that no allocation call shows: on an H200 a
// PyTorch process holds ~640 MB before its first tensor and ~140 MB more
// once cuBLAS kernels load lazily.
//
// How it is estimated: NVML reports what each process holds on a GPU. The
// context memory is that figure minus what gshare counted as allocations,
// charged to the process's slot, and refreshed by the upkeep thread because
// lazy module loading keeps growing it: every second while it changes, less
// often (up to every 8 s) once it is stable (runtime/upkeep.cpp).
// Where NVML is missing, or does not list this process (its PID namespace
// differs from NVML's), the estimate stays 0 and a message says so once.
#pragma once

namespace gshare::allocator {

struct Device;

// Returns whether the figure changed, or could not be measured now because
// this process allocated or freed meanwhile (either way: look again soon).
bool refresh_context_bytes(Device& device);

}  // namespace gshare::allocator
