// The table of hooks: each row's exact ABI name, its wrapper, and the real
// function it is bound to. No cuda.h here: the wrappers are only addresses.
#include <dlfcn.h>
#include <pthread.h>

#include <cstring>

#include "intercept/hook_ids.h"
#include "base/log.h"
#include "base/real_dlsym.h"

#define GSHARE_DECLARE_WRAPPER(name) extern "C" void name();
GSHARE_CUDA_HOOKS(GSHARE_DECLARE_WRAPPER)
GSHARE_NVML_HOOKS(GSHARE_DECLARE_WRAPPER)
#undef GSHARE_DECLARE_WRAPPER

namespace gshare::intercept {

void* g_real[int(HookId::kCount)];
std::atomic<int> g_state{int(RuntimeState::kWaiting)};

namespace {

enum class Library { kCuda, kNvml };

struct HookRow {
  const char* name;
  void* wrapper;
  Library library;
};

const HookRow kRows[] = {
#define GSHARE_CUDA_ROW(name) {#name, reinterpret_cast<void*>(&::name), Library::kCuda},
#define GSHARE_NVML_ROW(name) {#name, reinterpret_cast<void*>(&::name), Library::kNvml},
    GSHARE_CUDA_HOOKS(GSHARE_CUDA_ROW) GSHARE_NVML_HOOKS(GSHARE_NVML_ROW)
#undef GSHARE_CUDA_ROW
#undef GSHARE_NVML_ROW
};
static_assert(sizeof kRows / sizeof kRows[0] == size_t(HookId::kCount));

pthread_mutex_t g_bind_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_cuda_bound{false};
std::atomic<bool> g_nvml_bound{false};

const char* library_soname(Library library) {
  return library == Library::kCuda ? "libcuda.so.1" : "libnvidia-ml.so.1";
}

// Binds every row of `library` from `handle`. Rejects a "real" function that
// is our own wrapper: calling it would recurse forever (it happens when the
// handle resolves through the preload, e.g. RTLD_DEFAULT).
void bind_rows(Library library, void* handle) {
  for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; ++i) {
    const HookRow& row = kRows[i];
    if (row.library != library || g_real[i]) continue;
    void* real = real_dlsym()(handle, row.name);
    if (real == row.wrapper) {
      GSHARE_ERROR("%s resolves to gshare itself, not to %s; leaving it unbound", row.name,
                   library_soname(library));
      real = nullptr;
    }
    if (!real) GSHARE_DEBUG("%s has no %s", library_soname(library), row.name);
    __atomic_store_n(&g_real[i], real, __ATOMIC_RELEASE);
  }
}

bool bind_library(Library library, bool load, std::atomic<bool>* bound) {
  if (bound->load(std::memory_order_acquire)) return true;
  pthread_mutex_lock(&g_bind_mutex);
  if (!bound->load(std::memory_order_relaxed)) {
    const char* soname = library_soname(library);
    void* handle = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (!handle && load) handle = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    if (handle) {
      bind_rows(library, handle);
      bound->store(true, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_bind_mutex);
  return bound->load(std::memory_order_relaxed);
}

const HookRow* row_named(const char* name) {
  for (const HookRow& row : kRows)
    if (strcmp(row.name, name) == 0) return &row;
  return nullptr;
}

}  // namespace

bool bind_driver() { return bind_library(Library::kCuda, true, &g_cuda_bound); }
bool bind_nvml(bool load) { return bind_library(Library::kNvml, load, &g_nvml_bound); }

void* wrapper_for_real(void* real) {
  if (!real) return nullptr;
  for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; ++i)
    if (__atomic_load_n(&g_real[i], __ATOMIC_ACQUIRE) == real) return kRows[i].wrapper;
  return nullptr;
}

void* substitute_for_dlsym(const char* name, void* result) {
  if (!result || !name) return result;
  if (strncmp(name, "cu", 2) != 0 && strncmp(name, "nvml", 4) != 0) return result;
  const HookRow* row = row_named(name);
  if (!row || result == row->wrapper) return result;
  if (row->library == Library::kCuda) bind_driver(); else bind_nvml(false);
  // Only the real function of that very name is swapped: another library's
  // symbol that happens to share the name is left alone.
  void* real = __atomic_load_n(&g_real[row - kRows], __ATOMIC_ACQUIRE);
  return real == result ? row->wrapper : result;
}

namespace {
extern "C" int gshare_unbound_cuda() { return 500; /* CUDA_ERROR_NOT_FOUND */ }
extern "C" int gshare_unbound_nvml() { return 13; /* NVML_ERROR_FUNCTION_NOT_FOUND */ }
}  // namespace

void* bind_real_slow(HookId id) {
  const HookRow& row = kRows[int(id)];
  if (row.library == Library::kCuda) bind_driver(); else bind_nvml(true);
  void* real = __atomic_load_n(&g_real[int(id)], __ATOMIC_ACQUIRE);
  if (real) return real;
  GSHARE_ERROR("%s is not available in %s", row.name, library_soname(row.library));
  return row.library == Library::kCuda ? reinterpret_cast<void*>(&gshare_unbound_cuda)
                                       : reinterpret_cast<void*>(&gshare_unbound_nvml);
}

}  // namespace gshare::intercept
