"""Execution: run lowered graphs on dask's schedulers and fill the nodes' value slots.

The lifecycle of a node
    Recorded (waiting for its inputs), then, once somebody needs a value (``item()``,
    ``numpy()``, ``repr``, ``backward()``, ``optimizer.step()``, ``pargraph.compute``), lowered
    with everything it depends on that is not realized yet and handed to dask as one graph.
    Dask's scheduler marks it ready when its last input finished, runs it, and propagates the
    result to its consumers; the result lands in the node's value slot when the run ends.
    A run too small to profit from parallelism is one task (see :mod:`pargraph.lowering`); on
    the sync and threaded schedulers it runs directly in the calling thread, with no scheduler
    costs at all.

Threads or one thread
    A threaded run of coarse group tasks (:mod:`pargraph.partition`) goes the way that was
    fastest for its structure: on threads with BLAS limited to one thread each, or group
    after group in the calling thread with BLAS free to use every core, or limited to one
    (small matrix products run faster without BLAS's threads). On threads, the group tasks
    run as dask's threaded scheduler would run them (each as soon as its inputs exist, on
    ``num_workers`` threads, results released after their last reader) but without its costs
    per task (:func:`run_on_threads`): the calling thread works as one of them, and a task's
    end readies its readers in the thread that ran it, with no round trip through a
    scheduling thread. The plan times each way
    three times (not the first run after a switch, which pays for it), keeps the fastest
    median, and retries the others every 50 runs (``GroupPlan.choose_mode``). So a chain, a
    few big matmuls or many small GIL-bound ops run as on the sync scheduler, and independent
    branches run side by side: threads are never slower than sync for long. On the sync
    scheduler the group tasks run one after another in the calling thread, as dask's sync
    scheduler would run them but without its costs per task (:func:`run_in_order`).
    ``pargraph.adaptive: False`` always uses dask's threaded and sync schedulers themselves.

Which scheduler
    dask's own rules, in dask's order: ``dask.config.set(scheduler=...)`` (a name, a callable
    or a Client), then an active ``distributed.Client``, then the threaded scheduler.
    ``distributed`` is only consulted when it is already imported: nobody can have a Client
    otherwise, and asking costs ~0.4 ms per run. A local scheduler's name (``"threads"``,
    ``"sync"``) is looked up as dask does, but without dask's look for a Client on the way.

BLAS threads
    Graph-level and BLAS-level parallelism must not oversubscribe the cores, so while a threaded
    run executes BLAS is limited to one thread. threadpoolctl's limits are process-wide and
    cost far more than a task: the limit is set once around the run, through a cached
    controller that rescans the loaded libraries only after new imports.
    ``dask.config.set({"pargraph.limit-blas": False})`` turns it off. The sync scheduler keeps
    BLAS's own threads: it has no other parallelism.

Deferred work
    ``backward()`` builds its gradient graph at once (so its errors, such as a second backward
    through a freed graph, raise at the call) but defers running it to the next realization:
    typically ``optimizer.step()``, so forward, backward and updates run as one graph.

On a cluster
    Results stay on the workers: a value slot holds a Future, the next run's tasks refer to its
    key, and only what the user asks for (``item()``, ``numpy()``, ``state_dict()``, ``save``)
    is gathered. Parameters and optimizer state therefore never travel back and forth between
    steps; only new data (a batch) is sent. A value held here that a second run reads as
    well (a dataset kept in memory, a constant) is persisted on the cluster then (a data task
    the scheduler can rerun if its worker dies) and read by key from there on, instead of
    travelling inside every run's graph. With several worker processes, the lowering places
    each group task on a worker (:mod:`pargraph.placement`); the graph goes to the scheduler
    as one HighLevelGraph layer per worker, annotated ``workers=[address]`` and
    ``allow_other_workers=True`` (``pargraph.placement: False`` leaves placement to dask).
    A 0-d result (the loss) is gathered as soon as its task ends, while the rest still runs.
    Parameters and optimizer state are copied to a second worker (``pargraph.replicas``) as
    soon as each task holding them ends; the next run waits for the copies before it is
    submitted, so a worker dying loses nothing that cannot be recomputed. Each step's state is
    computed from the last step's, so the scheduler would keep every step's tasks (their run
    specs, the first step's parameter values among them) to be able to recompute it: once
    copied, the state becomes pure data on the scheduler and on the workers, as if scattered
    (:func:`forget_provenance`, :func:`forget_provenance_on_worker`), and what it was computed
    from is forgotten. Nor do distributed's message logs and spans grow with every step
    (:mod:`pargraph.plugins`, :func:`prune_spans`), and the scheduler's and the workers'
    messages go out after 1 ms instead of 5 and 2 (``pargraph.send-interval``).

Losing the cluster
    Values held on a cluster die with its scheduler: dask cancels every Future at once. A run
    or a ``fetch`` that meets a cancelled Future raises :class:`ClusterLostError` right away
    (dask itself would wait for a reconnect and then report "cancelled for reason: unknown").
    Objects registered with :func:`register_recovery` (optimizers, when
    ``pargraph.mirror-every`` is set, e.g. by ``connect(..., mirror_every=N)``) first put
    back the copies they gathered, so ``state_dict()`` still answers, at most N steps old.

Which values are kept
    The run returns, and the slots keep, the values of: the requested nodes; nodes that a live
    tensor still wraps; nodes with autograd history and the inputs they saved, because a later
    backward may need them (unless the run is the backward that frees them). Everything else is
    released by dask as soon as its last consumer is done. A kept node without history has its
    inputs cut, so the values it was computed from can be garbage collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from typing import Any

import dask
import dask.local
import dask.threaded
import numpy as np
from dask.utils import parse_timedelta

from pargraph.capturing import recording
from pargraph.graph import FREED, Node
from pargraph.interrupts import interrupts
from pargraph.lowering import Lowered, is_future, lower, plan, realized_meanwhile
from pargraph.partition import Granularity
from pargraph.runtime import FAILED_KEY, TaskTimes, annotate

DEFAULT_GET = dask.threaded.get
_run_ids = itertools.count()
_RUN_SESSION = secrets.token_hex(4)
#: Objects with a ``run(computed_nodes, get)`` context manager, entered around every run
#: (the trace layer registers itself here; execution never imports it).
observers: list = []
_blas_controller = None
_modules_at_scan = 0


def choose_scheduler() -> Callable:
    """The ``get`` function dask would use for this run, defaulting to the threaded one."""
    configured = dask.config.get("scheduler", None)
    if isinstance(configured, str) and configured.lower() in dask.base.named_schedulers:
        # What dask returns for a name of a local scheduler, without its look for a Client
        # on the way (which imports distributed: 0.48 s on the first run, 7 us on each).
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


def blas_limited(get: Callable):
    """A context limiting BLAS to one thread around a threaded run, or a no-op."""
    global _blas_controller, _modules_at_scan
    if not is_threaded(get) or not dask.config.get("pargraph.limit-blas", True):
        return contextlib.nullcontext()
    # Scanning for BLAS libraries costs ~0.7 ms; a new one can only have been loaded by an
    # import, so scan again only when modules were imported since the last scan.
    if _blas_controller is None or len(sys.modules) != _modules_at_scan:
        from threadpoolctl import ThreadpoolController

        _blas_controller = ThreadpoolController()
        _modules_at_scan = len(sys.modules)
    return _blas_controller.limit(limits=1, user_api="blas")


def is_live(node: Node) -> bool:
    """Whether a tensor the user holds still wraps ``node``."""
    owner = node.owner_tensor()
    return owner is not None and owner._node is node


def run_graph(graph: dict, keys: list, get: Callable) -> Sequence[Any]:
    """Run a dask graph on a local scheduler."""
    with blas_limited(get):
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
            return run_graph(lowered.graph, keys, get)
    except Exception as error:
        raise error.with_traceback(None) from None


def client_of(get: Callable) -> Any:
    """The distributed Client whose ``get`` this is, or ``None``."""
    client = getattr(get, "__self__", None)
    return client if type(client).__name__ == "Client" else None


def run_on_cluster(client: Any, graph: dict, keys: list, workers: dict | None = None,
                   fetched: int = 0, urgent: frozenset = frozenset(),
                   state: frozenset = frozenset()) -> list:
    """Run on the cluster and keep the results there: returns Futures, and the values of the
    last ``fetched`` keys (small: a loss). ``workers`` maps task keys to the worker address
    pargraph placed them on; ``urgent`` tasks run on their worker as soon as they can; the
    results at positions ``state`` (training state) are copied to a second worker as each is
    ready, then lose their history on the scheduler and the workers."""
    if client.status != "running":  # reconnecting or closed: every value it held is gone
        raise cluster_lost(client, f"the client's connection is {client.status}")
    graph = _untokenized(graph, workers, keys, urgent)
    settle_replication(client)
    _send_promptly(client)
    futures = _submit(client, graph, keys)
    _replaced.pop(client, None)  # the copies of what replaced it exist
    if state:
        _start_replication(client, [futures[k] for k in sorted(state)])
    # The fetched values (a loss) are often ready before the rest (a worker's backward pass):
    # they travel meanwhile.
    if fetched:
        _wait_for(client, futures[-fetched:], bar=False)
        try:
            values = client.gather(futures[-fetched:])
        except (OSError, CancelledError, asyncio.CancelledError) as error:
            # The scheduler went away after the run (CommClosedError is an OSError).
            raise cluster_lost(client, f"gathering the run's results: {error!r}") from None
    _wait_for(client, futures)
    if fetched:
        futures[-fetched:] = values
    return futures


def _submit(client: Any, graph: Any, keys: list) -> list:
    """``client.get(graph, keys, sync=False)``, without distributed's warning about a graph
    above ``distributed.admin.large-graph-warning-threshold`` (10 MB): its advice, keep data
    on the cluster instead of in every graph, is what pargraph does already (a value rides in
    the first run that reads it, a second run persists it and reads it by key from then on),
    so nothing in the user's code could act on it. The first step of a model with more than
    10 MB of parameters warned."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        return client.get(graph, keys, sync=False)


