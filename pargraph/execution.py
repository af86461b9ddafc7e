"""Execution: run lowered graphs on dask's schedulers and fill the nodes' value slots.

:func:`realize` computes what is needed now, plus this thread's deferred backward, as one
run: planned and lowered (:mod:`pargraph.lowering`), then handed to the scheduler dask would
pick (:func:`choose_scheduler`). A one-task run on a local scheduler runs in the calling
thread; a threaded run of group tasks goes the way that was fastest for its structure, on
pargraph's threads (:func:`run_on_threads`) or group after group in this thread
(:class:`ModeChoice`); a cluster run goes to :mod:`pargraph.remote`. BLAS is limited to one
thread while several tasks run at once. Which values a run keeps, and why, is in
docs/design.md ("Running").
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.local
import dask.threaded
import numpy as np

from pargraph.capturing import recording
from pargraph.graph import FREED, Node
from pargraph.interrupts import interrupts
from pargraph.lowering import local_value, lower, plan, realized_meanwhile
from pargraph.ops.gemm import blas as products
from pargraph.partition import Granularity
from pargraph.remote.recovery import check_held_values, cluster_lost
from pargraph.remote.replication import keep_until_copied
from pargraph.remote.state import clusters
from pargraph.remote.submit import held_on_cluster, run_on_cluster
from pargraph.remote.workers import hosts, replicas, threads_by_worker
from pargraph.runtime import (
    ALL_BLAS,
    ANY_BLAS,
    FAILED_KEY,
    ONE_BLAS,
    Lowered,
    TaskTimes,
    annotate,
)
from pargraph.shared_memory import shared_tensors
from pargraph.threads import get_num_threads, run_on_threads

DEFAULT_GET = dask.threaded.get


class CollectorPause:
    """Python's cyclic garbage collector paused while a step's graph is built and run
    (``backward()``, :func:`realize`). A graph is many small objects that live until the step
    ends, and each of the collector's full passes walks all of them, so the passes cost more
    the bigger the graph (figures: docs/design.md). Cycles made meanwhile are collected
    once it resumes. Counted, so nested and concurrent pauses end with the last; a collector
    the program disabled stays disabled; ``dask.config.set({"pargraph.pause-gc": False})``
    leaves it alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._resume = False  # whether the collector was on when the first pause began

    def __enter__(self) -> None:
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._resume = gc.isenabled() and dask.config.get("pargraph.pause-gc", True)
                if self._resume:
                    gc.disable()

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._depth -= 1
            if not self._depth and self._resume:
                gc.enable()

    def after_fork(self) -> None:
        """A forked child has only the forking thread: no pause of another is in progress."""
        if self._depth and self._resume:
            gc.enable()
        self.__init__()

    @staticmethod
    def freeze_imports() -> None:
        """Move the objects that exist now out of the collector's passes (``gc.freeze``):
        called once pargraph is imported, when they are the modules, classes and functions
        numpy, dask and pargraph made, which live as long as the process. Each full pass
        walked all of them (tens of thousands) in the middle of a training step.
        ``pargraph.freeze-gc`` False (``DASK_PARGRAPH__FREEZE_GC=False``) leaves them."""
        if dask.config.get("pargraph.freeze-gc", True):
            gc.freeze()


class LocalState:
    """This process's execution state, in one object (``local``)."""

    def __init__(self) -> None:
        #: Objects with a ``run(computed_nodes, get)`` context manager, entered around every
        #: run (the trace layer registers itself here; execution never imports it).
        self.observers: list = []
        #: threadpoolctl's controller, and how many modules (and libraries ``ops.gemm``)
        #: were loaded when it scanned.
        self.blas: Any = None
        self.modules_at_scan = (0, 0)
        #: Whether every BLAS library it found runs small products on one thread whatever
        #: its count: OpenBLAS, and sequential libraries such as the MKL of ``ops.gemm``
        #: (see ``blas_limited``).
        self.one_thread_rule = False
        #: The nodes the last backward freed that still hold a value (``_forget_structure``).
        self.structure_kept: weakref.WeakSet = weakref.WeakSet()
        #: How each structure's threaded runs went in each mode, by plan.
        self.modes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: Python's garbage collector, paused while graphs are built and run.
        self.collector = CollectorPause()
        os.register_at_fork(after_in_child=self.collector.after_fork)
        #: Held while a run plans and lowers, and while one commits: a commit stores values,
        #: cuts inputs and frees saved values, and a plan made meanwhile in another thread
        #: read some nodes before and others after (its structure's key could then name a
        #: node a source that its task list computes, from inputs already cut). Runs
        #: themselves go on side by side.
        self.structure = threading.RLock()


