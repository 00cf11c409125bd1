"""The statistics of every benchmark harness (bench/summarize.py,
bench/sched/, bench/memory/): median, percentiles, spread, Jain's fairness
index, counting steps in a window, interval merging and handover gaps.

No third-party imports (no numpy), so the orchestrators run on any python3
and `python3 bench/benchlib/test_stats.py` checks these without a GPU.
None values (a trial that measured nothing) are left out of median,
percentile and spread.
"""

import math


def present(values):
    """`values` without the Nones, as a list."""
    return [v for v in values if v is not None]


def percentile(values, q):
    """The q-th percentile (0..100) of `values`, interpolating linearly
    between closest ranks (numpy's default "linear" method). None if empty."""
    xs = sorted(present(values))
    if not xs:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    if len(xs) == 1:
        return xs[0]
    position = (len(xs) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(xs) - 1)
    fraction = position - low
    return xs[low] + (xs[high] - xs[low]) * fraction


def median(values):
    """The middle value; for an even count, the mean of the two middle ones
    (as statistics.median, to the last bit). None if empty."""
    xs = sorted(present(values))
    if not xs:
        return None
    middle = len(xs) // 2
    return xs[middle] if len(xs) % 2 else (xs[middle - 1] + xs[middle]) / 2


def spread(values):
    """(min, max) of `values`, or (None, None) if empty."""
    xs = present(values)
    return (min(xs), max(xs)) if xs else (None, None)


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


def distribution(values, scale=1.0):
    """Summary of a sample: n, mean, p50, p90, p99, p99.9, min, max; each
    value multiplied by `scale` (e.g. 1e3 for seconds to milliseconds)."""
    xs = [v * scale for v in values]
    if not xs:
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None,
                "p999": None, "min": None, "max": None}
    return {"n": len(xs), "mean": mean(xs), "p50": percentile(xs, 50),
            "p90": percentile(xs, 90), "p99": percentile(xs, 99),
            "p999": percentile(xs, 99.9), "min": min(xs), "max": max(xs)}


def jain(values):
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all equal,
    1/n when one gets everything. None for no values or all zero."""
    xs = list(values)
    if not xs:
        return None
    if any(x < 0 for x in xs):
        raise ValueError("Jain's index needs non-negative values")
    squares = sum(x * x for x in xs)
    if squares == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * squares)


def shares(values):
    """Each value's fraction of the total (None for each if the total is 0)."""
    xs = list(values)
    total = sum(xs)
    if total <= 0:
        return [None] * len(xs)
    return [x / total for x in xs]


def count_in_window(times, start, end):
    """How many event times t satisfy start < t <= end (an event is a step's
    end: a step ending exactly at `start` belongs to the window before)."""
    return sum(1 for t in times if start < t <= end)


def per_second_counts(times, start, end):
    """Events per whole second of [start, end): bin k is (start+k, start+k+1].
    A trailing partial second is dropped."""
    seconds = int(math.floor(end - start + 1e-9))
    counts = [0] * max(seconds, 0)
    for t in times:
        if t <= start:
            continue
        k = int(math.ceil(t - start)) - 1  # (start+k, start+k+1] -> k
        if 0 <= k < len(counts):
            counts[k] += 1
    return counts


def intervals_between(times, start, end):
    """Gaps between consecutive events inside (start, end], the first one
    measured from `start`: for step end times, each step's latency as the
    host saw it (waiting for the GPU included)."""
    previous = start
    gaps = []
    for t in sorted(times):
        if t <= start:
            previous = max(previous, t)
            continue
        if t > end:
            break
        gaps.append(t - previous)
        previous = t
    return gaps


def runs(times, start, end):
    """Events inside (start, end] split where the gap to the next is over
    five times the median gap and over 10 ms: for the step ends of a job
    under time-slicing, its turns. Each run is a sorted list of times."""
    inside = sorted(t for t in times if start < t <= end)
    if not inside:
        return []
    gaps = [b - a for a, b in zip(inside, inside[1:])]
    typical = median(gaps) or 0.0
    gap = max(5 * typical, 0.010)
    found = [[inside[0]]]
    for previous, t in zip(inside, inside[1:]):
        if t - previous > gap:
            found.append([t])
        else:
            found[-1].append(t)
    return found


def merge_intervals(intervals):
    """Union of [start, end] intervals as a sorted list of disjoint ones
    (touching intervals are merged)."""
    merged = []
    for start, end in sorted(intervals):
        if end < start:
            raise ValueError(f"interval ends before it starts: {(start, end)}")
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1][1] = end
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def covered_length(intervals, start=None, end=None):
    """Total length of the union of `intervals`, clipped to [start, end]
    when given."""
    total = 0
    for s, e in merge_intervals(intervals):
        if start is not None:
            s = max(s, start)
        if end is not None:
            e = min(e, end)
        if e > s:
            total += e - s
    return total


def common_span(streams):
    """[latest first start, earliest last end] over several lists of
    intervals: the time in which every stream was running. None if a stream
    is empty or the span is empty."""
    if not streams or any(not s for s in streams):
        return None
    begin = max(min(s for s, _ in stream) for stream in streams)
    finish = min(max(e for _, e in stream) for stream in streams)
    if finish <= begin:
        return None
    return begin, finish


def tagged_events(streams, span=None):
    """All intervals of all streams as (start, end, stream index), sorted by
    start (then end, then stream); only those wholly inside `span` if given."""
    events = []
    for index, stream in enumerate(streams):
        for s, e in stream:
            if span is None or (s >= span[0] and e <= span[1]):
                events.append((s, e, index))
    events.sort()
    return events


def handover_gaps(events):
    """Walks events (start, end, owner) sorted by start. Wherever the owner
    changes, records next.start - (the previous owner's latest end so far):
    the idle time of the handover, negative where the new owner's first
    kernel started before the old owner's last one ended (overlap).
    Returns a list of (gap, from_owner, to_owner, at_start)."""
    last_end = {}
    gaps = []
    owner = None
    for start, end, who in events:
        if owner is not None and who != owner:
            gaps.append((start - last_end[owner], owner, who, start))
        last_end[who] = max(last_end.get(who, end), end)
        owner = who
    return gaps


def owner_runs(events):
    """Runs of consecutive events of the same owner, as (owner, first start,
    last end, count): each run is one turn (slice) on the GPU."""
    runs = []
    for start, end, who in events:
        if runs and runs[-1][0] == who:
            o, s, e, n = runs[-1]
            runs[-1] = (o, s, max(e, end), n + 1)
        else:
            runs.append((who, start, end, 1))
    return runs


def fifo_makespan(jobs):
    """Makespan of running jobs one at a time in arrival order, no gaps:
    `jobs` is a list of (arrival_s, work_s). An estimate of a work-conserving
    policy's makespan, used to size the mix experiment."""
    t = 0.0
    for arrival, work in sorted(jobs):
        t = max(t, arrival) + work
    return t


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
