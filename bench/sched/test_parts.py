"""Self-tests of the parts' pure code (metrics, summaries, trace handling),
on made-up job outputs; no GPU, no PyTorch:
    cd bench/sched && python3 -m unittest test_parts"""

import os
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import alone  # noqa: E402
import fair  # noqa: E402
import handover  # noqa: E402
import metrics  # noqa: E402
import mix  # noqa: E402
import priority  # noqa: E402
import quantum  # noqa: E402
from benchlib.turns import Turns  # noqa: E402


def train_result(step_s, window, offset=0.0, late=0.0):
    """A `train_steps.py window` output stepping every `step_s` from `offset` until
    the window is over (its last step ends past it)."""
    ends, t = [], offset
    while True:
        t += step_s
        ends.append(round(t, 6))
        if t >= window:
            break
    return {"kind": "train", "step_ends": ends, "late_start_s": late, "peak_allocated_mib": 10.0}


def record(jobs, ok=True, **fields):
    return {"name": "x", "ok": ok, "errors": [], "jobs": jobs, **fields}


class TrainMetrics(unittest.TestCase):
    def test_turns_and_the_step_inside_them(self):
        # job0 steps every 2 ms, job1 every 3 ms, each in 10 turns of 30 ms a second
        def in_turns(step_s):
            steps_a_turn = int(0.03 / step_s)
            return {"kind": "train", "step_ends": [round(0.1 * turn + k * step_s, 6) for turn in range(10)
                                                   for k in range(1, steps_a_turn + 1)]}
        m = metrics.train(record({"job0": in_turns(0.002), "job1": in_turns(0.003)}))
        self.assertEqual(m["turns"], [10, 10])
        self.assertAlmostEqual(m["in_turn_step_ms"][0], 2.0, places=3)
        self.assertAlmostEqual(m["in_turn_step_ms"][1], 3.0, places=3)

    def test_equal_jobs(self):
        m = metrics.train(record({"job0": train_result(0.02, 10), "job1": train_result(0.02, 10)}))
        self.assertAlmostEqual(m["jain"], 1.0)
        self.assertAlmostEqual(m["shares"][0], 0.5)
        self.assertAlmostEqual(m["aggregate_steps_per_s"], 100, delta=1)
        self.assertEqual(len(m["per_second_steps"][0]), 10)
        self.assertAlmostEqual(m["step_ms"]["p50"], 20, places=3)

    def test_common_window_is_the_earliest_end(self):
        # job1 steps slowly and its last step ends late: only the window
        # up to job0's end (10.0) counts for both.
        m = metrics.train(record({"job0": train_result(0.5, 10), "job1": train_result(3.0, 10)}))
        self.assertAlmostEqual(m["window_s"], 10.0)
        self.assertEqual(m["steps"], [20, 3])

    def test_jobs_joining_one_after_another_count_from_the_last_join(self):
        # job1 joins at 2 s: both are counted from its first step end (2.5).
        late = {"kind": "train", "step_ends": [2.0 + 0.5 * k for k in range(1, 17)]}
        m = metrics.train(record({"job0": train_result(0.5, 10), "job1": late}), from_last_join=True)
        self.assertAlmostEqual(m["window_from_s"], 2.5)
        self.assertAlmostEqual(m["window_s"], 7.5)
        self.assertEqual(m["steps"], [15, 15])
        self.assertAlmostEqual(m["jain"], 1.0)
        # From T0, the late job would read as starved.
        self.assertLess(metrics.train(record({"job0": train_result(0.5, 10), "job1": late}))["jain"], 0.99)

    def test_weights(self):
        jobs = {"job0": train_result(0.01, 10), "job1": train_result(0.03, 10)}
        m = metrics.train(record(jobs), weights=[3, 1])
        self.assertAlmostEqual(m["shares"][0], 0.75, places=2)
        self.assertGreater(m["jain"], 0.999)
        self.assertLess(metrics.train(record(jobs))["jain"], 0.9)
        with self.assertRaises(ValueError):
            metrics.train(record(jobs), weights=[1])

    def test_job_order_is_numeric(self):
        jobs = {f"job{i}": train_result(0.01 * (i + 1), 5) for i in range(11)}
        m = metrics.train(record(jobs))
        self.assertEqual(m["jobs"][:3], ["job0", "job1", "job2"])
        self.assertEqual(m["jobs"][-1], "job10")

    def test_failures(self):
        self.assertIsNone(metrics.train(record({"job0": train_result(0.01, 5)}, ok=False)))
        self.assertIsNone(metrics.train(record({"job0": None})))
        self.assertIsNone(metrics.train(record({})))
        self.assertIsNone(metrics.train(None))

    def test_train_rate_and_infer(self):
        self.assertAlmostEqual(metrics.train_rate(train_result(0.1, 10), 10), 10, delta=0.11)
        self.assertIsNone(metrics.train_rate(None, 10))
        requests = [(i / 50, i / 50 + 0.0001, i / 50 + 0.0021) for i in range(100)]
        requests[10] = (0.2, 0.2001, 0.2301)  # one slow request (30 ms)
        requests[11] = (0.22, 0.2302, 0.2322)  # issued late behind it
        m = metrics.infer({"kind": "infer", "requests": requests, "planned": 100})
        self.assertAlmostEqual(m["latency_ms"]["p50"], 2.0, places=3)
        self.assertAlmostEqual(m["latency_ms"]["max"], 30.0, places=3)
        self.assertEqual(m["late_requests"], 1)
        self.assertAlmostEqual(m["from_due_ms"]["max"], 30.1, places=3)
        self.assertIsNone(metrics.infer({"kind": "infer", "requests": []}))

    def test_gshare_work_in_slow_requests(self):
        # 200 requests of 2 ms, 50 a second; two slow ones (8 ms), at 1.0 s and 3.0 s
        requests = [(i / 50, i / 50, i / 50 + (0.008 if i in (50, 150) else 0.002)) for i in range(200)]
        result = {"kind": "infer", "requests": requests, "t0_monotonic": 100.0}
        log = "\n".join(["# a comment", "gshare: 101.004000 NVML listed the GPU's processes in 400 us",
                         "gshare: 102.004000 the framework answered with 1 figure(s) in 60 us",
                         "gshare: an unstamped line"])
        slow = metrics.gshare_work_in_slow_requests(result, log)
        self.assertEqual(slow["slow"], 2)
        self.assertEqual(slow["with_gshare_line"], 1)  # the one at 1.0 s; 2.004 s is a fast request
        self.assertIn("NVML", slow["lines"][0])
        self.assertIsNone(metrics.gshare_work_in_slow_requests(result, "gshare: no stamps"))
        self.assertIsNone(metrics.gshare_work_in_slow_requests({"requests": requests}, log))


