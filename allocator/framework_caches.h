// Caches that only the framework can empty.
//
// PyTorch's default caching allocator and CuPy's memory pool keep freed
// device memory in segments they never give back on their own; seen from
// the driver, that memory is held for good. Both free their cache when an
// allocation fails (so a quota trims them, docs/DESIGN.md §5.1), but a job
// that is switched out allocates nothing. gshare then asks the framework
// itself, with its own public call, through the Python C API of the process:
//
//   torch.cuda.empty_cache()                      if torch's CUDA is initialised
//   cupy.get_default_memory_pool().free_all_blocks()   if cupy is imported
//
// Never from inside an allocation (the framework's allocator may be
// mid-call): only from a wait for the launch token and from host syncs. A
// training loop's main thread reaches those from inside a PyTorch op, which
// has released the GIL; gshare takes it (PyGILState_Ensure) for the call
// and gives it back. Not while the interpreter is finalising. A process
// without Python, torch or cupy: nothing happens.
#pragma once

namespace gshare::allocator {

// Whether the frameworks' calls can be made (Python loaded, and not
// finalising). The caller makes sure it is not inside an allocation.
bool can_empty_framework_caches();

// Runs the calls above. Returns false if nothing could be run. The bytes
// they free are seen by the free hooks as usual.
bool empty_framework_caches();

}  // namespace gshare::allocator
