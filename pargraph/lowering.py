"""Lowering: from the node graph to a dask task graph.

What gets lowered
    The not-yet-realized nodes reachable from the requested nodes. A realized node is a
    boundary: it enters the graph as a ``DataNode`` holding its value (on a cluster, a value
    held as a Future is not in the graph at all: tasks refer to its key, which lives on a
    worker) and the walk does not go past it. So a backward
    pass whose forward graph is not realized yet lowers forward and backward together, as one
    graph, and dask is free to overlap them and to release intermediates early.

Keys
    A node's key is ``"<prefix>-<serial>"`` where the prefix is what ``dask.utils.key_split``
    returns and hence what the dashboard groups by: the op name for forward nodes,
    ``<op>_backward`` for the nodes a vjp of ``<op>`` emits, ``accumulate_grad`` for fan-in
    points and ``<optimizer>_update`` for parameter updates. Keys are assigned when a node is
    recorded; nothing is ever tokenized.

Tasks
    A node becomes ``Task(key, NodeTask(node), *inputs)`` where inputs are ``TaskRef``s to
    the input nodes' keys or plain Python scalars. :class:`NodeTask` runs the op's numpy
    forward, casts to the node's static dtype, and on failure re-raises the original exception
    type with the op name and the user's source line that recorded the node.

Fusion
    Cheap nodes share a task with their consumer (:mod:`pargraph.fusion` has the rules): the
    group becomes one ``Task(root key, FusedTask(...), *external inputs)`` that runs the members'
    NodeTasks in order, so every member still reports its own timing to a trace. A run too
    small to profit from parallelism becomes one task; each requested value is then read out of
    its result tuple by a ``getitem`` task under the value's own key.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from dask.task_spec import DataNode, Task, TaskRef

from pargraph import fusion
from pargraph.graph import Node, format_site, toposort
from pargraph.ops import REGISTRY, Primitive


class TaskTimes:
    """Where running tasks report ``(key, start, stop, thread)`` while a trace listens.

    A plain list append is atomic under the GIL, so worker threads need no lock. On a cluster
    each worker process records into its own list (see ``start_task_times``).
    """

    sink: list | None = None


def start_task_times() -> None:
    """Start recording in this process (run on cluster workers by ``client.run``)."""
    if TaskTimes.sink is None:
        TaskTimes.sink = []


def stop_task_times() -> list:
    """Stop recording in this process and return what was recorded."""
    events, TaskTimes.sink = TaskTimes.sink or [], None
    return events


class NodeTask:
    """The callable of one node's task: the op's forward, a dtype cast, readable errors."""

    __slots__ = ("prim", "attrs", "dtype", "key", "site")

    def __init__(self, prim: Primitive, attrs: dict, dtype: np.dtype, key: str, site: Any):
        self.prim, self.attrs, self.dtype, self.key, self.site = prim, attrs, dtype, key, site

    def __call__(self, *args: Any) -> np.ndarray:
        sink = TaskTimes.sink
        start = time.time() if sink is not None else 0.0
        try:
            out = np.asarray(self.prim.forward(*args, **self.attrs))
        except Exception as error:
            if getattr(error, _ANNOTATED, False):  # a nested pargraph call named its op
                raise
            raise annotate(error, self.prim.name, self.site, self.key) from None
        out = out if out.dtype == self.dtype else out.astype(self.dtype)
        if sink is not None:
            sink.append((self.key, start, time.time(), threading.get_ident()))
        return out

    def __reduce__(self):
        # Code objects do not pickle: ship the formatted site, look the op up by name.
        return _remote_task, (self.prim.name, self.attrs, self.dtype, self.key,
                              format_site(self.site) if isinstance(self.site, tuple) else self.site)

    def __repr__(self) -> str:
        return f"NodeTask({self.key})"


def _remote_task(name: str, attrs: dict, dtype: np.dtype, key: str, site: str) -> NodeTask:
    return NodeTask(REGISTRY[name], attrs, dtype, key, site)


_ANNOTATED = "_pargraph_annotated"  # set on exceptions that already name the op and the site
#: Set on an annotated exception: the key of the node whose task raised it.
FAILED_KEY = "_pargraph_failed_key"


def annotate(error: Exception, op_name: str, site: Any, key: str | None = None,
             note: str = "the failing node was recorded at") -> Exception:
    """The same exception type, its message prefixed by the op and suffixed by the site.

    An exception that is annotated already only gets one more line: ``note`` and the site."""
    where = format_site(site) if isinstance(site, tuple) else site
    if getattr(error, _ANNOTATED, False):
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

    ``steps`` holds, per member in topological order, its NodeTask and where each argument
    comes from: ``("ext", k)`` the task's k-th argument, ``("env", j)`` the j-th member's
    result, or ``("lit", value)``. The task returns its root's value, or a tuple of the
    values of ``outputs`` (member positions) when the whole run is one task.
    """

    __slots__ = ("steps", "outputs")

    def __init__(self, steps: list, outputs: list[int] | None = None) -> None:
        self.steps, self.outputs = steps, outputs

    def __call__(self, *external: Any) -> Any:
        results: list = []
        for task, sources in self.steps:
            args = [external[v] if kind == "ext" else results[v] if kind == "env" else v
                    for kind, v in sources]
            results.append(task(*args))
        if self.outputs is None:
            return results[-1]
        return tuple(results[k] for k in self.outputs)

    def __repr__(self) -> str:
        return f"FusedTask({', '.join(task.key for task, _ in self.steps)})"


