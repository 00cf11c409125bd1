#include "intercept/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include "allocator/admission.h"
#include "allocator/devices.h"
#include "allocator/memory_export.h"
#include "allocator/movable_memory.h"
#include "allocator/pager.h"
#include "allocator/python_api.h"
#include "allocator/tracked_memory.h"
#include "base/driver_api.h"
#include "intercept/hook_ids.h"
#include "base/log.h"
#include "base/version.h"
#include "runtime/launch_gate.h"
#include "runtime/upkeep.h"
#include "scheduler/token.h"

extern char** environ;

namespace gshare::intercept {

namespace {
pthread_once_t g_start_once = PTHREAD_ONCE_INIT;
StartResult g_start_result = StartResult::kRefused;
Options g_options;

// A fork()ed child inherits the parent's tables but owns none of its GPU
// memory or slots (POSIX locks are not inherited). It starts afresh.
void after_fork_in_child() {
  allocator::ledger().clear_after_fork();
  allocator::forget_devices_after_fork();
  allocator::forget_classes_after_fork();
  runtime::forget_upkeep_after_fork();
  allocator::forget_pager_after_fork();
  allocator::forget_exports_after_fork();
  runtime::forget_launch_state_after_fork();
}

// Python's exit has begun: the program's own work is done. A framework's
// cache, often most of what a training job holds, would otherwise stay
// held through the interpreter's teardown and the driver's (about a second
// for PyTorch on an H200), with the next job of the lane waiting for it.
// Given back now, and the token passed on, that job starts at once. A
// program that still launches after this (an atexit handler of its own)
// waits for the token and its memory like any job.
void on_python_exit() {
  if (!hooks_active()) return;
  GSHARE_DEBUG("Python's exit began: giving the cache back and the token on");
  // The next job's switch is measured from here (scheduler/token.h).
  const uint64_t began = mono_now_ns();
  allocator::for_each_attached_device([&](allocator::Device& device) {
    if (device.account.slot()) scheduler::note_handover_began(device.account.arbiter(), began);
  });
  allocator::give_back_cache_before_switch();
  allocator::for_each_attached_device([](allocator::Device& device) {
    if (!device.account.slot()) return;
    // What the framework could not empty (a segment a live tensor keeps)
    // would hold the lane's space until the process ends.
    device.account.arbiter().leave_lane_space();
    scheduler::step_aside(device.account.arbiter());
    scheduler::note_handover_began(device.account.arbiter(), 0);
  });
  GSHARE_DEBUG("Python's exit: done");
}

void start_once() {
  char error[512];
  if (!parse_options(environ, &g_options, error, sizeof error)) {
    // Printed whatever GSHARE_LOG says: refusing to start must be visible.
    log_message(LogLevel::kError, "%s", error);
    g_start_result = StartResult::kRefused;
    g_state.store(int(RuntimeState::kRefused));
    return;
  }
  set_log_level(g_options.log_level);
  if (g_options.disable) {
    g_start_result = StartResult::kDisabled;
    g_state.store(int(RuntimeState::kDisabled));
    return;
  }
  allocator::configure_devices(g_options, runtime::start_upkeep);
  allocator::configure_admission(g_options);
  allocator::configure_movable_memory(g_options);
  allocator::configure_pager(g_options);
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  // Which library a process loaded, for reports from installed systems.
  GSHARE_INFO("libgshare.so %s started in pid %d", kVersion, int(getpid()));
  g_start_result = StartResult::kReady;
}
}  // namespace

StartResult start_runtime() {
  pthread_once(&g_start_once, start_once);
  return g_start_result;
}

void activate_runtime() {
  if (g_start_result != StartResult::kReady) return;
  g_state.store(int(RuntimeState::kActive));
  allocator::run_at_python_exit(on_python_exit);
}

const Options& options() { return g_options; }

}  // namespace gshare::intercept