#: Seconds a client batches its messages to the scheduler for (distributed's is 10 ms). A run
#: sent less than that after the last batch waits for the rest: a training step's first
#: message often follows the last step's releases of old values by a few ms. Measured on the
#: wide DataParallel step, one worker process, interleaved in one process: 95.9 -> 90.8 ms.
CLIENT_SEND_INTERVAL = 2e-3


#: Seconds the scheduler and the workers batch their messages to each other for
#: (``pargraph.send-interval``; distributed's are 5 and 2 ms), and how many payloads each of
#: these comms keeps in its debugging log (``pargraph.message-log-length``; distributed's
#: 1000 held the task specs of a hundred steps and more): see :mod:`pargraph.plugins`.
SEND_INTERVAL = 1e-3
MESSAGE_LOG_LENGTH = 10

#: The client comms whose scheduler has pargraph's plugins: a client that reconnects (to a
#: restarted scheduler) gets a new comm, and the new scheduler needs them again.
_tuned_comms: weakref.WeakSet = weakref.WeakSet()


def _send_promptly(client: Any) -> None:
    """Shorten the client's batching of messages to the scheduler and its log of them, and,
    once per scheduler connection, the scheduler's and the workers' with plugins
    (:mod:`pargraph.plugins`)."""
    from pargraph.plugins import SchedulerComms, WorkerComms, tune_comm

    comm = getattr(client, "scheduler_comm", None)
    log_length = int(dask.config.get("pargraph.message-log-length", MESSAGE_LOG_LENGTH))
    tune_comm(comm, CLIENT_SEND_INTERVAL, log_length)
    if comm is None or comm in _tuned_comms:
        return
    interval = parse_timedelta(dask.config.get("pargraph.send-interval", SEND_INTERVAL),
                               default="s")
    try:
        client.register_plugin(SchedulerComms(interval, log_length))
        client.register_plugin(WorkerComms(interval, log_length))
    except Exception as error:  # a speed-up only: the run itself reports a lost cluster
        if client.status != "running":
            return
        warnings.warn(f"pargraph could not tune the cluster's message batching ({error!r}): "
                      "runs work, a few ms slower each", stacklevel=2)
    _tuned_comms.add(comm)


