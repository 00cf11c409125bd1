// How many CPUs this process may run on: its affinity mask, which a
// cgroup's cpuset, taskset or Slurm narrows, not the machine's count.
#pragma once

namespace gshare {

// At least 1. Read once; a process that changes its affinity later keeps
// the first answer.
unsigned usable_cpus();

}  // namespace gshare
