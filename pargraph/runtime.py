"""The task runtime: what runs inside a dask task, on any scheduler or worker.

A task of pargraph's is a :class:`FusedTask`: a group of nodes run one after another (see
:mod:`pargraph.engine.partition` for how groups are chosen and :mod:`pargraph.engine.lowering`
for how they become dask tasks). It returns the tuple of the values its consumers and the caller
need, and drops every other member's value as soon as its last reader in the task has run. Its
members are the graph's own Nodes, whose ops, attributes, dtypes, keys and sites a run reads: a
training step makes no object per member. A task that travels to a cluster worker carries
:class:`NodeTask` s instead, the same fields without the graph.

Each member runs its op's numpy forward and casts to the node's static dtype
(:func:`run_node`). On failure it re-raises the original exception type with the op's name
and the user's line that recorded the node (:func:`annotate`), never a traceback from inside
dask. While a trace listens it reports ``(key, start, stop, thread)`` to :class:`TaskTimes`,
so a member of a group reports its own timing. Everything here pickles (code objects travel
as formatted source lines, ops by name), so it runs on cluster workers too.

The first task a dask worker process runs tunes that process's allocator
(:class:`Allocator`): distributed starts workers with ``MALLOC_TRIM_THRESHOLD_``
set, which makes glibc hand every large array back to the system when it is freed, so each
temporary of a numpy expression costs fresh pages: elementwise ops ran many times slower in
a worker than in a plain process.

This module imports no dask at import time: it is what a worker needs to run a task.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from pargraph.context import context
from pargraph.graph import format_site
from pargraph.ops import REGISTRY, Primitive


class Source(IntEnum):
    """Where a task member's argument comes from (:attr:`FusedTask.sources`)."""

    ENV = 0  # the result of an earlier member of the task
    EXT = 1  # one of the task's arguments
    PART = 2  # an element of a task argument that is another task's tuple
    LIT = 3  # a literal value


ENV, EXT, PART, LIT = Source  # the members, as the tasks' loops compare them


class Arg(IntEnum):
    """What a group task takes as an argument (``GroupPlan.external``)."""

    INPUT = 0  # a realized node of the run (its position in the run's order)
    GROUP = 1  # another group task's tuple
    SELECTION = 2  # a cluster task's pick of parts of several groups' tuples


#: How many of BLAS's threads a run takes (``lowering.blas_threads_of``): all of them, one,
#: or whatever BLAS has (no BLAS op of the run would be split across threads).
ALL_BLAS, ONE_BLAS, ANY_BLAS = "all", "one", "any"


@dataclass
class Lowered:
    """A dask graph, the keys to ask it for, and how to turn their results into the values of
    the run's outputs. A run small enough to be one task also keeps that task (``single``)
    so that local schedulers can run it in the calling thread."""

    source: Any  # the dask graph, or a function that builds it (an inline run needs none)
    keys: list
    unpack: Any = None  # results of ``keys`` -> one value per output; None: as they are
    single: FusedTask | None = None
    single_inputs: list = field(default_factory=list)
    single_values: list = field(default_factory=list)  # theirs, read when it was planned
    tasks: int = 0
    plan: Any = None  # the GroupPlan, for its record of how runs in each mode went
    #: (group key, keys to free after it, (key, element) pairs to drop after it) in
    #: dependency order: a run in one thread.
    sequential: list | None = None
    #: Per group key, the (key, element) pairs of tuples it reads that can go before their
    #: tuple once every reader of them ran (``GroupPlan._early_parts``).
    parts: dict | None = None
    listed: frozenset = frozenset()  # the keys of those tuples
    workers: dict | None = None  # task key -> the worker address it should run on
    fetched: int = 0  # on a cluster: the last ``fetched`` keys are gathered with the run
    urgent: frozenset = frozenset()  # on a cluster: tasks to run as soon as they can
    #: On a cluster: per output, the position in ``keys`` of the Future that holds it (None:
    #: it comes back with the run).
    holders: list | None = None
    #: On a cluster: positions in ``keys`` whose results hold training state (set by the
    #: caller): copied to a second worker, and their history forgotten (see execution).
    state: frozenset = frozenset()
    #: A run whose nodes are timed, for its structure's measured costs (see pargraph.costs).
    timing: Any = None
    #: How many of BLAS's threads the run takes (``lowering.blas_threads_of``).
    blas: str = ONE_BLAS
    #: A local run's group tasks as :class:`GroupCall` s by key, for pargraph's own runners
    #: (``source`` then builds dask's graph from them only if a dask scheduler runs it).
    calls: dict | None = None

    def values(self, results: Sequence[Any]) -> Sequence[Any]:
        return results if self.unpack is None else self.unpack(results)

    @property
    def graph(self) -> dict:
        if callable(self.source):
            self.source = self.source()
        return self.source


