"""Traces: how a graph actually ran, node by node.

Inside ``with pargraph.trace() as tr:`` every node realized (forward, backward, accumulation,
optimizer update) is recorded with its task key, op, phase, the time it became *ready* (its
last input finished: the end of its wait), the time it *started* and *finished*, and the
*lane* (thread, or worker and thread) that ran it.

Where the times come from
    Each node reports its own start and stop from inside the thread that runs it
    (``runtime.TaskTimes``), also when it is one member of a fused task: dask's local
    pretask/posttask callbacks run on the scheduler's thread and would measure queueing too,
    and distributed's task stream knows tasks, not the nodes fused into them. On a cluster,
    ``client.run`` switches the recording on in every worker and collects it afterwards.

What a trace keeps for a forecast
    Copies of each run's nodes with their inputs (:class:`RunRecord`; a run cuts its nodes'
    inputs, and the copies hold no values) and the first call of each kind of op with its
    arguments (``runtime.OpSamples``), which :func:`pargraph.forecast` partitions again and
    times. A trace therefore keeps those arguments alive while it lives.

What the summary computes
    *work* is the sum of node durations; the *critical path* is the longest chain of
    dependent nodes, weighted by duration. *Available parallelism* = work / critical path: how
    many cores the graph could keep busy. *Achieved parallelism* = work / wall: how many it did.
    *Scheduling overhead* is wall time during which no node was running.
"""

from __future__ import annotations

import contextlib
import gc
import graphlib
import json
import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pargraph import costs, runtime
from pargraph.autograd.backward_graph import BackwardTemplate
from pargraph.engine import execution, lowering, modes
from pargraph.graph import Node, uid_mark
from pargraph.remote.layout import is_future
from pargraph.remote.workers import on_every_worker

PHASE_COLORS = {"forward": "#4C9F70", "backward": "#3B75AF", "accumulate": "#D1495B",
                "update": "#EDAE49"}
_CHROME_COLORS = {"forward": "good", "backward": "rail_response", "accumulate": "terrible",
                  "update": "yellow"}


@dataclass
class NodeRecord:
    """One realized node: what it was and when and where it ran (times in seconds)."""

    key: str
    op: str
    phase: str
    scope: str
    inputs: tuple[str, ...]
    ready: float = 0.0
    start: float = 0.0
    stop: float = 0.0
    lane: str = ""

    @property
    def duration(self) -> float:
        return self.stop - self.start

    @property
    def waited(self) -> float:
        return max(self.start - self.ready, 0.0)


@dataclass
class Summary:
    """The numbers ``Trace.summary()`` reports (seconds)."""

    wall: float
    work: float
    critical_path: float
    overhead: float
    nodes: int
    lanes: int
    by_phase: dict[str, float] = field(default_factory=dict)
    by_op: dict[str, float] = field(default_factory=dict)
    critical_nodes: list[NodeRecord] = field(default_factory=list)
    plan_hits: int = 0
    plan_misses: int = 0
    backward_hits: int = 0
    backward_misses: int = 0
    cost_decisions: list[str] = field(default_factory=list)

    @property
    def available_parallelism(self) -> float:
        return self.work / self.critical_path if self.critical_path else 0.0

    @property
    def achieved_parallelism(self) -> float:
        return self.work / self.wall if self.wall else 0.0

    def __str__(self) -> str:
        if not self.nodes:
            return ("no node ran inside the trace block. pargraph runs recorded ops only when a "
                    "value is needed (item(), numpy(), print, optimizer.step(), "
                    "pargraph.compute()); values realized before the block are not run again. "
                    "Put the code that computes them inside `with pargraph.trace():`.")
        ms = 1000.0
        lines = [
            f"nodes {self.nodes} on {self.lanes} lane(s)",
            f"wall time            {self.wall * ms:9.2f} ms  (inside dask runs)",
            f"total work           {self.work * ms:9.2f} ms",
            f"critical path        {self.critical_path * ms:9.2f} ms",
            f"available parallelism {self.available_parallelism:8.2f}x  (work / critical path)",
            f"achieved parallelism  {self.achieved_parallelism:8.2f}x  (work / wall)",
            f"scheduling overhead  {self.overhead * ms:9.2f} ms  (wall time with no node running)",
            "work by phase:  "
            + ", ".join(f"{k} {v * ms:.2f} ms" for k, v in self.by_phase.items()),
            f"plan cache            {self.plan_hits} hit(s), {self.plan_misses} miss(es)  "
            "(a miss partitions a new graph structure)",
            f"backward cache        {self.backward_hits} hit(s), {self.backward_misses} "
            "miss(es)  (a miss calls the vjps of a new forward structure)",
            "work by op (top 8):",
        ]
        top_ops = sorted(self.by_op.items(), key=lambda kv: -kv[1])[:8]
        width = max([24] + [len(op) for op, _ in top_ops])
        lines += [f"  {op:<{width}} {t * ms:9.2f} ms" for op, t in top_ops]
        lines.append("critical path, longest nodes:")
        lines += [f"  {r.key:<32} {r.phase:<10} {r.duration * ms:8.2f} ms"
                  for r in sorted(self.critical_nodes, key=lambda r: -r.duration)[:5]]
        lines += [f"measured costs: {text}" for text in self.cost_decisions]
        return "\n".join(lines)


