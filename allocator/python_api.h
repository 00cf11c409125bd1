// The few functions of the Python C API that gshare calls, found in the
// process at run time (python's executable exports them; a program without
// Python has none, and gshare never loads Python). Used to ask a
// framework's own allocator for what only it knows
// (allocator/framework_caches.h, allocator/framework_counts.h).
#pragma once

#include <sys/types.h>

namespace gshare::allocator {

struct PythonApi {
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  int (*gil_ensure)() = nullptr;  // PyGILState_STATE, an enum
  void (*gil_release)(int) = nullptr;
  void (*err_fetch)(void**, void**, void**) = nullptr;
  void (*err_restore)(void*, void*, void*) = nullptr;
  void (*err_clear)() = nullptr;
  int (*add_pending_call)(int (*)(void*), void*) = nullptr;
  void* (*import_module)(const char*) = nullptr;
  void* (*get_attr_string)(void*, const char*) = nullptr;
  void* (*call_function)(void*, const char*, ...) = nullptr;  // PyObject_CallFunction
  int (*bytes_as_string_and_size)(void*, char**, ssize_t*) = nullptr;
  void (*dec_ref)(void*) = nullptr;
  // For run_at_python_exit only; a Python without them has no exit call.
  void* (*c_function_new)(void*, void*, void*) = nullptr;  // PyCFunction_NewEx
  void* (*build_value)(const char*, ...) = nullptr;        // Py_BuildValue
};

// The process's Python, or null if it has none (or lacks one of the
// functions above). Looked up once.
const PythonApi* python_api();

// Whether Python calls can be made now: initialised and not finalising.
bool python_running();

// Has `work` run on Python's main thread, holding the GIL, at its next
// bytecode (Py_AddPendingCall): from any thread, never waiting. False if
// Python is not running or the call could not be queued.
bool run_on_python_main_thread(int (*work)(void*));

// Has `callback` run when Python's exit begins (as a handler of Python's
// atexit module, on the main thread, the GIL held, the interpreter still
// whole): after the program's last line, before the interpreter's and the
// driver's teardown, which keep a framework's cache held for about a
// second more. Handlers the program registers later run before it. The
// registration is queued for Python's main thread; false if Python is not
// running or lacks a function it needs. Once per process; a fork()ed child,
// which inherits Python's handlers, does not run it.
bool run_at_python_exit(void (*callback)());

// Holding the GIL: the function `name` of gshare's private module
// `module`, made the first time from `source` (the module's code) and put
// in sys.modules. The code runs in the module's own namespace: it binds no
// name of the program's, and what it defines refers to nothing of the
// program's (a function defined in __main__ would keep the program's
// objects alive through its exit, their __del__ never run). Null if that
// failed. Keep it: the reference is the caller's.
void* python_function(const PythonApi& py, const char* source, const char* module, const char* name);

// Marks this thread as inside a call gshare makes into Python, for its
// scope. A framework's call may come back through gshare's hooks (an
// emptied cache syncs); nothing then calls into Python again.
class PythonCall {
 public:
  PythonCall();
  ~PythonCall();
  PythonCall(const PythonCall&) = delete;
  PythonCall& operator=(const PythonCall&) = delete;
  // False inside another PythonCall of this thread: make no call.
  bool allowed() const { return allowed_; }

 private:
  bool allowed_;
};

}  // namespace gshare::allocator
