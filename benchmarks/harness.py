"""Timing helpers shared by the workloads: repeated runs, medians with min-max, BLAS threads."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from threadpoolctl import threadpool_limits

SETTLE_SECONDS = 0.2


@dataclass
class Timing:
    """Seconds per call over repeated runs (``round_medians``: the median of each round, where
    runs came in interleaved rounds)."""

    samples: list[float]
    round_medians: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def ms(self) -> str:
        return (f"{self.median * 1e3:.2f} ms ({min(self.samples) * 1e3:.2f}-"
                f"{max(self.samples) * 1e3:.2f})")

    def us(self, per: int = 1) -> str:
        return (f"{self.median / per * 1e6:.2f} us ({min(self.samples) / per * 1e6:.2f}-"
                f"{max(self.samples) / per * 1e6:.2f})")


def measure(fn: Callable[[], object], repeats: int, warmup: int = 2,
            blas_threads: int | None = None) -> Timing:
    """Call ``fn`` ``warmup`` times, then time ``repeats`` calls (garbage collected between)."""
    with threadpool_limits(blas_threads, "blas") if blas_threads else _nothing():
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeats):
            gc.collect()
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return Timing(samples)


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 2,
                blas: dict[str, int | None] | None = None) -> dict[str, Timing]:
    """Time several variants round-robin, so that machine noise hits them all alike.

    A pause before each timed call lets the previous variant's spinning threads go idle."""
    blas = blas or {}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for name, fn in fns.items():
        with _limits(blas.get(name)):
            for _ in range(warmup):
                fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            with _limits(blas.get(name)):
                gc.collect()
                # Let the previous variant's idle threads (OpenMP and BLAS pools spin-wait
                # after work) go to sleep, so that they do not steal this variant's cores.
                time.sleep(SETTLE_SECONDS)
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    return {name: Timing(values) for name, values in samples.items()}


def in_rounds(fns: dict[str, Callable[[], object]], rounds: int, steps: int,
              warmup: int = 2, seconds: float = 0.0,
              after_round: Callable[[], object] | None = None) -> dict[str, Timing]:
    """Steady-state loops: each round runs every variant ``warmup`` times, then times
    ``steps`` consecutive calls (more, until ``seconds`` have passed), with no pause between
    them (what a training loop does: work a step leaves running, such as copies to another
    worker, slows the next one). Rounds interleave the variants, so that machine noise hits
    them all alike; ``after_round`` is called after each round, untimed."""
    timings = {name: Timing([]) for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(warmup):
                fn()
            times: list[float] = []
            while len(times) < steps or sum(times) < seconds:
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            timings[name].samples += times
            timings[name].round_medians.append(statistics.median(times))
        if after_round is not None:
            after_round()
    return timings


def per_round(numerator: list[float], denominator: list[float]) -> str:
    """The spread of a ratio taken round by round (rounds run close together in time, so the
    machine's state changes less within one than across the run): ``"per round 1.31-1.80x"``,
    or ``""`` with fewer than two rounds."""
    ratios = [a / b for a, b in zip(numerator, denominator) if b]
    if len(ratios) < 2:
        return ""
    return f"per round {min(ratios):.2f}-{max(ratios):.2f}x"


def in_blocks(ways: dict[str, tuple[Callable[[], None], Callable[[], object]]], blocks: int,
              steps: int) -> dict[str, list[float]]:
    """Seconds per step of each way, in ``blocks`` alternating blocks of ``steps`` timed
    steps: a way is ``(switch, step)``, ``switch()`` called before each of its blocks. The two
    steps after a switch are not timed (they pay for it)."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(blocks):
        for name, (switch, step) in ways.items():
            switch()
            step()
            step()
            for _ in range(steps):
                start = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - start)
    return times


def _limits(threads: int | None):
    return threadpool_limits(threads, "blas") if threads else _nothing()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def torch_or_none():
    """PyTorch if installed (optional: ``pip install torch==2.13.0``)."""
    try:
        import torch
    except ImportError:
        return None
    return torch
