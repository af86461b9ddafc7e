"""How a run goes: the scheduler dask would pick, the calling thread or pargraph's threads
for a structure (whichever ran it fastest, :class:`ModeChoice`), and BLAS's threads meanwhile.

:func:`pargraph.engine.execution.execute` asks here. Whether a run goes to a cluster is
decided here too (:func:`client_of`, which only looks at the scheduler); everything said to the
cluster is :mod:`pargraph.remote`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.local
import dask.threaded

from pargraph.context import context
from pargraph.engine.lowering import local_value
from pargraph.engine.partition import Granularity
from pargraph.engine.threads import get_num_threads, run_on_threads
from pargraph.ops.gemm import blas as products
from pargraph.remote.recovery import cluster_lost
from pargraph.remote.workers import hosts, threads_by_worker
from pargraph.runtime import ALL_BLAS, ANY_BLAS, ONE_BLAS, Lowered

DEFAULT_GET = dask.threaded.get


class Scheduling:
    """This process's record of how runs went, in one object (``scheduling``)."""

    def __init__(self) -> None:
        #: threadpoolctl's controller, and how many modules (and libraries ``ops.gemm``)
        #: were loaded when it scanned.
        self.blas: Any = None
        self.modules_at_scan = (0, 0)
        #: Whether every BLAS library it found runs small products on one thread whatever
        #: its count: OpenBLAS, and sequential libraries such as the MKL of ``ops.gemm``
        #: (see ``blas_limited``).
        self.one_thread_rule = False
        #: How each structure's threaded runs went in each mode, by plan.
        self.modes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: When the last run that left BLAS's threads free ended (``time.perf_counter``):
        #: they spin for about 0.1 s after their last call, on cores a threaded run wants.
        self.blas_free_end = 0.0
        #: The runs whose way the runner chose, by that way (``MODES``), in all.
        self.ran: Counter = Counter()


scheduling = context.register("scheduling", Scheduling())


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


def client_of(get: Callable) -> Any:
    """The distributed Client whose ``get`` this is, or ``None``."""
    client = getattr(get, "__self__", None)
    return client if type(client).__name__ == "Client" else None


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


