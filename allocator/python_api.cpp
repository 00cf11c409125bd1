#include "allocator/python_api.h"

#include <dlfcn.h>
#include <pthread.h>

#include "intercept/real_dlsym.h"

namespace gshare::allocator {

namespace {

PythonApi g_python;
bool g_complete = false;
__thread bool t_in_python_call = false;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

template <class T>
void find(T* out, const char* name) {
  *out = reinterpret_cast<T>(intercept::real_dlsym()(RTLD_DEFAULT, name));
}

void look_up() {
  PythonApi& p = g_python;
  find(&p.is_initialized, "Py_IsInitialized");
  find(&p.is_finalizing, "Py_IsFinalizing");  // 3.13+
  if (!p.is_finalizing) find(&p.is_finalizing, "_Py_IsFinalizing");
  find(&p.gil_ensure, "PyGILState_Ensure");
  find(&p.gil_release, "PyGILState_Release");
  find(&p.run_simple_string, "PyRun_SimpleString");
  find(&p.err_fetch, "PyErr_Fetch");
  find(&p.err_restore, "PyErr_Restore");
  find(&p.err_clear, "PyErr_Clear");
  find(&p.add_pending_call, "Py_AddPendingCall");
  find(&p.import_module, "PyImport_ImportModule");
  find(&p.get_attr_string, "PyObject_GetAttrString");
  find(&p.call_function, "PyObject_CallFunction");
  find(&p.bytes_as_string_and_size, "PyBytes_AsStringAndSize");
  find(&p.dec_ref, "Py_DecRef");
  g_complete = p.is_initialized && p.is_finalizing && p.gil_ensure && p.gil_release &&
               p.run_simple_string && p.err_fetch && p.err_restore && p.err_clear &&
               p.add_pending_call && p.import_module && p.get_attr_string && p.call_function &&
               p.bytes_as_string_and_size && p.dec_ref;
}

}  // namespace

const PythonApi* python_api() {
  pthread_once(&g_once, look_up);
  return g_complete ? &g_python : nullptr;
}

bool python_running() {
  const PythonApi* py = python_api();
  return py && py->is_initialized() && !py->is_finalizing();
}

bool run_on_python_main_thread(int (*work)(void*)) {
  return python_running() && python_api()->add_pending_call(work, nullptr) == 0;
}

void* python_function(const PythonApi& py, const char* source, const char* module, const char* name) {
  if (py.run_simple_string(source) != 0) return nullptr;
  void* m = py.import_module(module);
  if (!m) return nullptr;
  void* function = py.get_attr_string(m, name);
  py.dec_ref(m);
  return function;
}

PythonCall::PythonCall() : allowed_(!t_in_python_call) { t_in_python_call = true; }

PythonCall::~PythonCall() {
  if (allowed_) t_in_python_call = false;
}

}  // namespace gshare::allocator