def fair_records():
    records = []
    for trial in (1, 2):
        for config, mode, step in (("n2", "native", 0.020), ("n2", "gshare", 0.019),
                                   ("n4", "native", 0.040), ("n4", "gshare", 0.041)):
            n = 2 if config == "n2" else 4
            r = record({f"job{i}": train_result(step, 10) for i in range(n)},
                       config=config, mode=mode, trial=trial)
            r["metrics"] = metrics.train(r)
            records.append(r)
        r = record({"job0": train_result(0.0127, 10), "job1": train_result(0.038, 10)},
                   config="w31", mode="gshare", trial=trial)
        r["metrics"] = metrics.train(r, [3, 1])
        records.append(r)
    r = record({"job0": train_result(0.01, 10)}, config="alone", mode="native", trial=1)
    r["metrics"] = metrics.train(r)
    records.append(r)
    records.append({"name": "n4-gshare-t3", "ok": None, "skipped": "budget", "errors": [],
                    "config": "n4", "mode": "gshare", "trial": 3})
    return records


class FairSummary(unittest.TestCase):
    def test_rows(self):
        rows, alone = fair.summarize(fair_records())
        by = {row["config"]: row for row in rows}
        self.assertAlmostEqual(by["n2"]["ratio"], 20 / 19, places=2)
        self.assertTrue(by["n2"]["met"]["aggregate_ratio"])
        self.assertTrue(by["n2"]["met"]["jain"])
        self.assertFalse(by["n4"]["met"]["aggregate_ratio"])
        self.assertEqual(len(by["n4"]["trials"]), 2)  # the skipped trial 3 has no metrics
        self.assertAlmostEqual(by["w31"]["shares"][0], 0.75, places=2)
        self.assertTrue(by["w31"]["met"]["jain"])
        self.assertAlmostEqual(by["w31"]["native_aggregate"], by["n2"]["native_aggregate"])
        self.assertAlmostEqual(alone["steps_per_s"], 100, delta=1)

    def test_empty(self):
        rows, alone = fair.summarize([])
        self.assertIsNone(alone)
        self.assertEqual(rows, [])

    def test_small_jobs_spread(self):
        # Twelve small jobs: one at half the others' rate passes Jain's
        # index of many (0.99) but not slowest / fastest (0.9).
        records = []
        for mode, slow in (("native", 0.010), ("gshare", 0.020)):
            jobs = {f"job{i}": train_result(0.010, 20) for i in range(11)}
            jobs["job11"] = train_result(slow, 10)
            r = record(jobs, config="small", mode=mode, trial=1)
            r["metrics"] = metrics.train(r)
            records.append(r)
        rows, _ = fair.summarize(records)
        [row] = rows
        self.assertEqual(row["label"], "12 small jobs")
        self.assertAlmostEqual(row["slowest_over_fastest"], 0.5, places=2)
        self.assertFalse(row["met"]["slowest_over_fastest"])
        self.assertIsNone(row["shares"])  # too many to list
        self.assertAlmostEqual(row["trials"][0]["native_slowest_over_fastest"], 1.0, places=2)


    def test_exclusive_turns_gaps_and_pairs_beside_gshare(self):
        # One trial of four jobs natively (40 ms a step), under gshare (39),
        # with every turn a job's own (41), host-bound jobs' turns shared
        # (40.5), gappy jobs two to a turn (37.5) and any two to a turn (38):
        # a row each for gshare, exclusive, hostbound, gaps and pairs, all
        # against the trial's native run.
        records = []
        for mode, step in (("native", 0.040), ("gshare", 0.039), ("exclusive", 0.041), ("hostbound", 0.0405),
                           ("gaps", 0.0375), ("pairs", 0.038)):
            r = record({f"job{i}": train_result(step, 10) for i in range(4)}, config="n4", mode=mode, trial=1)
            r["metrics"] = metrics.train(r)
            records.append(r)
        rows, _ = fair.summarize(records)
        by = {row["mode"]: row for row in rows}
        self.assertEqual(set(by), {"gshare", "exclusive", "hostbound", "gaps", "pairs"})
        self.assertAlmostEqual(by["hostbound"]["ratio"], 40 / 40.5, places=2)
        self.assertTrue(by["hostbound"]["label"].endswith("host-bound jobs' turns shared"))
        self.assertAlmostEqual(by["gshare"]["ratio"], 40 / 39, places=2)
        self.assertAlmostEqual(by["exclusive"]["ratio"], 40 / 41, places=2)
        self.assertAlmostEqual(by["gaps"]["ratio"], 40 / 37.5, places=2)
        self.assertAlmostEqual(by["pairs"]["ratio"], 40 / 38, places=2)
        self.assertTrue(by["exclusive"]["label"].endswith("exclusive turns"))
        self.assertTrue(by["gaps"]["label"].endswith("gappy jobs two to a turn"))
        self.assertTrue(by["pairs"]["label"].endswith(", two to a turn"))
        self.assertFalse(by["gshare"]["label"].endswith("exclusive turns"))

    def test_host_bound_job_beside_training(self):
        # Natively the host-bound job (the last) makes 20 steps/s beside two
        # trainers of 50; under gshare 19 (0.95), the trainers 55 each (1.1).
        records = []
        for mode, train_step, host_step in (("native", 0.020, 0.050), ("gshare", 1 / 55, 1 / 19)):
            jobs = {"job0": train_result(train_step, 10), "job1": train_result(train_step, 10),
                    "job2": train_result(host_step, 10)}
            r = record(jobs, config="host", mode=mode, trial=1)
            r["metrics"] = metrics.train(r)
            records.append(r)
        rows, _ = fair.summarize(records)
        [row] = rows
        self.assertTrue(row["host"])
        self.assertAlmostEqual(row["training_ratio"], 1.1, places=1)
        self.assertAlmostEqual(row["host_ratio"], 0.95, places=1)
        self.assertTrue(row["met"]["training_ratio"])
        self.assertTrue(row["met"]["host_ratio"])


