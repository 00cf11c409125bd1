// gshare-top: a live view of the processes that run under gshare, read from
// the per-GPU regions (never written). See tools/README.md.
//
//   gshare-top [-d SECONDS] [--once] [--json] [--prometheus] [--serve ADDR:PORT]
//              [--dir DIR] [--columns] [-h|--help] [--help-env] [--version]
//
// Files: top_cli (command line), top_sample (snapshots and rates: no
// drawing), top_columns (the table of process columns), top_text (plain
// frames), top_json (--json), top_prometheus (--prometheus and what --serve
// answers), top_serve (the HTTP server of --serve), top_terminal (the live
// screen and giving the terminal back on every exit path). This file only
// picks a mode.
//
// --json prints one object on one line (schema version 3; fields are only
// ever added within a version):
//
//   {"version": 3,
//    "dir": "/dev/shm",                 regions were read from here
//    "timestamp_unix_ns": N,            when the second sample was taken
//    "sample_seconds": 0.25,            time between the two samples of the rates
//    "dir_error": "...",                only if the directory could not be read
//    "gpus": [                          one per region file, by path; [] if none
//      {"uuid": "GPU-...", "path": "/dev/shm/gshare-GPU-...",
//       "total_bytes": C,               the GPU's capacity
//       "reserved_bytes": N,            Σ reserved of the live processes
//       "repairs": N,                   times a holder died mid-update and state was repaired
//       "reclaimed_slots": N,           dead processes' slots cleaned up
//       "admission_waits": N,           allocations that had to wait, ended jobs included
//       "policy": "fair",               fifo|fair|srtf|priority|pack|prefetch; "unknown" until a process sets it
//       "holder_slot": N|null,          the live process holding the launch token (pack: lane 0's)
//       "holder_pid": N|null,
//       "watcher_pid": N|null,          the waiter that watches the holder (its slice's end,
//                                       idleness, host work); the others sleep until a grant
//       "handovers": N,                 times a token changed hands
//       "loans": N,                     times a holder working on the host lent it
//       "vtime_floor_ms": X,            the least vtime of the active jobs, never lowered
//                                       (fair, prefetch): no job becomes active behind it
//       "switches": N,                  handovers that reached the new holder's first launch
//       "switch_ns_total": N,           their cost in all: grant to first launch (scheduler/token.h)
//       "switch_ns_max": N|null,        the largest; null: no switch yet
//       "safety_bytes": N,              Σ P + Σ_lanes max E over the live processes
//       "safety_holds": B,              safety_bytes <= total_bytes
//       "memory_waiters": N,            processes blocked in an allocation
//       "lanes": [                      lanes with live members, by lane number
//         {"lane": N, "ephemeral_bytes": N,  the lane's space: its members' largest E
//          "pids": [N, ...],            members, by slot
//          "holder_slot": N|null}],     pack: the holder of the lane's token; else null
//       "slice_elapsed_ms": X|null,     how long the holder's slice has run; null: no holder
//       "slice_remaining_ms": X|null,   until the policy looks again; null: no holder or no end
//       "processes": [                  live processes only, by pid
//         {"pid": N, "command": "...", "uid": N, "attach_unix_ns": N,
//          "used_bytes": N,             allocated + context
//          "quota_bytes": N,            = total_bytes when unlimited
//          "allocated_bytes": N, "context_bytes": N,
//          "reserved_bytes": N,         allocated + context + reservations in flight
//          "peak_reserved_bytes": N,
//          "allocations": N,            live device allocations
//          "denied": N,                 allocations refused (quota or capacity)
//          "launches": N,               cumulative kernel and graph launches
//          "launches_per_second": X,    over sample_seconds
//          "syncs": N,                  cumulative host synchronisations
//          "state": "running"|"waiting"|"idle",  job_state, but running if it launched
//                                       during the sample (top_sample.h, ProcessState)
//          "job_state": "running"|"waiting"|"idle",  as the scheduler wrote it
//          "holds_token": B,            holds a launch token now (pack: its lane's)
//          "beside": B,                 runs beside the holder, in its turn (shared turns)
//          "host_bound": B,             its waits for the GPU stayed under a tenth of the
//                                       time it runs and its kernels kept the GPU busy
//                                       under 0.3 of its own turns: it may share turns
//                                       (fair, GSHARE_SHARED_TURNS gaps or on)
//          "leaves_gaps": B,            not host-bound, yet its kernels leave the GPU gaps
//                                       in its own turns (busy 0.4-0.85 once, or under
//                                       0.93 as a mean): it shares turns two at a time
//                                       (GSHARE_SHARED_TURNS=gaps, the default)
//          "gpu_wait_share": X,         0..1: that share at its latest judgement
//          "gpu_busy_share": X,         0..1: its kernels' share of a stretch of its own
//                                       turns, timed on the GPU; 0: not measured (it
//                                       asks to share turns only then)
//          "gpu_share_10s": X,          0..1: share of the last 10 s it held the token
//                                       (of its lifetime, at least 1 s, if younger)
//          "served_ms": X,              total time it held the token
//          "vtime_ms": X,               fair's clock: served / weight, as lifted when it
//                                       became active (rules::activate); the least runs next
//          "wait_ms": X,                total time it waited for the token, current wait included
//          "granted": N,                times it was given the token
//          "switches": N,               switches to it that reached its first launch
//          "switch_ns": N,              their cost in all: grant to first launch
//          "last_switch_ns": N|null,    the latest one's; null: no switch yet
//          "switch_cost_ns": N,         a switch's cost with the memory handed over
//                                       (recent switches; 0: none measured)
//          "switch_memory_ns": N,       the part of it that is memory handed over; turns
//                                       last 40 times that, up to 10 s (the rest: up to
//                                       twice the quantum)
//          "weight": N, "priority": N,  GSHARE_WEIGHT, GSHARE_PRIORITY
//          "handover": "overlap"|"strict"|"unknown",  GSHARE_HANDOVER
//          "shared_turns": "off"|"on"|"gaps"|"pairs"|"unknown",  GSHARE_SHARED_TURNS
//          "expected_seconds": X|null,  GSHARE_EXPECTED_SECONDS; null: not given
//          "expected_iterations": N|null,  GSHARE_EXPECTED_ITERS; null: not given
//          "iterations": N,             iterations detected
//          "iteration_ms": X|null,      the latest iteration's length; null: none detected
//          "iteration_launches": N|null,  launches per iteration; null: unknown
//          "iteration_source": "syncs"|"launches"|"unknown",  how iterations were found
//          "persistent_bytes": N,       P: context + allocations classified persistent
//          "ephemeral_bytes": N,        E: peak ephemeral bytes per iteration
//          "memory_provisional": B,     fewer than 2 iterations classified: P and E may move
//          "classified_iterations": N,
//          "lane": N|null,              null: not placed yet
//          "admission": "admitted"|"waiting for admission"|"waiting for memory"|"waiting for lane",
//          "admission_wait_ms": X,      the current wait so far; 0 when admitted
//          "admission_bytes": N,        the allocation that waits; 0 when admitted
//          "admission_short_bytes": N,  by how much it does not fit; 0 when admitted
//          "admission_waits": N,        waits so far
//          "admission_timeouts": N,     waits that gave up (GSHARE_ADMIT_TIMEOUT_S); the GPU has the same, ended jobs included
//          "blocked_by_pid": P|null,    while waiting: the job holding what it waits for (a wait chain follows these and holder_pid)
//          "released_bytes": N,         cached bytes given back on request
//          "slot": N, "generation": N}]},
//      {"path": "...", "error": "..."}  a region that cannot be read: no other fields
//    ]}

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tools/top_cli.h"
#include "tools/top_json.h"
#include "tools/top_prometheus.h"
#include "tools/top_sample.h"
#include "tools/top_serve.h"
#include "tools/top_terminal.h"
#include "tools/top_text.h"

