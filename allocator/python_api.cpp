#include "allocator/python_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include "base/real_dlsym.h"

namespace gshare::allocator {

namespace {

PythonApi g_python;
bool g_complete = false;
__thread bool t_in_python_call = false;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

template <class T>
void find(T* out, const char* name) {
  *out = reinterpret_cast<T>(real_dlsym()(RTLD_DEFAULT, name));
}

void look_up() {
  PythonApi& p = g_python;
  find(&p.is_initialized, "Py_IsInitialized");
  find(&p.is_finalizing, "Py_IsFinalizing");  // 3.13+
  if (!p.is_finalizing) find(&p.is_finalizing, "_Py_IsFinalizing");
  find(&p.gil_ensure, "PyGILState_Ensure");
  find(&p.gil_release, "PyGILState_Release");
  find(&p.err_fetch, "PyErr_Fetch");
  find(&p.err_restore, "PyErr_Restore");
  find(&p.err_clear, "PyErr_Clear");
  find(&p.add_pending_call, "Py_AddPendingCall");
  find(&p.import_module, "PyImport_ImportModule");
  find(&p.get_attr_string, "PyObject_GetAttrString");
  find(&p.call_function, "PyObject_CallFunction");
  find(&p.bytes_as_string_and_size, "PyBytes_AsStringAndSize");
  find(&p.dec_ref, "Py_DecRef");
  find(&p.c_function_new, "PyCFunction_NewEx");
  find(&p.build_value, "Py_BuildValue");
  g_complete = p.is_initialized && p.is_finalizing && p.gil_ensure && p.gil_release &&
               p.err_fetch && p.err_restore && p.err_clear &&
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
  void* function = nullptr;
  void* types = py.import_module("types");
  void* module_type = types ? py.get_attr_string(types, "ModuleType") : nullptr;
  void* made = module_type ? py.call_function(module_type, "(s)", module) : nullptr;
  void* names = made ? py.get_attr_string(made, "__dict__") : nullptr;
  void* builtins = names ? py.import_module("builtins") : nullptr;
  void* exec = builtins ? py.get_attr_string(builtins, "exec") : nullptr;
  void* ran = exec ? py.call_function(exec, "(sO)", source, names) : nullptr;
  void* sys = ran ? py.import_module("sys") : nullptr;
  void* modules = sys ? py.get_attr_string(sys, "modules") : nullptr;
  void* set_item = modules ? py.get_attr_string(modules, "__setitem__") : nullptr;
  void* set = set_item ? py.call_function(set_item, "(sO)", module, made) : nullptr;
  if (set) function = py.get_attr_string(made, name);
  for (void* object : {set, set_item, modules, sys, ran, exec, builtins, names, made, module_type, types})
    if (object) py.dec_ref(object);
  return function;
}

namespace {
void (*g_exit_callback)() = nullptr;

// A C function as Python sees one (PyMethodDef's layout, stable since 3.0).
struct MethodDef {
  const char* name;
  void* (*function)(void* self, void* unused);
  int flags;
  const char* doc;
};
constexpr int kMethodNoArgs = 0x0004;  // METH_NOARGS

pid_t g_exit_pid = 0;  // the process that registered: a fork()ed child inherits Python's handlers

void* at_exit(void*, void*) {
  if (g_exit_callback && getpid() == g_exit_pid) g_exit_callback();
  return g_python.build_value("");  // None, a new reference
}

MethodDef g_at_exit_method{"_gshare_at_exit", at_exit, kMethodNoArgs, nullptr};

// On Python's main thread, the GIL held (a pending call): atexit.register.
int register_at_exit(void*) {
  const PythonApi& py = g_python;
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  py.err_fetch(&type, &value, &traceback);
  void* function = py.c_function_new(&g_at_exit_method, nullptr, nullptr);
  void* module = function ? py.import_module("atexit") : nullptr;
  void* reg = module ? py.get_attr_string(module, "register") : nullptr;
  void* result = reg ? py.call_function(reg, "(O)", function) : nullptr;
  for (void* object : {result, reg, module, function})
    if (object) py.dec_ref(object);
  py.err_clear();  // an error of ours stays ours
  py.err_restore(type, value, traceback);
  return 0;
}
}  // namespace

bool run_at_python_exit(void (*callback)()) {
  static std::atomic<bool> registered{false};
  const PythonApi* py = python_api();
  if (!py || !py->c_function_new || !py->build_value || !python_running()) return false;
  if (registered.exchange(true)) return true;
  g_exit_callback = callback;
  g_exit_pid = getpid();
  if (py->add_pending_call(register_at_exit, nullptr) == 0) return true;
  registered.store(false);
  return false;
}

PythonCall::PythonCall() : allowed_(!t_in_python_call) { t_in_python_call = true; }

PythonCall::~PythonCall() {
  if (allowed_) t_in_python_call = false;
}

}  // namespace gshare::allocator