class TaskTimes:
    """Where running tasks report ``(key, start, stop, thread)`` while a trace listens, and
    the :class:`OpSamples` a local trace keeps for measuring its ops later.

    A plain list append is atomic under the GIL, so worker threads need no lock. On a cluster
    each worker process records into its own list (see ``start_task_times``).
    """

    sink: list | None = None
    samples: OpSamples | None = None


class OpSamples:
    """The first call of each kind of op a trace saw (its op, attributes and arguments, by op
    name, argument shapes and dtypes, and attributes), kept so that the call can be run again
    alone: :mod:`pargraph.forecast` times it to measure how much of its time holds the GIL.
    Keeps at most ``budget`` bytes of arguments; a kind past it is not kept."""

    def __init__(self, budget: int = 256 << 20) -> None:
        self.calls: dict[tuple, tuple[Primitive, dict, tuple]] = {}
        self.kinds: dict[str, tuple] = {}  # each offered node's kind, by key
        self.budget = budget

    @staticmethod
    def kind(op_name: str, args: Sequence[Any], attrs: dict) -> tuple:
        """The op, its arguments' shapes and dtypes, and its attributes: a convolution's
        weight gradients of a 1x1 kernel and of a 5x5 one read arguments of the same shapes
        and differ many-fold in time."""
        return (op_name, *((a.shape, a.dtype.str) if isinstance(a, np.ndarray) else type(a)
                           for a in args), repr(sorted(attrs.items())))

    def offer(self, node: Any, args: Sequence[Any]) -> None:
        kind = self.kind(node.op.name, args, node.attrs)
        self.kinds[node.key] = kind
        if kind in self.calls:
            return
        size = sum(a.nbytes for a in args if isinstance(a, np.ndarray))
        if size <= self.budget:
            self.budget -= size
            # the arguments themselves, not copies (a copy would lengthen the traced run): held
            # here, no later member takes one over for its result (``dying_input``)
            self.calls[kind] = (node.op, dict(node.attrs), tuple(args))


class Checks:
    """A check running tasks make on each node's result in this process, or None: a function
    ``(node, value)`` that raises (``autograd.detect_anomaly``'s NaN check). While one is set,
    every node runs through :func:`run_node`, not through generated code."""

    result: Any = None


def node_by_node() -> bool:
    """Whether tasks run their members one by one through :func:`run_node`: a trace times
    each node, or a check looks at each result."""
    return TaskTimes.sink is not None or Checks.result is not None


def start_task_times() -> None:
    """Start recording in this process (run on cluster workers by ``client.run``)."""
    if TaskTimes.sink is None:
        TaskTimes.sink = []


def stop_task_times() -> list:
    """Stop recording in this process and return what was recorded."""
    events, TaskTimes.sink = TaskTimes.sink or [], None
    return events


#: glibc's mallopt parameters (malloc.h), and the values a tuned process gets: arrays below
#: 64 MiB come from the heap, and up to 256 MiB of freed memory stays for the next step.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEPT_MMAP_THRESHOLD, _KEPT_TRIM_THRESHOLD = 64 << 20, 256 << 20


