"""Self-tests of bench/benchlib/stats.py; no GPU, no PyTorch:
    python3 bench/benchlib/test_stats.py"""

import math
import os
import statistics
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/

from benchlib import stats  # noqa: E402


class Medians(unittest.TestCase):
    def test_odd_count(self):
        self.assertEqual(stats.median([3, 1, 2]), 2)
        self.assertEqual(stats.median([5]), 5)

    def test_even_count_averages_the_middle_two(self):
        self.assertEqual(stats.median([4, 1, 3, 2]), 2.5)
        self.assertEqual(stats.median([1, 2]), 1.5)
        # as statistics.median, to the last bit
        xs = [0.1, 0.7, 0.2, 0.3000001]
        self.assertEqual(stats.median(xs), statistics.median(xs))

    def test_empty_and_missing(self):
        self.assertIsNone(stats.median([]))
        self.assertIsNone(stats.median([None, None]))
        self.assertEqual(stats.median([None, 4, 2]), 3)
        self.assertEqual(stats.median(x for x in (2, 8, 5)), 5)  # any iterable

    def test_spread(self):
        self.assertEqual(stats.spread([3, 1, 2]), (1, 3))
        self.assertEqual(stats.spread([1, None, 7, 4]), (1, 7))
        self.assertEqual(stats.spread([2]), (2, 2))
        self.assertEqual(stats.spread([]), (None, None))


class Percentiles(unittest.TestCase):
    def test_linear_interpolation_like_numpy(self):
        xs = [1, 2, 3, 4]
        self.assertEqual(stats.percentile(xs, 0), 1)
        self.assertEqual(stats.percentile(xs, 100), 4)
        self.assertAlmostEqual(stats.percentile(xs, 50), 2.5)
        # numpy.percentile([1,2,3,4], 99) == 3.97
        self.assertAlmostEqual(stats.percentile(xs, 99), 3.97)
        self.assertAlmostEqual(stats.percentile(list(range(101)), 99), 99)
        self.assertAlmostEqual(stats.percentile([5, 1, 3], 50), 3)

    def test_edge_cases(self):
        self.assertIsNone(stats.percentile([], 50))
        self.assertIsNone(stats.percentile([None], 50))
        self.assertEqual(stats.percentile([None, 1, 3], 50), 2)
        self.assertEqual(stats.percentile([7], 99), 7)
        with self.assertRaises(ValueError):
            stats.percentile([1], 101)
        d = stats.distribution([0.001, 0.002], scale=1e3)
        self.assertEqual(d["n"], 2)
        self.assertAlmostEqual(d["p50"], 1.5)
        self.assertIsNone(stats.distribution([])["p99"])


class Jain(unittest.TestCase):
    def test_values(self):
        self.assertAlmostEqual(stats.jain([1, 1, 1, 1]), 1.0)
        self.assertAlmostEqual(stats.jain([1, 0, 0, 0]), 0.25)
        self.assertAlmostEqual(stats.jain([3, 1]), 16 / 20)
        # weighted 3:1 jobs that got 70/30: normalised by weight
        self.assertAlmostEqual(stats.jain([0.7 / 3, 0.3 / 1]), 0.9846, places=4)
        self.assertIsNone(stats.jain([]))
        self.assertIsNone(stats.jain([0, 0]))

    def test_shares(self):
        self.assertEqual(stats.shares([3, 1]), [0.75, 0.25])
        self.assertEqual(stats.shares([0, 0]), [None, None])


