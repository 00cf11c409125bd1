#include "allocator/framework_caches.h"

#include "allocator/python_api.h"
#include "base/hook_depth.h"

namespace gshare::allocator {

namespace {

// The module `_gshare_caches`, with empty(): only frameworks already
// imported, each call guarded, so nothing is imported and no exception
// escapes to the program.
constexpr const char* kCachesModule =
    "import sys\n"
    "def empty():\n"
    "    t = sys.modules.get('torch')\n"
    "    try:\n"
    "        if t is not None and t.cuda.is_initialized(): t.cuda.empty_cache()\n"
    "    except Exception: pass\n"
    "    c = sys.modules.get('cupy')\n"
    "    try:\n"
    "        if c is not None: c.get_default_memory_pool().free_all_blocks()\n"
    "    except Exception: pass\n";

void* g_empty_function = nullptr;  // a new reference, kept; under the GIL

// The frameworks' frees must be counted: they run with this thread marked
// outside gshare, then the mark is restored.
struct OutsideGshare {
  int saved = t_hook_depth;
  OutsideGshare() { t_hook_depth = 0; }
  ~OutsideGshare() { t_hook_depth = saved; }
};

}  // namespace

bool can_empty_framework_caches() { return python_running(); }

bool empty_framework_caches() {
  PythonCall call;
  if (!call.allowed() || !can_empty_framework_caches()) return false;
  const PythonApi& py = *python_api();
  int gil = py.gil_ensure();
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  py.err_fetch(&type, &value, &traceback);  // keep whatever error is pending
  if (!g_empty_function) g_empty_function = python_function(py, kCachesModule, "_gshare_caches", "empty");
  void* result = nullptr;
  if (g_empty_function) {
    OutsideGshare outside;
    result = py.call_function(g_empty_function, nullptr);
  }
  if (result) py.dec_ref(result);
  py.err_clear();  // an error of ours stays ours
  py.err_restore(type, value, traceback);
  py.gil_release(gil);
  return result != nullptr;
}

}  // namespace gshare::allocator