class Allocator:
    """glibc's thresholds of this process, set at most once. With its defaults a training
    loop's large arrays are handed back to the system when freed and fault in again at the
    next step; tuned, freed arrays stay in the heap for reuse, as a framework's own allocator
    keeps its blocks (XLA's, PyTorch's on a GPU). The dask setting ``pargraph.malloc``
    (``DASK_PARGRAPH__MALLOC``): ``"auto"`` tunes a dask worker's process at its first task
    and the user's process at a compiled step's first run; ``"system"`` leaves both alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Whether this process ran a task yet (a worker's first task decides).
        self.checked = False
        #: Whether this process's thresholds were set.
        self.tuned = False
        #: Whether the setting was read (tuned or not, it is read once per process).
        self.decided = False

    def for_worker(self) -> bool:
        """At a task's start: tune a process hosting a dask worker. Returns whether tuned."""
        if self.checked:
            return self.tuned
        self.checked = True
        worker = sys.modules.get("distributed.worker")
        if worker is None or not worker.Worker._instances:
            return self.tuned  # no worker lives here: steps decide (:meth:`for_steps`)
        return self._tune()

    def for_steps(self) -> bool:
        """At a compiled step's run in the user's process: tune it. Returns whether tuned."""
        return self.tuned if self.decided else self._tune()

    def _tune(self) -> bool:
        import dask

        wanted = dask.config.get("pargraph.malloc", "auto")
        if wanted not in ("auto", "system"):
            raise ValueError(f"pargraph.malloc is {wanted!r}; expected 'auto' or 'system'")
        self.decided = True
        if wanted == "system" or not sys.platform.startswith("linux"):
            return False
        with self._lock:
            if not self.tuned:
                try:
                    libc = ctypes.CDLL("libc.so.6")
                    self.tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, _KEPT_MMAP_THRESHOLD)) \
                        and bool(libc.mallopt(_M_TRIM_THRESHOLD, _KEPT_TRIM_THRESHOLD))
                except (OSError, AttributeError):  # not glibc
                    self.tuned = False
        return self.tuned

    def state(self) -> tuple[bool, bool]:
        """(whether this process has run a task yet, whether its allocator is tuned)."""
        return self.checked, self.tuned


#: This process's allocator settings.
allocator = context.register("allocator", Allocator())


def allocator_state() -> tuple[bool, bool]:
    """:meth:`Allocator.state` of the process this runs in (for ``client.run``)."""
    return allocator.state()


def run_node(node: Any, args: Any, out: np.ndarray | None = None) -> np.ndarray:
    """The value of ``node`` (a graph Node, or the :class:`NodeTask` a worker gets) from its
    ``args``: its op's forward, written into ``out`` if it is given, cast to its dtype."""
    sink = TaskTimes.sink
    if sink is not None and TaskTimes.samples is not None and (
            out is None or all(out is not arg for arg in args)):
        TaskTimes.samples.offer(node, args)  # not a call that writes over its argument
    start = time.time() if sink is not None else 0.0
    op = node.op
    try:
        if out is None:
            out = np.asarray(op.forward(*args, **node.attrs))
        else:
            op.forward(*args, out=out, **node.attrs)
    except Exception as error:
        if getattr(error, _ANNOTATED, False):  # a nested pargraph call named its op
            raise
        raise annotate(error, op.name, node.site, node.key) from None
    dtype = node.dtype
    out = out if out.dtype == dtype else out.astype(dtype)
    check = Checks.result
    if check is not None:
        try:
            check(node, out)
        except Exception as error:
            raise annotate(error, op.name, node.site, node.key) from None
    if sink is not None:
        sink.append((node.key, start, time.time(), threading.get_ident()))
    return out


def dying_input(node: Any, args: list) -> np.ndarray | None:
    """An argument ``node``'s op may overwrite with its result: an array of the result's shape
    and dtype that owns its memory and that nothing but ``args`` refers to (no other member's
    view of it, no later reader, not a value another task or the caller holds)."""
    if not node.op.out:
        return None
    dtype, shape = node.dtype, node.shape
    for arg in args:
        if (type(arg) is np.ndarray and sys.getrefcount(arg) <= _ONLY_IN_ARGS
                and arg.shape == shape and arg.dtype == dtype):
            flags = arg.flags
            if flags.owndata and flags.writeable:
                return arg
    return None


class NodeTask:
    """What a task needs of a node, without the node: its op, attributes, dtype, key, the
    user's line that recorded it, and its shape. A task of its own (``pargraph.fuse:
    False``), and what a :class:`FusedTask` holds in place of its nodes once it travelled."""

    __slots__ = ("op", "attrs", "dtype", "key", "site", "shape")

    def __init__(self, op: Primitive, attrs: dict, dtype: np.dtype, key: str, site: Any,
                 shape: tuple | None = None):
        self.op, self.attrs, self.dtype, self.key, self.site = op, attrs, dtype, key, site
        self.shape = shape

    @classmethod
    def of(cls, node: Any) -> NodeTask:
        return cls(node.op, node.attrs, node.dtype, node.key, node.site, node.shape)

    def __call__(self, *args: Any) -> np.ndarray:
        return run_node(self, args)

    def __reduce__(self):
        # Code objects do not pickle: ship the formatted site, look the op up by name (an op
        # outside the registry, a user's autograd.Function, ships its forward function).
        site = _site_text(self.site)
        if REGISTRY.get(self.op.name) is not self.op:
            return _unregistered_task, (self.op.name, self.op.forward, self.attrs,
                                        self.dtype, self.key, site)
        return _remote_task, (self.op.name, self.attrs, self.dtype, self.key, site,
                              self.shape)

    def __repr__(self) -> str:
        return f"NodeTask({self.key})"