local = LocalState()


def choose_scheduler() -> Callable:
    """The ``get`` function dask would use for this run, defaulting to the threaded one."""
    configured = dask.config.get("scheduler", None)
    if isinstance(configured, str) and configured.lower() in dask.base.named_schedulers:
        # What dask returns for a name of a local scheduler, without its look for a Client
        # on the way (which imports distributed, and asks it at every run).
        return dask.base.named_schedulers[configured.lower()]
    if configured is not None:
        return dask.base.get_scheduler(scheduler=configured)
    client = current_client()
    return client.get if client is not None else DEFAULT_GET


def current_client() -> Any:
    """The active ``distributed.Client``, or ``None``."""
    if "distributed" not in sys.modules:
        return None
    from distributed import Client

    try:
        return Client.current(allow_global=True)
    except ValueError:
        return None


def is_threaded(get: Callable) -> bool:
    target = getattr(get, "func", get)  # get_scheduler wraps Executors in a partial
    return target is dask.threaded.get or target is dask.local.get_async


class BlasThreads:
    """BLAS limited to one thread while threaded runs are in progress. The float32 results of
    a matrix product depend on how many threads BLAS splits it across (not on what runs
    beside it), so a run's thread count comes from its graph (``lowering.blas_threads_of``),
    never from the way the run goes (on threads or in one, chosen by timing): a run with a big
    product keeps all of BLAS's threads, a run whose products OpenBLAS keeps on one thread
    anyway leaves the count alone, any other run limits BLAS to one thread. The count
    is set once per run, by the run's caller: OpenBLAS ignored a count set from one of the
    run's helper threads. It is per process, so while one thread's run limits BLAS, another
    thread's run that would keep all of them gets one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs = 0  # runs in progress that limit BLAS
        #: threadpoolctl's controller to limit BLAS through (``blas_limited`` sets it).
        self.controller: Any = None
        self._selected: Any = None  # the controller whose BLAS libraries are selected
        self._libraries: list = []
        self._outside: list[int] = []  # their threads before the runs limited them

    def __enter__(self) -> None:
        """A run that limits BLAS begins. Each library's count is set through threadpoolctl's
        controller of it, selected once: a run of one small task pays for this every time."""
        with self._lock:
            self._runs += 1
            if self._runs == 1:
                if self.controller is not self._selected:
                    self._selected = self.controller
                    self._libraries = self.controller.select(user_api="blas").lib_controllers
                self._outside = outside = [library.num_threads for library in self._libraries]
                for library, threads in zip(self._libraries, outside):
                    if threads != 1:
                        library.set_num_threads(1)

    def __exit__(self, *exc: Any) -> None:
        """A run that limits BLAS ended: the last one gives BLAS its threads back."""
        with self._lock:
            self._runs -= 1
            if not self._runs:
                for library, threads in zip(self._libraries, self._outside):
                    if threads != 1:
                        library.set_num_threads(threads)


#: What a run that leaves BLAS's threads alone enters.
_UNLIMITED = contextlib.nullcontext()
#: The process's BLAS threads during runs (BLAS's thread count is per process).
blas_threads = BlasThreads()


def blas_limited(get: Callable, blas: str = ONE_BLAS):
    """A context limiting BLAS to one thread around a threaded run, or a no-op: for a run
    that keeps all of BLAS's threads, or whose products OpenBLAS runs on one thread anyway
    (``blas``, see ``lowering.blas_threads_of``), or when ``pargraph.adaptive`` asks for BLAS
    free."""
    if blas is ALL_BLAS or not is_threaded(get) or not dask.config.get(
            "pargraph.limit-blas", True) or dask.config.get("pargraph.adaptive", True) == BLAS_FREE:
        return _UNLIMITED
    # Scanning for BLAS libraries costs more than a task; a new one is loaded by an import or
    # by ops.gemm, so scan again only when modules or MKL were loaded since the last scan.
    products.functions()  # MKL, where a run's products will load it, loads before the scan
    loaded = (len(sys.modules), products.loads)
    if local.blas is None or loaded != local.modules_at_scan:
        from threadpoolctl import ThreadpoolController

        local.blas = ThreadpoolController()
        local.modules_at_scan = loaded
        local.one_thread_rule = all(
            library.internal_api == "openblas"
            or getattr(library, "threading_layer", None) == "sequential"
            for library in local.blas.select(user_api="blas").lib_controllers)
    if blas is ANY_BLAS and local.one_thread_rule:
        return _UNLIMITED
    blas_threads.controller = local.blas
    return blas_threads


def is_live(node: Node) -> bool:
    """Whether a tensor the user holds still wraps ``node``."""
    owner = node.owner_tensor()
    return owner is not None and owner._node is node


def run_graph(graph: dict, keys: list, get: Callable, blas: str = ONE_BLAS) -> Sequence[Any]:
    """Run a dask graph on a local scheduler (``blas``: see :func:`blas_limited`)."""
    with blas_limited(get, blas):
        return get(graph, keys)


def execute(lowered: Lowered, keys: list, get: Callable) -> Sequence[Any]:
    """Every run goes through here: one task inline on local schedulers, a graph whose results
    stay on the workers as Futures on a cluster, else dask's local schedulers. Task errors
    surface as themselves, without dask's frames."""
    try:
        # Like PyTorch, floating point errors give inf/nan silently. numpy's errstate is a
        # context variable, and dask's thread pool runs tasks in a copy of this context.
        with np.errstate(all="ignore"):
            progress = _progress.minimum is not None
            inline = lowered.single is not None and is_local(get)
            if inline and not progress:
                with blas_limited(get, lowered.blas):
                    return run_inline(lowered)
            client = client_of(get)
            if client is not None:
                return run_on_cluster(client, lowered.graph, keys, lowered.workers,
                                      lowered.fetched, lowered.urgent, lowered.state)
            adaptive = dask.config.get("pargraph.adaptive", True)
            if lowered.sequential is not None and adaptive and not progress:
                if is_threaded(get):
                    return run_adaptively(lowered, keys, get)
                if getattr(get, "func", get) is dask.local.get_sync:
                    return run_in_order(lowered, keys)
            return run_graph(lowered.graph, keys, get, lowered.blas)
    except Exception as error:
        raise error.with_traceback(None) from None


