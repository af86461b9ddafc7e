"""Forecasts: how fast a traced step would run on other threads and workers.

``pargraph.forecast(tr, threads=[...], workers=[...])`` replays the step recorded by a
``with pargraph.trace() as tr:`` block in simulation, on each configuration asked for:

1. Each dask run of the step is partitioned again, by the partitioner a real run on that
   configuration uses (:func:`pargraph.partition.placed_partition`, dask's config read as a
   run reads it), with the nodes' measured times as their work, as a steady-state run does.
2. Its tasks run on simulated threads, one lane per thread, in dependency order. A node's
   measured time is split into a part that holds its process's GIL and a part that does not
   (the *GIL share*, measured per kind of op, see :func:`measure_call`): one lock per process
   serializes the held parts, first come first served. A local task costs the scheduler
   :data:`pargraph.partition.TASK_COST_LOCAL` with the GIL held; a run costs a fixed start.
   Where the real runner would run a structure in the calling thread, group after group,
   because that is faster (``execution.run_adaptively``), the forecast takes that way too.
3. On ``W`` workers each worker is a process with its own GIL and ``threads_per_worker``
   lanes. Tasks go where pargraph's placement puts them; a task starts a scheduler round
   trip after its last input is ready, and an input made on another worker arrives after a
   transfer (latency plus bytes over bandwidth). The defaults are measured on this machine's
   loopback, with two dask worker processes (:func:`loopback`), and can be given instead.
4. The time the step spends outside its runs (recording ops, Python between the runs) is the
   calling thread's and stays as measured.

What it leaves out, and so how far to trust it (docs/forecast.md has the measurements): it
knows no memory bandwidth and no shared caches (numpy's big elementwise ops scale worse than
forecast on many cores), it keeps BLAS's threads as traced, and a trace taken on several
threads measures the nodes' times with their contention included. A trace on one thread
gives the cleanest costs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import heapq
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pargraph import execution, lowering
from pargraph.costs import disagree
from pargraph.graph import Node
from pargraph.lowering import ALL_BLAS
from pargraph.partition import estimated_seconds, placed_partition
from pargraph.trace import PHASE_COLORS, Trace, critical_path

#: Seconds of repeated calls each GIL measurement times, per thread, and the fewest calls:
#: a thread's start and a sleep's overshoot are tens of microseconds, a few percent of one
#: call of a millisecond.
GIL_MEASURE_SECONDS, GIL_MEASURE_CALLS = 5e-3, 3
#: Seconds all GIL measurements of one forecast may take; kinds of op past it (the ones with
#: the least traced time) are taken to hold the GIL throughout.
GIL_BUDGET_SECONDS = 3.0


@dataclass(frozen=True)
class Network:
    """What a cluster's messages cost, in seconds: a task starts ``task_latency`` after the
    scheduler took it up, and the scheduler takes up one task at a time, each for
    ``scheduler_task``; a run's submission and its results' return cost ``run_latency``
    beyond its tasks', and ``run_node`` more per node of the run (recorded, lowered and
    sent by this process, taken in by the scheduler); a value moves between two workers in
    ``transfer_latency`` plus its bytes over ``bandwidth`` (bytes per second), and is copied
    to a second worker, as training state is, in ``replicate_latency`` plus its bytes over
    ``bandwidth``."""

    task_latency: float
    scheduler_task: float
    run_latency: float
    run_node: float
    transfer_latency: float
    bandwidth: float
    replicate_latency: float

    def __str__(self) -> str:
        return (f"a task {self.task_latency * 1e3:.2f} ms after the scheduler takes it up "
                f"({self.scheduler_task * 1e3:.2f} ms of the scheduler's time), a run "
                f"{self.run_latency * 1e3:.2f} ms + {self.run_node * 1e6:.1f} us per node, a "
                f"transfer {self.transfer_latency * 1e3:.2f} ms + {self.bandwidth / 1e6:.0f} "
                f"MB/s, a copy of training state {self.replicate_latency * 1e3:.2f} ms")


@dataclass
class Segment:
    """A simulated stretch of one lane: a node (or a task's scheduling) from start to stop."""

    lane: str
    key: str
    op: str
    phase: str
    start: float
    stop: float


@dataclass
class Outcome:
    """One configuration's simulated step: its time and where the time went (seconds)."""

    config: tuple[str, int]
    step_time: float
    lanes: int
    compute: float = 0.0
    gil_wait: float = 0.0
    transfers: float = 0.0
    scheduling: float = 0.0
    outside: float = 0.0
    segments: list[Segment] = field(default_factory=list)

    @property
    def busy(self) -> float:
        """Share of the lanes' time spent computing nodes."""
        return self.compute / (self.lanes * self.step_time) if self.step_time else 0.0


# --- measuring ------------------------------------------------------------------------


def _timed_calls(call: Any, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return time.perf_counter() - start


@dataclass(frozen=True)
class CallCost:
    """One kind of op's measured call: the share of its time that holds the GIL, and its
    seconds on one thread with BLAS on one thread."""

    gil_share: float
    seconds: float


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
    that too."""
    from threadpoolctl import threadpool_limits

    copies = [tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
              for _ in range(2)]
    calls = [functools.partial(op.forward, *c, **attrs) for c in copies]

    def pair(repeats: int, offset: float) -> tuple[float, float]:
        """(seconds from the first thread's first call to the last call's end, offset)."""
        barrier = threading.Barrier(2)
        starts, ends = [0.0, 0.0], [0.0, 0.0]

        def run(k: int) -> None:
            barrier.wait()
            if k:
                time.sleep(offset)
            starts[k] = time.perf_counter()
            _timed_calls(calls[k], repeats)
            ends[k] = time.perf_counter()

        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # on the threads' own clocks: the calling thread's start and join are no part of it
        return max(ends) - starts[0], max(starts[1] - starts[0], 0.0)

    from pargraph.threads import state

    alone, together, offsets = math.inf, math.inf, []
    # BLAS on one thread, and the switch interval of pargraph's runs
    with threadpool_limits(1), state.switching.lowered():
        single = _timed_calls(calls[0], 1)
        repeats = max(GIL_MEASURE_CALLS, int(GIL_MEASURE_SECONDS / max(single, 1e-7)))
        for _ in range(trials):
            alone = min(alone, _timed_calls(calls[0], repeats), _timed_calls(calls[1], repeats))
            took, offset = pair(repeats, single / 2)
            together = min(together, took - offset)
            offsets.append(offset)
    # The best of the trials, alone and together: the GIL takes its share in every trial,
    # while the machine's other work (another process, a core's sibling) only adds to some.
    both = alone - max(offsets)  # the stretch in which the two threads run at once
    share = (together - alone) / both if both > 0 else 1.0
    return CallCost(min(max(share, 0.0), 1.0), alone / repeats)


def call_costs(trace: Trace, budget: float = GIL_BUDGET_SECONDS) -> dict[tuple, CallCost]:
    """The :class:`CallCost` (:func:`measure_call`) of each kind of op ``trace`` kept a call
    of, the kinds with the most traced time first, until ``budget`` seconds are spent."""
    time_by_kind: dict[tuple, float] = defaultdict(float)
    for key, kind in trace.samples.kinds.items():
        record = trace.records.get(key)
        if record is not None and record.stop:
            time_by_kind[kind] += record.duration
    costs: dict[tuple, CallCost] = {}
    deadline = time.perf_counter() + budget
    for kind in sorted(time_by_kind, key=lambda k: -time_by_kind[k]):
        if time.perf_counter() > deadline:
            break
        call = trace.samples.calls.get(kind)
        if call is not None:
            try:
                costs[kind] = measure_call(*call)
            except Exception:  # a call that cannot run again alone (an op with side effects)
                continue
    return costs


@contextlib.contextmanager
def _two_workers() -> Iterator[Any]:
    """A Client of a ``dask scheduler`` and two one-thread ``dask worker`` processes on
    127.0.0.1, started as commands (a ``LocalCluster`` of processes would import the
    caller's ``__main__`` again), stopped at the end."""
    from distributed import Client

    with tempfile.TemporaryDirectory() as folder:
        address_file = os.path.join(folder, "scheduler.json")
        processes = [subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--no-dashboard", "--scheduler-file", address_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(address_file):
                if time.monotonic() > deadline or processes[0].poll() is not None:
                    raise RuntimeError("pargraph.forecast: a dask scheduler on 127.0.0.1 did "
                                       "not start, so the loopback's costs cannot be measured;"
                                       " pass network=pargraph.forecast.Network(...)")
                time.sleep(0.05)
            processes += [subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                 address_file, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
            with Client(scheduler_file=address_file, set_as_default=False) as client:
                client.wait_for_workers(2, timeout=60)
                yield client
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()


def _cache_file() -> str:
    folder = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(folder, "pargraph", "loopback.json")


@functools.cache
def loopback(measure: bool = False) -> Network:
    """This machine's loopback costs (:func:`measure_loopback`), kept in
    ``~/.cache/pargraph/loopback.json`` once measured (``measure=True``: again, now).

    Examples
    --------
    >>> from pargraph.forecast import Network, loopback
    >>> isinstance(loopback(), Network)
    True
    """
    path = _cache_file()
    if not measure:
        try:
            with open(path) as file:
                return Network(**json.load(file))
        except (OSError, ValueError, TypeError):
            pass  # none yet, or unreadable: measured now
    network = measure_loopback()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as file:
            json.dump(dataclasses.asdict(network), file)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # a read-only home: measured again by the next process
    return network


def measure_loopback() -> Network:
    """The :class:`Network` of this machine's loopback, measured on a ``dask scheduler`` and
    two ``dask worker`` processes of one thread on 127.0.0.1, tuned as pargraph tunes a
    cluster: a chain of tiny tasks on one worker (the task latency), a burst of tiny tasks
    (the scheduler's time per task), pargraph runs of 2 and of 302 tiny nodes and their
    result (the run latency beyond its task's, and the cost per node), and a task on one
    worker reading 1 KiB and 64 MiB made on the other (the transfer latency and the
    bandwidth), and the copy of 1 KiB to the second worker (the replication latency)."""
    import dask

    from pargraph.remote.submit import send_promptly

    def make(size: int) -> np.ndarray:
        return np.ones(size, np.uint8)

    def touch(x: Any) -> int:
        return 0 if x is None else 1

    def chain(previous: int) -> int:
        return previous + 1

    def median_of(measure: Any, repeats: int = 5) -> float:
        return float(np.median([measure() for _ in range(repeats)]))

    with _two_workers() as client:
        send_promptly(client)  # batched messages as prompt as on a cluster pargraph runs on
        a, b = sorted(client.scheduler_info()["workers"])
        client.submit(chain, 0, workers=[a], pure=False).result()  # warm both ends

        def task_chain(length: int = 20) -> float:
            start = time.perf_counter()
            future = client.submit(chain, 0, workers=[a], pure=False)
            for _ in range(length - 1):
                future = client.submit(chain, future, workers=[a], pure=False)
            future.result()
            return (time.perf_counter() - start) / length

        def burst(tasks: int = 200) -> float:
            start = time.perf_counter()
            client.gather(client.map(chain, range(tasks), pure=False))
            return (time.perf_counter() - start) / tasks

        def pargraph_run(nodes: int) -> float:
            from pargraph.factories import ones

            def run() -> None:
                h = x
                for _ in range(nodes - 1):
                    h = h * 2
                h.sum().item()

            x = ones(4)
            with dask.config.set(scheduler=client):
                run()
                start = time.perf_counter()
                run()
                return time.perf_counter() - start

        def moved(size: int) -> float:
            made = client.submit(make, size, workers=[a], pure=False)
            client.submit(touch, made, workers=[a], pure=False).result()  # made, and on a
            start = time.perf_counter()
            client.submit(touch, made, workers=[b], pure=False).result()
            across = time.perf_counter() - start
            start = time.perf_counter()
            client.submit(touch, made, workers=[a], pure=False).result()
            return max(across - (time.perf_counter() - start), 1e-6)

        def replicated() -> float:
            made = client.submit(make, 1 << 10, workers=[a], pure=False)
            client.submit(touch, made, workers=[a], pure=False).result()
            start = time.perf_counter()
            client.replicate([made], n=2)
            return time.perf_counter() - start

        task_latency = median_of(task_chain, 3)
        scheduler_task = median_of(burst, 3)
        one, many = median_of(lambda: pargraph_run(2)), median_of(lambda: pargraph_run(302))
        per_node = max((many - one) / 300, 0.0)
        run_latency = max(one - task_latency - 2 * per_node, 0.0)
        small, big = 1 << 10, 64 << 20
        small_time = median_of(lambda: moved(small), 7)
        big_time = median_of(lambda: moved(big), 7)
        replicate_latency = median_of(replicated)
    bandwidth = (big - small) / max(big_time - small_time, 1e-6)
    return Network(task_latency, min(scheduler_task, task_latency), run_latency, per_node,
                   small_time, bandwidth, replicate_latency)


@dataclass(frozen=True)
class LocalCosts:
    """What pargraph's threads cost a run on this machine: its start and end (``run``) and
    each task's bookkeeping, which holds the GIL (``task``), in seconds."""

    run: float
    task: float


@functools.cache
def local_costs() -> LocalCosts:
    """:class:`LocalCosts`, measured once per process: runs of one and of 256 tasks that do
    nothing, on pargraph's threads (``threads.run_on_threads``), on one thread."""
    from dask.task_spec import Task, TaskRef

    from pargraph.threads import run_on_threads

    def graph(tasks: int) -> dict:
        made = {f"t{k}": Task(f"t{k}", int) for k in range(tasks)}
        made["end"] = Task("end", _count, *[TaskRef(f"t{k}") for k in range(tasks)])
        return made

    def per_run(tasks: int) -> float:
        g = graph(tasks)
        run_on_threads(g, ["end"], 1)
        times = []
        for _ in range(15):
            start = time.perf_counter()
            run_on_threads(g, ["end"], 1)
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    one, many = per_run(1), per_run(256)
    task = max((many - one) / 255, 0.0)
    return LocalCosts(max(one - 2 * task, 0.0), task)


def _count(*values: Any) -> int:
    return len(values)


# --- simulating -----------------------------------------------------------------------


@dataclass
class _Task:
    members: list[int]  # indices into the run's computed nodes
    worker: int
    needs: set[int] = field(default_factory=set)  # indices of the tasks it reads from
    done: float = 0.0


class _Simulation:
    """One run on ``workers`` processes of ``threads`` lanes each (one process: threads),
    as events in time order. A lane runs a task's steps one after another: its scheduling
    (``task_cost`` of the GIL locally, a round trip on a cluster), then per member the part
    that holds the GIL and the part that does not. Each process's GIL goes to the lanes that
    ask, first come first served, and each ready task to the first free lane of its
    process, in the tasks' order."""

    def __init__(self, tasks: list[_Task], nodes: list[Node], seconds: list[float],
                 shares: list[float], workers: int, threads: int, remote: bool,
                 network: Network | None, start: float, outcome: Outcome,
                 task_cost: float = 0.0) -> None:
        self.tasks, self.nodes, self.seconds, self.shares = tasks, nodes, seconds, shares
        self.task_cost = task_cost  # seconds of the GIL a local task costs the scheduler
        self.workers, self.threads, self.remote = workers, threads, remote
        self.network, self.outcome, self.start = network, outcome, start
        self.events: list[tuple] = []
        self.order = 0
        self.free_lanes = [list(range(threads)) for _ in range(workers)]
        self.ready: list[list[int]] = [[] for _ in range(workers)]
        self.gil_held = [False] * workers
        self.gil_queue: list[list[tuple]] = [[] for _ in range(workers)]
        self.scheduler_free = start

    def _at(self, when: float, action: Any, *args: Any) -> None:
        self.order += 1
        heapq.heappush(self.events, (when, self.order, action, args))

    def run(self) -> float:
        """Simulates the run; returns when its last task ends."""
        producer: dict[int, int] = {}
        for t, task in enumerate(self.tasks):
            for m in task.members:
                producer.setdefault(m, t)
        index = {id(node): k for k, node in enumerate(self.nodes)}
        for task in self.tasks:
            own = set(task.members)
            for m in task.members:
                for i in self.nodes[m].inputs:
                    k = index.get(id(i)) if type(i) is Node else None
                    if k is not None and k not in own:
                        task.needs.add(producer[k])
        self.readers: dict[int, list[int]] = defaultdict(list)
        self.waiting = {t: len(task.needs) for t, task in enumerate(self.tasks)}
        for t, task in enumerate(self.tasks):
            for n in task.needs:
                self.readers[n].append(t)
        for t, n in self.waiting.items():
            if n == 0:
                self._at(self.start, self._ready, t)
        end = self.start
        while self.events:
            now, _, action, args = heapq.heappop(self.events)
            end = max(end, now)
            action(now, *args)
        return end

    # --- tasks ---

    def _ready(self, now: float, t: int) -> None:
        if self.remote:  # the scheduler takes tasks up one at a time, then sends them off
            network = self.network
            taken = max(now, self.scheduler_free)
            self.scheduler_free = taken + network.scheduler_task
            self.outcome.scheduling += taken + network.task_latency - now
            self._at(taken + network.task_latency, self._sent, t)
        else:
            self._sent(now, t)

    def _sent(self, now: float, t: int) -> None:
        w = self.tasks[t].worker
        heapq.heappush(self.ready[w], t)
        self._dispatch(now, w)

    def _dispatch(self, now: float, w: int) -> None:
        while self.ready[w] and self.free_lanes[w]:
            t, lane = heapq.heappop(self.ready[w]), self.free_lanes[w].pop(0)
            task = self.tasks[t]
            steps: list[tuple] = []
            if self.task_cost:
                steps.append(("gil", self.task_cost, None))
            for m in task.members:
                seconds, share = self.seconds[m], self.shares[m]
                steps += [("gil", seconds * share, m), ("free", seconds * (1.0 - share), m)]
            self._step(now, t, lane, steps, 0, now)

    def _step(self, now: float, t: int, lane: int, steps: list, k: int, began: float) -> None:
        """Lane ``lane`` goes on with step ``k`` of task ``t`` at ``now``; ``began``: when
        the current member (or the scheduling) started."""
        if k == len(steps):
            self._done(now, t, lane)
            return
        kind, seconds, member = steps[k]
        if k and steps[k - 1][2] != member:
            began = now
        if kind == "gil":
            w = self.tasks[t].worker
            if self.gil_held[w]:
                self.gil_queue[w].append((now, t, lane, steps, k, began))
            else:
                self._hold(now, now, t, lane, steps, k, began)
            return
        self._at(now + seconds, self._after, t, lane, steps, k, began)

    def _hold(self, now: float, asked: float, t: int, lane: int, steps: list, k: int,
              began: float) -> None:
        w = self.tasks[t].worker
        self.gil_held[w] = True
        self.outcome.gil_wait += now - asked
        if steps[k][2] is None:
            self.outcome.scheduling += steps[k][1] + now - asked
        self._at(now + steps[k][1], self._release, t, lane, steps, k, began)

    def _release(self, now: float, t: int, lane: int, steps: list, k: int,
                 began: float) -> None:
        w = self.tasks[t].worker
        self.gil_held[w] = False
        if self.gil_queue[w]:
            asked, *waiting = self.gil_queue[w].pop(0)
            self._hold(now, asked, *waiting)
        self._after(now, t, lane, steps, k, began)

    def _after(self, now: float, t: int, lane: int, steps: list, k: int, began: float) -> None:
        kind, seconds, member = steps[k]
        last_of_member = k + 1 == len(steps) or steps[k + 1][2] != member
        if member is not None and last_of_member:
            node = self.nodes[member]
            self.outcome.compute += self.seconds[member]
            self.outcome.segments.append(Segment(self._lane_name(t, lane), node.key,
                                                 node.op.name, node.phase, began, now))
        self._step(now, t, lane, steps, k + 1, began)

    def _done(self, now: float, t: int, lane: int) -> None:
        task = self.tasks[t]
        task.done = now
        self.free_lanes[task.worker].append(lane)
        self.free_lanes[task.worker].sort()
        for r in self.readers[t]:
            self.waiting[r] -= 1
            if self.waiting[r] == 0:
                self._at(self._inputs_arrive(self.tasks[r]), self._ready, r)
        self._dispatch(now, task.worker)

    def _inputs_arrive(self, task: _Task) -> float:
        arrive = self.start
        for n in task.needs:
            source = self.tasks[n]
            when = source.done
            if self.remote and source.worker != task.worker:
                moved = sum(_nbytes(self.nodes[m]) for m in source.members)
                seconds = self.network.transfer_latency + moved / self.network.bandwidth
                self.outcome.transfers += seconds
                when += seconds
            arrive = max(arrive, when)
        return arrive

    def _lane_name(self, t: int, lane: int) -> str:
        w = self.tasks[t].worker
        return f"worker {w} thread {lane}" if self.remote else f"thread {lane}"


def _nbytes(node: Node) -> int:
    return math.prod(node.shape) * node.dtype.itemsize


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
                 gil: float | dict | None = None, measure_gil: bool = True) -> None:
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
        self.trace = trace
        self.threads_per_worker = int(threads_per_worker)
        self._network = network
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
        bookkeeping."""
        if self.trace.stopped is None:
            return 0.0
        inside = sum(stop - start for start, stop in self.trace.runs) + self.trace.bookkeeping
        return max(self.trace.stopped - self.trace.started - inside, 0.0)

    def _shares(self, gil: float | dict | None, measure: bool) -> tuple[dict[str, float], int]:
        """Each traced node's GIL share, by key; and how many kinds of op were measured."""
        kinds = self.trace.samples.kinds
        given: dict = gil if isinstance(gil, dict) else {}
        costs = call_costs(self.trace) if measure else {}
        #: each node's seconds on one thread with BLAS on one, where its kind was measured
        self.one_thread = {key: costs[kind].seconds for key, kind in kinds.items()
                           if kind in costs}
        measured = {kind: cost.gil_share for kind, cost in costs.items()}
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
        outcome = Outcome((where, count), 0.0, lanes, outside=self._outside())
        now = 0.0
        for run in self.trace.run_records:
            now = self._simulate_run(run, remote, count, now, outcome)
        outcome.step_time = now + outcome.outside
        return outcome

    def _simulate_run(self, run: Any, remote: bool, count: int, now: float,
                      outcome: Outcome) -> float:
        nodes = run.computed
        records = self.trace.records
        seconds = [records[n.key].duration if n.key in records and records[n.key].stop
                   else 0.0 for n in nodes]
        shares = [self.shares.get(n.key, 1.0) for n in nodes]
        workers = count if remote else 1
        threads = self.threads_per_worker if remote else count
        if not (run.blas is ALL_BLAS and lowering.blas_threads_of(nodes, threads) is ALL_BLAS):
            # A node takes its kind's time measured alone, where measured: a trace runs node
            # by node, each timed (in a compiled step, in place of its generated code), and
            # where BLAS had every core in the trace, it has one thread per task here.
            seconds = [self.one_thread.get(n.key, s) for n, s in zip(nodes, seconds)]
        hosts = tuple((f"tcp://forecast-worker-{k}", threads) for k in range(workers)) \
            if remote and workers > 1 and _placement() else ()
        granularity = execution.configured_granularity(remote, workers * threads, hosts)
        if remote:
            submitted = self.network.run_latency + self.network.run_node * len(nodes)
            now += submitted
            outcome.scheduling += submitted
        # the work a steady run partitions with: the estimates, unless measured times
        # disagree with them (lowering.Timing; cluster runs are not timed)
        estimated = [estimated_seconds(node) for node in nodes]
        work = seconds if not remote and disagree(estimated, seconds) else estimated
        if lowering.is_small(nodes, granularity.single_task_below, work) or len(nodes) < 2:
            groups, placed = [list(nodes)], [0]
        else:
            groups, placed = placed_partition(nodes, granularity, run.outputs, work)
        index = {id(node): k for k, node in enumerate(nodes)}
        tasks = [_Task([index[id(m)] for m in group], placed[g] if hosts else 0)
                 for g, group in enumerate(groups)]
        if not remote and len(tasks) > 1:
            # the runner's other way: in the calling thread, group after group, which it
            # takes when faster (execution.run_adaptively); the forecast takes the faster too
            inline = Outcome(outcome.config, 0.0, 1)
            inline_end = _Simulation([_Task([k for t in tasks for k in t.members], 0)], nodes,
                                     seconds, shares, 1, 1, False, None, now, inline).run()
            trial = Outcome(outcome.config, 0.0, outcome.lanes)
            costs = local_costs()
            threaded_end = _Simulation(tasks, nodes, seconds, shares, 1, threads, False, None,
                                       now + costs.run, trial, costs.task).run()
            chosen, end = (inline, inline_end) if inline_end <= threaded_end \
                else (trial, threaded_end)
            _merge(outcome, chosen)
            return end
        simulation = _Simulation(tasks, nodes, seconds, shares, workers, threads, remote,
                                 self.network if remote else None, now, outcome)
        end = simulation.run()
        if remote and workers > 1 and _replicas() > 1:
            end = max(end, self._copies_done(tasks, nodes, outcome))
        return end

    def _copies_done(self, tasks: list[_Task], nodes: list[Node], outcome: Outcome) -> float:
        """When the copies of the run's training state (the optimizer's updates) to a second
        worker are done: each task's are copied once it ends, and the next run waits for
        them (``remote.replication``)."""
        network, done = self.network, 0.0
        for task in tasks:
            moved = sum(_nbytes(nodes[m]) for m in task.members if nodes[m].phase == "update")
            if moved:
                seconds = network.replicate_latency + moved / network.bandwidth
                outcome.transfers += seconds
                done = max(done, task.done + seconds)
        return done

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
                         "gil_wait": o.gil_wait, "transfers": o.transfers,
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
            f"GIL shares measured for {self.measured_kinds} kind(s) of op; share of the "
            f"work holding the GIL: {self.gil_held_share():.0%}",
            "",
            f"{'configuration':<26}{'step':>11}{'speed-up':>10}{'busy':>7}{'GIL wait':>11}"
            f"{'transfers':>11}{'scheduling':>12}",
        ]
        for row in self.rows():
            label = _name(row["where"], row["count"])
            if row["where"] == "workers":
                label += f" x {_name('threads', self.threads_per_worker)}"
            lines.append(f"{label:<26}{row['step_time'] * ms:8.2f} ms{row['speedup']:9.2f}x"
                         f"{row['busy']:7.0%}{row['gil_wait'] * ms:8.2f} ms"
                         f"{row['transfers'] * ms:8.2f} ms{row['scheduling'] * ms:9.2f} ms")
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
                               facecolors=PHASE_COLORS.get(phase, "grey"))
            ax.set_yticks(range(len(lanes)), lanes)
            ax.invert_yaxis()
            ax.set_title(title, loc="left", fontsize=10)
        axes[-1].set_xlabel("time (ms); the measured lanes show the runs only")
        fig.legend(handles=[Patch(color=c, label=p) for p, c in PHASE_COLORS.items()],
                   loc="lower center", ncol=4, frameon=False)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        fig.savefig(path, dpi=110)
        plt.close(fig)


def forecast(trace: Trace, threads: Any = (1, 2, 4, 8, 16), workers: Any = (),
             threads_per_worker: int = 1, network: Network | None = None,
             gil: float | dict | None = None, measure_gil: bool = True) -> Forecast:
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
    return Forecast(trace, threads, workers, threads_per_worker, network, gil, measure_gil)


def _merge(into: Outcome, part: Outcome) -> None:
    into.compute += part.compute
    into.gil_wait += part.gil_wait
    into.transfers += part.transfers
    into.scheduling += part.scheduling
    into.segments += part.segments


def _placement() -> bool:
    import dask

    return bool(dask.config.get("pargraph.placement", True))


def _replicas() -> int:
    import dask

    return int(dask.config.get("pargraph.replicas", 2))


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
