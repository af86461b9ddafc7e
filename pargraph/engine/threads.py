"""pargraph's threads: how many, and running a graph of group tasks on threads that wait
between runs.

:func:`get_num_threads` and :func:`set_num_threads` are PyTorch's: pargraph runs a step's
independent ops side by side on the threaded scheduler's ``num_workers`` threads (its inter-op
parallelism, ``set_num_interop_threads``), and the matrix products of a run with a big one on
BLAS's threads (intra-op); ``set_num_threads`` sets both, so ``set_num_threads(1)`` keeps a
process on one core as it does in PyTorch.

:func:`run_on_threads` runs each task as soon as the tasks it reads have finished, on the
calling thread and the helpers of a :class:`Helpers` pool, releasing each result after its last
reader: what dask's threaded scheduler does, without a round trip through its scheduling
thread per task. The helpers stay waiting for work between runs, so a run wakes only as many
of them as it has tasks ready, and its end wakes only its caller: every thread woken needs
the GIL for a few lines, and all of them woken at once would delay the caller's return.
:class:`GilSwitching` shortens the interpreter's switch interval while runs are in progress.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import dask
import numpy as np

from pargraph.context import context
from pargraph.interrupts import interrupts

#: Seconds a thread holds the GIL before one waiting for it may take it, while a threaded run
#: is in progress (``pargraph.switch-interval``; Python's own is ``PYTHON_SWITCH_INTERVAL``).
SWITCH_INTERVAL = 0.0002
PYTHON_SWITCH_INTERVAL = 0.005
#: Seconds between the calling thread's looks for a held Ctrl-C while it waits for tasks.
INTERRUPT_POLL = 0.05


class GilSwitching:
    """Lowers the interpreter's GIL switch interval while runs on threads
    (:func:`run_on_threads`) are in progress, and restores it when the last one ends. A thread
    that comes back from BLAS or a sleep needs the GIL for the few Python lines that start its
    next op; while another thread runs Python, it would wait up to a whole interval (5 ms by
    default) for it, and a step of many small ops would run one thread at a time.
    ``dask.config.set({"pargraph.switch-interval": None})`` leaves the interval alone; a
    shorter one the program set is kept. Entered inside :func:`run_on_threads`' deferred
    block, so a Ctrl-C cannot cut its bookkeeping short."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs = 0
        self._saved: float | None = None

    def interval(self) -> float:
        """The switch interval a run on threads started now would have."""
        wanted = dask.config.get("pargraph.switch-interval", SWITCH_INTERVAL)
        now = self._saved if self._runs else sys.getswitchinterval()
        return min(float(wanted), now) if wanted else sys.getswitchinterval()

    @contextlib.contextmanager
    def lowered(self) -> Iterator[None]:
        wanted = dask.config.get("pargraph.switch-interval", SWITCH_INTERVAL)
        if not wanted:
            yield
            return
        with self._lock:
            self._runs += 1
            if self._runs == 1:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(float(wanted), self._saved))
        try:
            yield
        finally:
            with self._lock:
                self._runs -= 1
                if self._runs == 0:
                    sys.setswitchinterval(self._saved)


class _Run:
    """One run's bookkeeping, read and changed under its pool's lock."""

    def __init__(self, graph: dict, keys: list, lock: threading.Lock,
                 parts: dict | None = None) -> None:
        self.graph = graph
        #: Per task, the (key, element) pairs of tuples it reads that go once every reader of
        #: them ran, before their tuple (``Lowered.parts``); those tuples are held as lists.
        self.parts = parts or {}
        self.part_unread = collections.Counter(p for read in self.parts.values() for p in read)
        self.listed = {key for key, _ in self.part_unread}
        self.inputs = {key: [k for k in task.dependencies if k in graph]
                       for key, task in graph.items()}
        self.readers: dict[Any, list] = {key: [] for key in graph}
        for key, read in self.inputs.items():
            for k in read:
                self.readers[k].append(key)
        self.waiting = {key: len(read) for key, read in self.inputs.items()}
        self.unread = {key: len(self.readers[key]) for key in graph}
        self.kept = set(keys)
        self.ready = [key for key, n in self.waiting.items() if n == 0]
        self.values: dict = {}
        self.left = len(graph)
        self.running = 0
        self.error: BaseException | None = None
        #: Wakes the run's caller only: when a task is ready for it, the run ended, or failed.
        self.changed = threading.Condition(lock)
        self.caller_waits = False