def client_of(get: Callable) -> Any:
    """The distributed Client whose ``get`` this is, or ``None``."""
    client = getattr(get, "__self__", None)
    return client if type(client).__name__ == "Client" else None


def _granularity_or_lost(get: Callable, client: Any) -> Granularity:
    """``granularity``, which asks a cluster's scheduler for its workers: a scheduler that is
    gone by then is a lost cluster (ClusterLostError), not a comm error from inside dask."""
    try:
        return granularity(get, client)
    except (OSError, asyncio.CancelledError) as error:  # CommClosedError is an OSError
        if client is None:
            raise
        raise cluster_lost(client, f"asking the scheduler for its workers: {error!r}") from None


def granularity(get: Callable, client: Any = None) -> Granularity:
    """How coarse the next run's tasks are: dask's config, and where the run goes. On a
    cluster of several worker processes pargraph places the tasks itself
    (``pargraph.placement``, default True; see :mod:`pargraph.placement`)."""
    return configured_granularity(client is not None, tasks_at_once(get, client),
                                  hosts(client) if client is not None else ())


def configured_granularity(remote: bool, workers: int,
                           hosts: tuple[tuple[str, int], ...] = ()) -> Granularity:
    """The granularity dask's config gives a run on ``workers`` threads (``remote``: of a
    cluster, whose worker processes are ``hosts``)."""
    return Granularity.of(remote, workers, bool(dask.config.get("pargraph.fuse", True)),
                          dask.config.get("pargraph.single-task-below", None),
                          dask.config.get("pargraph.task-grain", None), hosts)


def tasks_at_once(get: Callable, client: Any) -> int:
    """Tasks that can run at once on ``get`` (``client``: its Client, or None): one on the
    sync scheduler."""
    return _threads(client) if client is not None or is_threaded(get) else 1


