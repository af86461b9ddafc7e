"""This machine's costs, measured for forecasts: how much of each kind of op's time holds the
GIL and how long it takes alone (:func:`measure_call`), what pargraph's thread pool costs a
run and a task (:func:`local_costs`), and what a dask cluster's messages cost on this
machine's loopback (:func:`loopback`). :mod:`pargraph.forecast` replays a traced step with
them; docs/forecast.md says how each is measured and what it leaves out.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from pargraph.remote.loopback import LONG, measure_messages
from pargraph.trace import Trace, trace

#: Seconds of repeated calls each GIL measurement times, per thread, and the fewest calls:
#: a thread's start and a sleep's overshoot are tens of microseconds, and a busy machine's
#: time slices a few milliseconds, which a longer window averages out.
GIL_MEASURE_SECONDS, GIL_MEASURE_CALLS = 20e-3, 3
#: Seconds all GIL measurements of one forecast may take; kinds of op past it (the ones with
#: the least traced time) are taken to hold the GIL throughout. ``pargraph.measure-seconds``
#: sets the total of this and :data:`PAIR_BUDGET_SECONDS` (:func:`measure_seconds`).
GIL_BUDGET_SECONDS = 3.0
#: The largest measured share kept: a pair at most this many times one thread's calls.
MAX_SHARE = 4.0
#: Seconds of one round of a pair of kinds' measurement (each kind's calls alone, then both
#: side by side), at least, and the rounds whose median is kept (:func:`measure_pair`).
PAIR_ROUND_SECONDS, PAIR_ROUNDS = 10e-3, 5
#: Seconds all pair measurements of one forecast may take; pairs past it (those of the kinds
#: with the least traced time) keep the rule of the kinds' shares.
PAIR_BUDGET_SECONDS = 2.0
#: A kind whose time on a core is under this share of its time mostly waits (a sleep, I/O);
#: such kinds are not measured in pairs (``simulation.WAITS_BELOW``), nor kinds with less
#: than ``PAIR_LEAST`` of the trace's time in nodes.
PAIR_ON_CORE, PAIR_LEAST = 0.5, 0.02
#: Seconds the replay of a forecast's step on one thread and on two may take
#: (:func:`measure_replay`), and its rounds: at least the first, at most the second.
REPLAY_BUDGET_SECONDS = 1.0
REPLAY_ROUNDS = (3, 9)
#: Seconds of a call alone under which a node is replayed: a hand-over of the GIL costs a
#: call a fixed time, which a longer call's own time hides, and two longer calls side by side
#: slow each other by the core's hardware, which their kinds' shares and pairs measure.
REPLAY_CALLS_UNDER = 100e-6


@dataclass(frozen=True)
class Network:
    """What a cluster's messages cost, in seconds: a task starts ``task_latency`` after the
    scheduler took it up, and the scheduler spends ``scheduler_task`` on each task, one task
    at a time; a run's submission and its results' return cost ``run_latency``
    beyond its tasks', and ``run_node`` more per node of the run (recorded, lowered and
    sent by this process, taken in by the scheduler); a value moves between two workers in
    ``transfer_latency`` plus its bytes over ``bandwidth`` (bytes per second), and is copied
    to a second worker, as training state is, in ``replicate_latency`` plus its bytes over
    ``bandwidth``. A compiled step's call costs ``compiled_latency`` beyond its tasks',
    ``compiled_node`` more per node (its program is held on the workers, which run it as
    straight-line code) and
    ``compiled_value`` per value it reads and writes (a parameter, an optimizer's state: the
    mean of the two counts). Of a task's latency, ``worker_task`` is its worker's time on a
    core (taking the task in, running it, reporting it), which needs the worker's GIL and,
    where the processes share a machine, one of its cores. A transfer costs the two workers
    ``worker_transfer`` on a core between them (the sender's half and the reader's), and the
    scheduler ``scheduler_transfer``, within its latency; one that starts while another is
    moving costs ``worker_transfer_overlap`` and ``scheduler_transfer_overlap`` instead (the
    processes are awake, and a turn of their loops handles several messages); a copy of
    training state
    ``worker_replicate`` and ``scheduler_replicate``; and each array either moves costs the
    two workers ``worker_value`` more ((de)serializing it), each byte ``worker_byte`` more
    (copying it into and out of the sockets). A value a run kept on the cluster
    (not a 0-d one, which comes back with its run) reaches the caller who reads it in
    ``read_latency`` plus its bytes over ``bandwidth``. Between all that, each worker (with
    its nanny) keeps ``worker_idle`` of a core busy with its own loops (heartbeats, its
    profiler's samples), and the scheduler ``scheduler_idle``, as shares of a core."""

    task_latency: float
    scheduler_task: float
    run_latency: float
    run_node: float
    transfer_latency: float
    bandwidth: float
    replicate_latency: float
    worker_task: float = 0.0
    #: None: a compiled call costs what an eager run does (``run_latency``)
    compiled_latency: float | None = None
    compiled_node: float = 0.0
    compiled_value: float = 0.0
    worker_transfer: float = 0.0
    scheduler_transfer: float = 0.0
    worker_replicate: float = 0.0
    scheduler_replicate: float = 0.0
    worker_value: float = 0.0
    read_latency: float = 0.0
    #: None: as ``worker_transfer`` and ``scheduler_transfer``
    worker_transfer_overlap: float | None = None
    scheduler_transfer_overlap: float | None = None
    worker_byte: float = 0.0
    worker_idle: float = 0.0
    scheduler_idle: float = 0.0

    def __str__(self) -> str:
        return (f"a task {self.task_latency * 1e3:.2f} ms after the scheduler takes it up "
                f"({self.scheduler_task * 1e3:.2f} ms of the scheduler's time), a run "
                f"{self.run_latency * 1e3:.2f} ms + {self.run_node * 1e6:.1f} us per node, a "
                f"transfer {self.transfer_latency * 1e3:.2f} ms + {self.bandwidth / 1e6:.0f} "
                f"MB/s, a copy of training state {self.replicate_latency * 1e3:.2f} ms, a "
                f"worker's time on a core per task {self.worker_task * 1e3:.2f} ms and per "
                f"transfer {self.worker_transfer * 1e3:.2f} ms (the scheduler's "
                f"{self.scheduler_transfer * 1e3:.2f} ms; beside another "
                f"{self.transfer_costs(True)[0] * 1e3:.2f} and "
                f"{self.transfer_costs(True)[1] * 1e3:.2f} ms) and per copy "
                f"{self.worker_replicate * 1e3:.2f} ms (the scheduler's "
                f"{self.scheduler_replicate * 1e3:.2f} ms) + {self.worker_value * 1e6:.1f} "
                f"us per array and {self.worker_byte * 1e9:.2f} ms per MB (the two workers' "
                f"time on a core), a compiled step's call "
                f"{self.compiled_call * 1e3:.2f} ms + {self.compiled_node * 1e6:.1f} us per "
                f"node and {self.compiled_value * 1e6:.1f} us per value, a value read back "
                f"{self.read_latency * 1e3:.2f} ms, and between tasks a worker's own loops "
                f"{self.worker_idle:.1%} of a core (the scheduler's {self.scheduler_idle:.1%})")

    def transfer_costs(self, overlap: bool) -> tuple[float, float]:
        """The workers' and the scheduler's seconds on a core per transfer, for one that
        starts while another is moving (``overlap``) or alone."""
        if overlap and self.worker_transfer_overlap is not None:
            return self.worker_transfer_overlap, self.scheduler_transfer_overlap or 0.0
        return self.worker_transfer, self.scheduler_transfer

    @property
    def compiled_call(self) -> float:
        """Seconds a compiled step's call costs beyond its tasks'."""
        return self.run_latency if self.compiled_latency is None else self.compiled_latency


def _timed_calls(call: Any, repeats: int, cpu: list | None = None) -> float:
    """Seconds ``repeats`` calls take; ``cpu``: where to append the seconds this thread spent
    on a core meanwhile."""
    start, on_core = time.perf_counter(), time.thread_time()
    for _ in range(repeats):
        call()
    took = time.perf_counter() - start
    if cpu is not None:
        cpu.append(time.thread_time() - on_core)
    return took


@dataclass(frozen=True)
class CallCost:
    """One kind of op's measured call: the share of its time that holds the GIL, its seconds
    on one thread with BLAS on one thread (and on every core), and the share of its time a
    call adds when it takes the GIL from another thread (``contention``: passing the lock,
    waking a thread and sharing caches cost small ops more than their own time)."""

    gil_share: float
    seconds: float
    contention: float = 0.0
    #: its seconds with BLAS on every core, as a run on one thread gives it (0.0: an op that
    #: calls no BLAS, not measured)
    seconds_all_blas: float = 0.0
    #: the share of its time alone that its thread spent on a core (``time.thread_time``)
    on_core: float = 1.0


def measure_call(op: Any, attrs: dict, args: tuple, trials: int = 3) -> CallCost:
    """The share of one call's time that holds the GIL, and the call's time alone.

    Two threads, each with its own copy of the arguments, make ``repeats`` calls each, the
    second starting half a call after the first (started together, calls that sleep or wait
    would wake together and contend for the lock more than calls out of step do). While both
    run, parts that release the GIL overlap and parts that hold it take turns, so the pair
    ends ``share`` of that stretch after one thread alone would have. Each time, alone and
    together, is the best of ``trials``. BLAS runs on one thread meanwhile, so the threads
    compete only for the lock, for memory and for the core's hardware: on a machine of one
    core every share reads 1, and where two copies of a big elementwise op saturate memory,
    or two threads share a core (a virtual machine's two hyperthreads), the share counts
    that too. A share is at most the call's time on a core over its time alone
    (``time.thread_time``): a call that waits (a sleep, I/O) gives the GIL away, and its late
    wake-ups would otherwise read as holding it.

    Examples
    --------
    >>> import numpy as np
    >>> from pargraph.ops import REGISTRY
    >>> cost = measure_call(REGISTRY["exp"], {}, (np.ones(1000),))
    >>> 0.0 <= cost.gil_share <= 1.0 and cost.seconds > 0
    True
    """
    from threadpoolctl import threadpool_limits

    from pargraph.engine.threads import state

    copies = [_copied(args) for _ in range(2)]
    calls = [functools.partial(op.forward, *c, **attrs) for c in copies]
    alones, pairs, on_core = [], [], []
    # BLAS on one thread, and the switch interval of pargraph's runs
    with threadpool_limits(1), state.switching.lowered():
        # Each copy's first call untimed: a first call may set up what later ones reuse (a
        # library's lazy start, fresh pages), and, taken for a call's time, it would make
        # the repeats too few and the second thread start after the first had finished.
        for call in calls:
            call()
        single = min(_timed_calls(calls[0], 1) for _ in range(2))
        repeats = max(GIL_MEASURE_CALLS, int(GIL_MEASURE_SECONDS / max(single, 1e-7)))
        for _ in range(3 * trials):  # a pair whose second thread started late does not count
            alones += [_timed_calls(calls[0], repeats, on_core),
                       _timed_calls(calls[1], repeats, on_core)]
            alone = min(alones)
            took, offset = _side_by_side([[calls[0]] * repeats, [calls[1]] * repeats],
                                         single / 2)
            if offset < alone / 2:
                pairs.append((took - offset, offset))
            if len(pairs) == trials:
                break
    all_blas = _all_blas_seconds(op, calls[0], repeats, alone / repeats)
    on_core_share = min(on_core[alones.index(alone)] / alone, 1.0)
    if not pairs:  # the threads never ran at once: the machine is too busy to tell, but a
        # call holds the GIL no longer than it is on a core
        return CallCost(on_core_share, alone / repeats, 0.0, all_blas, on_core_share)
    # The best of the trials, alone and together: the GIL takes its share in every trial,
    # while the machine's other work (another process, a core's sibling) only adds to some.
    together, offset = min(pairs)
    # Less the timing's own noise, the spread of the times alone: a call that waits (a
    # sleep, I/O) holds the GIL for microseconds, but wakes up late by a varying margin.
    noise = float(np.median(alones)) - alone
    share = max(together - alone - noise, 0.0) / (alone - offset)  # over the stretch both ran
    held, contention = _held(share, on_core_share)
    return CallCost(held, alone / repeats, contention, all_blas, on_core_share)


def _held(slowing: float, on_core: float) -> tuple[float, float]:
    """A kind's GIL share and contention (:class:`CallCost`) from ``slowing``, how much two
    threads of its calls take longer than one, and ``on_core``, its share of time on a core."""
    # No more than its share of time on a core: a thread that waits (a sleep, I/O, another
    # thread) has given the GIL away, however late it woke.
    # A pair slower than one thread making both threads' calls (slowing over 1): each call
    # that took the lock from the other thread cost half the excess more, on its time on a
    # core.
    contention = min(max(slowing - 1.0, 0.0), MAX_SHARE - 1.0) / 2 * on_core
    return min(max(slowing, 0.0), 1.0, on_core), contention


#: Rounds of the measurement of a BLAS op's calls with BLAS on one thread against every core.
BLAS_ROUNDS = 5


def _all_blas_seconds(op: Any, call: Callable[[], Any], repeats: int, seconds: float) -> float:
    """A call's seconds with BLAS on every core, from its ``seconds`` on one BLAS thread: by
    the median over :data:`BLAS_ROUNDS` rounds of the two ways' times, each round timing
    ``repeats`` calls one way then the other, so that both meet the same machine (a shared
    one's speed moves within a second). 0.0 for an op that calls no BLAS: nothing to tell."""
    from threadpoolctl import threadpool_limits

    if not getattr(op, "blas", False):
        return 0.0
    ratios = []
    for _ in range(BLAS_ROUNDS):
        with threadpool_limits(1):
            one = _timed_calls(call, repeats)
        ratios.append(one / max(_timed_calls(call, repeats), 1e-12))
    return seconds / float(np.median(ratios))


def _copied(args: tuple) -> tuple:
    """``args`` with each array copied: a measured call runs on arrays of its own."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def measure_seconds() -> tuple[float, float, float]:
    """The seconds a forecast may spend measuring its trace's calls, alone, in pairs, and as
    the step replayed (:func:`measure_replay`): :data:`GIL_BUDGET_SECONDS`,
    :data:`PAIR_BUDGET_SECONDS` and :data:`REPLAY_BUDGET_SECONDS`, or the total dask's
    ``pargraph.measure-seconds`` sets, split alike (0 measures nothing).

    Examples
    --------
    >>> import dask
    >>> with dask.config.set({"pargraph.measure-seconds": 3.0}):
    ...     measure_seconds()
    (1.5, 1.0, 0.5)
    """
    budgets = GIL_BUDGET_SECONDS, PAIR_BUDGET_SECONDS, REPLAY_BUDGET_SECONDS
    default = sum(budgets)
    total = dask.config.get("pargraph.measure-seconds", None)
    if total is None:
        return budgets
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not total >= 0:
        raise ValueError(f"pargraph.forecast: the dask config pargraph.measure-seconds is the "
                         f"seconds a forecast may spend measuring its trace's calls, a number "
                         f"of at least 0 (default {default:g}), got {total!r}")
    first, second, third = (float(total) * (budget / default) for budget in budgets)
    return first, second, third


def call_costs(trace: Trace, budget: float | None = None) -> dict[tuple, CallCost]:
    """The :class:`CallCost` (:func:`measure_call`) of each kind of op ``trace`` kept a call
    of, the kinds with the most traced time first, until ``budget`` seconds are spent
    (default: the calls' share of :func:`measure_seconds`).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.trace() as tr:
    ...     _ = pargraph.ones(1000).exp().sum().item()
    >>> sorted(kind[0] for kind in call_costs(tr))
    ['exp', 'sum']
    """
    time_by_kind: dict[tuple, float] = defaultdict(float)
    for key, kind in trace.samples.kinds.items():
        record = trace.records.get(key)
        if record is not None and record.stop:
            time_by_kind[kind] += record.duration
    costs: dict[tuple, CallCost] = {}
    deadline = time.perf_counter() + (measure_seconds()[0] if budget is None else budget)
    for kind in sorted(time_by_kind, key=lambda k: -time_by_kind[k]):
        if time.perf_counter() >= deadline:
            break
        call = trace.samples.calls.get(kind)
        if call is not None:
            try:
                costs[kind] = measure_call(*call)
            except Exception:  # a call that cannot run again alone (an op with side effects)
                continue
    return costs


def measure_pair(first: tuple, second: tuple, rounds: int = PAIR_ROUNDS) -> tuple[float, float]:
    """How much two kinds of op slow each other side by side: ``(a, b)``, the first kind's
    calls taking ``1 + a`` times their time alone while the second's run beside them, and the
    second's ``1 + b``. ``first`` and ``second`` are calls as a trace keeps them (op,
    attributes, arguments), each run on its own copy of the arguments.

    In each of ``rounds`` rounds, with BLAS on one thread and the switch interval of
    pargraph's runs, each kind's calls run alone, then both kinds' on two threads at once;
    each kind's pace is its calls' rate beside the other over its rate alone in that round,
    and its slowing the median over the rounds, so that a round's times alone and together
    meet the same machine. The two kinds' shares (:func:`measure_call`) give the same for a
    pair of one kind; for two kinds, the time one waits for the GIL depends on how long the
    other holds it at a time, which their shares do not tell. :func:`pair_costs` measures
    several pairs with their rounds taking turns.

    Examples
    --------
    >>> import numpy as np
    >>> from pargraph.ops import REGISTRY
    >>> a, b = measure_pair((REGISTRY["exp"], {}, (np.ones(1000),)),
    ...                     (REGISTRY["tanh"], {}, (np.ones(1000),)), rounds=1)
    >>> 0.0 <= a <= MAX_SHARE and 0.0 <= b <= MAX_SHARE
    True
    """
    return _measure_pairs([(first, second)], rounds)[0]


def _measure_pairs(pairs: list[tuple[tuple, tuple]], rounds: int,
                   budget: float | None = None) -> list[tuple[float, float]]:
    """:func:`measure_pair` of each of ``pairs``, their rounds taking turns: a shared
    machine's slow stretches last up to seconds, and one that met every round of one pair
    would read as that pair's slowing; spread over all the rounds of all the pairs, it meets
    one round of each, which the median leaves out. With ``budget``, only the first pairs
    whose rounds fit in about that many seconds are measured."""
    from threadpoolctl import threadpool_limits

    from pargraph.engine.threads import state

    measured: list[tuple[list, float]] = []  # per pair, its two calls and its stretch
    with threadpool_limits(1), state.switching.lowered():
        spent = 0.0
        for pair in pairs:
            calls = [functools.partial(op.forward, *_copied(args), **attrs)
                     for op, attrs, args in pair]
            single = max(_timed_calls(call, 1) for call in calls)  # also warms both up
            # long enough for a few calls of the slower kind in each stretch
            seconds = max(PAIR_ROUND_SECONDS, 4 * single)
            # a round: each kind alone, then both for twice as long
            spent += rounds * 4 * seconds
            if budget is not None and measured and spent > budget:
                break
            measured.append((calls, seconds))
        paces: list[list[tuple[float, float]]] = [[] for _ in measured]
        for _ in range(rounds):
            for k, (calls, seconds) in enumerate(measured):
                alone = [_call_rate(call, seconds) for call in calls]
                together = _pair_rates(calls, 2 * seconds)
                paces[k].append((together[0] / alone[0], together[1] / alone[1]))
    return [tuple(min(max(1.0 / max(float(np.median(side)), 1e-9) - 1.0, 0.0), MAX_SHARE)
                  for side in zip(*each)) for each in paces]


def _call_rate(call: Callable[[], Any], seconds: float) -> float:
    """Calls a second of ``call`` made one after another for about ``seconds``."""
    calls, start = 0, time.perf_counter()
    while True:
        call()
        calls += 1
        took = time.perf_counter() - start
        if took >= seconds and calls >= 2:
            return calls / took


def _pair_rates(calls: list[Callable[[], Any]], seconds: float) -> list[float]:
    """Each call's rate while both run on two threads for about ``seconds``: the calls that
    ended while both threads were calling, over the time they took, so that neither thread's
    last calls, alone after the other stopped, count."""
    barrier, stop = threading.Barrier(2), threading.Event()
    ends: list[list[float]] = [[], []]

    def run(k: int) -> None:
        barrier.wait()
        ends[k].append(time.perf_counter())  # when it began
        while True:  # one call at least
            calls[k]()
            ends[k].append(time.perf_counter())
            if stop.is_set():
                return

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    began = max(ends[0][0], ends[1][0])
    over = min(ends[0][-1], ends[1][-1])  # the first thread's last call's end
    rates = []
    for own in ends:
        inside = [t for t in own[1:] if began < t <= over]
        if len(inside) >= 2:
            rates.append((len(inside) - 1) / (inside[-1] - inside[0]))
        else:  # calls as long as the stretch: its first one, from its start
            rates.append(1.0 / max(own[1] - own[0], 1e-9))
    return rates


def beside_itself(cost: CallCost, slowing: float) -> CallCost:
    """``cost`` with its GIL share and contention taken from ``slowing``, how much its kind's
    calls slow beside a copy of themselves (:func:`pair_costs`): the quantity the share's
    best-of-three trials measure (:func:`measure_call`), here as the median of rounds that
    each time the calls alone and side by side at once, which a shared machine's slow
    stretches move far less (docs/forecast.md). The share stays at most its time on a core.

    Examples
    --------
    >>> beside_itself(CallCost(0.3, 1e-3, on_core=1.0), 0.05).gil_share
    0.05
    """
    held, contention = _held(slowing, cost.on_core)
    return dataclasses.replace(cost, gil_share=held, contention=contention)


def pair_costs(trace: Trace, costs: dict[tuple, CallCost],
               budget: float | None = None) -> dict[tuple[tuple, tuple], float]:
    """How much each pair of kinds of op ``trace`` kept a call of slow each other side by
    side (:func:`measure_pair`): per ordered pair ``(a, b)`` of kinds, the share of its time
    ``a`` takes longer beside ``b``. Kinds measured alone in ``costs`` (:func:`call_costs`)
    that compute (a kind that mostly waits gives the GIL away for its wait) and hold at least
    :data:`PAIR_LEAST` of the traced time in nodes are paired: each kind with itself first
    (that pair gives its GIL share, :func:`beside_itself`), the kinds of the most traced time
    first, then two kinds, the pairs of the most traced time together first; as many as fit
    in ``budget`` seconds (default: the pairs' share of :func:`measure_seconds`), their rounds
    taking turns. A kind beside itself slows by the mean of its two sides (the two threads'
    calls are alike).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.trace() as tr:
    ...     _ = pargraph.ones(1000).exp().sum().item()
    >>> pairs = pair_costs(tr, call_costs(tr), budget=0.5)
    >>> all(0.0 <= slowing for slowing in pairs.values())
    True
    """
    traced: dict[tuple, float] = defaultdict(float)
    for key, kind in trace.samples.kinds.items():
        record = trace.records.get(key)
        if record is not None and record.stop:
            traced[kind] += record.duration
    least = PAIR_LEAST * sum(traced.values())
    kinds = sorted((k for k, seconds in traced.items() if seconds >= least and k in costs
                    and costs[k].on_core >= PAIR_ON_CORE), key=lambda k: -traced[k])
    # each kind beside itself first, the kinds of the most traced time first: that pair
    # gives the kind's GIL share (:func:`beside_itself`); then two kinds, which meet each
    # other both ways round, the pairs of the most traced time together first
    pairs = [(a, a) for a in kinds]
    pairs += sorted(((a, b) for i, a in enumerate(kinds) for b in kinds[i + 1:]),
                    key=lambda p: -traced[p[0]] * traced[p[1]])
    # every kind in costs ran again alone (measure_call), so it runs beside another too
    found = _measure_pairs([(trace.samples.calls[a], trace.samples.calls[b])
                            for a, b in pairs], PAIR_ROUNDS,
                           measure_seconds()[1] if budget is None else budget)
    slowing: dict[tuple[tuple, tuple], float] = {}
    for (a, b), (of_a, of_b) in zip(pairs, found):
        if a == b:
            slowing[a, a] = (of_a + of_b) / 2
        else:
            slowing[a, b], slowing[b, a] = of_a, of_b
    return slowing


@dataclass(frozen=True)
class Replay:
    """A traced step's nodes replayed, each a call of its kind's kept call
    (:func:`measure_replay`): the kinds in the step's order, each kind's seconds a call alone,
    and the median speed-up of the nodes shared out over two threads over the same nodes on
    one."""

    kinds: tuple[tuple, ...]
    seconds: dict[tuple, float]
    speedup: float


def measure_replay(trace: Trace, budget: float | None = None) -> Replay | None:
    """The step ``trace`` holds, replayed: each node whose kind's call takes under
    :data:`REPLAY_CALLS_UNDER` alone and computes (on a core for at least
    :data:`PAIR_ON_CORE` of its time) a call of its kind's kept call, in the step's order,
    on one thread, then every other node on each of two threads at once; the median, over
    rounds, of the time on one thread over the time on two. Two threads of a step's small
    ops lose more to the GIL's hand-overs than pairs of one kind repeated side by side show
    (:func:`measure_pair`): each op's release and retake of the lock waits for the other
    thread's stretch of Python, whatever kind it runs; :mod:`pargraph.forecast` fits its
    simulation's cost per hand-over to this figure. With BLAS on one thread and the switch
    interval of pargraph's runs; at most ``budget`` seconds (default: the replay's share of
    :func:`measure_seconds`), the step's first nodes only where it is longer; None where
    nothing can be replayed.

    Examples
    --------
    >>> import pargraph
    >>> a = pargraph.randn(64, 64)
    >>> with pargraph.trace() as tr:
    ...     _ = sum((a @ a).tanh().sum() for _ in range(8)).item()
    >>> replay = measure_replay(tr, budget=0.2)
    >>> replay.speedup > 0 and len(replay.kinds) >= 8
    True
    """
    from threadpoolctl import threadpool_limits

    from pargraph.engine.threads import state

    budget = measure_seconds()[2] if budget is None else budget
    samples = trace.samples
    order = [samples.kinds.get(node.key) for run in trace.run_records for node in run.computed]
    kinds = {kind for kind in order if kind in samples.calls}
    if budget <= 0 or not kinds:
        return None
    least, most = REPLAY_ROUNDS
    copies = [{kind: functools.partial(samples.calls[kind][0].forward,
                                       *_copied(samples.calls[kind][2]), **samples.calls[kind][1])
               for kind in kinds} for _ in range(2)]
    with threadpool_limits(1), state.switching.lowered():
        # each kind warmed up, then its fastest of three calls, whose time on a core says
        # whether it computes (a busy machine may take the core away during any one call)
        once: dict[tuple, float] = {}
        for kind in kinds:
            try:
                for calls in copies:
                    calls[kind]()
                took, on_core = min(_call_on_core(copies[0][kind]) for _ in range(3))
            except Exception:  # a call that cannot run again alone (an op with side effects)
                continue
            if on_core >= PAIR_ON_CORE * took and took < REPLAY_CALLS_UNDER:
                once[kind] = took
        # the first nodes whose rounds fit the budget, a round being about twice the nodes
        replayed, allowed = [], budget / (2.5 * least)
        for kind in order:
            if kind in once:
                allowed -= once[kind]
                if allowed < 0 and replayed:
                    break
                replayed.append(kind)
        if len(replayed) < 2:
            return None
        rounds = int(min(max(budget / (2.5 * sum(once[k] for k in replayed)), least), most))
        halves = [replayed[0::2], replayed[1::2]]
        timed: dict[tuple, list[float]] = defaultdict(list)
        speedups = []
        for _ in range(rounds):
            alone = 0.0
            for kind in replayed:
                start = time.perf_counter()
                copies[0][kind]()
                took = time.perf_counter() - start
                timed[kind].append(took)
                alone += took
            together, _ = _side_by_side(
                [[copies[k][kind] for kind in half] for k, half in enumerate(halves)])
            speedups.append(alone / together)
    return Replay(tuple(replayed), {kind: float(np.median(t)) for kind, t in timed.items()},
                  float(np.median(speedups)))


def _call_on_core(call: Callable[[], Any]) -> tuple[float, float]:
    """One call's seconds, and the seconds its thread spent on a core meanwhile."""
    on_core: list[float] = []
    return _timed_calls(call, 1, on_core), on_core[0]


def _side_by_side(calls: list[list[Callable[[], Any]]], offset: float = 0.0
                  ) -> tuple[float, float]:
    """Two threads make their ``calls`` one after another at once, the second starting
    ``offset`` seconds late: the seconds from the first thread's start to the last one's end,
    and how far apart the two started. On the threads' own clocks (the calling thread's
    start and join are no part of it), from whichever thread started first: a busy machine
    may hold either back."""
    barrier = threading.Barrier(2)
    starts, ends = [0.0, 0.0], [0.0, 0.0]

    def run(k: int) -> None:
        barrier.wait()
        if k and offset:
            time.sleep(offset)
        starts[k] = time.perf_counter()
        for call in calls[k]:
            call()
        ends[k] = time.perf_counter()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return max(ends) - min(starts), abs(starts[1] - starts[0])


def _cache_file(name: str) -> str:
    folder = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(folder, "pargraph", f"{name}.json")


#: How many of a machine's latest measurements of one kind are kept: what is read back is
#: their median, so that one measurement taken in a slow stretch of a shared machine does not
#: decide every forecast until the next.
KEPT_MEASUREMENTS = 5


def _kept(name: str, read: Callable[[dict], Any], measure_now: Callable[[], Any],
          measure: bool, form: int = 1) -> Any:
    """A measurement of this machine kept in ``~/.cache/pargraph/<name>.json``: read back as
    the median of the :data:`KEPT_MEASUREMENTS` latest (``read`` makes it from their median
    fields), unless ``measure`` or none is kept yet, in which case ``measure_now()`` measures
    it, and it is kept beside the latest others and returned. ``form`` says what the
    measurement means: those of another form (what pargraph did when they were measured has
    changed since) are dropped."""
    path = _cache_file(name)
    kept = _kept_measurements(path, form)
    if not measure and kept:
        try:
            return read(_median_fields(kept))
        except (ValueError, TypeError, KeyError, AttributeError):
            pass  # an older version's fields: measured now
    measured = measure_now()
    kept = (kept + [dataclasses.asdict(measured)])[-KEPT_MEASUREMENTS:]
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as file:
            json.dump({"form": form, "kept": kept}, file)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # a read-only home: measured again by the next process
    return measured


def _kept_measurements(path: str, form: int) -> list[dict]:
    """The measurements of ``form`` kept at ``path``, oldest first (a file of one measurement,
    as versions before the median wrote, is a list of one)."""
    try:
        with open(path) as file:
            saved = json.load(file)
        if saved.pop("form", 1) != form:
            return []
        kept = saved["kept"] if "kept" in saved else [saved]
        return [m for m in kept if isinstance(m, dict) and m]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []  # none yet, or unreadable


def _median_fields(measurements: list[dict]) -> dict:
    """Field by field, the median of ``measurements``: of numbers, and element by element of
    lists of numbers of one length; any other field, and one some measurements lack, is the
    latest's."""
    latest = measurements[-1]
    merged = {}
    for field_name, value in latest.items():
        values = [m.get(field_name) for m in measurements]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            merged[field_name] = float(np.median(values))
        elif all(isinstance(v, list) and len(v) == len(value)
                 and all(isinstance(e, (int, float)) for e in v) for v in values):
            merged[field_name] = [float(np.median(column)) for column in zip(*values)]
        else:
            merged[field_name] = value
    return merged


#: What a kept loopback measurement means, raised whenever what pargraph does on a cluster
#: changes what it measures (form 2: a compiled step's program held on the workers; 3: a
#: value read back; 4: the processes' own loops between tasks).
LOOPBACK_FORM = 4


@functools.cache
def loopback(measure: bool = False) -> Network:
    """This machine's loopback costs (:func:`measure_loopback`): the median of the latest
    measurements kept in ``~/.cache/pargraph/loopback.json`` (:data:`KEPT_MEASUREMENTS`),
    measured once none is kept (``measure=True``: again, now, and these figures returned).

    Examples
    --------
    >>> from pargraph.machine_costs import Network, loopback
    >>> isinstance(loopback(), Network)
    True
    """
    return _kept("loopback", _kept_network, lambda: measure_loopback(), measure,
                 LOOPBACK_FORM)


def _kept_network(fields: dict) -> Network:
    """A kept :class:`Network`, if it has every field this version measures (else KeyError:
    an older version's file is measured again)."""
    missing = {f.name for f in dataclasses.fields(Network)} - set(fields)
    if missing:
        raise KeyError(sorted(missing))
    return Network(**fields)


def median_network(networks: Sequence[Network]) -> Network:
    """Field by field, the median of ``networks`` (one measured in a slow stretch of a
    shared machine no longer decides alone).

    Examples
    --------
    >>> import dataclasses
    >>> from pargraph.machine_costs import Network, median_network
    >>> one = Network(1e-3, 1e-4, 2e-3, 0.0, 1e-3, 1e9, 2e-3)
    >>> median_network([dataclasses.replace(one, bandwidth=b) for b in (1e9, 2e9, 9e9)]
    ...                ).bandwidth
    2000000000.0
    """
    return _kept_network(_median_fields([dataclasses.asdict(n) for n in networks]))


def measure_loopback(repeats: int = 5) -> Network:
    """The :class:`Network` of this machine's loopback, measured on a ``dask scheduler`` and
    two ``dask worker`` processes of one thread on 127.0.0.1, tuned as pargraph tunes a
    cluster: a chain of tiny tasks on one worker (the task latency), a burst of tiny tasks
    (the scheduler's time per task, and the workers' time on a core), a chain that takes
    turns on the two workers (a transfer's latency, and the workers' and the scheduler's time
    on a core for it), pargraph runs of 2 and of 1202 tiny nodes and their result (the run
    latency beyond its task's, and the cost per node), the third call of compiled steps of
    2 and 1202 chained nodes that update 2 and 1202 tiny tensors, not copied to the second
    worker (a compiled run's latency beyond its task's, and the cost per node and per
    value), a task on one worker reading 1 KiB and 64 MiB made on the other (the
    bandwidth, and the workers' time on a core per byte), and the copy of 1 KiB to the
    second worker (the replication latency; of four at once as a step makes them, the time
    on a core per copy, and, from copies of tuples of 1 and of 101 arrays, per array), and
    the read of a 4-element value a run kept, right after the run (the read-back latency).
    Each is the median of about ``repeats`` measurements (fewer of the slow ones, more of
    the transfers).

    Examples
    --------
    Three processes start, so it takes seconds:

    >>> network = measure_loopback()  # doctest: +SKIP
    >>> print(network)  # doctest: +SKIP
    a task 3.25 ms after the scheduler takes it up (1.09 ms of the scheduler's time), ...
    """
    def pargraph_run(client: Any, nodes: int, values: int = 0) -> float:
        from pargraph.compiler import compile

        step = _chain_step(nodes, values)
        run = compile(step) if values else step
        # the copies of what it writes are measured apart (``worker_replicate``)
        with dask.config.set({"scheduler": client, "pargraph.replicas": 1}):
            for _ in range(2 if values else 1):  # a compiled step: captured, replayed
                run().item()
            start = time.perf_counter()
            run().item()
            return time.perf_counter() - start

    def read_back(client: Any) -> float:
        from pargraph.factories import ones
        from pargraph.functions import compute

        with dask.config.set({"scheduler": client, "pargraph.replicas": 1}):
            kept, loss = compute(ones(4) * 2, ones(4).sum())  # a step's kept value, its loss
            loss.item()
            start = time.perf_counter()
            kept.numpy()
            return time.perf_counter() - start

    return Network(*measure_messages(pargraph_run, read_back, repeats))


@dataclass(frozen=True)
class WakeUps:
    """Threads waking from sleeps into short stretches of Python, timed
    (:func:`measure_wake_ups`): ``threads`` threads each ``sleeps`` times sleep then run
    ``python`` seconds of Python (its time alone); one sleep and its Python took ``alone``
    seconds on one thread, and the whole loop on ``threads`` threads at once ``took``."""

    threads: int
    sleeps: int
    python: float
    alone: float
    took: float


@dataclass(frozen=True)
class LocalCosts:
    """What pargraph's threads cost a run on this machine: its start and end (``run``) and
    each task's bookkeeping, which holds the GIL (``task``); and what a compiled step's call
    costs beyond its ops' own time, on this process's threads: per call (its guards, its
    arguments), per node (running the program's next op) and per value it writes back
    (``compiled_call``, ``compiled_node``, ``compiled_value``), in seconds; and threads back
    from waits taking the GIL again (``wake_ups``), from which the forecast fits the GIL's
    time one such thread takes (``Simulation.retake``)."""

    run: float
    task: float
    compiled_call: float = 0.0
    compiled_node: float = 0.0
    compiled_value: float = 0.0
    wake_ups: WakeUps | None = None


@functools.cache
def local_costs() -> LocalCosts:
    """:class:`LocalCosts`, measured once per process: runs of one and of 256 tasks that do
    nothing, on pargraph's threads (``threads.run_on_threads``), on one thread; compiled
    steps of 4 and 1204 nodes writing 2 and 1202 values, on one thread, less their ops' own
    time (each kind's calls repeated alone); and threads waking from sleeps
    (:func:`measure_wake_ups`).

    Examples
    --------
    >>> costs = local_costs()
    >>> costs.run >= 0 and costs.task >= 0 and costs.compiled_node >= 0
    True
    """
    from dask.task_spec import Task, TaskRef

    from pargraph.engine.threads import run_on_threads

    def graph(tasks: int) -> dict:
        made = {f"t{k}": Task(f"t{k}", int) for k in range(tasks)}
        made["end"] = Task("end", _count, *[TaskRef(f"t{k}") for k in range(tasks)])
        return made

    def per_run(tasks: int) -> float:
        g = graph(tasks)
        return _median_time(lambda: run_on_threads(g, ["end"], 1), 15)

    one, many = per_run(1), per_run(256)
    task = max((many - one) / 255, 0.0)
    return LocalCosts(max(one - 2 * task, 0.0), task, *_compiled_call_costs(),
                      measure_wake_ups())


def measure_wake_ups(threads: int = 16, sleeps: int = 8, python: float = 35e-6,
                     repeats: int = 15) -> WakeUps:
    """Threads waking from waits into Python, with the switch interval of pargraph's runs:
    ``threads`` threads, started together, each ``sleeps`` times sleep 1 ms then run about
    ``python`` seconds of Python, timed ``repeats`` times (the median), after three untimed
    loops; and one thread doing the same, timed five times. Sixteen threads of 35 us keep the
    GIL about half busy with Python, as a step of many 1 ms branches on sixteen threads does,
    so that their hand-overs of the GIL decide how far the loop outlasts one thread's (about
    0.3 s in all).

    Examples
    --------
    >>> w = measure_wake_ups(threads=4, sleeps=2, repeats=1)
    >>> w.took > 0 and w.alone > w.python > 0
    True
    """
    from pargraph.engine.threads import state

    def run_python(loops: int) -> None:
        for _ in range(loops):
            pass

    # about ``python`` seconds of Python a wake-up, whatever this machine's speed
    per_loop = max(_median_time(lambda: run_python(1000), 20) / 1000, 1e-10)
    loops = max(int(python / per_loop), 1)
    took_python = min(_median_time(lambda: run_python(loops), 20) for _ in range(3))

    def loop(count: int) -> float:
        barrier = threading.Barrier(count + 1)

        def wake_ups() -> None:
            barrier.wait()
            for _ in range(sleeps):
                time.sleep(0.001)
                run_python(loops)

        pool = [threading.Thread(target=wake_ups, daemon=True) for _ in range(count)]
        for thread in pool:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in pool:
            thread.join()
        return time.perf_counter() - start

    with state.switching.lowered():
        for _ in range(3):  # untimed: a process's first threads start slower
            loop(threads)
        one = float(np.median([loop(1) for _ in range(5)])) / sleeps
        took = float(np.median([loop(threads) for _ in range(repeats)]))
    return WakeUps(threads, sleeps, took_python, max(one, took_python), took)


def _median_time(call: Callable[[], Any], repeats: int) -> float:
    """The median seconds of ``repeats`` calls, after one untimed."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _chain_step(nodes: int, values: int) -> Callable[[], Any]:
    """A step of ``nodes`` tiny nodes in a chain that also writes ``values`` tiny tensors in
    place (``mul_``), as a training step reads and writes its parameters: what the costs of
    a run per node and per value are measured on."""
    from pargraph.factories import ones

    x, written = ones(4), [ones(4) for _ in range(values)]

    def step() -> Any:
        for value in written:
            value.mul_(1.0)
        h = x
        for _ in range(nodes - 1):
            h = h * 2
        return h.sum()

    return step


def _compiled_call_costs() -> tuple[float, float, float]:
    """``(per call, per node, per value written)``: what a compiled step's call costs on one
    of this process's threads beyond its ops' own time, from steps that write ``values``
    tiny tensors (``mul_``) and multiply one ``nodes - 1`` times, their ops' time alone taken
    out as a forecast takes it (each kind's traced call repeated)."""
    from pargraph.compiler import compile

    def compiled(nodes: int, values: int) -> Callable[[], Any]:
        run = compile(_chain_step(nodes, values))
        return lambda: run().item()

    with dask.config.set(scheduler="threads", num_workers=1):
        base_step = compiled(2, 2)
        base_step(), base_step()  # captured, then replayed
        with trace() as tr:
            base_step()
        base = _median_time(base_step, 25)
        nodes_step, values_step = compiled(2 + LONG, 2), compiled(2, 2 + LONG)
        nodes_step(), values_step()
        nodes, values = _median_time(nodes_step, 9), _median_time(values_step, 9)
    alone = {}
    for kind, (op, attrs, args) in tr.samples.calls.items():
        call = functools.partial(op.forward, *args, **attrs)
        alone[kind[0]] = _median_time(lambda call=call: [call() for _ in range(100)], 9) / 100
    mul, mul_ = alone.get("mul", 0.0), alone.get("mul_", alone.get("mul", 0.0))
    per_node = max((nodes - base) / LONG - mul, 0.0)
    per_value = max((values - base) / LONG - mul_ - per_node, 0.0)
    per_call = max(base - sum(alone.values()) - 4 * per_node - 2 * per_value, 0.0)
    return per_call, per_node, per_value


def _count(*values: Any) -> int:
    return len(values)
