"""Turns that jobs take on the GPU, by the clock, from a common T0: job
`index` of `count` works only in turns index, index + count, index + 2 *
count, ... of `turn_s` seconds each, and starts nothing within `guard_s` of
its turn's end, so what it started ends before the next job's turn begins.

Two copies of one job, one native and one under gshare, taking turns
this way each run alone on the GPU, yet under the same slow drifts of the
machine (clocks, temperature, other tenants of the host): compared turn by
turn, the drifts cancel, where runs one after the other measure them too.
"""

import math


class Turns:
    def __init__(self, index, count, turn_s, guard_s):
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"turn {index} of {count}")
        if turn_s <= 0 or guard_s < 0 or guard_s >= turn_s:
            raise ValueError(f"turns of {turn_s} s with a guard of {guard_s} s")
        self.index, self.count, self.turn_s, self.guard_s = index, count, turn_s, guard_s

    @classmethod
    def parse(cls, text, turn_s, guard_s):
        """From 'I/N' (turn I of every N); None for an empty text."""
        if not text:
            return None
        index, sep, count = text.partition("/")
        try:
            if not sep:
                raise ValueError
            return cls(int(index), int(count), turn_s, guard_s)
        except ValueError as error:
            raise ValueError(f"--turn {text!r}: expected I/N with 0 <= I < N ({error})") from None

    def turn_at(self, t):
        """The number of the turn (anyone's) at `t` seconds from T0."""
        return math.floor(t / self.turn_s)

    def admits(self, t):
        """Whether work may start at `t` seconds from T0: in one of this
        job's turns, and before the guard at its end."""
        if t < 0:
            return False
        turn = self.turn_at(t)
        return turn % self.count == self.index and t < (turn + 1) * self.turn_s - self.guard_s

    def next_start(self, t):
        """When this job's next turn starts, at or after `t` (seconds from T0)."""
        t = max(t, 0.0)
        if self.admits(t):
            return t
        turn = self.turn_at(t)
        turn += 1
        while turn % self.count != self.index:
            turn += 1
        return turn * self.turn_s

    def describe(self):
        return {"index": self.index, "count": self.count, "turn_s": self.turn_s, "guard_s": self.guard_s}