def _wait_for(client: Any, futures: list, bar: bool = True) -> None:
    """Wait until ``futures`` finished; raise the first one's error, or ClusterLostError."""
    from distributed import progress, wait

    try:
        with client.as_current():
            if bar and _progress.minimum is not None:
                progress(futures)
            wait(futures)
    except CancelledError as error:
        raise cluster_lost(client, f"the run was cancelled: {str(error).splitlines()[0]}"
                           ) from None
    for future in futures:
        if future.status == "error":
            raise future.exception()
        if future.status != "finished":  # cancelled: the scheduler went away
            raise cluster_lost(client, f"the run's results were cancelled "
                                       f"({future.key} and {len(futures) - 1} more)")


def _untokenized(graph: dict, workers: dict | None = None, keys: list | None = None,
                 urgent: frozenset = frozenset()) -> Any:
    """The graph as the expression ``Client.get`` builds from a dict, but named by a unique
    token instead of one computed by hashing every task and array in it (~17 ms for a small
    training step): pargraph's keys are already unique. The token goes to the constructor,
    which names the expression at once (set afterwards, it came after the hashing: 4.6 ms of
    the one-worker wide step's run, 15.7 ms for forty 512 KiB arrays). Tasks placed on a
    worker (``workers``) go in one layer per worker, annotated as ``dask.annotate(workers=...,
    allow_other_workers=True)`` would: loose, so a worker that left blocks nothing; ``urgent``
    ones in a layer of their own with a higher priority."""
    try:
        from dask._expr import HLGExpr, LLGExpr
    except ImportError:  # an older or newer dask: let it tokenize
        return graph
    token = f"pargraph-{next(_run_ids)}-{_RUN_SESSION}"
    if workers:
        return HLGExpr(dsk=_placed_layers(graph, workers, urgent), output_keys=keys,
                       _determ_token=token)
    return LLGExpr(graph, _determ_token=token)


def _placed_layers(graph: dict, workers: dict, urgent: frozenset = frozenset()) -> Any:
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    by_worker: dict[tuple[str, bool], dict] = {}
    for key, task in graph.items():
        by_worker.setdefault((workers.get(key, ""), key in urgent), {})[key] = task
    layers = {}
    for (address, first), tasks in by_worker.items():
        annotations = {"workers": [address], "allow_other_workers": True} if address else {}
        if first:
            annotations["priority"] = 1
        name = f"pargraph-{address or 'anywhere'}{'-first' if first else ''}"
        layers[name] = MaterializedLayer(tasks, annotations=annotations or None)
    return HighLevelGraph(layers, {name: set() for name in layers})


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
    return Granularity.of(client is not None, _workers(get, client),
                          bool(dask.config.get("pargraph.fuse", True)),
                          dask.config.get("pargraph.single-task-below", None),
                          dask.config.get("pargraph.task-grain", None), _hosts(client))


def _workers(get: Callable, client: Any) -> int:
    """Tasks that can run at once on ``get``: one on the sync scheduler."""
    return _threads(client) if client is not None or is_threaded(get) else 1


def _hosts(client: Any) -> tuple[tuple[str, int], ...]:
    """(address, threads) of the worker processes pargraph places a run's tasks on: a
    cluster's, when it has several and ``pargraph.placement`` is on; else none."""
    if client is None or not dask.config.get("pargraph.placement", True):
        return ()
    nthreads = _threads_by_worker(client)
    return tuple(sorted(nthreads.items())) if len(nthreads) > 1 else ()


#: Seconds for which a cluster's workers, as last asked, are taken to be current: a training
#: step asked up to three times (its partition, DataParallel's shards, replication), a
#: scheduler round trip each, ~1-3 ms on a busy cluster.
MEMBERSHIP_SECONDS = 1.0
_membership: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _threads_by_worker(client: Any) -> dict[str, int]:
    """The cluster's worker addresses and their thread counts, asked at most once every
    ``MEMBERSHIP_SECONDS`` (a worker that joined is used from then on; one that left is
    annotated on loosely, so its tasks go elsewhere)."""
    now = time.monotonic()
    known = _membership.get(client)
    if known is None or now - known[0] > MEMBERSHIP_SECONDS:
        known = _membership[client] = (now, dict(client.nthreads()))
    return known[1]


_cpu_count = os.cpu_count() or 1


def _threads(client: Any) -> int:
    if client is not None:
        return max(sum(_threads_by_worker(client).values()), 1)
    return int(dask.config.get("num_workers", None) or _cpu_count)


def worker_threads() -> int:
    """How many tasks can run at once where the next run would go."""
    return _threads(client_of(choose_scheduler()))


def is_local(get: Callable) -> bool:
    """The sync or threaded scheduler (not a cluster, not processes)."""
    return is_threaded(get) or getattr(get, "func", get) is dask.local.get_sync


def run_adaptively(lowered: Lowered, keys: list, get: Callable) -> Sequence[Any]:
    """A threaded run of a structure seen before goes the way that was fastest for it: on
    threads with BLAS limited to one thread each (:func:`run_on_threads`), or in this thread,
    group after group, with BLAS free to use every core or limited to one (see
    ``GroupPlan.choose_mode``)."""
    mode = lowered.plan.choose_mode()
    start = time.perf_counter()
    if mode == "threads":
        with blas_limited(get):
            results = run_on_threads(lowered.graph, keys, _threads(None))
    else:
        with blas_limited(get) if mode.endswith("one BLAS thread") else \
                contextlib.nullcontext():
            results = run_in_order(lowered, keys)
    lowered.plan.record(mode, time.perf_counter() - start)
    return results