def _threads(client: Any) -> int:
    if client is not None:
        return max(sum(threads_by_worker(client).values()), 1)
    return get_num_threads()


def worker_threads() -> int:
    """How many tasks can run at once where the next run goes: the cluster's worker threads
    with an active Client, else the threaded scheduler's ``num_workers`` (default: all cores).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.worker_threads() >= 1
    True
    """
    return _threads(client_of(choose_scheduler()))


def is_local(get: Callable) -> bool:
    """The sync or threaded scheduler (not a cluster, not processes)."""
    return is_threaded(get) or getattr(get, "func", get) is dask.local.get_sync


#: The ways a threaded run of group tasks can go, in the order they are explored: on
#: pargraph's threads, or group after group in the calling thread. Both give BLAS the same
#: threads, one (hence the second's name) or, for a run with a big product, all of them
#: (``BlasThreads``): an op's float32 results depend on BLAS's threads, so they are
#: the same whichever way wins.
MODES = ("threads", "inline, one BLAS thread")
#: A way that only ``pargraph.adaptive`` chooses, never timing: in the calling thread, BLAS
#: free for every op (its float32 products can differ in the last bits from the other ways').
BLAS_FREE = "inline"
#: How much slower than the fastest way a way may be and still be tried again.
RETRY_WITHIN = 1.5
#: Seconds of a structure's first runs before its runs are timed: a process's first threaded
#: runs are slow (the pool's threads start, their allocator arenas grow, BLAS's threads spin
#: for about 0.1 s after their last call).
SETTLE = 0.15
#: Runs, and seconds of runs, between two retries of the ways close to the fastest.
RETRY_EVERY, RETRY_PERIOD = 50, 6.0


class ModeChoice:
    """How one structure's threaded runs went in each mode (see :data:`MODES`), and the
    mode of its next run: what :func:`run_adaptively` decides by."""

    def __init__(self) -> None:
        self.timings: dict[str, list[float]] = {mode: [] for mode in MODES}
        self.timed = dict.fromkeys(MODES, 0)  # timings taken in all, per mode
        self.runs = 0
        self.last_mode = ""  # of the last run, timed or not
        self.settling = 0.0  # seconds of runs before the last mode's runs are timed
        self.clock = 0.0  # seconds run in all
        self.retried_at = (0, 0.0)  # (runs, clock) when the last retries began
        self.retrying: list[tuple[str, int]] = []  # (mode, its timings when its retry began)

    def choose(self) -> str:
        """The way that ran this structure fastest (see :data:`MODES`).

        Each way is timed three times, then the way with the fastest of its last five timings
        wins (the machine's noise only ever slows a run, and comes in bursts: a median of five
        follows three slow runs in a row); every
        :data:`RETRY_EVERY` runs and :data:`RETRY_PERIOD` seconds, each other way within
        :data:`RETRY_WITHIN` of it is tried again until it is timed once more, since the
        machine's load changes. A way whose first timing is :data:`RETRY_WITHIN` slower
        than another's fastest is not tried further (branches of ops that wait, a solver's,
        run many times slower one after another). A chain of groups, or many small ones
        whose numpy calls contend for the GIL, runs faster in one thread; independent big
        matmuls run faster side by side."""
        self.runs += 1
        timings = self.timings
        known = [min(t) for t in timings.values() if len(t) >= 3]
        best = min(known) if known else None
        for mode in MODES:
            if len(timings[mode]) < 3 and not (
                    timings[mode] and best is not None
                    and min(timings[mode]) > RETRY_WITHIN * best):
                return mode
        while self.retrying:
            mode, before = self.retrying[0]
            if self.timed[mode] == before:
                return mode
            del self.retrying[0]
        ranked = sorted((mode for mode in MODES if timings[mode]),
                        key=lambda mode: min(timings[mode]))
        runs, clock = self.retried_at
        if self.runs - runs >= RETRY_EVERY and self.clock - clock >= RETRY_PERIOD:
            self.retried_at = (self.runs, self.clock)
            fastest = min(timings[ranked[0]])
            self.retrying = [(mode, self.timed[mode]) for mode in ranked[1:]
                             if min(timings[mode]) <= RETRY_WITHIN * fastest]
            if self.retrying:
                return self.retrying[0][0]
        return ranked[0]

    def record(self, mode: str, seconds: float) -> None:
        """Time a run, unless it is the first after a switch of way, or came less than
        :data:`SETTLE` seconds of runs after the structure's first run: such runs pay for the
        switch or for the process's start (BLAS's threads spinning, a pool's threads
        starting, memory their allocator arenas had not mapped), and timed, they made the way
        tried second look the faster one. A first run slower than any switch explains is
        timed all the same."""
        self.clock += seconds
        if mode != self.last_mode:
            self.settling = (SETTLE if not self.last_mode else 0.0) - seconds
            self.last_mode = mode
            known = [min(t) for t in self.timings.values() if len(t) >= 3]
            if known and seconds - SETTLE > RETRY_WITHIN * min(known):
                # Slower than a switch could make it (branches that wait, run one after
                # another): timed, so that the way is not run again to be timed.
                self.timings[mode].append(seconds)
                self.timed[mode] += 1
            return
        if self.settling > 0:
            self.settling -= seconds
            return
        timings = self.timings[mode]
        timings.append(seconds)
        del timings[:-5]
        self.timed[mode] += 1


