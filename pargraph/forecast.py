"""Forecasts: how fast a traced step would run on other threads and workers.

``pargraph.forecast(tr, threads=[...], workers=[...])`` replays the step recorded by a
``with pargraph.trace() as tr:`` block in simulation, on each configuration asked for:

1. Each dask run of the step is partitioned again, by the partitioner a real run on that
   configuration uses (:func:`pargraph.engine.partition.placed_partition`, dask's config read as a
   run reads it), with the work a steady run partitions with: the estimates, or the measured
   times where they disagree (on a cluster, whose runs are not timed, the estimates).
2. Its tasks run on simulated threads, one lane per thread, in dependency order. Nodes of
   one process that run at once slow each other by their *GIL shares* (measured per kind of
   op by :mod:`pargraph.machine_costs`): two of one kind each take ``1 + share`` times their
   time alone, as measured, and nodes holding the GIL throughout take turns; the kinds with
   the most traced time are measured side by side too, each beside itself first (its share
   then that pair's slowing), and slow each other as measured. A run and each task cost
   what pargraph's thread pool costs here. Where the real runner would run a structure in
   the calling thread, group after group, because that is faster
   (``modes.run_adaptively``), the forecast takes that way too.
3. On ``W`` workers each worker is a process with its own GIL and ``threads_per_worker``
   lanes. Tasks go where pargraph's placement puts them; the scheduler takes in their ends
   one at a time, a task starts a round trip after the end that made it ready, an input made
   on another worker arrives after a transfer once the task reached its worker, and the
   training state's copies to a second worker end the step. An eager run sends a value the
   step made here (a random mask) that several of its tasks read as a data task of its own.
   The costs are this machine's loopback's, measured
   (:func:`pargraph.machine_costs.loopback`), or given.
4. The time the step spends outside its runs (recording ops, Python between the runs) is the
   calling thread's, as traced, less what the caller saves coming back from a shorter wait on
   each run than traced (or plus what a longer one costs): the first Python after a wait
   refills the caches the machine's other work took meanwhile, as long as a small step's
   takes after a wait of that length on this machine (:func:`pargraph.caller_costs.away_costs`).

What it leaves out, and so how far to trust it: docs/forecast.md.
"""

from __future__ import annotations

import functools
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from pargraph.caller_costs import Away, away_costs
from pargraph.costs import disagree
from pargraph.engine import lowering, modes
from pargraph.engine.lowering import ALL_BLAS
from pargraph.engine.partition import estimated_seconds, placed_partition
from pargraph.engine.threads import PYTHON_SWITCH_INTERVAL, state
from pargraph.graph import Node
from pargraph.machine_costs import (
    MAX_SHARE,
    Network,
    Replay,
    WakeUps,
    beside_itself,
    call_costs,
    local_costs,
    loopback,
    measure_replay,
    pair_costs,
)
from pargraph.remote.layout import rides
from pargraph.remote.workers import placement_on, wanted_replicas
from pargraph.simulation import Outcome, Segment, Simulation, Task, nbytes
from pargraph.trace import PHASE_COLORS, Trace, critical_path

#: The predicted timeline's lane of the caller, which reads values back from a cluster.
CLIENT_LANE = "client"
#: The most seconds per node the GIL's hand-overs are fitted to (``Forecast._fit_handover``),
#: and the halvings of the interval the fit ends in.
HANDOVER_MOST, HANDOVER_STEPS = 1e-3, 16
#: The most seconds of the GIL a thread back from a wait is fitted to take (``fitted_retake``).
RETAKE_MOST = 2e-3
#: The predicted timeline's colours: the trace's by phase, and the caller's read-backs'.
TIMELINE_COLORS = {**PHASE_COLORS, "transfer": "#8C8C8C"}


def _with_data_tasks(run: Any, tasks: list[Task], nodes: list[Node], *per_node: list
                     ) -> tuple[list, ...]:
    """An eager run on a cluster sends each value the step made here that it reads for the
    first time (``RunRecord.shipped``: a random mask, a constant) in its graph; one that does
    not ride in its readers (``layout.rides``) as a data task of its own (``lowering.lower``),
    which the scheduler takes up and a worker runs like any task. Each becomes a task of one
    member taking no time, on the worker of its first reader, appended to ``tasks``; returns
    ``nodes`` and the ``per_node`` lists (seconds, shares, shares on a core) with those
    members added."""
    shipped, readers, first_reader = set(run.shipped), defaultdict(set), {}
    for t, task in enumerate(tasks):
        for m in task.members:
            for i in nodes[m].inputs:
                if type(i) is Node and i.key in shipped:
                    readers[i.key].add(t)
                    first_reader.setdefault(i.key, (t, i))
    leaves = {key: i for key, (t, i) in first_reader.items()
              if not rides(nbytes(i), len(readers[key]) == 1)}
    if not leaves:
        return (nodes, *per_node)
    for k, key in enumerate(leaves):
        tasks.append(Task([len(nodes) + k], tasks[first_reader[key][0]].worker))
    seconds, shares, on_core = per_node
    added = len(leaves)
    return (list(nodes) + list(leaves.values()), seconds + [0.0] * added,
            shares + [0.0] * added, on_core + [1.0] * added)