def _references_of_lone_element() -> int:
    # What ``dying_input``'s refcount says of an array that only ``args`` holds: 3 on CPython
    # 3.11 (the list, the loop variable, the call's argument); measured, as interpreters differ.
    args = [np.empty(1)]
    for arg in args:
        return sys.getrefcount(arg)
    raise AssertionError


_ONLY_IN_ARGS = _references_of_lone_element()


def _remote_task(name: str, attrs: dict, dtype: np.dtype, key: str, site: str,
                 shape: tuple | None) -> NodeTask:
    return NodeTask(REGISTRY[name], attrs, dtype, key, site, shape)


def _unregistered_task(name: str, forward: Any, attrs: dict, dtype: np.dtype, key: str,
                       site: str) -> NodeTask:
    return NodeTask(Primitive(name, forward, _no_shape_rule), attrs, dtype, key, site)


def _no_shape_rule(*inputs: Any, **attrs: Any) -> None:
    raise AssertionError("a task's op records no nodes")


_ANNOTATED = "_pargraph_annotated"  # set on exceptions that already name the op and the site
#: Set on an annotated exception: the key of the node whose task raised it.
FAILED_KEY = "_pargraph_failed_key"


def annotate(error: Exception, op_name: str, site: Any, key: str | None = None,
             note: str = "the failing node was recorded at") -> Exception:
    """The same exception type, its message prefixed by the op and suffixed by the site.

    An exception that is annotated already only gets one more line: ``note`` and the site."""
    where = format_site(site) if isinstance(site, tuple) else site
    # A message that names the op already ("linalg.inv: ...", as PyTorch's) keeps its start.
    named = str(error).split(":", 1)[0].rsplit(".", 1)[-1] == op_name
    if getattr(error, _ANNOTATED, False) or named:
        message = f"{error}\n  {note}: {where}"
    else:
        message = f"{op_name}: {error}\n  {note}: {where}"
    try:
        annotated = type(error)(message)
    except Exception:
        annotated = error
        if hasattr(error, "add_note"):
            error.add_note(message)
    setattr(annotated, _ANNOTATED, True)
    setattr(annotated, FAILED_KEY, key if key is not None else getattr(error, FAILED_KEY, None))
    return annotated


class FusedTask:
    """Several nodes run one after another inside one task.

    ``nodes`` holds the members in topological order: graph Nodes, which a training step's
    tasks read their ops, attributes, dtypes and keys from (no object per member per step),
    or :class:`NodeTask` s once the task travelled. ``sources`` holds, per member, where each
    argument comes from: ``(EXT, k)`` the task's k-th argument, ``(PART, (k, j))`` element
    ``j`` of the task's k-th argument (a tuple another group task returned), ``(ENV, j)`` the
    j-th member's result, or ``(LIT, value)``. The task returns the tuple of the values of
    ``outputs`` (member positions, or an ``(EXT, k)`` / ``(PART, (k, j))`` source: an argument
    passed through), or its last member's value when ``outputs`` is ``None``.
    """

    __slots__ = ("nodes", "sources", "outputs", "release", "straight")

    def __init__(self, nodes: Sequence[Any], sources: list[list],
                 outputs: list[int] | None = None,
                 release: list[tuple[int, ...]] | None = None) -> None:
        self.nodes, self.sources, self.outputs = nodes, sources, outputs
        self.release = release if release is not None else release_schedule(sources, outputs)
        #: The structure's straight-line code (``straight_line(per_run=True)``, given by its
        #: plan), or None; it does not travel to workers.
        self.straight: Any = None

    def __call__(self, *external: Any) -> Any:
        if not allocator.checked:
            allocator.for_worker()
        # As in PyTorch, floating point errors give inf/nan silently: on a worker too, where
        # the caller's numpy error state does not reach.
        with np.errstate(all="ignore"):
            return self.run(external)

    def run(self, external: tuple) -> Any:
        """The members' values from the task's arguments, under the caller's numpy error
        state (:func:`pargraph.engine.execution.execute` sets it for a run in the calling
        thread)."""
        if self.straight is not None and not node_by_node():  # a trace or check: per node
            return self.straight(external, self.nodes, self.sources)
        results: list = []
        for step, (node, sources, done) in enumerate(zip(self.nodes, self.sources,
                                                         self.release)):
            args = [results[v] if kind == ENV else external[v] if kind == EXT
                    else external[v[0]][v[1]] if kind == PART else v
                    for kind, v in sources]
            # A member's value goes as soon as its last reader in here has its arguments:
            # then an elementwise reader may write its result into it (relu into its
            # linear's output, a ReLU's backward into the incoming gradient).
            for j in done:
                if j < step:
                    results[j] = None
            results.append(run_node(node, args, dying_input(node, args) if done else None))
            if done and done[-1] == step:
                results[step] = None
        if self.outputs is None:
            return results[-1]
        return tuple(results[k] if type(k) is int else external[k[1]] if k[0] == EXT
                     else external[k[1][0]][k[1][1]] for k in self.outputs)

    def __reduce__(self):
        # A step's graph travels every step: pickled by the client, unpickled and pickled
        # again by the scheduler, unpickled by a worker. As columns of builtins, each site
        # once, a group of 150 nodes pickles in half the time and 58% of the bytes (dtype
        # objects and the sites repeated per node were most of it).
        nodes = self.nodes
        if any(REGISTRY.get(node.op.name) is not node.op for node in nodes):
            return FusedTask, ([NodeTask.of(node) for node in nodes], self.sources,
                               self.outputs, self.release)  # ships the functions
        sites: dict[str, int] = {}
        columns = ([node.op.name for node in nodes], [node.attrs for node in nodes],
                   [node.dtype.str for node in nodes], [node.key for node in nodes],
                   [sites.setdefault(_site_text(node.site), len(sites)) for node in nodes],
                   [node.shape for node in nodes])
        return _unpickled_fused, (columns, list(sites), self.sources, self.outputs,
                                  self.release)

    def __repr__(self) -> str:
        return f"FusedTask({', '.join(node.key for node in self.nodes)})"


