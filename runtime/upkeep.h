// A background thread per process, started when the first device attaches
// (never for a program that does not use CUDA). Every 250 ms it reclaims
// the slots of dead processes on each attached GPU, so their bytes return to
// the others within a second even when no one allocates; every second it
// refreshes this process's context memory and its pools' charges.
#pragma once

namespace gshare::runtime {

void start_upkeep();
// In a fork()ed child: threads do not survive fork; start again on attach.
void forget_upkeep_after_fork();

}  // namespace gshare::runtime
