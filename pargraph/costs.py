"""Measured costs: what the nodes of a run structure really take, and when to partition again.

The partitioner groups nodes by what they are estimated to take (:func:`partition.
estimated_seconds`: the elements an op touches, or its declared ``cost``). An op whose time
the estimate misses (a solver, a sleep, a simulator, a big FFT on small arrays) can make a
run of independent expensive branches look like one cheap task. So the first runs of each
structure time their nodes (the same per-node times a trace records), and the structure is
partitioned again with the measured times when they disagree with the planned ones by more
than :data:`OFF_BY`: in total, or on nodes that took most (:data:`SHARE`) of the run. After
that one run in :data:`SAMPLE_EVERY` is timed, and a drift as large partitions again. Timing
costs two clock reads per node and run: for a few runs, then one in fifty.

Per-node estimates of ordinary ops are rough (elementwise ops on small arrays over, matrix
products under: ``docs/design.md`` has the figures), but they are right in total and in
what is heavy, which is what the partition needs: such a structure is left as it is.

Cluster runs are not timed (each worker would be asked for its times).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from pargraph.context import context

#: Runs of a new structure that are timed before deciding, and then one run in how many.
YOUNG_RUNS, SAMPLE_EVERY = 3, 50
#: By how much measured times must differ from the planned ones to partition again: the
#: run's total, or the nodes that took longer than planned, if they took :data:`SHARE` of it.
OFF_BY, SHARE = 2.0, 0.5
#: Runs shorter than this (measured and planned) are left as they are: their partition
#: hardly matters, and their times are mostly noise.
MIN_SECONDS = 1e-3


class StructureCosts:
    """The per-node times of one structure's runs: the estimates, the times the current plan
    was made with (``planned``), and the measured ones."""

    def __init__(self, estimated: Sequence[float]) -> None:
        self.estimated = list(estimated)
        self.planned = self.estimated
        self.sums = [0.0] * len(self.estimated)
        self.timed = 0
        self.runs = 0

    def wants_timing(self) -> bool:
        """Whether this run of the structure is timed (counts the run)."""
        self.runs += 1
        return self.timed < YOUNG_RUNS or self.runs % SAMPLE_EVERY == 0

    def add(self, seconds: Sequence[float]) -> list[float] | None:
        """A timed run's per-node seconds; returns the times to partition with again, or None
        (too early, or the plan's times are close enough)."""
        if self.timed < YOUNG_RUNS:
            self.timed += 1
            self.sums = [a + b for a, b in zip(self.sums, seconds)]
            if self.timed < YOUNG_RUNS:
                return None
            measured = [total / YOUNG_RUNS for total in self.sums]
        else:
            measured = list(seconds)
        self.measured = measured
        if not disagree(self.planned, measured):
            return None
        self.planned = measured
        return measured


def disagree(planned: Sequence[float], measured: Sequence[float]) -> bool:
    """Whether the measured run is more than :data:`OFF_BY` off the planned one in total, or
    nodes that took more than :data:`OFF_BY` times their planned time took :data:`SHARE` of
    it."""
    total, expected = sum(measured), sum(planned)
    if total <= 0 or expected <= 0 or max(total, expected) < MIN_SECONDS:
        return False
    if total > OFF_BY * expected or total * OFF_BY < expected:
        return True
    under = sum(m for p, m in zip(planned, measured) if m > OFF_BY * p)
    return under >= SHARE * total


class CostDecisions:
    """The latest decisions made from measured times, with when they were made (a trace
    reports those made while it listened)."""

    def __init__(self) -> None:
        self.entries: deque = deque(maxlen=100)

    def add(self, text: str) -> None:
        self.entries.append((time.time(), text))

    def between(self, start: float, stop: float) -> list[str]:
        return [text for when, text in self.entries if start <= when <= stop]


decisions = context.register("cost_decisions", CostDecisions())


def describe(costs: StructureCosts, before: int, after: int) -> str:
    """One line for the summary: estimate, measurement and the new partition."""
    estimated, measured = sum(costs.estimated), sum(costs.measured)
    under = sum(1 for p, m in zip(costs.estimated, costs.measured) if m > OFF_BY * p)
    return (f"{len(costs.estimated)} nodes estimated at {estimated * 1e3:.2f} ms took "
            f"{measured * 1e3:.2f} ms ({under} took more than {OFF_BY:g}x their estimate): "
            f"partitioned again with the measured times, {before} -> {after} tasks")