class QuantumSummary(unittest.TestCase):
    def test_rows_and_choice(self):
        records = []
        for trial in (1, 2):
            r = record({"job0": train_result(0.02, 10), "job1": train_result(0.02, 10)},
                       quantum_ms=None, trial=trial)
            r["metrics"] = metrics.train(r)
            records.append(r)
            for q, step in ((5, 0.0205), (50, 0.0199), (200, 0.0198)):
                r = record({"job0": train_result(step, 10), "job1": train_result(step, 10)},
                           quantum_ms=q, trial=trial)
                r["metrics"] = metrics.train(r)
                records.append(r)
        native, rows, choice = quantum.summarize(records, [5, 50, 200])
        self.assertEqual(len(native["trials"]), 2)
        self.assertEqual(choice["best_aggregate_quantum_ms"], 200)
        self.assertEqual(choice["smallest_within_1pct_quantum_ms"], 50)
        self.assertEqual(choice["smallest_within_1pct_and_jain_099_quantum_ms"], 50)
        self.assertGreater(rows[2]["ratio"], 1.0)


class PrioritySummary(unittest.TestCase):
    @staticmethod
    def infer_metrics(p50, p99):
        return {"latency_ms": {"p50": p50, "p99": p99, "max": p99}, "window_s": 20.0,
                "from_due_ms": {"p99": p99}, "late_requests": 0, "requests": 1000}

    def records(self, alone_gshare):
        m = self.infer_metrics
        return [
            {"experiment": "infer-alone", "trial": 1, "ok": True,
             "metrics": {"infer": m(2.0, 3.0), "train_steps_per_s": None}},
            {"experiment": "train-alone", "trial": 1, "ok": True,
             "metrics": {"infer": None, "train_steps_per_s": 100.0}},
            {"experiment": "co-native", "trial": 1, "ok": True,
             "metrics": {"infer": m(4.0, 9.0), "train_steps_per_s": 90.0}},
            {"experiment": "co-priority", "trial": 1, "ok": True,
             "metrics": {"infer": m(2.06, 3.2), "train_steps_per_s": 80.0}},
            {"experiment": "infer-alone-gshare", "trial": 1, "ok": alone_gshare is not None,
             "metrics": None if alone_gshare is None else {"infer": m(*alone_gshare), "train_steps_per_s": None}},
        ]

    def test_ratios(self):
        rows, met = priority.summarize(self.records(None))
        by = {row["experiment"]: row for row in rows}
        self.assertAlmostEqual(by["co-native"]["p99_ratio"], 3.0)
        self.assertAlmostEqual(by["co-priority"]["p99_ratio"], 3.2 / 3.0)
        self.assertAlmostEqual(by["co-priority"]["train_ratio"], 0.8)
        # 50 requests/s of 2 ms: a GPU share of 0.1, so training keeps 0.85 x 0.9.
        self.assertAlmostEqual(by["infer-alone"]["gpu_share"], 0.1)
        self.assertAlmostEqual(by["co-priority"]["train_goal"], 0.765)
        self.assertTrue(met["p50_ratio"])    # 1.03
        self.assertFalse(met["p99_ratio"])   # 1.067
        self.assertTrue(met["train_ratio"])  # 0.8 >= 0.765
        self.assertIsNone(met["alone_p50"])
        self.assertIsNone(by["infer-alone-gshare"]["p99_ms"])
        self.assertTrue(all(v is None for v in priority.summarize([])[1].values()))

    def test_alone_under_gshare(self):
        # +2% of 2 ms is 40 us: +30 us passes; at p99, +2% of 3 ms is 60 us: +70 us fails.
        met = priority.summarize(self.records((2.03, 3.07)))[1]
        self.assertTrue(met["alone_p50"])
        self.assertFalse(met["alone_p99"])


