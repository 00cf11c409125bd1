// Path 1 of 3 into the driver: dlsym. cudart copies, Triton's launcher and
// ctypes users look up cu* functions with dlsym on libcuda's handle; this
// hands them gshare's wrapper when the real result is the hooked function.
#include <dlfcn.h>

#include "intercept/interception.h"
#include "intercept/real_dlsym.h"

extern "C" {
// Read by the assembly entry below, so C names and hidden.
__attribute__((visibility("hidden"))) void* (*gshare_real_dlsym)(void*, const char*) = nullptr;
__attribute__((visibility("hidden"))) void* gshare_dlsym_impl(void* handle, const char* name);
}

namespace gshare::intercept {

namespace {
DlsymFunction resolve_real_dlsym() {
  auto f = reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!f) f = reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  return f;
}

// Resolved at load: the RTLD_NEXT entry below must be able to jump to it
// without a call frame of ours in between. One dlvsym, nothing printed.
__attribute__((constructor)) void resolve_at_load() {
  if (!gshare_real_dlsym) gshare_real_dlsym = resolve_real_dlsym();
}
}  // namespace

DlsymFunction real_dlsym() {
  DlsymFunction f = __atomic_load_n(&gshare_real_dlsym, __ATOMIC_ACQUIRE);
  if (__builtin_expect(f == nullptr, 0)) {
    f = resolve_real_dlsym();
    __atomic_store_n(&gshare_real_dlsym, f, __ATOMIC_RELEASE);
  }
  return f;
}

}  // namespace gshare::intercept

void* gshare_dlsym_impl(void* handle, const char* name) {
  void* result = gshare::intercept::real_dlsym()(handle, name);
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