class Windows(unittest.TestCase):
    def test_count_in_window(self):
        times = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
        self.assertEqual(stats.count_in_window(times, 0.0, 2.0), 4)  # 0.5 1.0 1.5 2.0
        self.assertEqual(stats.count_in_window(times, 1.0, 10), 3)

    def test_per_second_counts(self):
        times = [0.1, 0.2, 1.0, 1.01, 1.99, 2.5, 3.2]
        self.assertEqual(stats.per_second_counts(times, 0.0, 3.0), [3, 2, 1])
        self.assertEqual(stats.per_second_counts(times, 0.0, 2.9), [3, 2])
        self.assertEqual(stats.per_second_counts([], 0.0, 0.5), [])
        self.assertEqual(stats.per_second_counts([10.5], 10.0, 12.0), [1, 0])

    def test_intervals_between(self):
        gaps = stats.intervals_between([0.5, 0.1, 0.3, 2.0], 0.0, 1.0)
        self.assertEqual(len(gaps), 3)
        for got, want in zip(gaps, [0.1, 0.2, 0.2]):
            self.assertAlmostEqual(got, want)
        # events before the start move the reference, not the count
        self.assertEqual(stats.intervals_between([-0.5, 0.25], 0.0, 1.0), [0.25])

    def test_runs_split_at_gaps_far_over_the_typical(self):
        # three turns of steps 2 ms apart, 0.3 s between turns
        times = [turn * 0.3 + k * 0.002 for turn in range(3) for k in range(1, 5)]
        found = stats.runs(times, 0.0, 1.0)
        self.assertEqual([len(r) for r in found], [4, 4, 4])
        self.assertEqual(found[1][0], times[4])
        # steady steps are one run; a gap under 10 ms never splits
        self.assertEqual(len(stats.runs([k * 0.001 for k in range(1, 50)] + [0.058], 0.0, 1.0)), 1)
        self.assertEqual(stats.runs([], 0.0, 1.0), [])
        self.assertEqual(stats.runs([2.0], 0.0, 1.0), [])


class Intervals(unittest.TestCase):
    def test_merge(self):
        self.assertEqual(stats.merge_intervals([(5, 6), (1, 3), (2, 4), (4, 4.5)]),
                         [(1, 4.5), (5, 6)])
        self.assertEqual(stats.merge_intervals([]), [])
        self.assertEqual(stats.merge_intervals([(1, 10), (2, 3)]), [(1, 10)])
        with self.assertRaises(ValueError):
            stats.merge_intervals([(3, 1)])

    def test_covered_length(self):
        self.assertEqual(stats.covered_length([(0, 2), (1, 3), (5, 6)]), 4)
        self.assertEqual(stats.covered_length([(0, 2), (1, 3), (5, 6)], 1, 5.5), 2.5)

    def test_common_span(self):
        a = [(0, 1), (2, 10)]
        b = [(3, 4), (5, 8)]
        self.assertEqual(stats.common_span([a, b]), (3, 8))
        self.assertIsNone(stats.common_span([a, []]))
        self.assertIsNone(stats.common_span([[(0, 1)], [(2, 3)]]))

    def test_handover_gaps_alternating(self):
        # process 0 runs 0-10, 10-20; hands over; process 1 runs 25-35, 35-45;
        # process 0 again at 44 (overlapping the tail by 1).
        a = [(0, 10), (10, 20), (44, 50)]
        b = [(25, 35), (35, 45)]
        events = stats.tagged_events([a, b])
        gaps = stats.handover_gaps(events)
        self.assertEqual([(g, f, t) for g, f, t, _ in gaps], [(5, 0, 1), (-1, 1, 0)])
        runs = stats.owner_runs(events)
        self.assertEqual(runs, [(0, 0, 20, 2), (1, 25, 45, 2), (0, 44, 50, 1)])

    def test_handover_gap_uses_latest_end_of_previous_owner(self):
        # owner 0 has a long kernel 0-30 and a short one 5-6 (two streams);
        # owner 1 starts at 31: the gap is from 30, not from 6.
        events = stats.tagged_events([[(0, 30), (5, 6)], [(31, 40)]])
        gaps = stats.handover_gaps(events)
        self.assertEqual([g for g, *_ in gaps], [1])

    def test_span_filter(self):
        events = stats.tagged_events([[(0, 1), (5, 6)], [(2, 3)]], span=(1.5, 5.5))
        self.assertEqual(events, [(2, 3, 1)])

    def test_three_owners(self):
        events = stats.tagged_events([[(0, 1)], [(2, 3)], [(3.5, 4)]])
        self.assertEqual([g for g, *_ in stats.handover_gaps(events)], [1, 0.5])


class Misc(unittest.TestCase):
    def test_fifo_makespan(self):
        self.assertEqual(stats.fifo_makespan([(0, 10), (2, 5), (30, 1)]), 31)
        self.assertEqual(stats.fifo_makespan([]), 0)

    def test_ratio(self):
        self.assertIsNone(stats.ratio(1, 0))
        self.assertIsNone(stats.ratio(None, 2))
        self.assertEqual(stats.ratio(1, 2), 0.5)
        self.assertTrue(math.isclose(stats.mean([1, 2, 3]), 2))


if __name__ == "__main__":
    unittest.main()
