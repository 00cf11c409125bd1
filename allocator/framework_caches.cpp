#include "allocator/framework_caches.h"

#include <dlfcn.h>
#include <pthread.h>

#include "intercept/hook_ids.h"
#include "intercept/real_dlsym.h"

namespace gshare::allocator {

namespace {

// The few Python C API functions used, looked up in the process (python's
// executable exports them; a program without Python has none).
struct PythonApi {
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  int (*gil_ensure)() = nullptr;  // PyGILState_STATE, an enum
  void (*gil_release)(int) = nullptr;
  int (*run_simple_string)(const char*) = nullptr;
  void (*err_fetch)(void**, void**, void**) = nullptr;
  void (*err_restore)(void*, void*, void*) = nullptr;
  bool complete() const {
    return is_initialized && is_finalizing && gil_ensure && gil_release && run_simple_string &&
           err_fetch && err_restore;
  }
};
PythonApi g_python;
pthread_once_t g_python_once = PTHREAD_ONCE_INIT;

template <class T>
void find(T* out, const char* name) {
  *out = reinterpret_cast<T>(intercept::real_dlsym()(RTLD_DEFAULT, name));
}

void look_up_python() {
  find(&g_python.is_initialized, "Py_IsInitialized");
  find(&g_python.is_finalizing, "Py_IsFinalizing");  // 3.13+
  if (!g_python.is_finalizing) find(&g_python.is_finalizing, "_Py_IsFinalizing");
  find(&g_python.gil_ensure, "PyGILState_Ensure");
  find(&g_python.gil_release, "PyGILState_Release");
  find(&g_python.run_simple_string, "PyRun_SimpleString");
  find(&g_python.err_fetch, "PyErr_Fetch");
  find(&g_python.err_restore, "PyErr_Restore");
}

// Only frameworks already imported, each call guarded: nothing is imported
// and no exception escapes to the program.
constexpr const char* kEmptyCaches =
    "def _gshare_empty_caches():\n"
    "    import sys\n"
    "    t = sys.modules.get('torch')\n"
    "    try:\n"
    "        if t is not None and t.cuda.is_initialized(): t.cuda.empty_cache()\n"
    "    except Exception: pass\n"
    "    c = sys.modules.get('cupy')\n"
    "    try:\n"
    "        if c is not None: c.get_default_memory_pool().free_all_blocks()\n"
    "    except Exception: pass\n"
    "_gshare_empty_caches()\n"
    "del _gshare_empty_caches\n";

// The frameworks' frees must be counted: they run with this thread marked
// outside gshare, then the mark is restored.
struct OutsideGshare {
  int saved = intercept::t_hook_depth;
  OutsideGshare() { intercept::t_hook_depth = 0; }
  ~OutsideGshare() { intercept::t_hook_depth = saved; }
};

}  // namespace

bool can_empty_framework_caches() {
  pthread_once(&g_python_once, look_up_python);
  return g_python.complete() && g_python.is_initialized() && !g_python.is_finalizing();
}

bool empty_framework_caches() {
  if (!can_empty_framework_caches()) return false;
  int gil = g_python.gil_ensure();
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  g_python.err_fetch(&type, &value, &traceback);  // keep whatever error is pending
  int failed;
  {
    OutsideGshare outside;
    failed = g_python.run_simple_string(kEmptyCaches);
  }
  g_python.err_restore(type, value, traceback);
  g_python.gil_release(gil);
  return failed == 0;
}

}  // namespace gshare::allocator
