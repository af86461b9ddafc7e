"""Lowering: from the node graph to a dask task graph.

What gets lowered
    The not-yet-realized nodes reachable from the requested nodes. A realized node is a
    boundary: it enters the graph as a ``DataNode`` holding its value (or, on a cluster, a
    reference to the Future that holds it) and the walk does not go past it. So a backward
    pass whose forward graph is not realized yet lowers forward and backward together, as one
    graph, and dask is free to overlap them and to release intermediates early.

Keys
    A node's key is ``"<prefix>-<serial>"`` where the prefix is what ``dask.utils.key_split``
    returns and hence what the dashboard groups by: the op name for forward nodes,
    ``<op>_backward`` for the nodes a vjp of ``<op>`` emits, ``accumulate_grad`` for fan-in
    points and ``<optimizer>_update`` for parameter updates. Keys are assigned when a node is
    recorded; nothing is ever tokenized.

Tasks
    Each node becomes ``Task(key, NodeTask(node), *inputs)`` where inputs are ``TaskRef``s to
    the input nodes' keys or plain Python scalars. :class:`NodeTask` runs the op's numpy
    forward, casts to the node's static dtype, and on failure re-raises the original exception
    type with the op name and the user's source line that recorded the node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from dask.task_spec import DataNode, Task, TaskRef

from pargraph.graph import Node, format_site, toposort
from pargraph.ops import REGISTRY, Primitive


class TaskTimes:
    """Where running tasks report ``(key, start, stop, thread)`` while a trace listens.

    A plain list append is atomic under the GIL, so worker threads need no lock. Only tasks
    run in this process report here; on a cluster, traces read distributed's task stream.
    """

    sink: list | None = None


def set_task_times(sink: list | None) -> None:
    TaskTimes.sink = sink


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
            raise annotate(error, self.prim.name, self.site) from None
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


def annotate(error: Exception, op_name: str, site: Any) -> Exception:
    """The same exception type, its message prefixed by the op and suffixed by the site."""
    if getattr(error, _ANNOTATED, False):
        return error
    where = format_site(site) if isinstance(site, tuple) else site
    message = f"{op_name}: {error}\n  the failing node was recorded at: {where}"
    try:
        annotated = type(error)(message)
    except Exception:
        annotated = error
        if hasattr(error, "add_note"):
            error.add_note(message)
    setattr(annotated, _ANNOTATED, True)
    return annotated


def lower(targets: Sequence[Node]) -> tuple[dict, list[Node]]:
    """The dask graph that computes ``targets``, and the nodes it computes (inputs first)."""
    graph: dict = {}
    computed: list[Node] = []
    for node in toposort(targets, stop=lambda n: n.value is not None):
        if node.value is not None:
            graph[node.key] = DataNode(node.key, node.value)
            continue
        if node.op.forward is None:
            raise RuntimeError(f"{node.key} has no value and no op to compute it")
        args = [TaskRef(i.key) if isinstance(i, Node) else i for i in node.inputs]
        graph[node.key] = Task(
            node.key, NodeTask(node.op, node.attrs, node.dtype, node.key, node.site), *args
        )
        computed.append(node)
    return graph, computed
