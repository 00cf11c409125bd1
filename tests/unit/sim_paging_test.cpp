// gshare-sim's paging model (tools/sim_paging.h): a schedule worked by
// hand, and, on the committed oversubscribed trace, the search never worse
// than a fixed policy and prefetch never worse than none.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "tools/sim_paging.h"

using namespace gshare::sim;

namespace {

constexpr double kGiBPerSecond8 = 8.0 * 1073741824.0 / 1e9;  // 8 GiB/s in GB/s

Trace three_jobs_of_4_gib() {
  Trace t;
  t.quantum_ms = 1000;
  t.handover_ms = 0;
  t.capacity_mib = 10 * 1024;
  for (const char* name : {"a", "b", "c"}) {
    TraceJob j;
    j.name = name;
    j.iteration_ms = 1000;
    j.iterations = 2;
    j.persistent_mib = 3 * 1024;
    j.ephemeral_mib = 1024;
    t.jobs.push_back(j);
  }
  return t;
}

// Three jobs of 6 GiB on 10 GiB, 26 s of work each: one on the GPU at a
// time, so that each swap pages one out.
Trace three_jobs_of_6_gib() {
  Trace t = three_jobs_of_4_gib();
  for (TraceJob& j : t.jobs) {
    j.iterations = 26;
    j.persistent_mib = 5 * 1024;
  }
  return t;
}

double seconds(uint64_t ns) { return double(ns) / 1e9; }

}  // namespace

TEST_CASE("paging model: three jobs of 4 GiB on 10 GiB, by turns, worked by hand") {
  // a runs 1 s; b runs 1 s beside it; c needs room: a (least recently run)
  // goes out, 0.5 s at 8 GiB/s, and c's switch then buys it a 5 s turn: it
  // finishes. a comes back (0.5 s in), finishes; b finishes.
  Trace trace = three_jobs_of_4_gib();
  Schedule turns = policy_schedule(trace, "fair");
  REQUIRE(turns.by_turns);
  PagingResult plain = simulate_paging(trace, turns, {kGiBPerSecond8, false});
  CHECK(seconds(plain.makespan_ns) == Approx(7.0).margin(1e-3));
  CHECK(plain.swapped_bytes == 8ull << 30);
  CHECK(plain.page_ins == 1);
  CHECK(seconds(plain.stall_ns) == Approx(1.0).margin(1e-3));
  // With prefetch a's page-out hides behind b's turn; a's page-in cannot
  // hide behind c's, whose memory did not leave room for it.
  PagingResult fetched = simulate_paging(trace, turns, {kGiBPerSecond8, true});
  CHECK(seconds(fetched.makespan_ns) == Approx(6.5).margin(1e-3));
  CHECK(seconds(fetched.stall_ns) == Approx(0.5).margin(1e-3));
  // Each to completion nothing is ever paged: 6 s of work.
  PagingResult whole = simulate_paging(trace, policy_schedule(trace, "fifo"), {kGiBPerSecond8, false});
  CHECK(seconds(whole.makespan_ns) == Approx(6.0).margin(1e-3));
  CHECK(whole.swapped_bytes == 0);
}

TEST_CASE("paging model: pinning costs a job's first page-out, and again past the host limit") {
  // The schedule worked by hand above, pinning at 8 GiB/s: a's page-out
  // first pins its 4 GiB (0.5 s more); its page-in pins nothing.
  Trace trace = three_jobs_of_4_gib();
  Schedule turns = policy_schedule(trace, "fair");
  PagingModel pinning{kGiBPerSecond8, false};
  pinning.pin_gb_per_s = kGiBPerSecond8;
  PagingResult plain = simulate_paging(trace, turns, pinning);
  CHECK(seconds(plain.makespan_ns) == Approx(7.5).margin(1e-3));
  CHECK(seconds(plain.stall_ns) == Approx(1.5).margin(1e-3));

  // Three jobs of 6 GiB on 10 GiB, by turns, one on the GPU at a time, so
  // that each swap pages one out (with two resident, the paged-out jobs
  // would wait for them to end): with room for every copy each job pins
  // once; with room for two copies (the two paged out), the resident job
  // gives its copy up and pins again at its next page-out.
  Trace three = three_jobs_of_6_gib();
  Schedule rounds = policy_schedule(three, "fair");
  PagingModel unlimited{kGiBPerSecond8, false};
  unlimited.pin_gb_per_s = 1;
  PagingModel limited = unlimited;
  limited.host_limit_bytes = 12ull << 30;
  PagingResult free_pins = simulate_paging(three, rounds, {kGiBPerSecond8, false});
  PagingResult once = simulate_paging(three, rounds, unlimited);
  PagingResult again = simulate_paging(three, rounds, limited);
  CHECK(once.makespan_ns > free_pins.makespan_ns);
  CHECK(again.makespan_ns > once.makespan_ns);
  CHECK(again.swapped_bytes == once.swapped_bytes);  // the same swaps, dearer

  // Once jobs take turns through host memory, each pins its copy ahead
  // while it runs (a quarter of the rate, as live's fewer threads): a
  // job's first page-out after that pins less, and the mix ends sooner
  // than with every copy pinned at its page-out.
  PagingModel at_page_out = unlimited;
  at_page_out.copies_ahead = false;
  PagingResult behind = simulate_paging(three, rounds, at_page_out);
  CHECK(once.makespan_ns < behind.makespan_ns);
  CHECK(once.swapped_bytes == behind.swapped_bytes);
}

