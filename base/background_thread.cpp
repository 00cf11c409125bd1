#include "base/background_thread.h"

#include <pthread.h>
#include <signal.h>

namespace gshare {

namespace {
// The signal mask is set in the thread, before `run`: a mask set by the
// caller around pthread_create would also hold the caller's own signals.
void* blocking_signals(void* run) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  return reinterpret_cast<void* (*)(void*)>(run)(nullptr);
}
}  // namespace

bool start_background_thread(void* (*run)(void*), const char* name) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  bool started = pthread_create(&thread, &attr, blocking_signals, reinterpret_cast<void*>(run)) == 0;
  if (started) pthread_setname_np(thread, name);
  pthread_attr_destroy(&attr);
  return started;
}

}  // namespace gshare