def _cache_counts() -> tuple[int, int, int, int]:
    return (lowering.PlanCache.hits, lowering.PlanCache.misses,
            BackwardTemplate.cache.hits, BackwardTemplate.cache.misses)


@dataclass
class RunRecord:
    """One dask run inside a trace: its nodes (a topological order), the ones it returned,
    and where it went (threads of this process, or a cluster's worker threads); when it ran
    is in ``Trace.runs``."""

    computed: list[Node]
    outputs: list[Node]
    threads: int
    remote: bool
    #: BLAS's threads in the run (``lowering.blas_threads_of``)
    blas: str = lowering.ONE_BLAS
    #: whether a compiled step's program made the run (it sends tasks, not nodes)
    compiled: bool = False
    #: the keys of the values held here that it reads, made inside the trace and by none of
    #: its runs (a step's random masks and constants): a run on a cluster sends each in its
    #: graph (``lowering.lower``)
    shipped: tuple[str, ...] = ()
    #: the keys of the nodes a compiled step's program runs after its tasks, one after
    #: another in the calling thread (its updates of big state, ``in_place``; ``outputs``
    #: are then what the tasks return, what these read among them)
    after: tuple[str, ...] = ()


class CollectorTime:
    """A ``gc.callbacks`` entry that adds up the seconds of Python's cyclic collector's passes
    that begin outside pargraph's runs (``open_runs``: those under way); a pass inside a run,
    in another thread, is the run's time already.

    Examples
    --------
    >>> import gc
    >>> clock = CollectorTime()
    >>> gc.callbacks.append(clock)
    >>> _ = gc.collect()
    >>> gc.callbacks.remove(clock)
    >>> clock.seconds > 0
    True
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.open_runs = 0
        self._start = 0.0
        self._counting = threading.Lock()  # runs of several threads enter and leave at once

    @contextlib.contextmanager
    def inside_run(self) -> Iterator[None]:
        """Counts a run under way for the block's duration."""
        with self._counting:
            self.open_runs += 1
        try:
            yield
        finally:
            with self._counting:
                self.open_runs -= 1

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            if not self.open_runs:
                self._start = time.perf_counter()
        elif self._start:  # not a pass that began before the clock was added
            self.seconds += time.perf_counter() - self._start
            self._start = 0.0