class Handover(unittest.TestCase):
    def test_load_and_analyze(self):
        with tempfile.TemporaryDirectory() as directory:
            path = pathlib.Path(directory) / "probe0.out"
            path.write_text('# handover_probe name=probe0 pid=1 gpu="NVIDIA H100 80GB HBM3" '
                            "launched=3\n# start_ns end_ns (%globaltimer)\n"
                            "1000 2000\n2000 3000\n9000 10000\n")
            loaded = handover.load_intervals(path)
        self.assertEqual(loaded["header"]["gpu"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(loaded["intervals"], [(1000, 2000), (2000, 3000), (9000, 10000)])
        other = [(3050, 4000), (4000, 8000), (10100, 11000)]
        m = handover.analyze([loaded["intervals"], other])
        # span: [3050, 10000]; owners 1 (3050-8000), 0 (9000-10000)
        self.assertEqual(m["handovers"], 1)
        self.assertAlmostEqual(m["gap_us"]["p50"], 1.0)  # 9000 - 8000 ns
        self.assertEqual(m["kernels"], [1, 2])
        self.assertIsNone(handover.analyze([[(0, 1)], []]))


class Mix(unittest.TestCase):
    trace = {"quantum_ms": 50, "jobs": [
        {"name": "long", "arrival_s": 0.0, "iteration_ms": 50, "iterations": 900},
        {"name": "short", "arrival_s": 2.0, "iteration_ms": 40, "iterations": 150,
         "estimate": "seconds"},
        {"name": "none", "arrival_s": 3.0, "iteration_ms": 20, "iterations": 10,
         "estimate": "none"}]}

    def test_numbers_and_estimates(self):
        self.assertEqual(mix.number_text(50.0), "50")
        self.assertEqual(mix.number_text(0.05), "0.05")
        self.assertEqual(mix.number_text(1234567.5), "1234567.5")
        self.assertEqual(mix.number_text(1e-7), "0")
        jobs = self.trace["jobs"]
        self.assertEqual(mix.job_vars("srtf", jobs[0]), {"GSHARE_EXPECTED_ITERS": "900"})
        self.assertEqual(mix.job_vars("srtf", jobs[1]), {"GSHARE_EXPECTED_SECONDS": "6"})
        self.assertIsNone(mix.job_vars("srtf", jobs[2]))
        self.assertIsNone(mix.job_vars("fifo", jobs[0]))
        self.assertAlmostEqual(mix.makespan(self.trace), 45 + 6 + 0.2)

    def test_scaling(self):
        half = mix.scaled(self.trace, 0.5)
        self.assertEqual(half["jobs"][0]["iterations"], 450)
        self.assertEqual(half["jobs"][1]["arrival_s"], 1.0)
        self.assertEqual(half["jobs"][2]["iterations"], 5)
        self.assertEqual(self.trace["jobs"][0]["iterations"], 900)  # not modified
        self.assertNotEqual(mix.trace_hash(half), mix.trace_hash(self.trace))
        self.assertEqual(mix.trace_hash(mix.scaled(self.trace, 1.0)), mix.trace_hash(self.trace))
        self.assertEqual(mix.choose_scale(self.trace, mix.MODES, 15, 0, 1000), 1.0)
        factor = mix.choose_scale(self.trace, mix.MODES, 15, 0, 150)
        self.assertTrue(0.1 <= factor < 1.0)
        self.assertLessEqual(3 * 30 + 3 * mix.SLOWDOWN * mix.makespan(self.trace) * factor, 150)
        self.assertIsNone(mix.choose_scale(self.trace, mix.MODES, 15, 0, 95))

    def test_load_trace(self):
        with tempfile.TemporaryDirectory() as directory:
            path = pathlib.Path(directory) / "t.json"
            path.write_text('{"jobs": [{"arrival_s": 0, "iteration_ms": 10, "iterations": 5}]}')
            self.assertEqual(mix.load_trace(path)["jobs"][0]["name"], "job0")
            path.write_text('{"jobs": [{"arrival_s": 0, "iteration_ms": 10}]}')
            with self.assertRaises(SystemExit):
                mix.load_trace(path)
            path.write_text('{"jobs": []}')
            with self.assertRaises(SystemExit):
                mix.load_trace(path)

    def test_sim_output_shapes(self):
        current = {"policies": {"fifo": {"summary": {"average_jct_s": 55.7}},
                                "srtf": {"summary": {"average_jct_s": 24.2}}},
                   "ratios": {"srtf_to_fifo": 0.435}}
        self.assertEqual(mix.find_average_jct(current, "srtf"), 24.2)
        other = {"results": [{"policy": "x"}, {"fifo": {"mean_jct_s": 10.0}},
                             {"srtf": {"avg_jct": 5.0}}]}
        self.assertEqual(mix.find_average_jct(other, "fifo"), 10.0)
        self.assertEqual(mix.find_average_jct(other, "srtf"), 5.0)
        self.assertIsNone(mix.find_average_jct({"fifo": 3}, "fifo"))

    def test_mode_metrics(self):
        results = [{"jct_s": 10.0, "end_s": 10.0, "late_s": 0.0, "memory_ok": True},
                   {"jct_s": 4.0, "end_s": 6.0, "late_s": 1.0, "memory_ok": False}]
        m = mix.mode_metrics(results)
        self.assertEqual((m["average_jct_s"], m["makespan_s"]), (7.0, 10.0))
        self.assertEqual((m["late_starts"], m["memory_refused"]), (1, 1))
        results.append({"jct_s": None, "end_s": None, "late_s": None, "memory_ok": None})
        self.assertIsNone(mix.mode_metrics(results)["average_jct_s"])


class TakingTurns(unittest.TestCase):
    def test_each_job_works_in_its_own_turns_only(self):
        first, second = Turns(0, 2, 0.5, 0.02), Turns(1, 2, 0.5, 0.02)
        for t in (0.0, 0.25, 0.479, 1.0, 1.3):
            self.assertTrue(first.admits(t), t)
            self.assertFalse(second.admits(t), t)
        for t in (0.5, 0.7, 1.6):
            self.assertFalse(first.admits(t), t)
            self.assertTrue(second.admits(t), t)
        # The guard: nothing starts in a turn's last 20 ms, nor before T0.
        self.assertFalse(first.admits(0.49))
        self.assertFalse(second.admits(0.99))
        self.assertFalse(first.admits(-0.1))

    def test_next_start(self):
        first, second = Turns(0, 2, 0.5, 0.02), Turns(1, 2, 0.5, 0.02)
        self.assertEqual(first.next_start(-1.0), 0.0)
        self.assertEqual(first.next_start(0.2), 0.2)
        self.assertEqual(first.next_start(0.49), 1.0)
        self.assertEqual(second.next_start(0.1), 0.5)
        self.assertEqual(second.next_start(0.99), 1.5)
        self.assertEqual(Turns(2, 3, 1.0, 0.1).next_start(0.0), 2.0)

    def test_parse(self):
        self.assertIsNone(Turns.parse("", 1.0, 0.1))
        self.assertEqual(Turns.parse("1/2", 1.0, 0.1).index, 1)
        for bad in ("2/2", "x", "1", "-1/2", "0/0"):
            with self.assertRaises(ValueError):
                Turns.parse(bad, 1.0, 0.1)
        with self.assertRaises(ValueError):
            Turns(0, 2, 0.5, 0.5)  # a guard as long as the turn


class AloneSummary(unittest.TestCase):
    @staticmethod
    def infer_result(latency_ms, count=1000):
        requests = [[i / 100, i / 100, i / 100 + latency_ms(i) / 1e3] for i in range(count)]
        return {"kind": "infer", "requests": requests, "window_s": 20.0}

    @staticmethod
    def train_result(step_ms, steps=500):
        spans, t = [], 0.0
        for _ in range(steps):
            spans.append([t, t + step_ms / 1e3])
            t += 2 * step_ms / 1e3
        return {"kind": "train", "step_spans": spans, "step_ends": [e for _, e in spans]}

    def records(self, gshare_infer_ms, gshare_step_ms):
        out = []
        for trial in (1, 2, 3):
            # One request in 50 takes 1 ms longer: p99 sits among those.
            infer = {"native": metrics.infer(self.infer_result(lambda i: 2.0 + (i % 50 == 0))),
                     "gshare": metrics.infer(self.infer_result(lambda i: gshare_infer_ms + (i % 50 == 0)))}
            train = {"native": metrics.train_spans(self.train_result(10.0)),
                     "gshare": metrics.train_spans(self.train_result(gshare_step_ms))}
            out.append({"experiment": "infer", "trial": trial, "ok": True, "metrics": infer})
            out.append({"experiment": "train", "trial": trial, "ok": True, "metrics": train})
        return out

    def test_equal_copies_meet_the_goals(self):
        rows, met = alone.summarize(self.records(2.0, 10.0))
        self.assertAlmostEqual(rows["infer"]["p50_ratio"], 1.0)
        self.assertAlmostEqual(rows["train"]["ratio"], 1.0)
        self.assertEqual(met, {"infer_p50": True, "infer_p99": True, "train": True})

    def test_a_slower_gshare_copy_misses(self):
        # +50 us is 2.5% of the 2 ms p50, over both +2% (40 us) and +10
        # us; but 1.7% of the 3 ms p99, within it.
        rows, met = alone.summarize(self.records(2.05, 10.2))
        self.assertAlmostEqual(rows["infer"]["p50_added_us"], 50, places=3)
        self.assertAlmostEqual(rows["infer"]["p99_added_us"], 50, places=3)
        self.assertAlmostEqual(rows["train"]["ratio"], 10.0 / 10.2)
        self.assertEqual(met, {"infer_p50": False, "infer_p99": True, "train": False})

    def test_spans_count_stepping_time_only(self):
        m = metrics.train_spans(self.train_result(10.0, steps=100))
        self.assertAlmostEqual(m["steps_per_s"], 100.0)
        self.assertIsNone(metrics.train_spans({"kind": "train", "step_ends": [1.0]}))

    def test_no_data(self):
        rows, met = alone.summarize([])
        self.assertEqual(met, {"infer_p50": None, "infer_p99": None, "train": None})


if __name__ == "__main__":
    unittest.main()