def node_task(node: Node) -> NodeTask:
    if node.op.forward is None:
        raise RuntimeError(f"{node.key} has no value and no op to compute it")
    return NodeTask(node.op, node.attrs, node.dtype, node.key, node.site)


def fused(members: list[Node], outputs: list[Node] | None = None) -> tuple[FusedTask, list]:
    """The FusedTask running ``members`` and the external nodes it takes as arguments."""
    index: dict[int, int] = {}
    external: list[Node] = []
    external_index: dict[int, int] = {}
    steps = []
    for position, node in enumerate(members):
        sources = []
        for i in node.inputs:
            if not isinstance(i, Node):
                sources.append(("lit", i))
                continue
            key = id(i)
            if key in index:  # an earlier member
                sources.append(("env", index[key]))
                continue
            if key not in external_index:
                external_index[key] = len(external)
                external.append(i)
            sources.append(("ext", external_index[key]))
        steps.append((node_task(node), sources))
        index[id(node)] = position
    out = None if outputs is None else [index[id(n)] for n in outputs]
    return FusedTask(steps, out), external


def plan(targets: Sequence[Node]) -> tuple[list[Node], list[Node]]:
    """The nodes a run of ``targets`` touches (inputs first) and those it computes."""
    order = toposort(targets, stop=lambda n: n.value is not None)
    return order, [n for n in order if n.value is None]


@dataclass
class Lowered:
    """A dask graph, plus, for a run small enough to be one task, that task itself (so that
    local schedulers can run it in the calling thread)."""

    graph: dict
    single: FusedTask | None = None
    single_inputs: list = field(default_factory=list)


def is_future(value: Any) -> bool:
    """Whether a value slot holds a cluster Future (its data stays on a worker)."""
    return type(value).__name__ == "Future" and hasattr(value, "key")


def fetch(node: Node) -> np.ndarray:
    """A realized node's value as a local numpy array (gathered from the cluster if needed)."""
    value = node.value
    return np.asarray(value.result()) if is_future(value) else value


def lower(order: list[Node], computed: list[Node], outputs: Sequence[Node],
          remote: bool = False) -> Lowered:
    """The dask graph that computes ``computed`` and returns the keys of ``outputs``.

    On a cluster (``remote``), a value held as a Future stays where it is: tasks refer to its
    key, which the cluster keeps in memory for as long as the Future lives. Elsewhere it is
    gathered into the graph like any other value.
    """
    graph: dict = {}
    for node in order:
        if node.value is None:
            continue
        if not is_future(node.value):
            graph[node.key] = DataNode(node.key, node.value)
        elif not remote:
            graph[node.key] = DataNode(node.key, fetch(node))
    fuse_below, single_below = fusion.thresholds(remote)
    if fusion.is_small(computed, single_below):
        task, external = fused(computed, list(outputs))
        whole = f"pargraph_run-{outputs[0].key}"
        graph[whole] = Task(whole, task, *(TaskRef(i.key) for i in external))
        for k, node in enumerate(outputs):
            graph[node.key] = Task(node.key, operator.getitem, TaskRef(whole), k)
        return Lowered(graph, task, external)
    for members in fusion.group(computed, {id(n) for n in outputs}, fuse_below):
        root = members[-1]
        if len(members) == 1:
            args = [TaskRef(i.key) if isinstance(i, Node) else i for i in root.inputs]
            graph[root.key] = Task(root.key, node_task(root), *args)
        else:
            task, external = fused(members)
            graph[root.key] = Task(root.key, task, *(TaskRef(i.key) for i in external))
    return Lowered(graph)