class Trace:
    """Records the nodes realized inside ``with pargraph.trace() as tr:``."""

    def __init__(self) -> None:
        self.records: dict[str, NodeRecord] = {}
        self.runs: list[tuple[float, float]] = []
        #: Each run's nodes, kept for :func:`pargraph.forecast` to partition again.
        self.run_records: list[RunRecord] = []
        #: The first call of each kind of op that ran in this process (``runtime.OpSamples``).
        self.samples = runtime.OpSamples()
        #: What :func:`pargraph.forecast` measured of ``samples`` on this machine (its ops'
        #: calls alone and side by side), by what: measured once, so that every forecast
        #: of this trace reads the same costs and asks again costs no time.
        self.measured: dict[str, Any] = {}
        self._lanes: dict[Any, str] = {}
        self._caches_at_start = _cache_counts()
        self.plan_hits = self.plan_misses = self.backward_hits = self.backward_misses = 0
        self.started, self.stopped = time.time(), None
        self._first_uid = uid_mark()  # nodes made inside the block have greater uids
        #: Seconds the trace spent on its own records around the runs.
        self.bookkeeping = 0.0
        self._collector = CollectorTime()
        #: Structures partitioned again from measured times inside the block (pargraph.costs).
        self.cost_decisions: list[str] = []
        #: The values the caller read that a run inside the block computed and kept (not a
        #: 0-d one, which comes back with its run): each as (runs before it, its bytes).
        self.reads: list[tuple[int, int]] = []

    def _count_cache_use(self) -> None:
        now = _cache_counts()
        (self.plan_hits, self.plan_misses, self.backward_hits, self.backward_misses) = (
            b - a for a, b in zip(self._caches_at_start, now))

    # --- recording ----------------------------------------------------------------------

    @property
    def collecting(self) -> float:
        """Seconds Python's cyclic garbage collector ran inside the block, outside the runs."""
        return self._collector.seconds

    @contextlib.contextmanager
    def run(self, computed: list[Node], get: Any, outputs: Sequence[Node] = (),
            compiled: bool = False, after: Sequence[Node] = ()) -> Iterator[None]:
        """Entered by the execution layer around each dask run of ``computed``, which returns
        ``outputs``; ``compiled``: the run is a compiled step's program, which runs ``after``
        (of ``computed``) after its tasks, in the calling thread."""
        with self._collector.inside_run(), self._recorded_run(computed, get, outputs,
                                                               compiled, after):
            yield

    @contextlib.contextmanager
    def _recorded_run(self, computed: list[Node], get: Any, outputs: Sequence[Node],
                      compiled: bool, after: Sequence[Node]) -> Iterator[None]:
        entered = time.time()
        structure = _copy_structure(computed)  # a run cuts its nodes' inputs
        position = {id(node): k for k, node in enumerate(computed)}
        returned = [position[id(node)] for node in outputs if id(node) in position]
        computed_keys = {node.key for node in computed}
        shipped = dict.fromkeys(
            i.key for node in computed for i in node.input_nodes()
            if i.key not in computed_keys and i.key not in self.records
            and i.uid > self._first_uid and i.value is not None and not is_future(i.value))
        for node in computed:
            inputs = tuple(i.key for i in node.input_nodes() if i.key in computed_keys
                           or i.key in self.records)
            self.records[node.key] = NodeRecord(node.key, node.op.name, node.phase,
                                                node.scope, inputs)
        client = modes.client_of(get)
        start = time.time()
        if client is not None:
            # Each worker records its tasks' members itself: the task stream would only know
            # tasks, and a fused task holds several nodes.
            on_every_worker(client, runtime.start_task_times)
            try:
                yield
            finally:
                recorded = on_every_worker(client, runtime.stop_task_times)
            for worker, events in recorded.items():
                self._add_events(events, computed_keys, worker)
        else:
            runtime.start_task_times()
            runtime.TaskTimes.samples = self.samples
            try:
                yield
            finally:
                runtime.TaskTimes.samples = None
                events = runtime.stop_task_times()
            self._add_events(events, computed_keys, "local")
        stop = time.time()
        self.runs.append((start, stop))
        threads = modes.tasks_at_once(get, client)
        self.run_records.append(RunRecord(structure, [structure[k] for k in returned],
                                          threads, client is not None,
                                          lowering.blas_threads_of(structure, threads),
                                          compiled, tuple(shipped),
                                          tuple(node.key for node in after)))
        self._set_ready(computed_keys, start)
        self.bookkeeping += time.time() - entered - (stop - start)

    def read(self, node: Node) -> None:
        """Called when the caller reads ``node``'s realized value: on a cluster, one its
        run kept there travels back then (a round trip a forecast charges)."""
        if node.shape and node.key in self.records:
            self.reads.append((len(self.run_records), math.prod(node.shape)
                               * node.dtype.itemsize))

    def _lane(self, where: Any) -> str:
        """A readable lane name per (host, thread); called after a run, on one thread."""
        if where not in self._lanes:
            host = where[0]
            self._lanes[where] = f"{host} thread {sum(1 for w in self._lanes if w[0] == host)}"
        return self._lanes[where]

    def _add_events(self, events: list, keys: set[str], host: str) -> None:
        for key, start, stop, thread in events:
            record = self.records.get(key) if key in keys else None
            # A node the partition copied into several tasks ran in each: its earliest run
            # came before every reader's (each task runs its own copy first).
            if record is not None and (not record.stop or start < record.start):
                record.start, record.stop = start, stop
                record.lane = self._lane((host, thread))

    def _set_ready(self, keys: set[str], run_start: float) -> None:
        for key in keys:
            record = self.records[key]
            ends = [self.records[i].stop for i in record.inputs if self.records[i].stop]
            record.ready = max(ends + [run_start])

    # --- analysis -----------------------------------------------------------------------

    def nodes(self) -> list[NodeRecord]:
        """The recorded nodes that ran, by start time."""
        return sorted((r for r in self.records.values() if r.stop), key=lambda r: r.start)

    def summary(self, print_it: bool = True) -> Summary:
        """Wall time, work, critical path, parallelism, overhead, per-phase/op totals."""
        nodes = self.nodes()
        wall = sum(stop - start for start, stop in self.runs)
        work = sum(r.duration for r in nodes)
        length, path = critical_path(nodes)
        by_phase: dict[str, float] = defaultdict(float)
        by_op: dict[str, float] = defaultdict(float)
        for r in nodes:
            by_phase[r.phase] += r.duration
            by_op[f"{r.op} ({r.phase})" if r.phase != "forward" else r.op] += r.duration
        summary = Summary(
            wall=wall, work=work, critical_path=length,
            overhead=max(wall - _covered(nodes), 0.0), nodes=len(nodes),
            lanes=len({r.lane for r in nodes}), by_phase=dict(by_phase), by_op=dict(by_op),
            critical_nodes=path, plan_hits=self.plan_hits, plan_misses=self.plan_misses,
            backward_hits=self.backward_hits, backward_misses=self.backward_misses,
            cost_decisions=list(self.cost_decisions),
        )
        if print_it:
            print(summary)
        return summary

    # --- export -------------------------------------------------------------------------

    def to_chrome(self, path: str | os.PathLike) -> None:
        """Write the Chrome trace event format (Perfetto, chrome://tracing): one lane per
        thread or worker, one slice per node coloured by phase, waits as async spans."""
        nodes = self.nodes()
        origin = min((r.ready for r in nodes), default=0.0)
        lanes = sorted({r.lane for r in nodes})
        hosts = sorted({lane.rsplit(" thread ", 1)[0] for lane in lanes})
        pid = {host: k + 1 for k, host in enumerate(hosts)}
        tid = {lane: k + 1 for k, lane in enumerate(lanes)}
        events: list[dict] = []
        for host in hosts:
            events.append({"name": "process_name", "ph": "M", "pid": pid[host], "tid": 0,
                           "args": {"name": host}})
        for lane in lanes:
            events.append({"name": "thread_name", "ph": "M", "pid": pid[_host(lane)],
                           "tid": tid[lane], "args": {"name": lane}})
        for number, r in enumerate(nodes):
            where = {"pid": pid[_host(r.lane)], "tid": tid[r.lane]}
            args = {"key": r.key, "phase": r.phase, "module": r.scope,
                    "waited_us": round(r.waited * 1e6, 1), "inputs": list(r.inputs)}
            events.append({"name": r.op, "cat": r.phase, "ph": "X",
                           "ts": (r.start - origin) * 1e6, "dur": r.duration * 1e6,
                           "cname": _CHROME_COLORS.get(r.phase, "generic_work"), "args": args,
                           **where})
            if r.waited > 0:
                wait = {"name": f"wait {r.op}", "cat": "wait", "id": number, **where}
                events.append({**wait, "ph": "b", "ts": (r.ready - origin) * 1e6})
                events.append({**wait, "ph": "e", "ts": (r.start - origin) * 1e6})
        with open(path, "w") as file:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, file)

    def plot(self, path: str | os.PathLike, title: str = "pargraph trace") -> None:
        """Write a PNG timeline: one row per lane, nodes coloured by phase, waits in grey."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        nodes = self.nodes()
        origin = min((r.ready for r in nodes), default=0.0)
        lanes = sorted({r.lane for r in nodes})
        row = {lane: k for k, lane in enumerate(lanes)}
        fig, ax = plt.subplots(figsize=(11, 1.2 + 0.6 * len(lanes)))
        for r in nodes:
            y = row[r.lane]
            ax.broken_barh([((r.start - origin) * 1e3, max(r.duration * 1e3, 1e-3))],
                           (y - 0.35, 0.7), facecolors=PHASE_COLORS.get(r.phase, "grey"),
                           edgecolors="white", linewidth=0.3)
            if r.waited > 0:
                ax.plot([(r.ready - origin) * 1e3, (r.start - origin) * 1e3], [y + 0.42] * 2,
                        color="grey", alpha=0.4, linewidth=0.8)
        ax.set_yticks(range(len(lanes)), lanes)
        ax.invert_yaxis()
        ax.set_xlabel("time (ms)")
        ax.set_title(title)
        fig.legend(handles=[Patch(color=c, label=p) for p, c in PHASE_COLORS.items()]
                   + [Patch(color="grey", alpha=0.4, label="waiting")],
                   loc="lower center", ncol=5, frameon=False)
        fig.tight_layout(rect=(0, 0.45 / (1.2 + 0.6 * len(lanes)), 1, 1))
        fig.savefig(path, dpi=110)
        plt.close(fig)


class RunClock:
    """An observer of pargraph's runs (as a trace is one) that adds up their seconds, and
    the seconds of the garbage collector's passes that begin between them.

    Examples
    --------
    >>> import pargraph
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


