// Path 1 of 3 into the driver: dlsym. cudart copies, Triton's launcher and
// ctypes users look up cu* functions with dlsym on libcuda's handle; this
// hands them gshare's wrapper when the real result is the hooked function.
#include <dlfcn.h>

#include "base/real_dlsym.h"
#include "intercept/interception.h"

extern "C" {
// Read by the assembly entry below, so a C name and hidden.
__attribute__((visibility("hidden"))) void* gshare_dlsym_impl(void* handle, const char* name);
}

void* gshare_dlsym_impl(void* handle, const char* name) {
  void* result = gshare::real_dlsym()(handle, name);
  return gshare::intercept::substitute_for_dlsym(name, result);
}

// dlsym(RTLD_NEXT, ...) is relative to its caller's object. To keep that
// meaning for the program's own RTLD_NEXT lookups (other interposers rely on
// it), the entry *jumps* to glibc's dlsym, leaving the caller's return address
// in place. Every other handle goes through gshare_dlsym_impl.
#if defined(__x86_64__)
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
dlsym:
  .cfi_startproc
  cmpq $-1, %rdi
  jne gshare_dlsym_impl
  movq gshare_real_dlsym(%rip), %rax
  testq %rax, %rax
  jz gshare_dlsym_impl
  jmp *%rax
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#else
GSHARE_EXPORT void* dlsym(void* handle, const char* name) { return gshare_dlsym_impl(handle, name); }
#endif
