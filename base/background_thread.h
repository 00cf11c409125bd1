// gshare's own threads (the upkeep thread, the pager): detached, small
// stacks, named so that they show as such in top and gdb, and with every
// signal blocked, so that the program's signals go to its own threads.
#pragma once

namespace gshare {

// Starts `run` on such a thread. False if the thread could not be made.
bool start_background_thread(void* (*run)(void*), const char* name);

}  // namespace gshare