class GroupCall:
    """One group task of a run on this machine, called without dask's task objects (whose
    building and argument resolving cost the calling thread more than a small group's
    work): its :class:`FusedTask`, its arguments (literal values, and None where another
    task's result goes) and ``refs``, the ``(position, key)`` of those results. The caller
    sets numpy's error state (the calling thread's run, or the pool's threads)."""

    __slots__ = ("function", "args", "refs", "dependencies")

    def __init__(self, function: FusedTask, args: list, refs: list[tuple[int, Any]]) -> None:
        self.function, self.args, self.refs = function, args, refs
        #: The keys of the tasks it reads, as a dask task's.
        self.dependencies = frozenset(key for _, key in refs)

    def __call__(self, values: dict) -> Any:
        args = list(self.args)
        for position, key in self.refs:
            args[position] = values[key]
        if not allocator.checked:
            allocator.for_worker()
        return self.function.run(tuple(args))

    def __repr__(self) -> str:
        return f"GroupCall({self.function!r})"


def _site_text(site: Any) -> str:
    return format_site(site) if isinstance(site, tuple) else site


def _unpickled_fused(columns: tuple, sites: list, sources: list, outputs: Any,
                     release: list) -> FusedTask:
    dtypes = {text: np.dtype(text) for text in set(columns[2])}
    nodes = [NodeTask(REGISTRY[name], attrs, dtypes[dtype], key, sites[site], shape)
             for name, attrs, dtype, key, site, shape in zip(*columns)]
    return FusedTask(nodes, sources, outputs, release)




class Selection:
    """The parts of other tasks' tuples that a worker sends on: ``picks`` holds, per part,
    ``(k, j)``, element ``j`` of the task's k-th argument."""

    __slots__ = ("picks",)

    def __init__(self, picks: list[tuple[int, int]]) -> None:
        self.picks = picks

    def __call__(self, *tuples: tuple) -> tuple:
        return tuple(tuples[k][j] for k, j in self.picks)

    def __repr__(self) -> str:
        return f"Selection({self.picks})"


def release_schedule(sources: list[list], outputs: list[int] | None) -> list[tuple[int, ...]]:
    """For each step of a FusedTask, the members whose values no later step reads and that it
    does not return: dropping them there keeps a group's peak memory at what a task per node
    would need."""
    last_reader: dict[int, int] = {}
    for step, step_sources in enumerate(sources):
        for kind, v in step_sources:
            if kind == ENV:
                last_reader[v] = step
    kept = set(outputs) if outputs is not None else {len(sources) - 1}
    done: list[list[int]] = [[] for _ in sources]
    for member in range(len(sources)):
        if member not in kept:
            done[last_reader.get(member, member)].append(member)
    return [tuple(d) for d in done]


