"""Placement: which worker process of a cluster runs each task of a run.

Why
    dask's scheduler places a task where most of its input bytes already are. A training step
    reads every parameter, and the parameters all start on the worker that ran the first
    step's updates, so the scheduler kept the whole step there: with two workers one computed
    and the other waited. pargraph sees the whole step before it runs, with estimated costs
    (each primitive's ``cost``) and sizes (shapes), so it places the work itself and tells
    dask through task annotations (``workers=`` with ``allow_other_workers=True``, one
    HighLevelGraph layer per worker: loose, so a worker that left blocks nothing).

What goes where
    The units are the partitioner's linear clusters (a tower's forward chain, its backward
    chain, a weight gradient with its update), before they are coarsened. Units that read one
    parameter are one *component* (union-find), and so is a unit whose neighbours all belong
    to one component (a ReLU's backward, a weight gradient). Components go, heaviest first, to
    the worker with the least work per thread (LPT, Graham 1969); one heavier than half a
    worker's share of the step whose units could run side by side (branches that all read
    one input) would leave the other workers idle, and its units are placed one by one as
    the rest is. Otherwise a parameter, its
    gradient, its update and next step's readers stay on one worker and parameters never
    travel; in a DataParallel step of a wide model each worker owns whole towers, for every
    shard. (Moving components afterwards where a HEFT simulation of the step ended sooner was
    tried: no measurable gain, and slow plans for many towers; dropped.) The
    rest (a batch split, the loss, what joins components) is placed by HEFT
    (Topcuoglu, Hariri & Wu, "Performance-effective and low-complexity task scheduling for
    heterogeneous computing", IEEE TPDS 2002) with its insertion policy: in decreasing upward
    rank (work plus the longest path of work and transfers after a unit), each unit goes to
    the worker thread where it would finish first, counting a transfer for every input that
    another worker computed (once per worker: it keeps what it fetched). The partitioner then
    coarsens each worker's units separately.

Cost
    A few passes over the units, on a plan-cache miss only (the plan is cached by structure
    and by the workers' addresses). What it buys on this 2-core machine: the wide
    DataParallel step on 2 worker processes ~15-25% faster than dask's own placement, with
    the partitioner's fan-out rule; still slower than 1 worker, which shares the cores with
    nobody (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Hashable, Sequence

from pargraph.graph import Node

#: Seconds per byte moved between two workers, and per transfer, in the units of the
#: primitives' cost estimates (which assume a quarter of one core's speed), scheduler round
#: trip included.
SECONDS_PER_BYTE = 2e-8
TRANSFER_LATENCY = 4e-3


def transfer_seconds(node: Node) -> float:
    """An estimate of the time to move ``node``'s value to another worker."""
    return TRANSFER_LATENCY + math.prod(node.shape) * node.dtype.itemsize * SECONDS_PER_BYTE


def place(work: Sequence[float], reads: Sequence[Sequence[tuple[int, float]]],
          owns: Sequence[Sequence[Hashable]], threads: Sequence[int]) -> list[int]:
    """The worker (an index into ``threads``, the thread count of each worker) of each unit of
    work, given in a topological order: unit ``u`` takes ``work[u]`` seconds, reads the results
    of units ``reads[u]`` as ``(unit, seconds to move them)`` and the parameters ``owns[u]``
    (any hashable names): units that share a parameter share a worker.

    Examples
    --------
    >>> place([1.0, 1.0], [[], []], [[], []], threads=[1, 1])  # independent: side by side
    [0, 1]
    >>> place([1.0, 1.0], [[], [(0, 5.0)]], [[], []], threads=[1, 1])  # a chain stays together
    [0, 0]
    >>> owners = [["w"], ["w"], ["v"], ["v"], ["u"], ["u"], ["t"], ["t"]]
    >>> place([1.0] * 8, [[]] * 8, owners, threads=[1, 1])  # towers, each its parameter's
    [0, 0, 1, 1, 0, 0, 1, 1]
    >>> place([1.0] * 4, [[]] * 4, [["x"]] * 4, threads=[1, 1])  # branches of one input
    [0, 1, 0, 1]
    """
    # LPT (Graham 1969): heaviest component first, to the worker with the least work per thread.
    load = [0.0] * len(threads)
    pinned: dict[int, int] = {}
    # A component heavier than half a worker's share of the step whose units could run side
    # by side (branches that all read one input) would leave the other workers idle: its
    # units are placed one by one instead, and its parameters travel.
    share = sum(work) * max(threads) / max(sum(threads), 1)
    for units in _components(work, reads, owns):
        total = sum(work[u] for u in units)
        if len(threads) > 1 and total > share / 2 and total >= 2 * _longest_chain(
                units, work, reads):
            continue
        worker = min(range(len(threads)), key=lambda w: load[w] / max(threads[w], 1))
        load[worker] += sum(work[u] for u in units)
        pinned.update((u, worker) for u in units)
    rank = _upward_ranks(work, reads)
    order = sorted(range(len(work)), key=rank.__getitem__, reverse=True)
    return _heft(order, work, reads, threads, pinned)