namespace gshare::top {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Two samples kFirstSampleWindow apart: the frame of --once and --json.
Frame sample_window(const std::string& dir) {
  Sample before = take_sample(dir);
  std::this_thread::sleep_until(before.taken + kFirstSampleWindow);
  return make_frame(dir, before, take_sample(dir));
}

// False, after saying why, if stdout could not take it (a full disk, a closed pipe).
bool write_stdout(const std::string& text) {
  fwrite(text.data(), 1, text.size(), stdout);
  if (fflush(stdout) == 0 && !ferror(stdout)) return true;
  fprintf(stderr, "gshare-top: cannot write the output: %s\n", strerror(errno));
  return false;
}

int print_json(const CommandLine& command_line) {
  return write_stdout(render_json(sample_window(command_line.dir)) + "\n") ? 0 : 1;
}

// One snapshot: counters need no second sample, Prometheus takes the rates.
int print_prometheus(const CommandLine& command_line) {
  Sample sample = take_sample(command_line.dir);
  return write_stdout(render_prometheus(sample.gpus, command_line.dir, sample.dir_error)) ? 0 : 1;
}

// The terminal's width, or where there is none to ask, $COLUMNS or 120:
// a row never runs past it.
size_t plain_width() {
  if (isatty(STDOUT_FILENO)) return TerminalSession::size().columns;
  return plain_output_width(getenv("COLUMNS"));
}

int print_once(const CommandLine& command_line) {
  Frame frame = sample_window(command_line.dir);
  return write_stdout(join_lines(render_text(frame, plain_width()))) ? 0 : 1;
}

// stdout is a file or a pipe: plain frames, each after a title line and
// followed by a blank line, until a signal ends us or the reader goes away.
int print_frames(const CommandLine& command_line) {
  Sample previous = take_sample(command_line.dir);
  Clock::time_point next = previous.taken + kFirstSampleWindow;
  for (;;) {
    std::this_thread::sleep_until(next);
    Sample current = take_sample(command_line.dir);
    Frame frame = make_frame(command_line.dir, previous, current);
    std::string text = title_line(frame, command_line.delay_seconds) + "\n" +
                       join_lines(render_text(frame, plain_width())) + "\n";
    if (!write_stdout(text)) return 1;
    previous = std::move(current);
    next = previous.taken + to_duration(command_line.delay_seconds);
  }
}

std::vector<TextLine> live_screen(const std::optional<Frame>& frame, const CommandLine& command_line,
                                  size_t width, bool reads_keys) {
  if (!frame) return {{TextLine::Kind::kTitle, "gshare-top  " + command_line.dir + "  sampling"}};
  std::string title = title_line(*frame, command_line.delay_seconds);
  if (reads_keys) title += "  q quits";
  std::vector<TextLine> lines = {{TextLine::Kind::kTitle, title}, {TextLine::Kind::kBlank, ""}};
  for (TextLine& line : render_text(*frame, width)) lines.push_back(std::move(line));
  return lines;
}

int run_live(const CommandLine& command_line) {
  TerminalSession terminal;
  std::optional<Frame> frame;
  auto draw = [&] {
    terminal.draw(live_screen(frame, command_line, TerminalSession::size().columns,
                              terminal.reads_keys()));
  };
  Sample previous = take_sample(command_line.dir);
  Clock::time_point next = previous.taken + kFirstSampleWindow;
  draw();
  for (;;) {
    switch (terminal.wait_until(next)) {
      case TerminalSession::Event::kQuit:
        return 0;
      case TerminalSession::Event::kRedraw:
        draw();
        continue;
      case TerminalSession::Event::kTimeout:
        break;
    }
    Sample current = take_sample(command_line.dir);
    frame = make_frame(command_line.dir, previous, current);
    previous = std::move(current);
    next = previous.taken + to_duration(command_line.delay_seconds);
    draw();
  }
}

int run(const CommandLine& command_line) {
  if (command_line.help) return write_stdout(usage_text()) ? 0 : 1;
  if (command_line.help_env) return write_stdout(environment_text()) ? 0 : 1;
  if (command_line.serve) return serve_metrics(*command_line.serve, command_line.dir);
  if (command_line.prometheus) return print_prometheus(command_line);
  if (command_line.version) return write_stdout(version_text()) ? 0 : 1;
  if (command_line.columns) return write_stdout(columns_text()) ? 0 : 1;
  if (command_line.json) return print_json(command_line);
  if (command_line.once) return print_once(command_line);
  if (isatty(STDOUT_FILENO)) return run_live(command_line);
  return print_frames(command_line);
}

}  // namespace
}  // namespace gshare::top

int main(int argc, char** argv) {
  gshare::top::CommandLine command_line;
  std::string error;
  if (!gshare::top::parse_command_line(argc, argv, &command_line, &error)) {
    fprintf(stderr, "gshare-top: %s\n", error.c_str());
    return 2;
  }
  try {
    return gshare::top::run(command_line);
  } catch (const std::exception& e) {
    // The live screen, if any, was given back while unwinding.
    fprintf(stderr, "gshare-top: %s\n", e.what());
    return 1;
  } catch (...) {
    fprintf(stderr, "gshare-top: unexpected error\n");
    return 1;
  }
}