def outside_seconds(step: Callable[[], Any]) -> float:
    """The seconds one call of ``step`` spends outside pargraph's runs and the collector's
    passes (as :func:`pargraph.forecast` counts a trace's).

    Examples
    --------
    >>> import pargraph
    >>> outside_seconds(lambda: (pargraph.ones(3) * 2).sum().item()) > 0
    True
    """
    clock = RunClock()
    with clock.observing():
        start = time.perf_counter()
        step()
        took = time.perf_counter() - start
    return took - clock.inside - clock.collecting


def _copy_structure(computed: Sequence[Node]) -> list[Node]:
    """Copies of ``computed`` (a topological order) that keep what a partition reads: op,
    attributes, shape, dtype, key, phase, scope, ``requires_grad`` (placement keeps the
    readers of one parameter on one worker) and inputs, the inputs from outside the run as
    copies without their values (a run cuts its nodes' inputs, and the trace must not keep
    the values alive)."""
    copies: dict[int, Node] = {}

    def copy_of(node: Node, inputs: tuple) -> Node:
        made = Node.replayed(node.op, inputs, node.attrs, node.shape, node.dtype, node.phase,
                             "copy", node.scope, node.site)
        made.key = node.key
        made.requires_grad = node.requires_grad
        return made

    for node in computed:
        inputs = []
        for i in node.inputs:
            if type(i) is Node and id(i) not in copies:
                copies[id(i)] = copy_of(i, ())
            inputs.append(copies[id(i)] if type(i) is Node else i)
        copies[id(node)] = copy_of(node, tuple(inputs))
    return [copies[id(node)] for node in computed]