def choose_mode(plan: Any) -> tuple[str, ModeChoice | None]:
    """The mode of a threaded run of ``plan`` and the record to time it in: the mode
    ``pargraph.adaptive`` names (one of :data:`MODES` or :data:`BLAS_FREE`; not timed), else
    the fastest so far."""
    forced = dask.config.get("pargraph.adaptive", True)
    if forced in MODES or forced == BLAS_FREE:
        return forced, None
    choice = local.modes.get(plan)
    if choice is None:
        choice = local.modes[plan] = ModeChoice()
    return choice.choose(), choice


def run_adaptively(lowered: Lowered, keys: list, get: Callable) -> Sequence[Any]:
    """A threaded run of a structure seen before goes the way that was fastest for it: on
    threads with BLAS limited to one thread each (:func:`run_on_threads`), or in this thread,
    group after group, with BLAS free to use every core or limited to one (see
    :class:`ModeChoice`)."""
    mode, choice = choose_mode(lowered.plan)
    start = time.perf_counter()
    with blas_limited(get, lowered.blas):
        if mode == "threads":
            results = run_on_threads(lowered.graph, keys, _threads(None))
        else:
            results = run_in_order(lowered, keys)
    if choice is not None:
        choice.record(mode, time.perf_counter() - start)
    return results


def run_in_order(lowered: Lowered, keys: list) -> list:
    """Run the group tasks one after another in this thread, in dependency order, releasing
    each result after its last reader as dask would: what dask's sync scheduler does, without
    its costs per task."""
    values: dict = {}
    for key, done in lowered.sequential:
        values[key] = lowered.graph[key](values)
        for finished in done:
            del values[finished]
    return [values[key] for key in keys]


def run_inline(lowered: Lowered) -> Sequence[Any]:
    """Run a single-task graph in the calling thread: no scheduler costs."""
    return lowered.single.run(tuple([local_value(node, value) for node, value in
                                     zip(lowered.single_inputs, lowered.single_values)]))


class _DeferredWork(threading.local):
    """Work that ``backward()`` deferred to this thread's next run: one entry per call, as
    ``(targets, release, site of the backward() call)``, and the targets that are training
    state. Per thread, so that one thread's backward never runs (or fails) inside another
    thread's unrelated realization."""

    def __init__(self) -> None:
        self.entries: list[tuple[list[Node], list[Node], Any]] = []
        self.state: list[Node] = []
        self.replaced: list[Node] = []


_deferred = _DeferredWork()


def defer(targets: Sequence[Node], release: Sequence[Node] = (), site: Any = None,
          state: bool = False, replaces: Sequence[Node] = ()) -> None:
    """Realize ``targets`` (and then release ``release``) with this thread's next run, so
    that ``loss.backward(); optimizer.step()`` becomes one graph in which updates start as
    soon as their gradients exist. ``site``: the user's ``backward()`` line, which an error
    in the deferred work names. ``state``: the targets are training state (batch norm's
    running statistics), kept as parameters are, and ``replaces`` the state they replace."""
    _deferred.entries.append((list(targets), list(release), site))
    if state:
        _deferred.state += targets
        _deferred.replaced += replaces