def run_on_threads(graph: dict, keys: list, threads: int) -> list:
    """Run a graph of group tasks on ``threads`` threads (this one and ``threads - 1`` of a
    pool), each task as soon as the tasks it reads have finished, releasing each result after
    its last reader: what dask's threaded scheduler does, without its costs per task. Those
    are a round trip through its scheduling thread per task and its bookkeeping there, which
    holds the GIL the tasks' Python needs: on the branchy step's 39 group tasks, replayed
    in one process, dask's threads took 33.3 ms, these 27.8 (one thread: 38.2). The first
    error stops the run (tasks already running end first) and is raised as itself.

    Ctrl-C is held while the calling thread works and waits here, and taken between tasks:
    raised inside ``Condition.wait``, it could leave the condition's lock held, and every
    thread of the pool waiting for it, the next run too."""
    inputs = {key: [k for k in task.dependencies if k in graph] for key, task in graph.items()}
    readers: dict[Any, list] = {key: [] for key in graph}
    for key, read in inputs.items():
        for k in read:
            readers[k].append(key)
    waiting = {key: len(read) for key, read in inputs.items()}
    unread = {key: len(readers[key]) for key in graph}
    kept = set(keys)
    ready = [key for key, n in waiting.items() if n == 0]
    values: dict = {}
    state = {"left": len(graph), "error": None}
    changed = threading.Condition()

    def work() -> None:
        # Only the main thread takes Ctrl-C, waking now and then to look for one; the pool's
        # threads stop on the error it sets. (A run another thread started goes on, as Python
        # raises KeyboardInterrupt in the main thread only.)
        main = threading.current_thread() is threading.main_thread()
        poll = INTERRUPT_POLL if main else None
        while True:
            with changed:
                while not ready and state["left"] and state["error"] is None and \
                        not (main and interrupts.held()):
                    changed.wait(poll)
                if main and interrupts.held():  # between tasks: stop every thread of the run
                    state["error"] = state["error"] or KeyboardInterrupt()
                    changed.notify_all()
                    return
                if not ready or state["error"] is not None:
                    return
                key = ready.pop()
            try:
                value = graph[key](values)
            except BaseException as error:
                with changed:
                    state["error"] = state["error"] or error
                    changed.notify_all()
                return
            with changed:
                values[key] = value
                state["left"] -= 1
                before = len(ready)
                for reader in readers[key]:
                    waiting[reader] -= 1
                    if not waiting[reader]:
                        ready.append(reader)
                for k in inputs[key]:
                    unread[k] -= 1
                    if not unread[k] and k not in kept:
                        del values[k]
                # Wake as many threads as tasks became ready (this one takes one more); all
                # of them at the end, so that they return. Woken after every task, all the
                # threads would contend for the GIL only to find nothing to do.
                if state["left"]:
                    changed.notify(len(ready) - before)
                else:
                    changed.notify_all()

    with interrupts.deferred():  # a Ctrl-C held here is raised as the block ends
        helpers = [_thread_pool(threads - 1).submit(work) for _ in range(threads - 1)]
        work()
        for helper in helpers:
            # A helper still queued (the pool busy with another run, or with the run that
            # called this one from a task) is not waited for: this thread did the work.
            if not helper.cancel():
                helper.result()
    if state["error"] is not None:
        raise state["error"]
    return [values[key] for key in keys]


#: Seconds between the calling thread's looks for a held Ctrl-C while it waits for tasks.
INTERRUPT_POLL = 0.05


_pool: dict = {}


def _thread_pool(size: int) -> Any:
    """This process's pool of ``size`` threads for :func:`run_on_threads` (made once)."""
    if size not in _pool:
        from concurrent.futures import ThreadPoolExecutor

        # As in PyTorch, floating point errors give inf/nan silently, in these threads too
        # (numpy's error state is per thread; code generated for compiled steps sets none).
        _pool[size] = ThreadPoolExecutor(size, thread_name_prefix="pargraph",
                                         initializer=np.seterr, initargs=("ignore",))
    return _pool[size]


def run_in_order(lowered: Lowered, keys: list) -> list:
    """Run the group tasks one after another in this thread, in dependency order, releasing
    each result after its last reader as dask would: what dask's sync scheduler does, without
    its costs per task (~75 us each here: 3 of the branchy step's 13 ms)."""
    values: dict = {}
    for key, done in lowered.sequential:
        values[key] = lowered.graph[key](values)
        for finished in done:
            del values[finished]
    return [values[key] for key in keys]


def run_inline(lowered: Lowered) -> Sequence[Any]:
    """Run a single-task graph in the calling thread: no scheduler costs, BLAS left free."""
    return lowered.single.run(tuple([fetch(node) for node in lowered.single_inputs]))


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
    """Realize ``targets`` (and then release ``release``) with this thread's next run.

    ``backward()`` defers its gradients this way, so that the usual ``loss.backward();
    optimizer.step()`` becomes one dask graph in which parameter updates start as soon as
    their gradients exist, overlapping the rest of the backward pass. ``site`` is the user's
    line that called ``backward()``: an error in the deferred work names it. ``state``: the
    targets are training state (batch norm's running statistics), kept as parameters are
    (see ``realize``'s ``replicate``), and ``replaces`` the state they replace (see
    :func:`keep_until_copied`).
    """
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


def restore_deferred(taken: _DeferredWork) -> None:
    """Put work :func:`take_deferred` took back in front of this thread's deferred work."""
    _deferred.entries[:0], _deferred.state[:0], _deferred.replaced[:0] = (
        taken.entries, taken.state, taken.replaced)


def clear_deferred() -> None:
    """Drop this thread's deferred work (for tests that must not leak into each other)."""
    _deferred.entries = []
    _deferred.state = []
    _deferred.replaced = []