@functools.cache
def fitted_retake(wake_ups: WakeUps | None) -> float:
    """The seconds of the GIL a thread back from a wait takes (``Simulation.retake``) with
    which the simulated wake-up loop (:func:`pargraph.machine_costs.measure_wake_ups`) takes
    as long as it was timed (:func:`simulated_wake_ups`). 0 where the loop without
    hand-overs takes as long already.

    Examples
    --------
    >>> from pargraph.machine_costs import WakeUps
    >>> fitted_retake(WakeUps(4, 2, 30e-6, 1.1e-3, 2.0e-3))  # no slower than its sleeps
    0.0
    """
    if wake_ups is None:
        return 0.0
    took = wake_ups.took
    if simulated_wake_ups(wake_ups, 0.0) >= took:
        return 0.0
    low, high = 0.0, 1e-4
    while simulated_wake_ups(wake_ups, high) < took and high < RETAKE_MOST:
        low, high = high, 2 * high
    for _ in range(HANDOVER_STEPS):
        middle = (low + high) / 2
        if simulated_wake_ups(wake_ups, middle) < took:
            low = middle
        else:
            high = middle
    return min(high, RETAKE_MOST)


def simulated_wake_ups(w: WakeUps, retake: float) -> float:
    """The seconds the wake-up loop ``w`` takes in simulation with ``retake``: each thread a
    task of its sleeps, each sleep and its Python a node of its time alone on one thread, on
    this machine's cores with the switch interval of pargraph's runs."""
    count = w.threads * w.sleeps
    nodes = [_Replayed(f"wake-up-{k}", "sleep") for k in range(count)]
    tasks = [Task(list(range(k * w.sleeps, (k + 1) * w.sleeps)), 0) for k in range(w.threads)]
    return Simulation(tasks, nodes, [w.alone] * count, [1.0] * count, 1, w.threads, False,
                      None, 0.0, Outcome(("threads", w.threads), 0.0, w.threads),
                      on_core=[min(w.python / w.alone, 1.0)] * count, cores=os.cpu_count(),
                      retake=retake, switch_interval=state.switching.interval()).run()


def _run_after(outcome: Outcome, nodes: list[Node], seconds: list[float], after: set[str],
               end: float) -> float:
    """The nodes of ``after`` (keys) run from ``end`` one after another in the calling thread,
    as a compiled program runs its updates of big state after its tasks; returns when the
    last ends."""
    for node, took in zip(nodes, seconds):
        if node.key in after:
            outcome.segments.append(Segment("thread 0", node.key, node.op.name, node.phase,
                                            end, end + took))
            outcome.compute += took
            end += took
    return end


# --- the forecast ---------------------------------------------------------------------