class Helpers:
    """``size`` daemon threads that take ready tasks of any run in progress, in the order the
    runs asked, and wait for more between runs. Made once per size (:func:`helpers`)."""

    def __init__(self, size: int) -> None:
        self.lock = threading.Lock()
        self.work = threading.Condition(self.lock)
        #: Runs with tasks ready and no thread on them yet.
        self.queue: collections.deque[_Run] = collections.deque()
        for k in range(size):
            threading.Thread(target=self._serve, name=f"pargraph-{k + 1}-of-{size}",
                             daemon=True).start()

    def _serve(self) -> None:
        # As in PyTorch, floating point errors give inf/nan silently, in these threads too
        # (numpy's error state is per thread; code generated for compiled steps sets none).
        np.seterr(all="ignore")
        self.lock.acquire()
        run = None
        while True:
            if run is None:
                while not self.queue:
                    self.work.wait()
                run = self.queue[0]
            self._work(run)
            # It goes on with the run it worked on, if it can; else it waits holding nothing
            # of it (its values and tasks go when the run ends).
            if not run.ready:
                run = None

    def _work(self, run: _Run) -> None:
        """Run one ready task of ``run``: taken and finished holding the lock (held when this
        is called and when it returns), run without it."""
        key = self._take(run)
        self.lock.release()
        value, error = _call(run, key)
        self.lock.acquire()
        self._finish(run, key, value, error)

    def _take(self, run: _Run) -> Any:
        """A ready task of ``run`` (the lock held), and ``run`` out of the queue if it was its
        last ready one."""
        key = run.ready.pop()
        if not run.ready:
            self.queue.remove(run)
        run.running += 1
        return key

    def _finish(self, run: _Run, key: Any, value: Any, error: BaseException | None) -> None:
        """Record a task's end (the lock held): store its value, ready its readers, release
        what no later task reads, and wake as many threads as there are tasks newly ready but
        one (this thread takes it); the caller when the run is over."""
        run.running -= 1
        if error is not None or run.error is not None:
            self._fail(run, error)
            return
        run.values[key] = list(value) if key in run.listed else value
        run.left -= 1
        newly = 0
        for reader in run.readers[key]:
            run.waiting[reader] -= 1
            if not run.waiting[reader]:
                if not run.ready:
                    self.queue.append(run)
                run.ready.append(reader)
                newly += 1
        values, unread, kept = run.values, run.unread, run.kept
        for part in run.parts.get(key, ()):
            run.part_unread[part] -= 1
            if not run.part_unread[part]:
                values[part[0]][part[1]] = None
        for k in run.inputs[key]:
            unread[k] -= 1
            if not unread[k] and k not in kept:
                del values[k]
        if not run.left:
            run.changed.notify()
            return
        wake = newly - 1  # this thread goes on with one of them
        if wake > 0 and run.caller_waits:
            run.changed.notify()
            wake -= 1
        if wake > 0:
            self.work.notify(wake)

    def _fail(self, run: _Run, error: BaseException | None) -> None:
        """Stop ``run`` at its first error (the lock held): no task of it starts again, and
        its caller wakes once no task of it is running."""
        if run.error is None:
            run.error = error if error is not None else KeyboardInterrupt()
        if run.ready:
            run.ready.clear()
            self.queue.remove(run)
        if not run.running:
            run.changed.notify()


def _call(run: _Run, key: Any) -> tuple[Any, BaseException | None]:
    try:
        return run.graph[key](run.values), None
    except BaseException as error:
        return None, error


class ThreadsState:
    """This process's helper pools, by size, and its GIL switching."""

    def __init__(self) -> None:
        self.pools: dict[int, Helpers] = {}
        self.switching = GilSwitching()
        self.lock = threading.Lock()

    def after_fork(self) -> None:
        """A forked child has only the thread that forked: none of the pools' helpers, and
        none of the runs that another thread had in progress (their locks may be held)."""
        if self.switching._runs:
            sys.setswitchinterval(self.switching._saved)
        self.__init__()


state = context.register("threads", ThreadsState())


def helpers(size: int) -> Helpers:
    """This process's pool of ``size`` helper threads (made once)."""
    pool = state.pools.get(size)
    if pool is None:
        with state.lock:
            pool = state.pools.get(size)
            if pool is None:
                pool = state.pools[size] = Helpers(size)
    return pool


_cpu_count = os.cpu_count() or 1


