// Kernel and graph launches. Each passes the launch gate (scheduler/), then
// the driver. This is the hot path: no lock, no syscall, no allocation.
// A graph launch is one unit: one token check, one count, however many
// kernels the graph holds.
//
// Each hook has two bodies. The exported one does the common case inline
// and ends in a jump to the driver: a few loads, one relaxed atomic add,
// nothing to save or restore. Anything else (gshare not active, the gate not
// plainly open, a capture in progress, several GPUs, an unbound driver)
// goes to the cold `_slow` twin, which may wait for the launch token.
#include "intercept/interception.h"
#include "runtime/launch_gate.h"

using namespace gshare;
using namespace gshare::intercept;

#define GSHARE_LAUNCH_HOOK(name, stream, what, params, args)                              \
  namespace {                                                                             \
  [[gnu::noinline, gnu::cold]] CUresult name##_slow params {                             \
    if (!hooks_active()) return REAL(name) args;                                          \
    runtime::LaunchTicket ticket = runtime::before_launch_slow(stream, what);         \
    if (ticket.refused != CUDA_SUCCESS) return ticket.refused;                            \
    CUresult result = REAL(name) args;                                                    \
    runtime::after_launch_slow(ticket, stream, result);                                 \
    return result;                                                                        \
  }                                                                                       \
  }                                                                                       \
  GSHARE_HOOK(CUresult, name, params) {                                                   \
    void* real = __atomic_load_n(&g_real[int(HookId::id_##name)], __ATOMIC_RELAXED);      \
    if (GSHARE_LIKELY(real != nullptr && hooks_active() && runtime::launch_fast_path())) \
      return reinterpret_cast<decltype(&name)>(real) args;                                \
    return name##_slow args;                                                              \
  }

#define GSHARE_KERNEL_PARAMS                                                             \
  (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,     \
   unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params, \
   void** extra)
#define GSHARE_KERNEL_ARGS (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)

GSHARE_LAUNCH_HOOK(cuLaunchKernel, stream, f, GSHARE_KERNEL_PARAMS, GSHARE_KERNEL_ARGS)
GSHARE_LAUNCH_HOOK(cuLaunchKernel_ptsz, stream, f, GSHARE_KERNEL_PARAMS, GSHARE_KERNEL_ARGS)

#define GSHARE_EX_PARAMS (const CUlaunchConfig* config, CUfunction f, void** params, void** extra)
#define GSHARE_EX_ARGS (config, f, params, extra)

GSHARE_LAUNCH_HOOK(cuLaunchKernelEx, config ? config->hStream : nullptr, f, GSHARE_EX_PARAMS,
                   GSHARE_EX_ARGS)
GSHARE_LAUNCH_HOOK(cuLaunchKernelEx_ptsz, config ? config->hStream : nullptr, f, GSHARE_EX_PARAMS,
                   GSHARE_EX_ARGS)

#define GSHARE_COOPERATIVE_PARAMS                                                         \
  (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,      \
   unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params)
#define GSHARE_COOPERATIVE_ARGS (f, gx, gy, gz, bx, by, bz, shared, stream, params)

GSHARE_LAUNCH_HOOK(cuLaunchCooperativeKernel, stream, f, GSHARE_COOPERATIVE_PARAMS,
                   GSHARE_COOPERATIVE_ARGS)
GSHARE_LAUNCH_HOOK(cuLaunchCooperativeKernel_ptsz, stream, f, GSHARE_COOPERATIVE_PARAMS,
                   GSHARE_COOPERATIVE_ARGS)

GSHARE_LAUNCH_HOOK(cuGraphLaunch, stream, graph, (CUgraphExec graph, CUstream stream), (graph, stream))
GSHARE_LAUNCH_HOOK(cuGraphLaunch_ptsz, stream, graph, (CUgraphExec graph, CUstream stream),
                   (graph, stream))