def realize(targets: Sequence[Node], release: Sequence[Node] = (),
            replicate: Sequence[Node] = ()) -> None:
    """Compute the values of ``targets`` (and of this thread's deferred work) in one run;
    afterwards free the saved values of the ``release`` nodes (the graph a backward pass went
    through). On a cluster, the values of ``replicate`` (parameters and optimizer state,
    which exist nowhere else) are copied to a second worker as soon as they exist, and the
    scheduler forgets how they were computed.

    A Ctrl-C during the run leaves every node as it was and the deferred work in place, for
    the next realization; one while the results land waits until they all have.

    While a compiled step captures (:mod:`pargraph.compiled`), nothing runs: the targets join
    the step's one run at its end."""
    recorder = recording.recorder
    if recorder is not None and recorder.realize(targets, replicate):
        return
    taken = (_deferred.entries, _deferred.state, _deferred.replaced)
    try:
        # One statement with no call in it: Python checks for signals at calls and jumps.
        _deferred.entries, _deferred.state, _deferred.replaced = [], [], []
        commit = _run(targets, release, replicate, *taken)
    except KeyboardInterrupt:
        # Interrupted work was not wrong: it runs with the next realization, as if this one
        # had not started (an error, by contrast, would only raise again).
        with interrupts.deferred():
            if _deferred.entries is not taken[0]:  # taken, not only read
                _deferred.entries[:0], _deferred.state[:0], _deferred.replaced[:0] = taken
        raise
    with interrupts.deferred():
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
    pending = [node for node in targets if node.value is None]
    keep: list[Node] = []
    values: Sequence[Any] = ()
    lowered = None
    while pending:  # once, unless another thread realizes a node of this run meanwhile
        order, computed = plan(pending)
        _check_held_values(order)
        keep = _kept(computed, target_ids, {id(n) for n in release})
        get = choose_scheduler()
        client = client_of(get)
        if client is not None and client.status != "running":  # every value it held is gone
            raise cluster_lost(client, f"the client's connection is {client.status}")
        held = _held_on_cluster(order, client) if client is not None else None
        try:
            lowered = lower(order, computed, keep, _granularity_or_lost(get, client),
                            held=held, copied=replicate if client is not None and
                            _replicas(client) else ())
        except Exception:
            if not realized_meanwhile(computed):
                raise
        if not realized_meanwhile(computed):
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
                for observer in list(observers):
                    stack.enter_context(observer.run(computed, get))
                if timing is not None:
                    events = stack.enter_context(_timed_nodes())
                values = lowered.values(execute(lowered, lowered.keys, get))
        except Exception as error:
            raise _blame_backward(error, deferred) from None
        if timing is not None:
            timing.learn(events)

    def commit() -> None:
        for node, value in zip(keep, values):
            node.realize(value, keep_inputs=node.history)
        if pending and replaced:
            keep_until_copied([node.value for node in replaced])
        for node in release:
            node.free(keep_value=id(node) in target_ids or is_live(node))
        if release:
            _forget_structure([node for node in release if node.value is not None])

    return commit


#: Values held here that a cluster run has read, by node: True after the first run (sent in
#: the graph), then the Future of the copy persisted for the second and later runs.
_shipped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _held_on_cluster(order: list[Node], client: Any) -> dict[str, Any]:
    """For the realized values held here that an earlier run on ``client`` read too, a
    reference to their copy on the cluster (sent now if this is the second run reading them),
    by node key. The copy is a persisted data task, not scattered data: a worker that dies
    with it loses nothing, the scheduler runs the task again (and a copy a lost scheduler
    took along is sent again)."""
    from dask.task_spec import DataNode, TaskRef

    held: dict[str, Any] = {}
    for node in order:
        if node.value is None or is_future(node.value):
            continue
        copy = _shipped.get(node)
        if copy is None:
            _shipped[node] = True  # sent in this run's graph; kept there if it comes back
            continue
        if copy is True or copy.client is not client or copy.status in ("cancelled", "error"):
            key = f"{node.key}-held-{next(_run_ids)}"  # groups with its op in the dashboard
            graph = _untokenized({key: DataNode(key, node.value)})
            copy = _shipped[node] = _submit(client, graph, [key])[0]
        held[node.key] = TaskRef(copy.key)
    return held


_structure_kept: weakref.WeakSet = weakref.WeakSet()


def _forget_structure(freed_with_values: list[Node]) -> None:
    """Cut the inputs of the nodes the *previous* backward freed and that still hold a value.

    A tensor kept after its backward ran (``history.append(loss)``) then holds its value only,
    not its step's graph and the old parameter values in it. The structure of the latest
    backward stays one step longer, so it can still be drawn (``pargraph.visualize``). Held
    weakly: a structure nobody holds a tensor of cannot be drawn, and holding it kept the
    parameters it read alive, a third copy beside the current and the new ones during the
    next step (the wide step's peak memory: 12 MiB more).
    """
    global _structure_kept
    for node in _structure_kept:
        if node.state == FREED:
            node.cut()
    _structure_kept = weakref.WeakSet(freed_with_values)


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


def _start_replication(client: Any, state: list) -> None:
    """Start copying the ``state`` futures to more than one worker (``pargraph.replicas``,
    default 2), each as soon as it exists, so that a worker dying loses no state that cannot
    be recomputed; then make the scheduler and the workers forget how they were computed.

    A worker's update tasks are copied while the other worker still computes, and the caller
    records its next step meanwhile; the next run on the cluster waits for the copies
    before it starts (:func:`settle_replication`), so every run starts with the state on two
    workers. (Copied once the whole run had returned, the wide DataParallel step's ~24 MiB
    took 8-21 ms of each step on 2 workers here.)"""
    wanted = _replicas(client)
    workers = len(_threads_by_worker(client)) if wanted else 0
    futures = state if wanted else []  # with copies, they hold nothing else (the _keep tasks)

    async def copy_each() -> None:
        await asyncio.gather(*(client._replicate([future], n=min(wanted, workers))
                               for future in futures), return_exceptions=True)
        # then the forgetting, which the next run need not wait for
        forgetting = asyncio.ensure_future(_forget_history(client, list(state)))
        _forgetting.add(forgetting)  # asyncio keeps only a weak reference to a task
        forgetting.add_done_callback(_forgetting.discard)

    copying = copy_each()
    try:
        if futures:
            _keep_replicas(client)
        _replicating[client] = asyncio.run_coroutine_threadsafe(copying,
                                                                client.loop.asyncio_loop)
    except Exception:  # the client is closing: nothing to copy to
        copying.close()


_forgetting: set = set()


