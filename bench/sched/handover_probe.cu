// handover_probe: the GPU side of bench/sched/handover.py. Launches short
// spin kernels (<<<1, 1>>>, each waiting --spin-us on the GPU's
// %globaltimer) on one stream, back to back, for --seconds; each kernel
// records its own start and end %globaltimer (nanoseconds, one clock for
// every process on that GPU) in a device buffer. At the end the process
// writes them to --out, one "start end" line per kernel, after '#' header
// lines. Merging the files of two processes that took turns on the GPU
// gives, at each change of owner, the time from the last kernel end of one
// to the first kernel start of the next: the handover cost.
//
// With --sync-every K > 0 the stream is synchronised after every K kernels:
// the host sync is what gshare takes as an iteration boundary, so each K
// kernels are one "iteration". 0 never syncs until the end.
//
// Start barrier (same protocol as jobutil.py): after context creation and a
// warm-up, create --ready-file, wait for --start-file, which holds T0 in
// CLOCK_MONOTONIC seconds, sleep until T0, run until T0 + --seconds.
//
// Launches use the runtime's <<<>>> (cudaLaunchKernel): cudart reaches the
// driver through cuGetProcAddress, which gshare intercepts.
//
// Build: nvcc -O2 -arch=native -o handover_probe handover_probe.cu
// usage: handover_probe --seconds S --spin-us U --sync-every K --out FILE
//                       [--name N] [--ready-file F --start-file F] [--barrier-timeout S]
#include <cuda_runtime.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace {

const char* g_name = "probe";

void fail(const char* what, const char* detail) {
  fprintf(stderr, "handover_probe[%s]: %s: %s\n", g_name, what, detail);
  exit(1);
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail(what, cudaGetErrorString(status));
}

double monotonic_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void sleep_until(double deadline) {
  for (;;) {
    double left = deadline - monotonic_seconds();
    if (left <= 0) return;
    if (left > 0.002) usleep(useconds_t((left - 0.0015) * 1e6));
  }
}

