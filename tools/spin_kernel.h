// The spin kernel of gshare's demo and test programs, as PTX text: waits
// `ns` nanoseconds on the GPU's global timer. PTX is JIT-compiled by the
// driver for whatever GPU is present, so no nvcc is needed; the fake driver
// (tests/fake_driver) runs a function named *spin* for the same `ns`.
#pragma once

namespace gshare {

inline constexpr const char* kSpinKernelName = "gshare_spin";

inline constexpr const char* kSpinKernelPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry gshare_spin(.param .u64 ns)
{
  .reg .u64 %start, %now, %limit, %elapsed;
  .reg .pred %p;
  ld.param.u64 %limit, [ns];
  mov.u64 %start, %globaltimer;
WAIT:
  mov.u64 %now, %globaltimer;
  sub.u64 %elapsed, %now, %start;
  setp.lt.u64 %p, %elapsed, %limit;
  @%p bra WAIT;
  ret;
}
)";

}  // namespace gshare
