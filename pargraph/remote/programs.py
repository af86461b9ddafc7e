"""A compiled step's run on a cluster: its tasks submitted under new keys on each call.

:class:`pargraph.compiler.program.Program` compiles a step once and hands its slots here when
a Client is the scheduler. The program's fields read here are its group tasks (``tasks``,
``labels``, ``recipes``, ``kinds``, ``unpack``), its ``plan`` and ``granularity``, its
``outputs`` and training state (``state_ids``), and the program as the workers hold it
(``kept``, ``whole``, ``whole_label``, ``last_symbols``; ``held``: the cluster's copies).

The program travels to each worker it runs on once, as a persisted data task, and stays in
its memory: each step's tasks send the call's numbers and read the copy on their worker, so
a step's graph carries no nodes. A worker that dies with its copy loses nothing: the
scheduler runs the data task again elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph.graph import Node
from pargraph.remote.layout import INLINE_BYTES, HeldPart, held_results, is_future
from pargraph.remote.recovery import ensure_running
from pargraph.remote.state import clusters
from pargraph.remote.submit import held_on_cluster, lost, persisted, run_on_cluster
from pargraph.remote.workers import replicas
from pargraph.runtime import Arg


def run_program(program: Any, values: list, client: Any, whole_task: Callable,
                group_task: Callable) -> list:
    """Run a compiled ``program`` (``pargraph.compiler.program.Program``) on ``client``'s
    cluster, on its slots' ``values``: its tasks submitted under new keys, the results held on
    the workers (a 0-d one comes back), as an eager run's are. A program of one worker goes as
    one task, ``whole_task(held program, numbers, *slots)``; a placed group ``g`` as
    ``group_task(held program, numbers, g, *arguments)`` on its worker."""
    from dask.task_spec import DataNode, Task, TaskRef

    from pargraph.runtime import Selection

    ensure_running(client)
    run = f"r{next(clusters.runs)}"
    graph: dict = {}
    arguments = []
    for s, value in enumerate(values):
        if type(value) is HeldPart:
            arguments.append(value.ref())
        elif is_future(value):
            arguments.append(TaskRef(value.key))
        elif getattr(value, "nbytes", 0) <= INLINE_BYTES:
            arguments.append(value)
        else:
            key = f"slot-{s}{run}-{id(program):x}"
            graph[key] = DataNode(key, value)
            arguments.append(TaskRef(key))
    made = program.plan
    if program.whole:
        return _run_whole(program, graph, arguments, run, client, whole_task)
    keys = []
    for task, label in zip(program.tasks, program.labels):
        _, serial, session = task.nodes[-1].key.rsplit("-", 2)
        keys.append(f"{label}-{serial}t{run}-{session}")  # "t": never a node's key
    sent = []
    for s, (producers, picks) in enumerate(getattr(made, "selections", ())):
        _, serial, session = keys[producers[-1]].rsplit("-", 2)
        sent.append(f"{program.labels[producers[-1]]}_send-{serial}s{s}-{session}")
        graph[sent[-1]] = Task(sent[-1], Selection(picks),
                               *(TaskRef(keys[g]) for g in producers))
    workers = None
    hosts = getattr(made, "hosts", None)
    if hosts:
        workers = dict(zip(keys, hosts))
        workers.update((key, hosts[producers[0]])
                       for key, (producers, _) in zip(sent, made.selections))
    elif program.granularity.hosts:  # one task: on one worker step after step, as eager's
        workers = {key: program.granularity.hosts[0][0] for key in keys}
    for g, (task, recipe) in enumerate(zip(program.tasks, program.recipes)):
        args = [arguments[v] if not is_group else
                TaskRef(keys[v] if kind == Arg.GROUP else sent[v])
                for (is_group, v), (kind, _) in zip(recipe, program.kinds[g])]
        if workers:  # read the copy of the program its worker holds
            held = _held(program, client, workers[keys[g]])
            graph[keys[g]] = Task(keys[g], group_task, TaskRef(held.key),
                                  program.last_symbols, g, *args)
        else:  # placement is off: the task goes where the scheduler sends it
            graph[keys[g]] = Task(keys[g], task, *args)
    wanted = sorted({g for g, _ in program.unpack})
    position = {g: k for k, g in enumerate(wanted)}
    picks = [(position[g], e) for g, e in program.unpack]
    scalar = [k for k, g in enumerate(wanted) if all(
        type(j) is int and not program.tasks[g].nodes[j].shape
        for j in program.tasks[g].outputs)]
    return _submit(program, graph, [keys[g] for g in wanted], picks, scalar, workers,
                   frozenset(sent) | {keys[wanted[k]] for k in scalar}, client)


def _run_whole(program: Any, graph: dict, arguments: list, run: str, client: Any,
               whole_task: Callable) -> list:
    """Submit the program as one task (:class:`~pargraph.compiler.tasks.HeldProgram`) on the
    arguments: each step sends its numbers and slots."""
    from dask.task_spec import Task, TaskRef

    held = _held(program, client, "")
    _, serial, session = program.tasks[-1].nodes[-1].key.rsplit("-", 2)
    key = f"{program.whole_label}-{serial}t{run}-{session}"  # "t": never a node's key
    graph[key] = Task(key, whole_task, TaskRef(held.key), program.last_symbols, *arguments)
    scalar = [0] if all(not node.shape for node in program.outputs) else []
    return _submit(program, graph, [key], [(0, e) for e in range(len(program.outputs))], scalar,
                   None, frozenset({key}) if scalar else frozenset(), client)


def _held(program: Any, client: Any, address: str) -> Any:
    """The Future of ``program.kept`` held on the worker at ``address`` (anywhere for ""):
    sent the first time, and again after the client or the copy was lost."""
    held = program.held.get(address)
    if held is None or lost(held, client):
        key = f"{program.whole_label}_program-{next(clusters.graphs)}-{clusters.session}"
        held = program.held[address] = persisted(client, key, program.kept, address)
    return held


def _submit(program: Any, graph: dict, keys: list[str], picks: list, scalar: list,
            workers: dict | None, urgent: frozenset, client: Any) -> list:
    """Run ``graph`` on the cluster; output ``i`` is element ``picks[i][1]`` of
    ``keys[picks[i][0]]``'s tuple, held there (a 0-d one comes back)."""
    state = frozenset(i for i, node in enumerate(program.outputs)
                      if id(node) in program.state_ids) if replicas(client) \
        else frozenset()
    lowered = held_results(graph, keys, picks, program.outputs, len(graph), scalar, state,
                           workers, urgent)
    if state:
        lowered.state = frozenset(lowered.holders[i] for i in state
                                  if lowered.holders[i] is not None)
    results = run_on_cluster(client, lowered.graph, lowered.keys, lowered.workers,
                             lowered.fetched, lowered.urgent, lowered.state)
    return list(lowered.values(results))


def refer_to_copies(values: list, nodes: list, client: Any) -> None:
    """Where a slot's value is an array held here that an earlier run sent to ``client``'s
    cluster, refer to the copy kept there (as an eager run does: ``held_on_cluster``), so
    that an input a loop passes to every step (a whole dataset, a fixed batch) travels once."""
    big = {s: node for s, node in enumerate(nodes)
           if type(node) is Node and type(node.value) is np.ndarray
           and node.value.nbytes > INLINE_BYTES}
    if big:
        copies = held_on_cluster(list(big.values()), client)
        for s, node in big.items():
            values[s] = copies.get(node.key, values[s])