def _heft(order: list[int], work: Sequence[float], reads: Sequence[Sequence[tuple[int, float]]],
          threads: Sequence[int], pinned: dict[int, int]) -> list[int]:
    """HEFT with insertion over ``order`` (decreasing upward rank): each unit's worker, the
    one where it would finish first; ``pinned`` units only on their worker."""
    lanes = [w for w, count in enumerate(threads) for _ in range(max(count, 1))]
    busy: list[list[tuple[float, float]]] = [[] for _ in lanes]  # sorted (start, end)
    finish = [0.0] * len(work)
    where = [0] * len(work)
    copied: dict[tuple[int, int], float] = {}  # (unit, worker): when its results got there
    for u in order:
        best = (math.inf, 0.0, 0)
        for lane, worker in enumerate(lanes):
            if pinned.get(u, worker) != worker:
                continue
            ready, moved = 0.0, 0.0
            for producer, seconds in reads[u]:
                ready = max(ready, copied.get((producer, worker), finish[producer]))
                if where[producer] != worker and (producer, worker) not in copied:
                    moved += seconds  # the receiving worker spends it, as the network does
            start = _earliest_gap(busy[lane], ready, work[u] + moved)
            if start + work[u] + moved < best[0]:
                best = (start + work[u] + moved, start, lane)
        end, start, lane = best
        bisect.insort(busy[lane], (start, end))
        finish[u] = end
        where[u] = worker = lanes[lane]
        for producer, _ in reads[u]:  # a worker keeps what it fetched for later readers
            if where[producer] != worker:
                copied.setdefault((producer, worker), end - work[u])
    return where


def _earliest_gap(busy: list[tuple[float, float]], ready: float, length: float) -> float:
    """The earliest start at or after ``ready`` of an idle stretch of ``length`` on a lane busy
    during the sorted intervals ``busy`` (HEFT's insertion policy)."""
    start = ready
    # The intervals do not overlap, so their ends are sorted too: skip those over by ``ready``.
    for begin, end in itertools.islice(busy, bisect.bisect_right(busy, ready, key=_end), None):
        if begin >= start + length:
            return start
        start = max(start, end)
    return start


def _end(interval: tuple[float, float]) -> float:
    return interval[1]


def _components(work: Sequence[float], reads: Sequence[Sequence[tuple[int, float]]],
                owns: Sequence[Sequence[Hashable]]) -> list[list[int]]:
    """The units that must share a worker, heaviest group first: units linked by a shared
    parameter (union-find), with each unit whose neighbours (producers and consumers) belong
    to one such component only (a weight gradient, a ReLU's backward). What touches several
    components (a loss) is in none."""
    parent = list(range(len(work)))

    def root(u: int) -> int:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    first_reader: dict = {}
    for u, names in enumerate(owns):
        for name in names:
            parent[root(u)] = root(first_reader.setdefault(name, u))
    member = [root(u) if names else None for u, names in enumerate(owns)]
    neighbours: list[set[int]] = [set() for _ in work]
    for u, edges in enumerate(reads):
        for producer, _ in edges:
            neighbours[u].add(producer)
            neighbours[producer].add(u)
    changed = True
    while changed:  # until no free unit has exactly one component among its neighbours
        changed = False
        for u in range(len(work)):
            if member[u] is None:
                found = {member[v] for v in neighbours[u]} - {None}
                if len(found) == 1:
                    member[u] = found.pop()
                    changed = True
    components: dict[int, list[int]] = {}
    for u, component in enumerate(member):
        if component is not None:
            components.setdefault(component, []).append(u)
    return sorted(components.values(), key=lambda units: -sum(work[u] for u in units))


def _longest_chain(units: list[int], work: Sequence[float],
                   reads: Sequence[Sequence[tuple[int, float]]]) -> float:
    """The most work on one path through ``units`` (in a topological order)."""
    inside, longest = set(units), {}
    for u in sorted(units):
        longest[u] = work[u] + max((longest[p] for p, _ in reads[u] if p in inside), default=0.0)
    return max(longest.values(), default=0.0)


def _upward_ranks(work: Sequence[float], reads: Sequence[Sequence[tuple[int, float]]]
                  ) -> list[float]:
    """Each unit's work plus the longest chain of work and transfers after it: every unit
    ranks above its consumers, so decreasing rank is a topological order."""
    tail = [0.0] * len(work)
    rank = [0.0] * len(work)
    for u in range(len(work) - 1, -1, -1):
        rank[u] = max(work[u], 1e-9) + tail[u]
        for producer, seconds in reads[u]:
            tail[producer] = max(tail[producer], seconds + rank[u])
    return rank