class _BlasFree:
    """Entered by a run that may call BLAS on all of its threads: its end is noted
    (``Scheduling.blas_free_end``)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        scheduling.blas_free_end = time.perf_counter()


#: What a run that leaves BLAS's threads alone enters: one whose products OpenBLAS runs on
#: one thread anyway, and one that may use them all.
_UNLIMITED, _FREE = contextlib.nullcontext(), _BlasFree()
#: The process's BLAS threads during runs (BLAS's thread count is per process).
blas_threads = context.register("blas_threads", BlasThreads())


def blas_limited(get: Callable, blas: str = ONE_BLAS):
    """A context limiting BLAS to one thread around a threaded run, or a no-op: for a run
    that keeps all of BLAS's threads, or whose products OpenBLAS runs on one thread anyway
    (``blas``, see ``lowering.blas_threads_of``), or when ``pargraph.adaptive`` asks for BLAS
    free."""
    if blas is ALL_BLAS or not is_threaded(get) or not dask.config.get(
            "pargraph.limit-blas", True) or dask.config.get("pargraph.adaptive", True) == BLAS_FREE:
        return _UNLIMITED if blas is ANY_BLAS else _FREE
    # Scanning for BLAS libraries costs more than a task; a new one is loaded by an import or
    # by ops.gemm, so scan again only when modules or MKL were loaded since the last scan.
    products.functions()  # MKL, where a run's products will load it, loads before the scan
    loaded = (len(sys.modules), products.loads)
    if scheduling.blas is None or loaded != scheduling.modules_at_scan:
        from threadpoolctl import ThreadpoolController

        scheduling.blas = ThreadpoolController()
        scheduling.modules_at_scan = loaded
        scheduling.one_thread_rule = all(
            library.internal_api == "openblas"
            or getattr(library, "threading_layer", None) == "sequential"
            for library in scheduling.blas.select(user_api="blas").lib_controllers)
    if blas is ANY_BLAS and scheduling.one_thread_rule:
        return _UNLIMITED
    blas_threads.controller = scheduling.blas
    return blas_threads


def run_graph(graph: dict, keys: list, get: Callable, blas: str = ONE_BLAS) -> Sequence[Any]:
    """Run a dask graph on a local scheduler (``blas``: see :func:`blas_limited`)."""
    with blas_limited(get, blas):
        return get(graph, keys)


def granularity_or_lost(get: Callable, client: Any) -> Granularity:
    """``granularity``, which asks a cluster's scheduler for its workers: a scheduler that is
    gone by then is a lost cluster (ClusterLostError), not a comm error from inside dask."""
    try:
        return granularity(get, client)
    except (OSError, asyncio.CancelledError) as error:  # CommClosedError is an OSError
        if client is None:
            raise
        raise cluster_lost(client, f"asking the scheduler for its workers: {error!r}",
                           isinstance(error, OSError)) from None


def granularity(get: Callable, client: Any = None) -> Granularity:
    """How coarse the next run's tasks are: dask's config, and where the run goes. On a
    cluster of several worker processes pargraph places the tasks itself
    (``pargraph.placement``, default True; see :mod:`pargraph.engine.placement`)."""
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
#: Runs, and seconds of runs, between two retries of the ways close to the fastest: a retry
#: costs two runs of the other way, and a shared machine's slow stretches (where the calling
#: thread's way wins) end within seconds.
RETRY_EVERY, RETRY_PERIOD = 50, 1.0


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
        self.last_end = 0.0  # when its last run ended (``time.perf_counter``)
        self.after_free = False  # whether a run that left BLAS free came before its last run
        self.spun_until = 0.0  # its runs that start before then meet BLAS's threads spinning
        self.untimed = 0.0  # seconds of its last runs, in a row, not timed for that

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

    def meets_spinning_blas(self, start: float, free_end: float) -> bool:
        """Whether a run starting at ``start`` meets BLAS's threads still spinning (for
        :data:`SETTLE` seconds) after another structure's run that left them free and ended at
        ``free_end``, where such a run came before this one but not before the one before it
        (a switch: a block of steps on one thread, then steps on two). Such runs are not timed:
        timed, they would make threads look slower than one thread until the next retry. Where
        such a run comes before each of this structure's runs, the spinning is part of their
        cost: only the first :data:`SETTLE` seconds go untimed, and never more than twice that
        in a row."""
        after_free = free_end > self.last_end
        if after_free and not self.after_free:
            self.spun_until = free_end + SETTLE
        self.after_free = after_free
        return start < self.spun_until and self.untimed < 2 * SETTLE

    def ended(self, mode: str, start: float, end: float, spinning: bool) -> None:
        """A run in ``mode`` went from ``start`` to ``end``; timed unless it met BLAS's
        threads ``spinning`` (:meth:`meets_spinning_blas`)."""
        self.last_end = end
        if spinning:
            self.untimed += end - start
            return
        self.untimed = 0.0
        self.record(mode, end - start)

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
    choice = scheduling.modes.get(plan)
    if choice is None:
        choice = scheduling.modes[plan] = ModeChoice()
    return choice.choose(), choice


def run_adaptively(lowered: Lowered, keys: list, get: Callable) -> Sequence[Any]:
    """A threaded run of a structure seen before goes the way that was fastest for it: on
    threads with BLAS limited to one thread each (:func:`run_on_threads`), or in this thread,
    group after group, with BLAS free to use every core or limited to one (see
    :class:`ModeChoice`)."""
    mode, choice = choose_mode(lowered.plan)

    def run() -> Sequence[Any]:
        with blas_limited(get, lowered.blas):
            if mode == "threads":
                return run_on_threads(lowered.calls, keys, _threads(None), lowered.parts)
            return run_in_order(lowered, keys)

    return timed(choice, mode, run)


def timed(choice: ModeChoice | None, mode: str, run: Callable[[], Any]) -> Any:
    """``run()``, a run in ``mode``, timed into ``choice`` (None: not timed) unless it meets
    BLAS's threads spinning after another structure's run (``ModeChoice.meets_spinning_blas``)."""
    if choice is None:
        return run()
    scheduling.ran[mode] += 1
    start = time.perf_counter()
    spinning = choice.meets_spinning_blas(start, scheduling.blas_free_end)
    results = run()
    choice.ended(mode, start, time.perf_counter(), spinning)
    return results


def run_in_order(lowered: Lowered, keys: list) -> list:
    """Run the group tasks one after another in this thread, in dependency order, releasing
    each result after its last reader as dask would, and each element of a result after its
    own (``Lowered.sequential``): what dask's sync scheduler does, without its costs per
    task."""
    values: dict = {}
    calls = lowered.calls
    listed = lowered.listed  # tuples with elements that go early, held as lists
    for key, done, drops in lowered.sequential:
        value = calls[key](values)
        values[key] = list(value) if key in listed else value
        for producer, element in drops:
            values[producer][element] = None
        for finished in done:
            del values[finished]
    return [values[key] for key in keys]


def run_inline(lowered: Lowered) -> Sequence[Any]:
    """Run a single-task graph in the calling thread: no scheduler costs."""
    return lowered.single.run(tuple([local_value(node, value) for node, value in
                                     zip(lowered.single_inputs, lowered.single_values)]))