async def _forget_history(client: Any, futures: list) -> None:
    """Once ``futures`` exist, make the scheduler forget how they were computed
    (:func:`forget_provenance`): what a training step keeps (parameters, optimizer state) is
    computed from the last step's, so otherwise the scheduler keeps every step's tasks, the
    first step's parameter values with them (measured: 8 more tasks a step, ~64 KiB pickled,
    on the wide DataParallel step)."""
    from distributed.client import _wait

    kept_spans = int(dask.config.get("pargraph.kept-spans", KEPT_SPANS))
    try:
        await _wait(futures)
        keys = [f.key for f in futures if f.status == "finished"]
        await client._run_on_scheduler(forget_on_scheduler, keys=keys, kept_spans=kept_spans)
        await client._run(forget_provenance_on_worker, keys=keys, on_error="ignore")
    except Exception:  # a worker or the scheduler left: the next run reports what matters
        return


#: How many finished "default" spans a training loop leaves on the scheduler
#: (``pargraph.kept-spans``): see :func:`prune_spans`.
KEPT_SPANS = 100


def forget_on_scheduler(keys: list, kept_spans: int, dask_scheduler: Any = None) -> None:
    """(Runs on the scheduler after each step's copies.) :func:`forget_provenance` of the
    training state, then :func:`prune_spans`."""
    forget_provenance(keys, dask_scheduler)
    prune_spans(kept_spans, dask_scheduler)


def prune_spans(kept: int, dask_scheduler: Any = None) -> int:
    """(Runs on the scheduler.) Empty the finished "default" spans older than the newest
    ``kept``: distributed opens one for a graph whenever the last one finished, one per
    training step, and each keeps its task groups forever (dask/distributed#7977). A span
    itself stays (a worker's heartbeat reports metrics by span and fails on one the scheduler
    no longer knows), without the task groups the scheduler forgot: those were most of a
    span's objects, which every full garbage collection of the scheduler's process walks (a
    LocalCluster's: the client's). The dashboard's span views then cover the last ``kept``
    steps. Spans a user opened (``distributed.span``) stay whole. Returns how many spans were
    emptied (0 on a distributed whose spans differ)."""
    spans = getattr(dask_scheduler, "extensions", {}).get("spans")
    if spans is None or not hasattr(spans, "spans_search_by_name"):
        return 0
    defaults = spans.spans_search_by_name.get(("default",), [])
    groups = dask_scheduler.task_groups
    emptied = 0
    # Only the spans that just left the kept window: older ones were emptied when they did
    # (one whose groups were still alive then is retried for 50 steps), so a step's cost
    # does not grow with the training's length.
    end = max(len(defaults) - kept, 0)
    for span in defaults[max(end - 50, 0):end]:
        members = getattr(span, "groups", None)
        if members and not span.children and span.done and not any(
                groups.get(group.name) is group for group in members):
            members.clear()
            emptied += 1
    return emptied


def forget_provenance(keys: list, dask_scheduler: Any = None) -> int:
    """(Runs on the scheduler.) Make the tasks of ``keys`` that are in memory pure data, as if
    scattered: no run spec, no dependencies; the tasks they depended on that nothing else
    needs are forgotten, and so on up the history. What is lost: recomputing them if every
    worker holding them dies (pargraph keeps training state on two workers, and recomputing
    it meant rerunning every step since the first). dask/distributed#809 asks for this as an
    API; until one exists, this edits the scheduler's task states the way its own transitions
    do. Returns how many tasks were forgotten (0 on a scheduler whose task states differ)."""
    tasks = dask_scheduler.tasks
    before = len(tasks)
    found = [tasks[key] for key in keys if key in tasks]
    fields = ("state", "run_spec", "dependencies", "dependents", "waiters", "who_wants")
    if not all(hasattr(ts, name) for ts in found for name in fields):
        return 0  # another version of distributed: leave its state alone
    forget: dict = {}
    for ts in found:
        if ts.state != "memory" or not ts.dependencies:
            continue
        for dts in ts.dependencies:
            dts.dependents.discard(ts)
            if dts.waiters:
                dts.waiters.discard(ts)
            if not dts.dependents and not dts.who_wants and dts.state == "released":
                forget[dts.key] = "forgotten"
        ts.dependencies.clear()
        ts.run_spec = None
    if forget:
        dask_scheduler.transitions(forget, stimulus_id=f"pargraph-forget-{time.time()}")
    # A kept value's task group lives as long as the training (it always holds some state)
    # and its dependencies would collect every step's forgotten task groups.
    groups = dask_scheduler.task_groups
    for ts in found:
        group = getattr(ts, "group", None)
        dependencies = getattr(group, "dependencies", None)
        if isinstance(dependencies, set):
            dependencies -= {dep for dep in dependencies if groups.get(dep.name) is not dep}
    return before - len(tasks)


def forget_provenance_on_worker(keys: list, dask_worker: Any = None) -> int:
    """(Runs on each worker.) What :func:`forget_provenance` does on the scheduler, in the
    worker's own task states: a worker keeps a released task while a task that depended on it
    is known to it, so it too kept every step's tasks, their run specs with them (measured:
    +4 tasks, ~30 KiB pickled and ~230 KiB of resident memory a step on each worker of the
    wide DataParallel step). Returns how many tasks were forgotten."""
    state = dask_worker.state
    found = [state.tasks[key] for key in keys if key in state.tasks]
    if not all(hasattr(ts, name) for ts in found for name in ("state", "dependencies",
                                                                "dependents")):
        return 0  # another version of distributed: leave its state alone
    forget: dict = {}
    for ts in found:
        if ts.state != "memory":
            continue
        for dep in ts.dependencies:
            dep.dependents.discard(ts)
            if dep.state == "released" and not dep.dependents:
                forget[dep] = "forgotten"
        ts.dependencies.clear()
    before = len(state.tasks)
    if forget:
        state._transitions(forget, stimulus_id=f"pargraph-forget-{time.time()}")
    return before - len(state.tasks)


