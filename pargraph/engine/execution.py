"""Execution: run lowered graphs and fill the nodes' value slots.

:func:`realize` computes what is needed now, plus this thread's deferred backward, as one
run: planned and lowered (:mod:`pargraph.engine.lowering`), then handed to the scheduler and the
way :mod:`pargraph.engine.modes` chooses (the calling thread, pargraph's threads, or a cluster
through :mod:`pargraph.remote`). Which values a run keeps, and why, is in docs/design.md
("Running").
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.local
import numpy as np

from pargraph.capturing import recording
from pargraph.context import context
from pargraph.engine.lowering import lower, plan, realized_meanwhile
from pargraph.engine.modes import (
    blas_limited,
    choose_scheduler,
    client_of,
    granularity_or_lost,
    is_local,
    is_threaded,
    run_adaptively,
    run_graph,
    run_in_order,
    run_inline,
)
from pargraph.graph import FREED, Node
from pargraph.interrupts import interrupts
from pargraph.remote.recovery import check_held_values, ensure_running
from pargraph.remote.replication import keep_until_copied
from pargraph.remote.state import clusters
from pargraph.remote.submit import held_on_cluster, run_on_cluster
from pargraph.remote.workers import replicas
from pargraph.runtime import (
    FAILED_KEY,
    Lowered,
    TaskTimes,
    annotate,
)
from pargraph.shared_memory import shared_tensors


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
        #: run, and a ``read(node)`` method, called when the caller reads a realized value
        #: (the trace layer registers itself here; execution never imports it).
        self.observers: list = []
        #: The nodes the last backward freed that still hold a value (``_forget_structure``).
        self.structure_kept: weakref.WeakSet = weakref.WeakSet()
        #: Python's garbage collector, paused while graphs are built and run.
        self.collector = CollectorPause()
        #: Held while a run plans and lowers, and while one commits: a commit stores values,
        #: cuts inputs and frees saved values, and a plan made meanwhile in another thread
        #: read some nodes before and others after (its structure's key could then name a
        #: node a source that its task list computes, from inputs already cut). Runs
        #: themselves go on side by side.
        self.structure = threading.RLock()

    def after_fork(self) -> None:
        """A forked child has only the forking thread: no pause of another is in progress,
        and no other thread holds the structure's lock."""
        self.collector.after_fork()
        self.structure = threading.RLock()


local = context.register("execution", LocalState())


def observe_read(node: Node) -> None:
    """Tells the observers (a trace) that the caller read ``node``'s realized value: on a
    cluster, a value a run kept there travels back then."""
    for observer in list(local.observers):
        observer.read(node)


def is_live(node: Node) -> bool:
    """Whether a tensor the user holds still wraps ``node``."""
    owner = node.owner_tensor()
    return owner is not None and owner._node is node


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


class _DeferredWork(threading.local):
    """Work that ``backward()`` deferred to this thread's next run: one entry per call, as
    ``(targets, release, site of the backward() call)``, and the targets that are training
    state. Per thread, so that one thread's backward never runs (or fails) inside another
    thread's unrelated realization."""

    def __init__(self) -> None:
        self.entries: list[tuple[list[Node], list[Node], Any]] = []
        self.state: list[Node] = []
        self.replaced: list[Node] = []


_deferred = context.register("deferred", _DeferredWork())


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


_progress = context.register("progress", _Progress())


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
            if client is not None:
                ensure_running(client)
            held = held_on_cluster(order, client) if client is not None else None
            try:
                lowered = lower(order, computed, keep, granularity_or_lost(get, client),
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