TEST_CASE("paging model: a page-out moves what the job holds switched out (paged_mib), not its peak") {
  // The schedule worked by hand above, each job giving 1 GiB back as it is
  // switched out: a's page-out and page-in move 3 GiB (0.375 s each at
  // 8 GiB/s), not 4; the room c needs is still its whole 4 GiB.
  Trace trace = three_jobs_of_4_gib();
  for (TraceJob& j : trace.jobs) j.paged_mib = 3 * 1024;
  PagingResult plain = simulate_paging(trace, policy_schedule(trace, "fair"), {kGiBPerSecond8, false});
  CHECK(plain.swapped_bytes == 6ull << 30);
  CHECK(plain.page_ins == 1);
  CHECK(seconds(plain.stall_ns) == Approx(0.75).margin(1e-3));

  // Past the host limit it decides too: three copies of 6 GiB pass 11 GiB,
  // so the resident job gives its copy up and pins again; of 3 GiB they
  // fit, each pinned once.
  Trace three = three_jobs_of_6_gib();
  Schedule rounds = policy_schedule(three, "fair");
  PagingModel limited{kGiBPerSecond8, false};
  limited.pin_gb_per_s = 1;
  limited.host_limit_bytes = 11ull << 30;
  limited.copies_ahead = false;
  PagingResult peak = simulate_paging(three, rounds, limited);
  for (TraceJob& j : three.jobs) j.paged_mib = 3 * 1024;
  PagingResult held = simulate_paging(three, rounds, limited);
  CHECK(held.makespan_ns < peak.makespan_ns);
  CHECK(held.swapped_bytes * 6 == peak.swapped_bytes * 3);  // the same swaps, 3 GiB each instead of 6
}

TEST_CASE("paging model: without prefetch a paged-out job waits a turn at most while a resident one wants the GPU, as live") {
  // Four jobs of 4 GiB on 10 GiB, two at a time on the GPU, 3 s of work
  // each in turns of about 1 s. a and b start; c and d page them out for
  // their first turns. Then a and b, paged out, are passed over while c
  // and d (resident, the one not holding the token wanting it) run, but
  // for one turn each at most: then they page in on demand, and the four
  // take turns through host memory. Passed over until c and d ended, a
  // and b would have come back once each: two page-ins in all.
  Trace trace = three_jobs_of_4_gib();
  trace.jobs.push_back(trace.jobs[0]);
  trace.jobs.back().name = "d";
  for (TraceJob& j : trace.jobs) j.iterations = 60;
  PagingModel slow{kGiBPerSecond8, false};
  Schedule turns = policy_schedule(trace, "fair");
  turns.by_turns = true;
  PagingResult parked = simulate_paging(trace, turns, slow);
  CHECK(parked.page_ins >= 8);
  PagingResult weighted = simulate_paging(trace, policy_schedule(trace, "prefetch"), slow);
  CHECK(weighted.page_ins >= 8);
  // To completion nothing comes back more than once.
  PagingResult in_order = simulate_paging(trace, policy_schedule(trace, "fifo"), slow);
  CHECK(in_order.page_ins <= 2);
}

TEST_CASE("paging model: the search never loses to a fixed policy, prefetch never to none") {
  std::ifstream file(GSHARE_SOURCE_DIR "/tools/traces/paging_mix.json");
  REQUIRE(file);
  std::stringstream text;
  text << file.rdbuf();
  Trace trace;
  std::string error;
  REQUIRE(parse_trace(text.str(), &trace, &error));
  REQUIRE(trace.capacity_mib > 0);
  uint64_t footprint = 0;
  for (const TraceJob& j : trace.jobs) footprint += j.persistent_mib + j.ephemeral_mib;
  CHECK(footprint >= 2 * trace.capacity_mib);  // 2-3x oversubscribed
  for (double rate : {5.0, 25.0}) {
    INFO("GB/s " << rate);
    for (bool prefetch : {false, true}) {
      INFO("prefetch " << prefetch);
      PagingModel model{rate, prefetch};
      uint64_t best_fixed = UINT64_MAX;
      for (const char* policy : {"fifo", "fair", "srtf", "priority", "pack", "prefetch"}) {
        Schedule s = policy_schedule(trace, policy);
        PagingResult r = simulate_paging(trace, s, model);
        best_fixed = std::min(best_fixed, r.makespan_ns);
        if (prefetch) CHECK(r.makespan_ns <= simulate_paging(trace, s, {rate, false}).makespan_ns);
      }
      PagingResult searched;
      search_schedule(trace, model, SearchOptions{}, &searched);
      CHECK(searched.makespan_ns <= best_fixed);
    }
  }
  // Deterministic: the same seed finds the same schedule.
  PagingResult first, second;
  Schedule a = search_schedule(trace, {25, true}, SearchOptions{}, &first);
  Schedule b = search_schedule(trace, {25, true}, SearchOptions{}, &second);
  CHECK(a.order == b.order);
  CHECK(first.makespan_ns == second.makespan_ns);
}