def get_num_threads() -> int:
    """The threads a local run uses (dask's ``num_workers``; by default every core), as
    ``torch.get_num_threads``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.get_num_threads() >= 1
    True
    """
    return int(dask.config.get("num_workers", None) or _cpu_count)


def set_num_threads(threads: int) -> None:
    """Run on ``threads`` threads, as ``torch.set_num_threads``: independent ops side by side
    (dask's ``num_workers``, global as ``dask.config.set`` outside a ``with``) and BLAS's
    threads within the matrix products of a run with a big one (threadpoolctl; other
    threaded runs limit BLAS to one thread, see ``modes.BlasThreads``).

    Examples
    --------
    >>> import pargraph
    >>> before = pargraph.get_num_threads()
    >>> pargraph.set_num_threads(1)
    >>> pargraph.get_num_threads()
    1
    >>> pargraph.set_num_threads(before)
    """
    count = _positive("set_num_threads", threads)
    dask.config.set(num_workers=count)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=count, user_api="blas")


def get_num_interop_threads() -> int:
    """The threads that run independent ops side by side, as ``torch.get_num_interop_threads``:
    dask's ``num_workers`` (BLAS's threads are the intra-op ones).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.get_num_interop_threads() == pargraph.get_num_threads()
    True
    """
    return get_num_threads()


def set_num_interop_threads(threads: int) -> None:
    """Run independent ops on ``threads`` threads (dask's ``num_workers``), leaving BLAS's
    threads as they are, as ``torch.set_num_interop_threads``. PyTorch allows one call,
    before any parallel work; pargraph takes it at any time.

    Examples
    --------
    >>> import pargraph
    >>> before = pargraph.get_num_interop_threads()
    >>> pargraph.set_num_interop_threads(2)
    >>> pargraph.get_num_interop_threads()
    2
    >>> pargraph.set_num_interop_threads(before)
    """
    dask.config.set(num_workers=_positive("set_num_interop_threads", threads))


def _positive(name: str, threads: Any) -> int:
    """``threads`` as an int, or PyTorch's error for what it refuses (a bool, a float, a
    string, zero or less)."""
    if isinstance(threads, bool) or not hasattr(threads, "__index__"):
        raise RuntimeError(f"{name} expects an int, but got {type(threads).__name__}")
    if threads.__index__() <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return threads.__index__()


def run_on_threads(graph: dict, keys: list, threads: int, parts: dict | None = None) -> list:
    """Run a graph of group tasks (dask tasks, or ``runtime.GroupCall`` s: each called with
    the dict of results so far, and naming the keys it reads in ``dependencies``) on
    ``threads`` threads (this one and ``threads - 1`` helpers), each task as soon as the
    tasks it reads have finished, releasing each result
    after its last reader (and each element of a tuple named in ``parts``, see
    ``Lowered.parts``, after its own); returns the values of ``keys``. The first error stops
    the run and is raised as itself, once no task of the run is running. Ctrl-C is held while
    this thread works and waits, and taken between tasks (raised inside ``Condition.wait``, it
    could leave the lock held).

    Examples
    --------
    >>> from dask.task_spec import Task, TaskRef
    >>> graph = {"a": Task("a", lambda: 2), "b": Task("b", lambda a: a * 3, TaskRef("a"))}
    >>> run_on_threads(graph, ["b"], threads=2)
    [6]
    """
    # A Ctrl-C held in this block is raised as it ends.
    with interrupts.deferred(), state.switching.lowered():
        pool = helpers(max(threads - 1, 0))
        lock = pool.lock
        run = _Run(graph, keys, lock, parts)
        main = threading.current_thread() is threading.main_thread()
        poll = INTERRUPT_POLL if main else None
        lock.acquire()
        try:
            if run.ready:
                pool.queue.append(run)
                pool.work.notify(len(run.ready) - 1)  # this thread takes one
            while True:
                # Only the main thread takes Ctrl-C, waking now and then to look for one.
                while not run.ready and run.left and run.error is None and \
                        not (main and interrupts.stopping()):
                    run.caller_waits = True
                    run.changed.wait(poll)
                    run.caller_waits = False
                if main and interrupts.stopping() and run.error is None:
                    pool._fail(run, None)  # between tasks: no task of the run starts again
                if run.error is not None or not run.left:
                    break
                pool._work(run)
            while run.running:  # after an error: the tasks still running end first
                run.changed.wait()
        finally:
            lock.release()
    if run.error is not None:
        raise run.error
    return [run.values[key] for key in keys]