def _host(lane: str) -> str:
    return lane.rsplit(" thread ", 1)[0]


def _covered(nodes: list[NodeRecord]) -> float:
    """Total time during which at least one node was running."""
    total, end = 0.0, float("-inf")
    for r in sorted(nodes, key=lambda r: r.start):
        if r.start > end:
            total += r.duration
            end = r.stop
        elif r.stop > end:
            total += r.stop - end
            end = r.stop
    return total


def critical_path(nodes: list[NodeRecord]) -> tuple[float, list[NodeRecord]]:
    """The longest chain of dependent nodes, weighted by duration: (length, nodes on it)."""
    by_key = {r.key: r for r in nodes}
    sorter = graphlib.TopologicalSorter({r.key: [i for i in r.inputs if i in by_key]
                                         for r in nodes})
    order = [by_key[key] for key in sorter.static_order()]
    longest: dict[str, float] = {}
    previous: dict[str, str | None] = {}
    for r in order:
        best, via = 0.0, None
        for i in r.inputs:
            if i in longest and longest[i] > best:
                best, via = longest[i], i
        longest[r.key] = best + r.duration
        previous[r.key] = via
    if not longest:
        return 0.0, []
    key: str | None = max(longest, key=longest.get)
    length = longest[key]
    path = []
    while key is not None:
        path.append(by_key[key])
        key = previous[key]
    return length, path[::-1]


def trace(input: Any = None) -> Any:
    """``with trace() as tr:`` records every node realized inside the block. Given a matrix,
    ``trace(A)`` is PyTorch's ``torch.trace``, the sum of its diagonal (one name for both, as
    programs call it).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.trace() as tr:
    ...     total = (pargraph.ones(3).exp() * 2).sum().item()
    >>> sorted({r.op for r in tr.nodes()})
    ['exp', 'mul', 'sum']
    >>> pargraph.trace(pargraph.eye(3)).item()
    3.0
    """
    if input is not None:
        return input.trace()
    return _recording()


@contextlib.contextmanager
def _recording() -> Iterator[Trace]:
    recorder = Trace()
    execution.local.observers.append(recorder)
    gc.callbacks.append(recorder._collector)
    try:
        yield recorder
        execution.flush()  # backward() defers its run: the block's work runs inside the block
    finally:
        gc.callbacks.remove(recorder._collector)
        execution.local.observers.remove(recorder)
        recorder.stopped = time.time()
        recorder._count_cache_use()
        recorder.cost_decisions = costs.decisions.between(recorder.started, time.time())
