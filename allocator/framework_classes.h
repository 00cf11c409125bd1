// P and E of a process whose framework caches its memory (PyTorch's
// allocator, CuPy's pool, XLA's BFC): seen from the driver a cached
// activation and a weight look alike, so lifetimes (allocator/classifier.h)
// cannot tell them apart.
//
//   answers   a framework that answers with its allocator's figures
//             (allocator/framework_counts.h) gives P directly: the least
//             in use over its recent answers (allocator/in_use_window.h),
//             which rises only once the answers have shown an iteration's
//             end, and what the process holds at a boundary with its cache
//             just emptied.
//   emptying  one that caches but does not answer is measured: its cache
//             is emptied once at a boundary, when an iteration's memory is
//             free, and what survives is persistent; what is born after it
//             is never promoted by age (it may be cache).
//
// The caches also go back to other jobs (allocator/admission.h); each
// emptying is counted here.
#pragma once

#include <cstdint>

namespace gshare::allocator {

// From the second classified boundary on, a process with a framework cache
// that has not answered has it emptied once to measure P and E. Runs it if
// due and possible here: call right after a host sync that ended an
// iteration, when the iteration's ephemeral memory is free.
void measure_framework_cache_if_due();

// Has the frameworks empty their caches (if this thread can), to give the
// memory back to other jobs. Once the cache was measured, what survives
// and has lived two release points becomes persistent. Returns the bytes
// freed.
uint64_t give_back_framework_caches();

// Whether this process has a framework cache (one was emptied, or a
// framework answered with its figures).
bool has_framework_cache();

// A framework's answer (allocator/framework_counts.h), on Python's main
// thread: the figures of each framework for each device. From the first
// answer that shows a cache on, P comes from these.
struct FrameworkCount;
void note_framework_counts(const FrameworkCount* counts, int n);

// At an iteration boundary, the framework's cache just emptied (before a
// switch, or switched out): what the process still holds is P
// (InUseWindow::record_rest). Only where P comes from a framework's
// figures.
void note_cache_emptied_at_boundary();

// In a fork()ed child (from forget_classes_after_fork).
void forget_framework_classes_after_fork();

}  // namespace gshare::allocator
