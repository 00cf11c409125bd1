// glibc's own dlsym. gshare exports `dlsym`, so a plain call of dlsym from
// inside gshare would reach gshare again; everything here uses this instead.
#pragma once

namespace gshare {

using DlsymFunction = void* (*)(void*, const char*);

// Found with dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), falling back to the
// pre-2.34 version "GLIBC_2.2.5". Never null once the library is loaded.
DlsymFunction real_dlsym();

}  // namespace gshare

extern "C" {
// The same, resolved at load: the dlsym hook's assembly entry jumps to it
// for RTLD_NEXT lookups (intercept/dlsym_hook.cpp), so a C name, hidden.
__attribute__((visibility("hidden"))) extern void* (*gshare_real_dlsym)(void*, const char*);
}