def straight_line(task: FusedTask, read_literals: frozenset = frozenset(),
                  read_attributes: frozenset = frozenset(), per_run: bool = False) -> Any:
    """``task``'s members as one generated Python function of the task's arguments: each
    member one call of its op's forward on local variables, its value dropped after its last
    reader, as :meth:`FusedTask.run` does without a loop, list or call per member around the
    forward (what a compiled step replays thousands of times). The members in
    ``read_attributes`` read their attributes from their nodes at each call, and the literals
    at ``read_literals`` (member, argument position) from ``task.sources``, so new values
    apply; the others are constants, attributes passed as keywords (no dict per call). Raises
    as ``run_node`` does; does not report timings (a trace runs :meth:`FusedTask.run`).

    ``per_run``: a function ``run(ext, _nodes, _sources)`` for every task of ``task``'s
    structure (a plan's template), reading each run's literals, attributes and dtypes from
    the nodes and sources it is given."""
    nodes, sources, outputs = task.nodes, task.sources, task.outputs
    names: dict[str, Any] = {"_ndarray": np.ndarray, "_fix": _fixed_dtype,
                             "_dying": dying_input, "_failed": _failed_member}
    if per_run:
        lines = ["def run(ext, _nodes, _sources):", "    s = -1", "    try:"]
        read_attributes = frozenset(range(len(nodes)))
    else:
        names.update(_nodes=nodes, _sources=sources)
        lines = ["def run(ext):", "    s = -1", "    try:"]
    for k, (node, node_sources, done) in enumerate(zip(nodes, sources, task.release)):
        args = []
        for kind, v in node_sources:
            if kind == ENV:
                args.append(f"v{v}")
            elif kind == EXT:
                args.append(f"ext[{v}]")
            elif kind == PART:
                args.append(f"ext[{v[0]}][{v[1]}]")
            elif per_run or (k, len(args)) in read_literals:
                args.append(f"_sources[{k}][{len(args)}][1]")
            else:
                names[f"c{k}_{len(args)}"] = v
                args.append(f"c{k}_{len(args)}")
        names[f"f{k}"] = node.op.forward
        dtype = f"_nodes[{k}].dtype" if per_run else f"d{k}"
        if not per_run:
            names[dtype] = node.dtype
        if k in read_attributes or not all(name.isidentifier() for name in node.attrs):
            attributes = f"**_nodes[{k}].attrs"
        else:
            for name, value in node.attrs.items():
                names[f"a{k}_{name}"] = value
            attributes = ", ".join(f"{name}=a{k}_{name}" for name in node.attrs)
        call = ", ".join(args)
        lines.append(f"        s = {k}")
        dying = [j for j in done if j < k]
        if node.op.out and done:
            lines.append(f"        a = ({call},)")
            for j in dying:
                lines.append(f"        v{j} = None")
            lines.append(f"        o = _dying(_nodes[{k}], a)")
            more = f", {attributes}" if attributes else ""
            lines.append(f"        v{k} = f{k}(*a{more}) if o is None else "
                         f"f{k}(*a, out=o{more})")
            lines.append("        a = o = None")
        else:
            lines.append(f"        v{k} = f{k}({', '.join(a for a in (call, attributes) if a)})")
            for j in dying:
                lines.append(f"        v{j} = None")
        lines.append(f"        if v{k}.__class__ is not _ndarray or v{k}.dtype is not {dtype}:")
        lines.append(f"            v{k} = _fix(v{k}, {dtype})")
        if k in done:
            lines.append(f"        v{k} = None")
    if outputs is None:
        returned = f"v{len(nodes) - 1}"
    else:
        returned = "(" + "".join(
            f"v{o}, " if type(o) is int else f"ext[{o[1]}], " if o[0] == EXT
            else f"ext[{o[1][0]}][{o[1][1]}], " for o in outputs) + ")"
    lines.append(f"        return {returned}")
    lines.append("    except Exception as error:")
    lines.append("        raise _failed(error, _nodes, s) from None")
    exec("\n".join(lines), names)  # noqa: S102 (code built above from positions only)
    return names["run"]


def _fixed_dtype(value: Any, dtype: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


def _failed_member(error: Exception, nodes: Sequence[Any], step: int) -> Exception:
    if step < 0 or getattr(error, _ANNOTATED, False):
        return error
    node = nodes[step]
    return annotate(error, node.op.name, node.site, node.key)
