// glibc's own dlsym. gshare exports `dlsym`, so a plain call of dlsym from
// inside gshare would reach gshare again; everything here uses this instead.
#pragma once

namespace gshare::intercept {

using DlsymFunction = void* (*)(void*, const char*);

// Found with dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), falling back to the
// pre-2.34 version "GLIBC_2.2.5". Never null once the library is loaded.
DlsymFunction real_dlsym();

}  // namespace gshare::intercept