class Forecast:
    """A traced step's predicted time on each configuration: ``threads`` of this process,
    or ``workers`` of a dask cluster (``threads_per_worker`` each). Configurations not asked
    for at first are simulated when asked about.

    Examples
    --------
    >>> import pargraph
    >>> a = pargraph.randn(64, 64)
    >>> with pargraph.trace() as tr:
    ...     _ = sum((a @ a).tanh().sum() for _ in range(4)).item()
    >>> fc = pargraph.forecast(tr, threads=[1, 2], measure_gil=False)
    >>> fc.speedup(threads=2) >= 1.0
    True
    """

    def __init__(self, trace: Trace, threads: Any = (1, 2, 4, 8, 16), workers: Any = (),
                 threads_per_worker: int = 1, network: Network | None = None,
                 gil: float | dict | None = None, measure_gil: bool = True,
                 cores: int | None = None, away: Away | None = None) -> None:
        if not trace.run_records:
            raise ValueError("pargraph.forecast: the trace holds no run, so there is no step "
                             "to forecast; trace one training step: `with pargraph.trace() "
                             "as tr: step()` (a value realized inside the block runs there)")
        if any(run.remote for run in trace.run_records):
            raise ValueError("pargraph.forecast: the trace ran on a cluster, whose nodes' "
                             "GIL shares and times are the workers'; trace the step on this "
                             "machine's threads (the default scheduler) and forecast from it")
        if threads_per_worker < 1:
            raise ValueError(f"pargraph.forecast: threads_per_worker must be at least 1, got "
                             f"{threads_per_worker}")
        if cores is not None and (isinstance(cores, bool) or not isinstance(
                cores, (int, np.integer)) or cores < 1):
            raise ValueError(f"pargraph.forecast: cores must be a whole number of at least 1 "
                             f"(or None: each thread or worker process has cores of its "
                             f"own), got {cores!r}")
        self.trace = trace
        #: The cores every simulated thread and process shares (None: as many as they need).
        self.cores = None if cores is None else int(cores)
        self.threads_per_worker = int(threads_per_worker)
        self._network = network
        self._away = away
        self._outcomes: dict[tuple[str, int], Outcome] = {}
        summary = trace.summary(print_it=False)
        self.work, self.critical_path = summary.work, summary.critical_path
        self.measured = summary.wall + self._outside()
        self.traced_threads = max(run.threads for run in trace.run_records)
        self.shares, self.measured_kinds = self._shares(gil, measure_gil)
        for n in _counts("threads", threads):
            self.outcome(threads=n)
        for n in _counts("workers", workers):
            self.outcome(workers=n)

    # --- inputs ---

    def _outside(self) -> float:
        """The calling thread's time between and around the runs, but for the trace's own
        bookkeeping and the garbage collector's passes: pargraph pauses the collector while
        it builds and runs graphs, so its passes fall outside the runs, and one full pass
        in the traced step (tens of milliseconds, every few hundred steps) would stand for
        every step."""
        if self.trace.stopped is None:
            return 0.0
        inside = sum(stop - start for start, stop in self.trace.runs) + self.trace.bookkeeping
        return max(self.trace.stopped - self.trace.started - inside - self.trace.collecting,
                   0.0)

    def _outside_after(self, outcome: Outcome) -> float:
        """The caller's time outside the runs on ``outcome``'s configuration: the traced time,
        less, per run, how much less the Python after it (up to the next run; the last run's,
        up to the step's first) takes after the configuration's wait on it than after the
        traced configuration's, both simulated (:attr:`away`), at most that Python's time."""
        traced = self._outside()
        runs = self.trace.runs
        if outcome.config == ("threads", self.traced_threads) or self.trace.stopped is None:
            return traced
        was = self.outcome(threads=self.traced_threads).waits
        bounds = [self.trace.started, *(t for run in runs for t in run), self.trace.stopped]
        gaps = [max(bounds[2 * k + 1] - bounds[2 * k], 0.0) for k in range(len(runs) + 1)]
        saved = 0.0
        for k, (before, now) in enumerate(zip(was, outcome.waits)):
            after = gaps[k + 1] + (gaps[0] if k == len(runs) - 1 else 0.0)
            saved += min(self.away.extra(before) - self.away.extra(now), after)
        return max(traced - saved, 0.0)

    @property
    def away(self) -> Away:
        """How much longer the caller's Python takes after a wait: as given, else measured
        on this machine once per process."""
        if self._away is None:
            self._away = away_costs()
        return self._away

    def _traced_seconds(self, run: Any) -> list[float]:
        records = self.trace.records
        return [records[n.key].duration if n.key in records and records[n.key].stop else 0.0
                for n in run.computed]

    def _shares(self, gil: float | dict | None, measure: bool) -> tuple[dict[str, float], int]:
        """Each traced node's GIL share, by key; and how many kinds of op were measured."""
        kinds = self.trace.samples.kinds
        given: dict = gil if isinstance(gil, dict) else {}
        kept = self.trace.measured
        if measure and "calls" not in kept:
            kept["calls"] = call_costs(self.trace)
        costs = kept["calls"] if measure else {}
        #: each node's seconds on one thread with BLAS on one, where its kind was measured
        self.one_thread = {key: costs[kind].seconds for key, kind in kinds.items()
                           if kind in costs}
        #: per node whose kind was measured, its time with BLAS on one thread over its time
        #: with BLAS on every core (as the trace's run on one thread had it), between 1 and
        #: the machine's cores: BLAS splits a product over at most one thread per core, and
        #: runs one too small to gain on one thread. On a shared machine, calls repeated alone
        #: read outside those bounds where the same step's products do not (docs/forecast.md).
        most = float(os.cpu_count() or 1)
        self.one_blas_thread = {
            key: min(max(costs[kind].seconds / costs[kind].seconds_all_blas, 1.0), most)
            for key, kind in kinds.items() if kind in costs and costs[kind].seconds_all_blas > 0}
        #: per ordered pair of kinds measured side by side, how much the second slows the
        #: first (``machine_costs.pair_costs``): not where shares are given
        if measure and gil is None and "pairs" not in kept:
            kept["pairs"] = pair_costs(self.trace, costs)
        self.pairs = kept["pairs"] if measure and gil is None else {}
        # a kind measured beside itself takes its share from that pair's rounds
        costs = {kind: beside_itself(cost, self.pairs[kind, kind])
                 if (kind, kind) in self.pairs else cost for kind, cost in costs.items()}
        measured = {kind: cost.gil_share for kind, cost in costs.items()}
        self.kind_costs = costs
        #: the step's nodes replayed on one thread and on two (``machine_costs.measure_replay``),
        #: and the seconds per node lost to the GIL's hand-overs that it fits: not where
        #: shares are given
        if measure and gil is None and "replay" not in kept:
            kept["replay"] = measure_replay(self.trace)
        self.replay: Replay | None = kept["replay"] if measure and gil is None else None
        self.handover = self._fit_handover()
        #: each node's share of its time on a core, where its kind was measured
        self.on_core = {key: costs[kind].on_core for key, kind in kinds.items() if kind in costs}
        #: each node's measured contention (``CallCost.contention``), where its kind was
        self.contention = {key: costs[kind].contention for key, kind in kinds.items()
                           if kind in costs and gil is None}
        shares = {}
        for key, record in self.trace.records.items():
            if isinstance(gil, (int, float)):
                shares[key] = float(gil)
            elif record.op in given:
                shares[key] = float(given[record.op])
            else:
                shares[key] = measured.get(kinds.get(key), 1.0)
        for key, share in shares.items():
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"pargraph.forecast: a GIL share is a fraction of a node's "
                                 f"time, between 0 and 1; got {share} for "
                                 f"{self.trace.records[key].op}")
        return shares, len(measured)

    def _alone(self, run: Any, nodes: list[Node], seconds: list[float],
               all_blas: bool) -> list[float]:
        """Each node's seconds alone in a configuration whose BLAS has every core
        (``all_blas``) or one thread, from its traced ``seconds``."""
        traced_all = run.blas is ALL_BLAS
        if traced_all and all_blas:
            return seconds
        # A node whose op calls BLAS takes its traced time, scaled by its kind's measured
        # ratio of BLAS on one thread over BLAS on every core where the trace ran it on every
        # core and the configuration on one, by the inverse the other way round (the traced
        # time keeps what the step's context costs a big product: caches, fresh memory); any
        # other node its kind's time alone, where measured (a trace runs node by node, each
        # timed, which costs a small op more than its own work).
        power = 0 if traced_all == all_blas else 1 if traced_all else -1
        return [s * self.one_blas_thread.get(n.key, 1.0) ** power if n.op.blas
                else self.one_thread.get(n.key, s) for n, s in zip(nodes, seconds)]

    def _pairs(self, node_kinds: list, compiled: bool, step: float
               ) -> tuple[list[int], dict[tuple[int, int], float]]:
        """Per node, of its kind (``node_kinds``, None: unknown), the kind's number among the
        kinds measured side by side (-1: none), and per ordered pair of those numbers how
        much the second slows the first over the first's time on a core, as the simulation
        takes it: in a compiled program's call here each node's time holds the program's
        ``step`` to it too, holding the GIL, as its share does."""
        if not self.pairs:
            return [-1] * len(node_kinds), {}
        number: dict[tuple, int] = {}
        for a, b in self.pairs:
            number.setdefault(a, len(number))
            number.setdefault(b, len(number))
        kinds = [number.get(kind, -1) for kind in node_kinds]
        pairs = {}
        for (a, b), slowing in self.pairs.items():
            cost = self.kind_costs[a]
            seconds, on_core = cost.seconds, cost.on_core
            if compiled:
                slowing = (slowing * seconds + step) / (seconds + step)
                on_core = (on_core * seconds + step) / (seconds + step)
            on_core = max(on_core, min(slowing, 1.0))
            pairs[number[a], number[b]] = min(slowing / on_core, MAX_SHARE) if on_core else 0.0
        return kinds, pairs

    def _fit_handover(self) -> float:
        """The seconds per node lost to the GIL's hand-overs (``Simulation.handover``) with
        which the simulated :attr:`replay` (:meth:`_replay_speedup`) gives the speed-up the
        replay measured; 0 where the shares and pairs alone give no more than it did."""
        replay = self.replay
        if replay is None or self._replay_speedup(0.0) <= replay.speedup:
            return 0.0
        low, high = 0.0, max(replay.seconds.values())
        while self._replay_speedup(high) > replay.speedup and high < HANDOVER_MOST:
            low, high = high, 2 * high
        for _ in range(HANDOVER_STEPS):
            middle = (low + high) / 2
            if self._replay_speedup(middle) > replay.speedup:
                low = middle
            else:
                high = middle
        return min(high, HANDOVER_MOST)

    def _replay_speedup(self, handover: float) -> float:
        """The speed-up of :attr:`replay` as simulated with ``handover``: its nodes, each its
        kind's time alone, on one thread, and every other one on each of two threads of one
        process on this machine's cores, as they were replayed."""
        replay, costs = self.replay, self.kind_costs
        kinds = list(replay.kinds)
        seconds = [replay.seconds[kind] for kind in kinds]
        on_core, shares = _slowing(
            [costs[k].gil_share if k in costs else 1.0 for k in kinds],
            [costs[k].contention if k in costs else 0.0 for k in kinds],
            [costs[k].on_core if k in costs else 1.0 for k in kinds])
        numbers, pairs = self._pairs(kinds, False, 0.0)
        nodes = [_Replayed(f"replayed-{k}", kind[0]) for k, kind in enumerate(kinds)]
        halves = [Task(list(range(first, len(kinds), 2)), 0) for first in (0, 1)]
        end = Simulation(halves, nodes, seconds, shares, 1, 2, False, None, 0.0,
                         Outcome(("threads", 2), 0.0, 2), on_core=on_core,
                         cores=os.cpu_count(), kinds=numbers, pairs=pairs,
                         handover=handover).run()
        return sum(seconds) / end if end > 0 else 1.0

    @property
    def network(self) -> Network:
        """The cluster's message costs: as given, else this machine's loopback, measured."""
        if self._network is None:
            self._network = loopback()
        return self._network

    # --- simulating ---

    def outcome(self, threads: int | None = None, workers: int | None = None) -> Outcome:
        """The simulated step on ``threads`` threads, or on ``workers`` workers."""
        config = _config(threads, workers)
        if config not in self._outcomes:
            self._outcomes[config] = self._simulate(*config)
        return self._outcomes[config]

    def _simulate(self, where: str, count: int) -> Outcome:
        remote = where == "workers"
        lanes = count * self.threads_per_worker if remote else count
        outcome = Outcome((where, count), 0.0, lanes)
        now = 0.0
        for k, run in enumerate(self.trace.run_records):
            began = now
            now = self._simulate_run(run, remote, count, now, outcome)
            if remote:
                # each value the caller read after this run travels back from the cluster
                network = self.network
                back = sum(network.read_latency + size / network.bandwidth
                           for after, size in self.trace.reads if after == k + 1)
                if back:
                    outcome.segments.append(Segment(CLIENT_LANE, f"read-back-{k}", "read back",
                                                    "transfer", now, now + back))
                now += back
                outcome.transfers += back
            outcome.waits.append(now - began)
        outcome.outside = self._outside_after(outcome)
        outcome.step_time = now + outcome.outside
        return outcome

    def _simulate_run(self, run: Any, remote: bool, count: int, now: float,
                      outcome: Outcome) -> float:
        """Simulates one run from ``now``; returns when it ends."""
        local = local_costs()
        retake = fitted_retake(local.wake_ups)
        nodes = run.computed
        seconds = self._traced_seconds(run)
        shares = [self.shares.get(n.key, 1.0) for n in nodes]
        contention = [self.contention.get(n.key, 0.0) for n in nodes]
        workers = count if remote else 1
        threads = self.threads_per_worker if remote else count
        # A cluster's workers run BLAS on one thread each (dask's nanny starts them so:
        # ``distributed.nanny.pre-spawn-environ``); threads as the run's plan says.
        all_blas = not remote and lowering.blas_threads_of(nodes, threads) is ALL_BLAS
        seconds = self._alone(run, nodes, seconds, all_blas)
        # a product with BLAS on every core takes every core of the machine while it runs
        widths = [self.cores if all_blas and self.cores and n.op.blas else 1 for n in nodes]
        on_core = [self.on_core.get(n.key, 1.0) for n in nodes]
        if run.compiled and not remote:
            # a compiled program's call here: its guards and the values it writes back in the
            # calling thread first, and per node the program's step to it, holding the GIL
            now += local.compiled_call + local.compiled_value * len(run.outputs)
            step = local.compiled_node
            shares = [(h * s + step) / (s + step) for h, s in zip(shares, seconds)]
            on_core = [(c * s + step) / (s + step) for c, s in zip(on_core, seconds)]
            contention = [c * s / (s + step) for c, s in zip(contention, seconds)]
            seconds = [s + step for s in seconds]
        on_core, shares = _slowing(shares, contention, on_core)
        kinds_of = self.trace.samples.kinds
        kinds, pairs = self._pairs([kinds_of.get(n.key) for n in nodes],
                                   run.compiled and not remote, local.compiled_node)
        hosts = tuple((f"tcp://forecast-worker-{k}", threads) for k in range(workers)) \
            if remote and workers > 1 and placement_on() else ()
        granularity = modes.configured_granularity(remote, workers * threads, hosts)
        # the work a steady run partitions with: the estimates, unless measured times
        # disagree with them (lowering.Timing); a compiled program keeps the partition it
        # was captured with, from the estimates, and cluster runs are not timed
        estimated = [estimated_seconds(node) for node in nodes]
        timed = not remote and not run.compiled
        work = seconds if timed and disagree(estimated, seconds) else estimated
        # a compiled program's updates of big state run after its tasks (in_place); the
        # run's outputs are what its tasks return, what the updates read among them
        after = set(run.after)
        tasked = [k for k, node in enumerate(nodes) if node.key not in after]
        in_tasks, work = [nodes[k] for k in tasked], [work[k] for k in tasked]
        if lowering.is_small(in_tasks, granularity.single_task_below, work) \
                or len(in_tasks) < 2:
            groups, placed = [in_tasks], [0]
        else:
            groups, placed = placed_partition(in_tasks, granularity, run.outputs, work)
        index = {id(node): k for k, node in enumerate(nodes)}
        tasks = [Task([index[id(m)] for m in group], placed[g] if hosts else 0)
                 for g, group in enumerate(groups)]
        if remote:
            # An eager run records, lowers and sends each node. A compiled step's program is
            # held on the workers (remote.programs): a call sends its group tasks' arguments,
            # as one task on one worker process, and lands each value it reads and writes.
            network = self.network
            whole = run.compiled and workers == 1 and len(tasks) > 1
            if run.compiled:
                inside = {id(node) for node in nodes}
                read = len({id(i) for node in nodes for i in node.input_nodes()
                            if id(i) not in inside})
                submitted = (network.compiled_call + network.run_node * len(tasks)
                             + network.compiled_node * len(nodes)
                             + network.compiled_value * (read + len(run.outputs)) / 2)
            else:
                submitted = network.run_latency + network.run_node * len(nodes)
                nodes, seconds, shares, on_core = _with_data_tasks(
                    run, tasks, nodes, seconds, shares, on_core)
                kinds += [-1] * (len(nodes) - len(kinds))
            now += submitted
            outcome.scheduling += submitted
            if whole:
                # the one task runs its groups on the worker's threads
                now += network.task_latency
                outcome.scheduling += network.task_latency
                remote = False
        # a dask worker process keeps Python's switch interval; pargraph's runs lower it here
        switch = PYTHON_SWITCH_INTERVAL if remote else state.switching.interval()
        if not remote and len(tasks) > 1:
            # the runner's other way: in the calling thread, group after group, which it
            # takes when faster (modes.run_adaptively); the forecast takes the faster too
            inline = Outcome(outcome.config, 0.0, 1)
            inline_end = Simulation([Task([k for t in tasks for k in t.members], 0)], nodes,
                                    seconds, shares, 1, 1, False, None, now, inline,
                                    on_core=on_core, cores=self.cores, widths=widths,
                                    retake=retake, kinds=kinds, pairs=pairs,
                                    switch_interval=switch).run()
            trial = Outcome(outcome.config, 0.0, outcome.lanes)
            threaded_end = Simulation(tasks, nodes, seconds, shares, 1, threads, False, None,
                                      now + local.run, trial, local.task, on_core,
                                      self.cores, widths=widths, retake=retake,
                                      kinds=kinds, pairs=pairs, handover=self.handover,
                                      switch_interval=switch).run()
            chosen, end = (inline, inline_end) if inline_end <= threaded_end \
                else (trial, threaded_end)
            _merge(outcome, chosen)
            return _run_after(outcome, nodes, seconds, after, end)
        # Training state is copied to a second worker as each task holding it ends, and the
        # next run waits for the copies.
        returned = {index[id(node)] for node in run.outputs if id(node) in index}
        simulation = Simulation(tasks, nodes, seconds, shares, workers, threads, remote,
                                self.network if remote else None, now, outcome,
                                on_core=on_core, cores=self.cores,
                                returned=returned, widths=None if remote else widths,
                                copies=remote and workers > 1 and wanted_replicas() > 1,
                                retake=retake, kinds=kinds, pairs=pairs,
                                handover=self.handover, switch_interval=switch)
        return _run_after(outcome, nodes, seconds, after, simulation.run())

    # --- reading ---

    def step_time(self, threads: int | None = None, workers: int | None = None) -> float:
        """Predicted seconds of one step on ``threads`` threads or ``workers`` workers."""
        return self.outcome(threads, workers).step_time

    def speedup(self, threads: int | None = None, workers: int | None = None) -> float:
        """Predicted speed-up over one thread (``threads=``) or one worker (``workers=``)."""
        where, count = _config(threads, workers)
        one = self.outcome(**{where: 1}).step_time
        return one / self.outcome(**{where: count}).step_time

    def rows(self) -> list[dict]:
        """The configurations simulated so far, as dicts (seconds and shares)."""
        rows = []
        for (where, count), o in sorted(self._outcomes.items()):
            rows.append({"where": where, "count": count, "step_time": o.step_time,
                         "speedup": self.speedup(**{where: count}), "busy": o.busy,
                         "gil_wait": o.gil_wait, "core_wait": o.core_wait,
                         "transfers": o.transfers,
                         "scheduling": o.scheduling, "outside": o.outside})
        return rows

    def __str__(self) -> str:
        ms = 1000.0
        traced = self.outcome(threads=self.traced_threads)
        lines = [
            f"forecast of one traced step: work {self.work * ms:.2f} ms, critical path "
            f"{self.critical_path * ms:.2f} ms (available parallelism "
            f"{self.work / self.critical_path if self.critical_path else 0.0:.2f}x)",
            f"traced on {_name('threads', self.traced_threads)}: measured "
            f"{self.measured * ms:.2f} ms, forecast {traced.step_time * ms:.2f} ms",
            f"GIL shares measured for {self.measured_kinds} kind(s) of op, and "
            f"{len({frozenset(p) for p in self.pairs})} pair(s) of them side by side; share "
            f"of the work holding the GIL: {self.gil_held_share():.0%}",
        ]
        if self.replay is not None:
            lines.append(f"the GIL's hand-overs: {self.handover * 1e6:.1f} us a node beside "
                         f"another, fitted to {len(self.replay.kinds)} of its small calls "
                         f"replayed on two threads ({self.replay.speedup:.2f}x)")
        if self.cores is not None:
            lines.append(f"every thread and process shares {self.cores} core(s)")
        lines.append("the waits, transfers and scheduling add up over every lane and task, so "
                     "they can exceed the step; outside: the caller's time between the runs")
        lines += ["", f"{'configuration':<26}{'step':>11}{'speed-up':>10}{'busy':>7}"
                  f"{'GIL wait':>11}" + (f"{'core wait':>11}" if self.cores else "")
                  + f"{'transfers':>11}{'scheduling':>12}{'outside':>11}"]
        for row in self.rows():
            label = _name(row["where"], row["count"])
            if row["where"] == "workers":
                label += f" x {_name('threads', self.threads_per_worker)}"
            core_wait = f"{row['core_wait'] * ms:8.2f} ms" if self.cores else ""
            lines.append(f"{label:<26}{row['step_time'] * ms:8.2f} ms{row['speedup']:9.2f}x"
                         f"{row['busy']:7.0%}{row['gil_wait'] * ms:8.2f} ms{core_wait}"
                         f"{row['transfers'] * ms:8.2f} ms{row['scheduling'] * ms:9.2f} ms"
                         f"{row['outside'] * ms:8.2f} ms")
        return "\n".join(lines)

    def gil_held_share(self) -> float:
        """The share of the traced work that holds the GIL."""
        nodes = self.trace.nodes()
        total = sum(r.duration for r in nodes)
        held = sum(r.duration * self.shares.get(r.key, 1.0) for r in nodes)
        return held / total if total else 0.0

    def critical_nodes(self) -> list:
        """The traced nodes on the critical path, first to last."""
        return critical_path(self.trace.nodes())[1]

    # --- pictures ---

    def to_chrome(self, path: str | os.PathLike, threads: int | None = None,
                  workers: int | None = None) -> None:
        """Write the predicted timeline on one configuration in Chrome's trace event format
        (Perfetto, chrome://tracing), one lane per simulated thread."""
        segments = self.outcome(threads, workers).segments
        lanes = sorted({s.lane for s in segments})
        tid = {lane: k + 1 for k, lane in enumerate(lanes)}
        events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                               "args": {"name": f"forecast: {_name(*_config(threads, workers))}"}}]
        events += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid[lane],
                    "args": {"name": lane}} for lane in lanes]
        events += [{"name": s.op, "cat": s.phase, "ph": "X", "ts": s.start * 1e6,
                    "dur": (s.stop - s.start) * 1e6, "pid": 1, "tid": tid[s.lane],
                    "args": {"key": s.key, "phase": s.phase}} for s in segments]
        with open(path, "w") as file:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, file)

    def plot(self, path: str | os.PathLike, threads: int | None = None,
             workers: int | None = None) -> None:
        """Write a PNG: the measured timeline above, the predicted one on the configuration
        below, on one time axis, nodes coloured by phase."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        measured = self.trace.nodes()
        origin = min((r.start for r in measured), default=0.0)
        rows = [("measured", [(r.lane, r.phase, r.start - origin, r.stop - origin)
                              for r in measured])]
        outcome = self.outcome(threads, workers)
        rows.append((f"forecast, {_name(*outcome.config)}",
                     [(s.lane, s.phase, s.start, s.stop) for s in outcome.segments]))
        heights = [max(len({lane for lane, *_ in spans}), 1) for _, spans in rows]
        fig, axes = plt.subplots(2, 1, sharex=True, figsize=(11, 1.6 + 0.45 * sum(heights)),
                                 gridspec_kw={"height_ratios": heights})
        for ax, (title, spans) in zip(axes, rows):
            lanes = sorted({lane for lane, *_ in spans})
            for lane, phase, start, stop in spans:
                ax.broken_barh([(start * 1e3, max((stop - start) * 1e3, 1e-3))],
                               (lanes.index(lane) - 0.35, 0.7),
                               facecolors=TIMELINE_COLORS.get(phase, "grey"))
            ax.set_yticks(range(len(lanes)), lanes)
            ax.invert_yaxis()
            ax.set_title(title, loc="left", fontsize=10)
        axes[-1].set_xlabel("time (ms); the measured lanes show the runs only")
        fig.legend(handles=[Patch(color=c, label="read back" if p == "transfer" else p)
                            for p, c in TIMELINE_COLORS.items()],
                   loc="lower center", ncol=5, frameon=False)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        fig.savefig(path, dpi=110)
        plt.close(fig)


def forecast(trace: Trace, threads: Any = (1, 2, 4, 8, 16), workers: Any = (),
             threads_per_worker: int = 1, network: Network | None = None,
             gil: float | dict | None = None, measure_gil: bool = True,
             cores: int | None = None, away: Away | None = None) -> Forecast:
    """Predict a traced step's time on other numbers of threads and of cluster workers.

    Parameters
    ----------
    trace : Trace
        From ``with pargraph.trace() as tr:`` around one steady step, eager or compiled,
        on this machine's threads.
    threads, workers : iterable of int
        Configurations to simulate now (others are simulated when asked about).
    threads_per_worker : int
        Threads of each simulated worker process.
    network : Network, optional
        A cluster's message costs; default: this machine's loopback, measured once.
    gil : float or dict, optional
        Every node's GIL share, or shares by op name; default: measured per kind of op.
    measure_gil : bool
        False: kinds not given in ``gil`` hold the GIL throughout (nothing is measured).
    cores : int, optional
        The cores of the one machine every simulated thread, worker process and the
        scheduler share, as a ``LocalCluster`` on a laptop does; where their steps on a core
        want more cores than there are, each goes slower, as Linux shares them. Default: each
        thread (``threads=``) or worker process has cores of its own, as on a cluster of
        machines.
    away : Away, optional
        How much longer the caller's Python takes after waiting on a run, by the wait;
        default: measured on this machine once per process
        (:func:`pargraph.caller_costs.away_costs`).

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.randn(32, 32, requires_grad=True)
    >>> with pargraph.trace() as tr:
    ...     sum((w * k).tanh().sum() for k in range(4)).backward()
    ...     _ = w.grad.numpy()
    >>> fc = pargraph.forecast(tr, threads=[1, 4], gil=0.0)
    >>> fc.step_time(threads=4) <= fc.step_time(threads=1)
    True
    """
    return Forecast(trace, threads, workers, threads_per_worker, network, gil, measure_gil,
                    cores, away)


def _slowing(shares: list[float], contention: list[float], on_core: list[float]
             ) -> tuple[list[float], list[float]]:
    """Per node, its share of its time on a core (at least its GIL share), and how much a
    node of its process running beside it slows it, over that time: its GIL share and, where
    a pair of its kind took longer than one thread making both's calls, the excess
    (``CallCost.contention``)."""
    on_core = [max(c, h) for c, h in zip(on_core, shares)]
    return on_core, [min((h + 2 * k / c) / c, MAX_SHARE) if c > 0 else 0.0
                     for h, k, c in zip(shares, contention, on_core)]


@dataclass
class _Replayed:
    """A node of a replayed step (``machine_costs.Replay``), as the simulation reads it: it
    reads no other node."""

    key: str
    name: str  # its op's
    phase: str = "forward"
    inputs: tuple = ()

    @property
    def op(self) -> Any:
        return self


def _merge(into: Outcome, part: Outcome) -> None:
    into.compute += part.compute
    into.gil_wait += part.gil_wait
    into.core_wait += part.core_wait
    into.transfers += part.transfers
    into.scheduling += part.scheduling
    into.segments += part.segments


def _config(threads: int | None = None, workers: int | None = None) -> tuple[str, int]:
    if (threads is None) == (workers is None):
        raise ValueError("pargraph.forecast: name one configuration: threads=N or workers=N, "
                         f"got threads={threads!r}, workers={workers!r}")
    where, count = ("threads", threads) if threads is not None else ("workers", workers)
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"pargraph.forecast: {where} must be a whole number of at least 1, "
                         f"got {count!r}")
    return where, int(count)


def _counts(where: str, counts: Any) -> list[int]:
    if isinstance(counts, (int, np.integer)):
        counts = [counts]
    return [_config(**{where: n})[1] for n in counts]


def _name(where: str, count: int) -> str:
    singular = where[:-1]
    return f"{count} {singular if count == 1 else where}"