class _Progress(threading.local):
    minimum: float | None = None  # seconds: show a bar for runs longer than this


_progress = _Progress()


@contextlib.contextmanager
def showing_progress(minimum: float = 0.5):
    """Progress bars for this thread's runs inside the block (``pargraph.progress``): dask's
    bar on local schedulers, ``distributed.progress`` on a cluster. A run with a bar goes
    through dask's scheduler (the bar watches it), not in the calling thread."""
    from dask.diagnostics import ProgressBar

    saved, _progress.minimum = _progress.minimum, minimum
    try:
        with ProgressBar(minimum=minimum):
            yield
            flush()
    finally:
        _progress.minimum = saved


def flush() -> None:
    """Run this thread's deferred work now (what ``pargraph.compute()`` without arguments,
    and the end of a ``trace()`` or ``progress()`` block, do)."""
    if _deferred.entries:
        realize([])


def take_deferred() -> _DeferredWork:
    """This thread's deferred work, taken away (a compiled step's capture runs it itself)."""
    taken = _DeferredWork()
    taken.entries, taken.state, taken.replaced = (_deferred.entries, _deferred.state,
                                                  _deferred.replaced)
    _deferred.entries, _deferred.state, _deferred.replaced = [], [], []
    return taken


def clear_deferred() -> None:
    """Drop this thread's deferred work (for tests that must not leak into each other)."""
    _deferred.entries = []
    _deferred.state = []
    _deferred.replaced = []


def realize(targets: Sequence[Node], release: Sequence[Node] = (),
            replicate: Sequence[Node] = ()) -> None:
    """Compute the values of ``targets`` (and of this thread's deferred work) in one run;
    afterwards free the saved values of the ``release`` nodes (the graph a backward went
    through). On a cluster the values of ``replicate`` (training state) are copied to a
    second worker. A Ctrl-C during the run changes no node and keeps the deferred work for
    the next realization; while a compiled step captures, nothing runs (the targets join the
    step's one run at its end)."""
    recorder = recording.recorder
    if recorder is not None and recorder.realize(targets, replicate):
        return
    if not release and not _deferred.entries and all(n.value is not None for n in targets):
        return  # nothing to run: a value read again
    with local.collector:
        taken = (_deferred.entries, _deferred.state, _deferred.replaced)
        try:
            # One statement with no call in it: Python checks for signals at calls and jumps.
            _deferred.entries, _deferred.state, _deferred.replaced = [], [], []
            commit = _run(targets, release, replicate, *taken)
        except KeyboardInterrupt:
            # Interrupted work was not wrong: it runs with the next realization, as if this
            # one had not started (an error, by contrast, would only raise again).
            with interrupts.deferred():
                if _deferred.entries is not taken[0]:  # taken, not only read
                    _deferred.entries[:0], _deferred.state[:0], _deferred.replaced[:0] = taken
                if shared_tensors:  # shared tensors read their mapping again
                    shared_tensors.write_back()
            raise
        except Exception:
            if shared_tensors:
                with interrupts.deferred():
                    shared_tensors.write_back()
            raise
        with interrupts.deferred(), local.structure:
            commit()