def keep_until_copied(values: Sequence[Any]) -> None:
    """Hold ``values``, the training state a step replaced, until the copies of the state
    that replaced it exist: a worker that dies before then takes the only copy of some new
    state with it, and dask recomputes that from these (released, they were forgotten: see
    :func:`forget_provenance`). They go once the next run is submitted, which waits for the
    copies: released as soon as the copies existed, the scheduler's messages freeing them
    delayed the next run's first tasks by its 5 ms batching (2 workers: 79.5 -> 81.9 ms)."""
    held = [value for value in values if is_future(value)]
    if held:
        _replaced.setdefault(held[0].client, []).extend(held)


#: Per client: the training state the last step replaced (see :func:`keep_until_copied`).
_replaced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _replicas(client: Any) -> int:
    """How many workers a run on ``client`` keeps parameters and optimizer state on: 0 when
    that is one (``pargraph.replicas`` is 1, or the cluster has one worker)."""
    wanted = int(dask.config.get("pargraph.replicas", 2))
    return wanted if wanted > 1 and len(_threads_by_worker(client)) > 1 else 0


#: Per client: the copying :func:`_start_replication` started (a ``concurrent.futures.Future``).
_replicating: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def settle_replication(client: Any) -> None:
    """Wait until the copies the last :func:`_start_replication` started on ``client``
    exist."""
    copying = _replicating.pop(client, None)
    if copying is None:
        return
    try:
        copying.result()
    except Exception:
        # A worker that leaves during the copying makes the scheduler fail it (whatever the
        # error). The values are intact on their first worker; the next step copies again.
        return


_replicas_kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _keep_replicas(client: Any) -> None:
    """Once per client: stop the scheduler's Active Memory Manager, whose one default policy
    (ReduceReplicas) drops every copy of a key beyond the first every 2 s, also those
    ``Client.replicate`` made: the replicas would be gone by the time a worker dies.
    (``retire_workers`` still works: it runs its own policy when the manager is stopped.)"""
    if client not in _replicas_kept:
        _replicas_kept[client] = True
        if client.amm.running():
            client.amm.stop()


def connect(address: str, timeout: float = 10.0, security: Any = None,
            mirror_every: int | None = None) -> Any:
    """A ``distributed.Client`` for the scheduler at ``address``, or a ``ConnectionError``
    that names the address, within ``timeout`` seconds whatever answers there.
    ``mirror_every`` sets ``pargraph.mirror-every`` for the process."""
    from distributed import Client

    if mirror_every is not None:
        if int(mirror_every) < 0:
            raise ValueError(f"connect: mirror_every must be >= 0 (steps), got {mirror_every}")
        dask.config.set({"pargraph.mirror-every": int(mirror_every)})

    if address.startswith("tls://") and security is None:
        raise ValueError(
            f"connect: {address} is a TLS address, so pass security=: for example "
            "distributed.security.Security(tls_ca_file='ca.pem', tls_client_cert='client.pem', "
            "tls_client_key='client-key.pem', require_encryption=True) (see docker/README.md)")
    deadline = time.monotonic() + timeout
    _probe_scheduler(address, timeout, security)
    remaining = max(deadline - time.monotonic(), 0.1)
    try:
        return Client(address, timeout=f"{remaining}s", security=security)
    except (OSError, TimeoutError) as error:
        raise _unreachable(address, timeout, error) from None


def _unreachable(address: str, timeout: float, reason: Any) -> ConnectionError:
    return ConnectionError(
        f"could not reach the dask scheduler at {address} within {timeout:g} s ({reason}); "
        "is it running, and is the address right? Start one with `dask scheduler --host "
        "127.0.0.1`.")


#: Bounds of the frames the probe reads: a scheduler's identity is a few kilobytes.
PROBE_FRAMES, PROBE_BYTES = 64, 2**24


def _probe_scheduler(address: str, timeout: float, security: Any) -> None:
    """Ask whatever listens at ``address`` for its identity, on a thread of its own and bounded
    by ``timeout``: a port that accepts but never answers, or a server speaking another
    protocol (whose reply dask would read as a frame length of exabytes), becomes a
    ConnectionError instead of a hang or a MemoryError.

    The probe speaks dask's wire format itself and decodes the answers as plain msgpack,
    never as pickles: dask's own reader unpickles what a message marks as pickled, so a
    server that is not a scheduler could run code here by answering. (Once connected, the
    Client trusts the scheduler, as dask does: across machines, use TLS with certificates.)
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return  # an in-process or other transport: nothing on a network can answer
    host, port = parse_host_port(location)
    ssl_context = None
    if scheme == "tls":
        ssl_context = security.get_connection_args("client")["ssl_context"]

    async def identity() -> Any:
        deadline = time.monotonic() + timeout
        while True:  # a scheduler still starting refuses connections: retry, as dask does
            try:
                reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline - 0.05:
                    raise
                await asyncio.sleep(0.05)
        try:
            # dask's handshake (no compression), then the identity request.
            writer.write(_frame({"compression": None, "python": tuple(sys.version_info)[:3],
                                 "pickle-protocol": 5}))
            handshake = await _read_message(reader)
            writer.write(_frame({"op": "identity", "reply": True}))
            return handshake, await _read_message(reader)
        finally:
            writer.close()

    outcome: dict = {}

    def ask() -> None:
        try:
            outcome["reply"] = asyncio.run(asyncio.wait_for(identity(), timeout))
        except BaseException as error:  # MemoryError included: a bogus frame length
            outcome["error"] = error

    thread = threading.Thread(target=ask, name="pargraph-connect", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    if thread.is_alive() or isinstance(outcome.get("error"), (TimeoutError,
                                                              asyncio.TimeoutError)):
        raise _unreachable(address, timeout, "no answer")
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, (OSError, EOFError, asyncio.IncompleteReadError)):
            raise _unreachable(address, timeout, error)
        raise ConnectionError(f"the server at {address} does not speak the dask protocol "
                              f"({type(error).__name__}: {str(error)[:80]}); is the address "
                              "that of a dask scheduler?") from None
    handshake, reply = outcome["reply"]
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ConnectionError(f"the server at {address} is not a dask scheduler (it answered "
                              f"{str(reply)[:80]!r})")
    if not _plain(handshake) or not _plain(reply):
        raise ConnectionError(f"the server at {address} answered with pickled objects, which a "
                              "dask scheduler's handshake and identity never hold: not "
                              "connecting (it could run code in this process)")


def _plain(value: Any) -> bool:
    """Whether a decoded message holds no part dask would unpickle or deserialize."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if "__Pickled__" in item or "__Serialized__" in item:
                return False
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return True