TEST_CASE("paging model: the prefetch policy takes turns by the live policy's own picks") {
  // Three jobs of 6 GiB on a 10 GiB GPU: one resident beside the runner
  // is impossible, so every switch pages; the policy's turns still serve
  // every job and finish all the work.
  Trace trace;
  trace.capacity_mib = 10 * 1024;
  trace.quantum_ms = 100;
  trace.handover_ms = 0;
  for (int i = 0; i < 3; ++i) {
    TraceJob job;
    job.name = "job" + std::to_string(i);
    job.iteration_ms = 50;
    job.iterations = 20 + 10 * uint64_t(i);
    job.persistent_mib = 5 * 1024;
    job.ephemeral_mib = 1024;
    trace.jobs.push_back(job);
  }
  Schedule weighted = policy_schedule(trace, "prefetch");
  REQUIRE(weighted.by_weight);
  PagingResult none = simulate_paging(trace, weighted, {kGiBPerSecond8, false});
  PagingResult fetched = simulate_paging(trace, weighted, {kGiBPerSecond8, true});
  const uint64_t work_ns = (20 + 30 + 40) * 50 * 1'000'000ull;
  CHECK(none.makespan_ns >= work_ns);
  CHECK(none.page_ins > 0);
  CHECK(fetched.makespan_ns <= none.makespan_ns);
  // Alone on the GPU (capacity for all): no copies, just the work.
  trace.capacity_mib = 20 * 1024;
  PagingResult roomy = simulate_paging(trace, weighted, {kGiBPerSecond8, false});
  CHECK(roomy.makespan_ns == work_ns);
  CHECK(roomy.swapped_bytes == 0);
}

TEST_CASE("paging model: jobs set up before time 0, and an ended job's memory held through its exit") {
  // Two jobs of 6 GiB on 10 GiB, one after the other: b needs a's room.
  Trace trace = three_jobs_of_4_gib();
  trace.jobs.pop_back();
  for (TraceJob& j : trace.jobs) j.persistent_mib = 5 * 1024;
  Schedule whole = policy_schedule(trace, "fifo");
  // b paged out before time 0 (its copy pinned), a on the GPU: b's turn
  // pages it in (0.75 s at 8 GiB/s), nothing is paged out.
  trace.jobs[0].at_start = StartState::kResident;
  trace.jobs[1].at_start = StartState::kPagedOut;
  PagingModel pinning{kGiBPerSecond8, false};
  pinning.pin_gb_per_s = 1;  // slow: nothing may pin here
  PagingResult set_up = simulate_paging(trace, whole, pinning);
  CHECK(set_up.page_ins == 1);
  CHECK(set_up.swapped_bytes == 6ull << 30);
  CHECK(seconds(set_up.makespan_ns) == Approx(4.75).margin(1e-3));
  // a's process takes 1.5 s to exit: b waits for that room, and no
  // prefetch hides it.
  trace.exit_ms = 1500;
  for (bool prefetch : {false, true}) {
    PagingModel model{kGiBPerSecond8, prefetch};
    PagingResult r = simulate_paging(trace, whole, model);
    CHECK(seconds(r.makespan_ns) == Approx(6.25).margin(1e-3));
    CHECK(seconds(r.stall_ns) == Approx(2.25).margin(1e-3));
  }
  // Both on the GPU at time 0 cannot be.
  std::string error;
  CHECK_FALSE(parse_trace(R"({"capacity_mib": 10240, "jobs": [
      {"name": "a", "arrival_s": 0, "iteration_ms": 1, "iterations": 1, "persistent_mib": 6144,
       "at_start": "resident"},
      {"name": "b", "arrival_s": 0, "iteration_ms": 1, "iterations": 1, "persistent_mib": 6144,
       "at_start": "resident"}]})",
                          &trace, &error));
  CHECK(error.find("at time 0") != std::string::npos);
  CHECK_FALSE(parse_trace(R"({"jobs": [{"name": "a", "arrival_s": 0, "iteration_ms": 1, "iterations": 1,
                                         "at_start": "asleep"}]})",
                          &trace, &error));
  CHECK(error == R"(jobs[0].at_start must be new, resident, resident_with_copy or paged_out (got "asleep"))");
}