// Creates `path` atomically: write a temporary file, rename it.
void touch(const std::string& path) {
  if (path.empty()) return;
  std::string temporary = path + ".tmp" + std::to_string(getpid());
  FILE* f = fopen(temporary.c_str(), "w");
  if (f == nullptr) fail("cannot create", temporary.c_str());
  fprintf(f, "%d\n", int(getpid()));
  fclose(f);
  if (rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename to", path.c_str());
}

// Waits for the start file and returns the T0 it holds.
double wait_for_start(const std::string& path, double timeout, pid_t parent) {
  const double deadline = monotonic_seconds() + timeout;
  for (;;) {
    FILE* f = fopen(path.c_str(), "r");
    if (f != nullptr) {
      double t0 = 0;
      int got = fscanf(f, "%lf", &t0);
      fclose(f);
      if (got == 1) return t0;
    }
    if (monotonic_seconds() > deadline) fail("no start signal in time", path.c_str());
    if (getppid() != parent) fail("the orchestrator has gone", "exiting");
    usleep(1000);
  }
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins `ns` on the global timer; writes [start, end] at `index` unless it
// is past the buffer (warm-up kernels pass index == capacity).
__global__ void spin(unsigned long long* out, unsigned long long index,
                     unsigned long long capacity, unsigned long long ns) {
  const unsigned long long start = global_ns();
  unsigned long long now = start;
  while (now - start < ns) now = global_ns();
  if (index < capacity) {
    out[2 * index] = start;
    out[2 * index + 1] = now;
  }
}

struct Options {
  double seconds = 8;
  double spin_us = 50;
  long sync_every = 20;
  double barrier_timeout = 300;
  std::string out, ready_file, start_file, name = "probe";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      printf("usage: %s --seconds S --spin-us U --sync-every K --out FILE [--name N]\n"
             "          [--ready-file F --start-file F] [--barrier-timeout S]\n", argv[0]);
      exit(0);
    }
    if (i + 1 >= argc) fail("missing value after", argv[i]);
    const char* value = argv[++i];
    char* end = nullptr;
    errno = 0;
    if (arg == "--seconds") {
      o.seconds = strtod(value, &end);
    } else if (arg == "--spin-us") {
      o.spin_us = strtod(value, &end);
    } else if (arg == "--sync-every") {
      o.sync_every = strtol(value, &end, 10);
    } else if (arg == "--barrier-timeout") {
      o.barrier_timeout = strtod(value, &end);
    } else if (arg == "--out") {
      o.out = value;
    } else if (arg == "--ready-file") {
      o.ready_file = value;
    } else if (arg == "--start-file") {
      o.start_file = value;
    } else if (arg == "--name") {
      o.name = value;
    } else {
      fail("unknown option", arg.c_str());
    }
    if (end != nullptr && (*end != '\0' || errno != 0)) fail("bad number", value);
  }
  if (o.out.empty()) fail("missing option", "--out");
  if (!(o.seconds > 0) || !(o.spin_us > 0) || o.sync_every < 0) fail("bad option", "values");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  g_name = o.name.c_str();
  const pid_t parent = getppid();
  const unsigned long long spin_ns = (unsigned long long)(o.spin_us * 1000.0);
  // No kernel can be shorter than spin_ns, so this never fills up.
  const unsigned long long capacity =
      (unsigned long long)(o.seconds * 1e6 / o.spin_us) + 10000ull;

  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context creation");
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  unsigned long long* buffer = nullptr;
  check(cudaMalloc(&buffer, capacity * 2 * sizeof(unsigned long long)), "cudaMalloc");
  check(cudaMemset(buffer, 0, capacity * 2 * sizeof(unsigned long long)), "cudaMemset");
  for (int i = 0; i < 20; ++i) spin<<<1, 1, 0, stream>>>(buffer, capacity, capacity, spin_ns);
  check(cudaGetLastError(), "warm-up launch");
  check(cudaStreamSynchronize(stream), "warm-up");

  touch(o.ready_file);
  double t0 = monotonic_seconds();
  if (!o.start_file.empty()) {
    t0 = wait_for_start(o.start_file, o.barrier_timeout, parent);
    sleep_until(t0);
  }
  const double end_at = t0 + o.seconds;
  const double began = monotonic_seconds();
  unsigned long long launched = 0;
  while (launched < capacity && monotonic_seconds() < end_at) {
    spin<<<1, 1, 0, stream>>>(buffer, launched, capacity, spin_ns);
    ++launched;
    if (o.sync_every > 0 && launched % (unsigned long long)o.sync_every == 0)
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if ((launched & 1023) == 0) {
      check(cudaGetLastError(), "launch");
      if (getppid() != parent) fail("the orchestrator has gone", "exiting");
    }
  }
  check(cudaGetLastError(), "launch");
  check(cudaStreamSynchronize(stream), "final cudaStreamSynchronize");
  const double host_end = monotonic_seconds();

  std::vector<unsigned long long> times(launched * 2);
  if (launched > 0)
    check(cudaMemcpy(times.data(), buffer, launched * 2 * sizeof(unsigned long long),
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  unsigned long long missing = 0;
  std::string temporary = o.out + ".tmp" + std::to_string(getpid());
  FILE* f = fopen(temporary.c_str(), "w");
  if (f == nullptr) fail("cannot create", temporary.c_str());
  fprintf(f, "# handover_probe name=%s pid=%d gpu=\"%s\" launched=%llu spin_ns=%llu "
          "sync_every=%ld seconds=%.3f late_start_s=%.6f host_s=%.6f\n",
          o.name.c_str(), int(getpid()), prop.name, launched, spin_ns, o.sync_every, o.seconds,
          began - t0, host_end - began);
  fprintf(f, "# start_ns end_ns (%%globaltimer)\n");
  for (unsigned long long i = 0; i < launched; ++i) {
    if (times[2 * i] == 0 || times[2 * i + 1] < times[2 * i]) {
      ++missing;
      continue;
    }
    fprintf(f, "%llu %llu\n", times[2 * i], times[2 * i + 1]);
  }
  if (fclose(f) != 0) fail("cannot write", temporary.c_str());
  if (rename(temporary.c_str(), o.out.c_str()) != 0) fail("cannot rename to", o.out.c_str());
  printf("{\"probe\":\"%s\",\"launched\":%llu,\"missing\":%llu,\"host_s\":%.6f,\"gpu\":\"%s\"}\n",
         o.name.c_str(), launched, missing, host_end - began, prop.name);
  check(cudaFree(buffer), "cudaFree");
  return missing == 0 ? 0 : 1;
}
