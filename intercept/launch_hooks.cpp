// Kernel and graph launches. Each passes the launch gate (scheduler/), then
// the driver. This is the hot path: no lock, no syscall, no allocation.
// A graph launch is one unit.
#include "intercept/interception.h"
#include "scheduler/launch_gate.h"

using namespace gshare;
using namespace gshare::intercept;

#define GSHARE_GATE(stream) \
  if (GSHARE_LIKELY(hooks_active())) scheduler::before_launch(stream)

GSHARE_HOOK(CUresult, cuLaunchKernel,
            (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
             unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params,
             void** extra)) {
  GSHARE_GATE(stream);
  return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

GSHARE_HOOK(CUresult, cuLaunchKernel_ptsz,
            (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
             unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params,
             void** extra)) {
  GSHARE_GATE(stream);
  return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

GSHARE_HOOK(CUresult, cuLaunchKernelEx,
            (const CUlaunchConfig* config, CUfunction f, void** params, void** extra)) {
  GSHARE_GATE(config ? config->hStream : nullptr);
  return REAL(cuLaunchKernelEx)(config, f, params, extra);
}

GSHARE_HOOK(CUresult, cuLaunchKernelEx_ptsz,
            (const CUlaunchConfig* config, CUfunction f, void** params, void** extra)) {
  GSHARE_GATE(config ? config->hStream : nullptr);
  return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra);
}

GSHARE_HOOK(CUresult, cuLaunchCooperativeKernel,
            (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
             unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params)) {
  GSHARE_GATE(stream);
  return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}

GSHARE_HOOK(CUresult, cuLaunchCooperativeKernel_ptsz,
            (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
             unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params)) {
  GSHARE_GATE(stream);
  return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}

GSHARE_HOOK(CUresult, cuGraphLaunch, (CUgraphExec graph, CUstream stream)) {
  GSHARE_GATE(stream);
  return REAL(cuGraphLaunch)(graph, stream);
}

GSHARE_HOOK(CUresult, cuGraphLaunch_ptsz, (CUgraphExec graph, CUstream stream)) {
  GSHARE_GATE(stream);
  return REAL(cuGraphLaunch_ptsz)(graph, stream);
}
