"""The caller's time outside pargraph's runs, by thread count: what a forecast takes as traced.

    python -m benchmarks.outside            # writes benchmarks/OUTSIDE.md

A forecast charges every configuration the time its one-thread trace spent outside the runs
(recording ops, planning, reading values back). This measures that time in untraced steps of
each sleeping graph of ``benchmarks.scaling`` on one and on sixteen threads, the counts taking
turns in rounds, beside the one-thread traces' figure the forecast reads; and how long one
recording of a graph takes right after another and after the process has been away from it
(spinning or sleeping) for a while, on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator

import pargraph
from benchmarks import scaling
from benchmarks.forecast import _on_threads, sleeping_workloads
from pargraph.engine import execution
from pargraph.trace import CollectorTime

HERE = os.path.dirname(os.path.abspath(__file__))
#: The thread counts compared, and the rounds and steps per round each takes in turn.
THREADS, ROUNDS, STEPS = (1, 16), 6, 8
#: Milliseconds the process spins before one recording, and recordings timed per stretch.
AWAY_MS, RECORDINGS = (0, 2, 10, 20, 50, 150), 20


class RunClock:
    """An observer of pargraph's runs (as a trace is one) that adds up their seconds, and
    the seconds of the garbage collector's passes that begin between them.

    Examples
    --------
    >>> clock = RunClock()
    >>> with clock.observing():
    ...     _ = (pargraph.ones(3) * 2).sum().item()
    >>> clock.inside > 0
    True
    """

    def __init__(self) -> None:
        self.inside = 0.0
        self._collector = CollectorTime()

    @property
    def collecting(self) -> float:
        return self._collector.seconds

    @contextlib.contextmanager
    def run(self, *args: object, **kwargs: object) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with self._collector.inside_run():
                yield
        finally:
            self.inside += time.perf_counter() - start

    def read(self, node: object) -> None:
        """A value read back: nothing to count."""

    @contextlib.contextmanager
    def observing(self) -> Iterator[RunClock]:
        execution.local.observers.append(self)
        gc.callbacks.append(self._collector)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._collector)
            execution.local.observers.remove(self)


def outside_seconds(step: Callable[[], None]) -> float:
    """The seconds one call of ``step`` spends outside pargraph's runs and the collector's
    passes (as :func:`pargraph.forecast` counts a trace's)."""
    clock = RunClock()
    with clock.observing():
        start = time.perf_counter()
        step()
        took = time.perf_counter() - start
    return took - clock.inside - clock.collecting


def measure_outside(make: Callable[[], Callable[[], None]]) -> dict:
    """The median seconds outside the runs per thread count of :data:`THREADS`, in rounds,
    untraced; and the one-thread traces' (one after each round), as the forecast reads them."""
    steps = {n: _on_threads(n, make()) for n in THREADS}
    for step in steps.values():
        scaling.median_step(step, 1, 20, scaling.WARM_SECONDS)
    outside: dict[int, list[float]] = {n: [] for n in THREADS}
    traced = []
    for _ in range(ROUNDS):
        for n in THREADS:
            steps[n]()
            steps[n]()
            outside[n] += [outside_seconds(steps[n]) for _ in range(STEPS)]
        steps[1]()
        with pargraph.trace() as tr:
            steps[1]()
        fc = pargraph.forecast(tr, threads=(1,), measure_gil=False)
        traced.append(fc.rows()[0]["outside"])
    return {"untraced": {n: statistics.median(v) for n, v in outside.items()},
            "traced": statistics.median(traced)}


def recording_after_away() -> dict[str, float]:
    """The median seconds of one recording (forward and backward, nothing run) of the towers
    graph, right after the last (0 ms) and after the process spun for :data:`AWAY_MS`, or slept
    150 ms; the stretches taking turns."""
    model = scaling.GRAPHS["towers (8 x 3 ops of 5 ms)"]()
    x = pargraph.ones(4, requires_grad=True)

    def record() -> None:
        model(x).backward()
        x.grad = None

    def spin(ms: float) -> None:
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end:
            pass

    befores = {f"spun {ms} ms": (lambda ms=ms: spin(ms)) for ms in AWAY_MS}
    befores["slept 150 ms"] = lambda: time.sleep(0.15)
    for _ in range(RECORDINGS):
        record()
    times: dict[str, list[float]] = {name: [] for name in befores}
    for _ in range(RECORDINGS):
        for name, before in befores.items():
            before()
            start = time.perf_counter()
            record()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) for name, v in times.items()}


def report(outside: dict[str, dict], away: dict[str, float]) -> str:
    ms = 1e3
    lines = ["# Time outside the runs, by thread count", "",
             "Generated by `python -m benchmarks.outside` on this machine "
             f"({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores). Medians of "
             f"{ROUNDS} rounds of {STEPS} untraced steps per thread count, the counts taking "
             "turns; the forecast's figure is the median of one-thread traces, one per round.",
             "", "| graph | 1 thread (ms) | 16 threads (ms) | 16 over 1 | forecast takes (ms) |",
             "|---|---:|---:|---:|---:|"]
    for name, row in outside.items():
        one, many = row["untraced"][1], row["untraced"][16]
        lines.append(f"| {name} | {one * ms:.2f} | {many * ms:.2f} | {many / one:.2f} | "
                     f"{row['traced'] * ms:.2f} |")
    lines += ["", "One recording of the towers graph (forward and backward, nothing run), after "
              "the process was away from it:", "", "| before it | recording (ms) |", "|---|---:|"]
    lines += [f"| {name} | {seconds * ms:.3f} |" for name, seconds in away.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="do not write OUTSIDE.md")
    args = parser.parse_args(argv)
    outside = {}
    for name, make in sleeping_workloads().items():
        outside[name] = measure_outside(make)
        print(name, {k: v for k, v in outside[name].items()}, flush=True)
    text = report(outside, recording_after_away())
    print(text)
    if not args.no_write:
        with open(os.path.join(HERE, "OUTSIDE.md"), "w") as file:
            file.write(text)


if __name__ == "__main__":
    main()