def _run(targets: Sequence[Node], release: Sequence[Node], replicate: Sequence[Node],
         deferred: list, state: list, replaced: list) -> Callable[[], None]:
    """Run what :func:`realize` asks for; returns what applies the results to the nodes."""
    if state:
        replicate = [*replicate, *state]
    if deferred:
        targets, release = list(targets), list(release)
        for more_targets, more_release, _ in deferred:
            targets += more_targets
            release += more_release
    target_ids = {id(n) for n in targets}
    if shared_tensors:  # an update of a shared tensor reads a copy taken now
        shared_tensors.snapshot()
    pending = [node for node in targets if node.value is None]
    keep: list[Node] = []
    values: Sequence[Any] = ()
    lowered = None
    while pending:  # once, unless another thread realized a node of this run before
        # Planned and lowered while no other thread commits (see LocalState.structure).
        with local.structure:
            order, computed = plan(pending)
            if clusters.used:
                check_held_values(order)
            keep = _kept(computed, target_ids, {id(n) for n in release})
            get = choose_scheduler()
            client = client_of(get)
            if client is not None and client.status != "running":  # every value it held is gone
                raise cluster_lost(client, f"the client's connection is {client.status}")
            held = held_on_cluster(order, client) if client is not None else None
            try:
                lowered = lower(order, computed, keep, _granularity_or_lost(get, client),
                                held=held, copied=replicate if client is not None and
                                replicas(client) else ())
            except Exception:
                if not _realized_meanwhile(computed, pending):
                    raise
            if not _realized_meanwhile(computed, pending):
                break
        pending = [node for node in pending if node.value is None]
        keep, lowered = [], None
    if lowered is not None:
        if replicate and lowered.holders is not None:
            wanted = {id(node) for node in replicate}
            lowered.state = frozenset(lowered.holders[i] for i, node in enumerate(keep)
                                      if id(node) in wanted and lowered.holders[i] is not None)
        timing = lowered.timing if client is None else None
        try:
            with contextlib.ExitStack() as stack:
                for observer in list(local.observers):
                    stack.enter_context(observer.run(computed, get, keep))
                if timing is not None:
                    events = stack.enter_context(_timed_nodes())
                values = lowered.values(execute(lowered, lowered.keys, get))
        except Exception as error:
            raise _blame_backward(error, deferred) from None
        if timing is not None:
            with local.structure:  # re-planning reads the nodes' inputs
                timing.learn(events)

    def commit() -> None:
        for node, value in zip(keep, values):
            node.realize(value, keep_inputs=node.history)
        if pending and replaced and clusters.used:
            keep_until_copied([node.value for node in replaced])
        for node in release:
            node.free(keep_value=id(node) in target_ids or is_live(node))
        if release:
            _forget_structure([node for node in release if node.value is not None])
        if shared_tensors:  # a shared tensor's new values go to its mapping
            shared_tensors.write_back()

    return commit




def _realized_meanwhile(computed: list[Node], targets: list[Node]) -> bool:
    """Whether another thread realized a node this run set out to compute, or one of its
    targets (then ``plan`` may have listed the target's inputs but not the target)."""
    return realized_meanwhile(computed) or realized_meanwhile(targets)


def _forget_structure(freed_with_values: list[Node]) -> None:
    """Cut the inputs of the nodes the *previous* backward freed and that still hold a value,
    so a tensor kept after its backward (``history.append(loss)``) holds its value, not its
    step's graph and the old parameters in it. The latest backward's structure stays one step
    longer, weakly, so it can still be drawn (``pargraph.visualize``)."""
    for node in local.structure_kept:
        if node.state == FREED:
            node.cut()
    local.structure_kept = weakref.WeakSet(freed_with_values)


def _blame_backward(error: Exception, deferred: list) -> Exception:
    """``error`` with the line of the ``backward()`` call whose deferred work raised it."""
    failed = getattr(error, FAILED_KEY, None)
    for targets, _, site in deferred:
        pending = [n for n in targets if n.value is None]
        if failed is not None and any(n.key == failed for n in plan(pending)[1]):
            return annotate(error, "backward", site, note="the failing work was deferred "
                            "by the backward() called at")
    return error


def _kept(computed: list[Node], target_ids: set[int], released: set[int]) -> list[Node]:
    saved: set[Node] = set()  # nodes hash by identity
    for node in computed:
        if node.history and id(node) not in released:
            saved.add(node)
            saved.update([i for i in node.inputs if type(i) is Node])
    # A value without history that an in-place op replaced (``p.data.add_(...)`` after the
    # forward read ``p``) is kept too: its replacement, not computed yet, reads it. Dropped,
    # each later run would compute the whole chain of replacements again.
    return [node for node in computed
            if node in saved or id(node) in target_ids or is_live(node)
            or (node.overwritten and not node.history)]




@contextlib.contextmanager
def _timed_nodes():
    """The ``(key, start, stop, thread)`` of every node that runs in the block: recorded by
    the tasks (``runtime.TaskTimes``), into the trace's list if one listens."""
    sink = TaskTimes.sink
    mine = sink is None
    if mine:
        TaskTimes.sink = sink = []
    first = len(sink)
    events: list = []
    try:
        yield events
    finally:
        events += sink[first:]
        if mine and TaskTimes.sink is sink:
            TaskTimes.sink = None


