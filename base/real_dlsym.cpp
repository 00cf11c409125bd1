#include "base/real_dlsym.h"

#include <dlfcn.h>

extern "C" {
__attribute__((visibility("hidden"))) void* (*gshare_real_dlsym)(void*, const char*) = nullptr;
}

namespace gshare {

namespace {
DlsymFunction resolve_real_dlsym() {
  auto f = reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!f) f = reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  return f;
}

// Resolved at load: the dlsym hook's RTLD_NEXT entry must be able to jump
// to it without a call frame of ours in between. One dlvsym, nothing printed.
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

}  // namespace gshare