def _frame(message: dict) -> bytes:
    """``message`` as dask's TCP comm writes it: the byte count of what follows, the frame
    count and sizes, then one msgpack frame."""
    import struct

    import msgpack

    body = msgpack.packb(message, use_bin_type=True)
    prelude = struct.pack("QQ", 1, len(body))
    return struct.pack("Q", len(prelude) + len(body)) + prelude + body


async def _read_message(reader: asyncio.StreamReader) -> Any:
    """One dask message's first frame, decoded as plain msgpack (a part dask would unpickle
    stays a dict of bytes), within :data:`PROBE_FRAMES` frames and :data:`PROBE_BYTES`."""
    import struct

    import msgpack

    (length,) = struct.unpack("Q", await reader.readexactly(8))
    if not 16 <= length <= PROBE_BYTES:
        raise ValueError(f"a message of {length} bytes")
    data = await reader.readexactly(length)
    (frames,) = struct.unpack_from("Q", data)
    if not 1 <= frames <= PROBE_FRAMES or 8 * (frames + 1) > length:
        raise ValueError(f"a message of {frames} frames")
    sizes = struct.unpack_from(f"{frames}Q", data, 8)
    start = 8 * (frames + 1)
    if sum(sizes) > PROBE_BYTES:
        raise ValueError(f"a message of {sum(sizes)} bytes")
    if start + sum(sizes) > length:  # frames dask sends apart from the first read
        data += await reader.readexactly(start + sum(sizes) - length)
    return msgpack.unpackb(data[start:start + sizes[0]], raw=False, use_list=False,
                           strict_map_key=False)


# --- losing the cluster ---------------------------------------------------------------------


class ClusterLostError(RuntimeError):
    """The cluster that held tensor values lost them: its scheduler went away, or a worker
    that had the only copy of some (``pargraph.replicas: 1``) left."""


_recovery_sources: list = []  # weak references to objects with a ``recover()`` method
_recovered: dict[str, np.ndarray] = {}  # key of a lost Future -> the value put back for it
#: The path of the last checkpoint ``pargraph.save`` wrote in this process, for error messages.
last_checkpoint: str | None = None


def register_recovery(source: Any) -> None:
    """Call ``source.recover(client)`` when ``client``'s cluster is lost. It puts back the
    values it kept a copy of and returns ``(description, {lost Future key: value})``."""
    _recovery_sources.append(weakref.ref(source))


def mirror_every() -> int:
    """Every how many optimizer steps parameters and state are copied off the cluster (0:
    never); ``pargraph.connect(..., mirror_every=N)`` or the ``pargraph.mirror-every`` key."""
    return int(dask.config.get("pargraph.mirror-every", 0) or 0)


def _is_lost(value: Any) -> bool:
    # "cancelled": the client lost its scheduler. ("lost" is a worker's death: dask
    # recomputes those values, so it is not a loss of the cluster.)
    return is_future(value) and value.status == "cancelled"


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


def _check_held_values(order: list[Node]) -> None:
    """Before a run: values that died with their cluster are put back from a recovery copy,
    or the run stops with :class:`ClusterLostError` (instead of hanging on a reconnect)."""
    for node in order:
        value = node.value
        if value is None or type(value) is np.ndarray or not _is_lost(value):
            continue
        if value.key not in _recovered:
            raise cluster_lost(value.client, f"{value.key} was cancelled")
        node.value = _recovered[value.key]


def fetch(node: Node) -> np.ndarray:
    """A realized node's value as a local numpy array (gathered from the cluster if needed)."""
    value = node.value
    if not is_future(value):
        return value
    if value.key in _recovered:
        node.value = _recovered[value.key]
        return node.value
    if not _is_lost(value):
        try:
            return np.asarray(value.result())
        except (Exception, asyncio.CancelledError) as error:
            # Fetching a part runs a task: its cancellation can come before the part's own.
            cancelled = isinstance(error, (asyncio.CancelledError, CancelledError))
            if not _is_lost(value) and not cancelled:
                raise
            cause = f"{value.key}: {error or type(error).__name__}"
    else:
        cause = f"{value.key} was cancelled"
    error = cluster_lost(value.client, cause)
    if value.key in _recovered:
        node.value = _recovered[value.key]
        return node.value
    raise error


def cluster_lost(client: Any, cause: str) -> ClusterLostError:
    """Put back what recovery sources kept and describe the loss (to be raised)."""
    restored = []
    for reference in list(_recovery_sources):
        source = reference()
        if source is None:
            _recovery_sources.remove(reference)
            continue
        description, values = source.recover(client)
        if description:
            restored.append(description)
            _recovered.update(values)
    address = getattr(getattr(client, "scheduler", None), "address", None) or "the cluster"
    # The scheduler answers still: data was lost with a worker, pure data (training state,
    # see forget_provenance) that no other worker had a copy of.
    how = ("a worker that left had the only copy of some of them (pargraph.replicas sets on "
           "how many workers training state is kept)" if getattr(client, "status", None) ==
           "running" else "its scheduler went away")
    message = f"the dask cluster at {address} lost values it held: {how} ({cause})."
    if restored:
        message += (" Rolled back to the copies gathered off the cluster: "
                    + "; ".join(restored) + ". state_dict() answers with them: save them, "
                    "then connect to a running cluster and continue, or resume later.")
    else:
        message += (" Parameters and optimizer state that lived there are gone. Resume from "
                    "your last checkpoint (pargraph.load, then load_state_dict"
                    + (f"; this process last saved {last_checkpoint}" if last_checkpoint
                       else "") + "). To lose at most N steps next time, connect with "
                    "pargraph.connect(address, mirror_every=N).")
    return ClusterLostError(message)
