"""Lowering: from the node graph to a dask task graph.

What gets lowered
    The not-yet-realized nodes reachable from the requested nodes. A realized node is a
    boundary: its value enters as a literal argument of the tasks that read it (on a
    cluster, a value held as a Future is not in the graph at all: tasks refer to its key,
    which lives on a worker) and the walk does not go past it. So a backward pass whose
    forward graph is not realized yet lowers forward and backward together, as one graph, and
    dask is free to overlap them and to release intermediates early.

What a task is
    A group of nodes chosen by :mod:`pargraph.partition` (a tower's forward pass, its
    backward pass, a weight gradient with its update): ``Task(group key, FusedTask(...),
    *inputs)``. :class:`FusedTask` runs its members (the graph's own nodes) in topological
    order, so every member still reports its own timing to a trace, and returns the tuple of
    the members used outside the group; consumers index that tuple inside their own task, so
    no extra ``getitem`` task exists locally. Each member runs the op's numpy forward, casts
    to the node's static dtype, and on failure re-raises the original exception type with the
    op name and the user's source line that recorded the node. Why: a dask task costs
    ~40 us on threads and ~1 ms on a cluster before it does anything; a training step has
    hundreds of nodes and, as literal data, hundreds of parameters. Cost: one tuple per group.

Keys
    A node's key is ``"<prefix>-<serial>-<session>"`` where the prefix is what
    ``dask.utils.key_split`` returns: the op name for forward nodes, ``<op>_backward`` for the
    nodes a vjp emits, ``accumulate_grad`` for fan-in points and ``<optimizer>_update`` for
    parameter updates. A group's key is ``"<label>-<serial>t-<session>"``, its label the
    module path its members share and the phase (``towers.3_forward``) or its heaviest node's
    prefix (``sgd_update``): the dashboard's task stream groups by it. Keys are assigned when a
    node is recorded; nothing is ever tokenized. ``pargraph.fuse: False`` lowers one node to
    one task under the node's own key (the per-op view, for debugging).

Single tasks and cached plans
    A run too small to profit from parallelism, or that partitions into one group, is one
    task (local schedulers run it in the calling thread, BLAS free), templated as a
    :class:`SinglePlan`. Otherwise the partition and the tasks' templates are a
    :class:`GroupPlan`. Both are cached by the run's structure (``PlanCache``): a
    training loop's steps after the first only fill in keys and values. On a cluster a
    kept value is a :class:`HeldPart`: its group's Future and its position in the tuple. A
    held part keeps the whole tuple on its worker, so a group whose tuple also carries values
    only the step's other tasks read hands its kept parts to a reader on the same worker,
    which returns them as well (:meth:`GroupPlan.return_kept_from_readers`). A worker fetches a
    task's whole tuple, so where groups on another worker read a small part of a big tuple, a
    task on the producer's worker picks those parts and only they travel
    (:meth:`GroupPlan.send_only_what_other_workers_read`). A value held here of at most
    ``INLINE_BYTES`` rides inside each cluster task that reads it. A 0-d output (a loss) comes
    back with the run: the tuple of a group that returns 0-d values only (the partition makes
    the loss such a group on a cluster) is gathered whole, as soon as it is ready; a 0-d part
    of another group's tuple is picked out by a ``getitem`` task. What is copied to a second
    worker (parameters, optimizer state) is picked out of an update group's tuple, which also
    holds the gradients, by a ``<label>_keep`` task on its worker: half the bytes travel.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median_high
from typing import Any

import numpy as np
from dask.task_spec import DataNode, Task, TaskRef

from pargraph.costs import StructureCosts, decisions, describe
from pargraph.graph import Node, StructureCache, toposort
from pargraph.partition import LOCAL, Granularity, estimated_seconds, placed_partition
from pargraph.runtime import ENV, EXT, LIT, PART, FusedTask, NodeTask, Selection, release_schedule


def check_computable(computed: Sequence[Node]) -> None:
    """Raise if a node to compute has no op that computes it (a leaf without its value).
    Plans check when they are made, for every run of their structure."""
    for node in computed:
        if node.op.forward is None:
            raise RuntimeError(f"{node.key} has no value and no op to compute it")


def plan(targets: Sequence[Node]) -> tuple[list[Node], list[Node]]:
    """The nodes a run of ``targets`` touches (inputs first) and those it computes."""
    order = toposort(targets, stop=lambda n: n.value is not None)
    return order, [n for n in order if n.value is None]


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
    tasks: int = 0
    plan: Any = None  # the GroupPlan, for its record of how runs in each mode went
    sequential: list | None = None  # (group key, keys to free after it) in dependency order
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

    def values(self, results: Sequence[Any]) -> Sequence[Any]:
        return results if self.unpack is None else self.unpack(results)

    @property
    def graph(self) -> dict:
        if callable(self.source):
            self.source = self.source()
        return self.source


class HeldPart:
    """A value kept on a cluster as element ``index`` of a group task's tuple result.

    A training step keeps every parameter, gradient and optimizer state; one ``getitem`` task
    per kept value (so that each became a Future of its own) cost the scheduler ~1 ms each.
    Now the group's Future is kept and the tasks that read a part index the tuple inside
    themselves. It answers like a Future where pargraph reads one (``key``, which names the
    part, ``status``, ``client``, ``result()``). Cost: a tuple stays on its worker while any of
    its parts is held (at most one step's values between groups, beside what is kept).
    """

    __slots__ = ("future", "index")

    def __init__(self, future: Any, index: int) -> None:
        self.future, self.index = future, index

    @property
    def key(self) -> str:
        return f"{self.future.key}[{self.index}]"

    @property
    def status(self) -> str:
        return self.future.status

    @property
    def client(self) -> Any:
        return self.future.client

    def result(self) -> Any:
        """The part alone, fetched from its worker (not the whole tuple)."""
        key = f"fetch-{self.key}-{secrets.token_hex(4)}"  # "fetch" in the task stream
        return self.client.submit(operator.getitem, self.future, self.index, key=key).result()

    def ref(self) -> Task:
        """The part as a task argument: indexed inside the task that reads it."""
        return Task(None, operator.getitem, TaskRef(self.future.key), self.index)


def is_future(value: Any) -> bool:
    """Whether a value slot holds a cluster Future, or a part of one (data on a worker)."""
    return type(value) is HeldPart or (type(value).__name__ == "Future" and hasattr(value, "key"))


def futures_of(values: Sequence[Any]) -> list:
    """The distinct cluster Futures behind ``values`` (parts share their group's Future)."""
    found: dict[str, Any] = {}
    for value in values:
        future = value.future if type(value) is HeldPart else value
        found.setdefault(future.key, future)
    return list(found.values())


def fetch(node: Node) -> np.ndarray:
    """A realized node's value as a local numpy array (gathered from the cluster if needed)."""
    value = node.value
    return np.asarray(value.result()) if is_future(value) else value


def lower(order: list[Node], computed: list[Node], outputs: Sequence[Node],
          granularity: Granularity = LOCAL, named_outputs: bool = False,
          held: dict[str, Any] | None = None, copied: Sequence[Node] = ()) -> Lowered:
    """The dask graph that computes ``computed`` and returns the values of ``outputs``.

    On a cluster (``remote``), a value held as a Future stays where it is: tasks refer to its
    key, which the cluster keeps in memory for as long as the Future lives. Elsewhere it is
    gathered into the graph like any other value. With ``named_outputs`` (the dask collection
    protocol) every output has a task under its own key; otherwise outputs are read out of
    their group's result: locally the values, on a cluster :class:`HeldPart` s of its Future.
    ``held`` maps the keys of values held here that the cluster has a copy of to the argument
    that reads that copy. On a cluster, the ``copied`` outputs (parameters and optimizer
    state, which go to a second worker) are held in tuples that hold nothing else.
    """
    remote = granularity.remote
    held = held or {}
    graph: dict = {}
    outputs = list(outputs)
    plan_, key = _cached_plan(order, computed, outputs, granularity) if granularity.fuse \
        else (None, None)
    single = plan_.instantiate(order, computed) if isinstance(plan_, SinglePlan) else None
    if single is not None and not remote:  # inline, unless a graph is asked for
        lowered = _single_task(graph, *single, outputs, {},
                               data=lambda: _realized_values(order, held, remote))
        if plan_.costs.wants_timing() and _measuring():
            lowered.timing = Timing(plan_, key, order, computed, outputs, granularity)
        return lowered
    local_values = _realized_values(order, held, remote)
    if not isinstance(plan_, GroupPlan) or remote:
        # Data keys: what a task per node or a whole-run task reads; and on a cluster, a
        # value several tasks read is sent once, as one key. A small one (an index, a
        # scalar) rides in the tasks that read it: a data key costs the scheduler a task.
        riding = {key: value for key, value in local_values.items()
                  if remote and getattr(value, "nbytes", INLINE_BYTES + 1) <= INLINE_BYTES}
        graph.update((key, DataNode(key, value)) for key, value in local_values.items()
                     if key not in riding)
        local_values = riding
    if remote:  # parts of group results are indexed inside the tasks that read them
        local_values.update((node.key, node.value.ref()) for node in order
                            if type(node.value) is HeldPart)
        local_values.update(held)
    if not granularity.fuse:
        return _one_task_per_node(graph, computed, outputs, local_values)
    copied_ids = {id(node) for node in copied}
    copied_outputs = frozenset(i for i, node in enumerate(outputs) if id(node) in copied_ids)
    if single is not None:  # on a cluster
        return _single_task(graph, *single, outputs, local_values, parts=not named_outputs,
                            copied=copied_outputs)
    lowered = plan_.instantiate(graph, order, computed, outputs, local_values,
                                named_outputs=bool(named_outputs), remote=remote,
                                copied=copied_outputs)
    if not remote and plan_.costs.wants_timing() and _measuring():
        lowered.timing = Timing(plan_, key, order, computed, outputs, granularity)
    return lowered


def _measuring() -> bool:
    """``pargraph.measured-costs`` (default True): structures learn from timed runs."""
    import dask

    return bool(dask.config.get("pargraph.measured-costs", True))


def _realized_values(order: list[Node], held: dict[str, Any], remote: bool) -> dict[str, Any]:
    """The values of the run's realized nodes by key, but for those ``held`` maps to the
    cluster's copy; on a cluster, Futures stay where they are (not gathered)."""
    values: dict[str, Any] = {}
    for node in order:
        if node.value is None or node.key in held:
            continue
        if not is_future(node.value):
            values[node.key] = node.value
        elif not remote:
            values[node.key] = fetch(node)
    return values


#: Numbers each run submitted to a cluster, whose task keys carry it: a run interrupted (or
#: failed) and run again computes the same nodes, maybe grouped otherwise, and a key the
#: scheduler still holds from the first submission would stand for a different task.
cluster_runs = itertools.count()


def tagged(key: str, tag: str) -> str:
    """``key`` (``<name>-<serial>-<session>``) with ``tag`` after its serial number: the
    same name in the dashboard (``dask.utils.key_split``), another key."""
    name, serial, session = key.rsplit("-", 2)
    return f"{name}-{serial}{tag}-{session}"


#: Bytes up to which a value held here travels inside each cluster task that reads it (a
#: copy per task: only indices and scalars, such as those a loss makes every step).
INLINE_BYTES = 8 * 1024
#: Bytes a task picking the parts another worker reads must keep from travelling: it adds a
#: scheduler round trip before its readers (~5 ms on 2 busy cores), about what 1 MiB costs on
#: a 1 Gbit/s link (over loopback the wide DataParallel step was as fast either way; on a
#: 1 Gbit/s link 195.6 -> 130.5 ms).
SEND_PARTS_SAVING = 1 << 20

#: Lowering plans by graph structure: a training loop records the same structure every step,
#: so its partition and task templates are computed once. The structure is what they depend
#: on: each node's op, shape and inputs (positions in the run), which nodes are realized
#: inputs, which are outputs, the cluster/local choice, the worker count and the thresholds.
#: Literal arguments (a learning rate) and values are read from the nodes of each run.
PlanCache = StructureCache(64)


def structure_of(order: list[Node], outputs: list[Node], granularity: Granularity) -> tuple:
    # A loop over every node of every step, kept lean: nodes hash by identity, so they are
    # the dict's keys (no id() call per edge).
    position = {node: k for k, node in enumerate(order)}
    parts = []
    append = parts.append
    for node in order:
        if node.value is not None:
            append(node.shape)
        else:
            append((node.op.name, node.shape,
                    tuple([position[i] if type(i) is Node else -1 for i in node.inputs])))
    return (granularity, tuple([position[n] for n in outputs]), tuple(parts))


def _cached_plan(order: list[Node], computed: list[Node], outputs: list[Node],
                 granularity: Granularity) -> tuple[GroupPlan | SinglePlan, tuple]:
    """The run's plan and its structure's key: one task when it is too small or one group,
    else a task per group (placed on the workers when ``granularity.hosts`` lists several).
    A new plan starts its structure's record of measured costs."""
    key = structure_of(order, outputs, granularity)
    found = PlanCache.get(key)
    if found is None:
        found = make_plan(order, computed, outputs, granularity)
        found.costs = StructureCosts([estimated_seconds(node) for node in computed])
        if not realized_meanwhile(computed):
            PlanCache.put(key, found)
    return found, key


@dataclass
class Timing:
    """A run whose nodes are timed (see :mod:`pargraph.costs`): what re-planning needs."""

    plan: Any
    key: tuple
    order: list
    computed: list
    outputs: list
    granularity: Granularity

    def learn(self, events: list) -> None:
        """Take the run's ``(key, start, stop, thread)`` events; with times that disagree
        with the plan's, partition the structure again and cache the new plan."""
        position = {node.key: k for k, node in enumerate(self.computed)}
        seconds, seen = [0.0] * len(self.computed), [0] * len(self.computed)
        for key, start, stop, _ in events:
            k = position.get(key)
            if k is not None:  # a node copied into several groups runs more than once
                seconds[k] += stop - start
                seen[k] += 1
        if not all(seen):  # another run took the timing over: this one is incomplete
            return
        costs = self.plan.costs
        measured = costs.add([s / n for s, n in zip(seconds, seen)])
        if measured is None or realized_meanwhile(self.computed):
            return
        made = make_plan(self.order, self.computed, self.outputs, self.granularity, measured)
        if _groups(made) == _groups(self.plan):
            return  # the same partition: the plan keeps its record of how runs went
        made.costs = costs
        PlanCache.put(self.key, made)
        decisions.add(describe(costs, len(_groups(self.plan)), len(_groups(made))))


def _groups(plan: Any) -> list:
    return plan.members if isinstance(plan, GroupPlan) else [None]


def make_plan(order: list[Node], computed: list[Node], outputs: list[Node],
              granularity: Granularity, work: Sequence[float] | None = None
              ) -> GroupPlan | SinglePlan:
    """The plan of a run, made now (:func:`_cached_plan` keeps them by structure); ``work``:
    measured seconds per computed node, in place of the estimates."""
    if not is_small(computed, granularity.single_task_below, work):
        groups, workers = placed_partition(computed, granularity, outputs, work)
        if len(groups) > 1:
            made = GroupPlan(order, computed, groups, outputs)
            if len(granularity.hosts) > 1:
                made.hosts = [granularity.hosts[w][0] for w in workers]
            if granularity.remote:
                made.return_kept_from_readers(computed, outputs)
                if made.hosts:
                    made.send_only_what_other_workers_read(computed)
            return made
    return SinglePlan(order, computed, outputs)


def realized_meanwhile(computed: Sequence[Node]) -> bool:
    """Whether another thread's run realized a node this run set out to compute: it may
    have cut the node's inputs while this run's plan read them (a value is stored before
    the inputs go), so the plan is made again (and never cached)."""
    return any(node.value is not None for node in computed)


#: The ways a threaded run of group tasks can go: on dask's threads (BLAS limited to one thread
#: each), or group after group in the calling thread, with BLAS free to use every core or
#: limited to one (small matrix products run faster without BLAS's threads: the branchy step
#: took 12.2-12.9 ms a step where the other two ways' best took 12.8-14.4).
MODES = ("threads", "inline", "inline, one BLAS thread")
#: How much slower than the fastest way a way may be and still be tried again.
RETRY_WITHIN = 2.0


class GroupPlan:
    """One task per group, returning the tuple of its members used outside it, as templates
    in positions (members in ``computed``, realized inputs in ``order``) that
    :meth:`instantiate` fills with each run's nodes, keys and values."""

    def __init__(self, order: list[Node], computed: list[Node], groups: list[list[Node]],
                 outputs: list[Node]) -> None:
        check_computable(computed)
        in_order = {id(node): k for k, node in enumerate(order)}
        in_computed = {id(node): k for k, node in enumerate(computed)}
        # A node the partition copied into several groups is exported, if a group that
        # does not compute it reads it, by the first: its own (the partition lists it first).
        group_of: dict[int, int] = {}
        copies: dict[int, int] = {}
        for g, members in enumerate(groups):
            for node in members:
                group_of.setdefault(id(node), g)
                copies[id(node)] = copies.get(id(node), 0) + 1
        used_outside = {id(n) for n in outputs}
        for members in groups:
            inside = {id(node) for node in members}
            for node in members:
                used_outside.update(id(i) for i in node.input_nodes()
                                    if id(i) in group_of and id(i) not in inside)
        self.members = [[in_computed[id(n)] for n in members] for members in groups]
        self.labels = [group_label([n for n in members if copies[id(n)] == 1] or members)
                       for members in groups]
        self.exported: list[list[int]] = []
        export_of: dict[int, tuple[int, int]] = {}
        for g, members in enumerate(groups):
            local = [j for j, n in enumerate(members)
                     if id(n) in used_outside and group_of[id(n)] == g]
            self.exported.append(local)
            for e, j in enumerate(local):
                export_of[id(members[j])] = (g, e)
        #: Per group, each member's sources (``(LIT, input position)`` for a literal, which
        #: each run reads from its nodes), and the members that read literals.
        self.sources: list[list[list]] = []
        self.literal: list[list[int]] = []
        self.external: list[list[tuple[int, int]]] = []  # (0, order pos) or (1, group)
        for members in groups:
            index = {id(n): j for j, n in enumerate(members)}
            refs: dict[tuple[int, int], int] = {}
            group_sources, literal = [], []
            for j, node in enumerate(members):
                sources = []
                for position, i in enumerate(node.inputs):
                    if not isinstance(i, Node):
                        sources.append((LIT, position))
                    elif id(i) in index:
                        sources.append((ENV, index[id(i)]))
                    else:
                        producer = export_of.get(id(i))
                        ref = (1, producer[0]) if producer else (0, in_order[id(i)])
                        k = refs.setdefault(ref, len(refs))
                        sources.append((EXT, k) if producer is None else (PART, (k, producer[1])))
                group_sources.append(sources)
                if any(kind == LIT for kind, _ in sources):
                    literal.append(j)
            self.sources.append(group_sources)
            self.literal.append(literal)
            self.external.append(list(refs))
        self.release = [release_schedule(group_sources, self.exported[g])
                        for g, group_sources in enumerate(self.sources)]
        self.outputs = [export_of[id(n)] for n in outputs]
        self.order = self._dependency_order()
        # For a run in one thread: after the k-th group of ``order``, the groups whose results
        # no later group reads (and that are not outputs) can go.
        wanted = {g for g, _ in self.outputs}
        last_reader = {}
        for k, g in enumerate(self.order):
            for kind, v in self.external[g]:
                if kind == 1:
                    last_reader[v] = k
        self.free_after: list[list[int]] = [[] for _ in self.order]
        for g, k in last_reader.items():
            if g not in wanted:
                self.free_after[k].append(g)
        self.timings: dict[str, list[float]] = {mode: [] for mode in MODES}
        self.runs = 0
        self.last_mode = ""  # of the last run, timed or not
        self.hosts: list[str] | None = None  # the worker address of each group, if placed
        #: What each group task returns: its exported members, then arguments passed through.
        self.returned: list[list] = [list(exported) for exported in self.exported]
        #: On a cluster: tasks that pick, on a group's worker, the parts that groups on another
        #: worker read (``(producer groups, [(producer, position)])``; a reader's ``(2, s)``).
        self.selections: list[tuple[list[int], list[tuple[int, int]]]] = []

    def return_kept_from_readers(self, computed: list[Node], outputs: list[Node]) -> None:
        """On a cluster a kept value is a part of its group's tuple, which stays on its worker,
        with every other value the group exports for the step's other tasks, for as long as
        the part is held (and ``pargraph.replicas`` copies all of it). A group whose kept
        parts can all move does not hold them: a group on the same worker that reads it
        already and exports nothing else the run drops returns them too (passed through, not
        copied), and the first group's tuple goes once its readers ran."""
        kept = {id(n) for n in outputs}
        exports = [[computed[self.members[g][j]] for j in exported]
                   for g, exported in enumerate(self.exported)]
        dropped = [sum(n.dtype.itemsize * math.prod(n.shape) for n in nodes if id(n) not in kept)
                   for nodes in exports]
        holders: dict[int, int] = {}
        for g, refs in enumerate(self.external):
            for kind, v in refs:
                if (kind == 1 and dropped[v] and not dropped[g] and v not in holders
                        and (self.hosts is None or self.hosts[v] == self.hosts[g])):
                    holders[v] = g
        for i, (g, e) in enumerate(self.outputs):
            h = holders.get(g)
            if h is not None:
                part = (PART, (self.external[h].index((1, g)), e))
                if part not in self.returned[h]:
                    self.returned[h].append(part)
                self.outputs[i] = (h, self.returned[h].index(part))

    def send_only_what_other_workers_read(self, computed: list[Node]) -> None:
        """A worker fetches a whole task result, but a group's tuple holds everything its
        readers on its own worker need too (a tower's activations, kept for its backward),
        often megabytes where a reader on another worker wants a few kilobytes (the tower's
        logits, for the loss). Where that keeps at least ``SEND_PARTS_SAVING`` bytes from
        travelling, a task on the producer's worker picks the parts the groups on another
        worker read, and they read its result instead: one such task for the groups of a
        worker that the same readers wait for. It runs first on its worker (``urgent``)."""
        nbytes = [[computed[self.members[g][j]].dtype.itemsize
                   * math.prod(computed[self.members[g][j]].shape) for j in exported]
                  for g, exported in enumerate(self.exported)]
        read: dict[tuple[int, int], set[int]] = {}  # (producer, reader) -> positions read
        for h, group_sources in enumerate(self.sources):
            for sources in group_sources:
                for kind, v in sources:
                    if kind == PART and self.external[h][v[0]][0] == 1:
                        g = self.external[h][v[0]][1]
                        if self.hosts[g] != self.hosts[h]:
                            read.setdefault((g, h), set()).add(v[1])
        remote: dict[tuple[int, str], set[int]] = {}  # (producer, reader's host) -> readers
        for g, h in read:
            remote.setdefault((g, self.hosts[h]), set()).add(h)
        bundles: dict[tuple[str, str, frozenset], list[int]] = {}
        for (g, host), readers in sorted(remote.items()):
            wanted = set().union(*(read[g, h] for h in readers))
            saved = sum(nbytes[g]) - sum(nbytes[g][e] for e in wanted if e < len(nbytes[g]))
            if saved >= SEND_PARTS_SAVING:
                bundles.setdefault((self.hosts[g], host, frozenset(readers)), []).append(g)
        for (_, _, readers), producers in bundles.items():
            picks: list[tuple[int, int]] = []
            position: dict[tuple[int, int], int] = {}
            for p, g in enumerate(producers):
                for e in sorted(set().union(*(read[g, h] for h in readers))):
                    position[g, e] = len(picks)
                    picks.append((p, e))
            s = len(self.selections)
            self.selections.append((producers, picks))
            for h in readers:
                self._read_from_selection(h, s, producers, position)

    def _read_from_selection(self, h: int, s: int, producers: list[int],
                             position: dict[tuple[int, int], int]) -> None:
        """Group ``h`` reads selection ``s`` in place of the tuples of ``producers``."""
        refs = self.external[h]
        slots = {k: g for k, (kind, g) in enumerate(refs) if kind == 1 and g in producers}
        k_new = min(slots)
        refs[k_new] = (2, s)
        # The other producers' argument slots go: the arguments after them move up.
        kept = [k for k in range(len(refs)) if k == k_new or k not in slots]
        renumber = {k: j for j, k in enumerate(kept)}
        self.external[h] = [refs[k] for k in kept]

        def remapped(source: tuple) -> tuple:
            kind, v = source
            if kind == PART and v[0] in slots:
                return PART, (renumber[k_new], position[slots[v[0]], v[1]])
            if kind == PART:
                return PART, (renumber[v[0]], v[1])
            if kind == EXT:
                return EXT, renumber[v]
            return source

        self.sources[h] = [[remapped(source) for source in sources]
                           for sources in self.sources[h]]
        self.returned[h] = [remapped(r) if type(r) is tuple else r for r in self.returned[h]]

    def _dependency_order(self) -> list[int]:
        """The groups in an order where each comes after the groups it reads from."""
        needs = [{v for kind, v in refs if kind == 1} for refs in self.external]
        done: list[int] = []
        placed: set[int] = set()
        while len(done) < len(needs):
            before = len(done)
            for g, wanted in enumerate(needs):
                if g not in placed and wanted <= placed:
                    placed.add(g)
                    done.append(g)
            assert len(done) > before, "the partition's groups depend on each other in a cycle"
        return done

    def choose_mode(self) -> str:
        """The way that ran this structure fastest (see :data:`MODES`).

        Each way is timed three times, then the fastest median wins; every 50 runs each
        other way within :data:`RETRY_WITHIN` of it is tried again (for two runs), since the
        machine's load changes. A way whose first timing is :data:`RETRY_WITHIN` slower
        than another's median is not tried further (branches of ops that wait, a solver's,
        run many times slower one after another). A chain of groups, or many small ones
        whose numpy calls contend for the GIL, runs faster in one thread; independent big
        matmuls run faster side by side; big matmuls in a chain run faster with BLAS's
        threads, small ones without them."""
        self.runs += 1
        timings = self.timings
        known = [median_high(t) for t in timings.values() if len(t) >= 3]
        best = min(known) if known else None
        for mode in MODES:
            if len(timings[mode]) < 3 and not (
                    timings[mode] and best is not None
                    and min(timings[mode]) > RETRY_WITHIN * best):
                return mode
        ranked = sorted((mode for mode in MODES if timings[mode]),
                        key=lambda mode: median_high(timings[mode]))
        fastest = median_high(timings[ranked[0]])
        close = [mode for mode in ranked[1:]
                 if median_high(timings[mode]) <= RETRY_WITHIN * fastest]
        retry = self.runs % 50
        if retry < 2 * len(close):
            return close[retry // 2]
        return ranked[0]

    def record(self, mode: str, seconds: float) -> None:
        """Time a run, unless it is the first in its mode since a run in the other: that one
        pays for the switch (BLAS's threads, memory the other threads' allocator arenas had
        not mapped; 100-115 ms against 60-69 on the wide step), and timed, it made the first
        way tried look the slower one, or the two ways alternate at that price."""
        switched, self.last_mode = mode != self.last_mode, mode
        if switched:
            return
        timings = self.timings[mode]
        timings.append(seconds)
        del timings[:-5]

    def instantiate(self, graph: dict, order: list[Node], computed: list[Node],
                    outputs: list[Node], local_values: dict[str, Any],
                    named_outputs: bool = False, remote: bool = False,
                    copied: frozenset = frozenset()) -> Lowered:
        """Realized values held here are the tasks' literal arguments, not graph keys: dask's
        schedulers spend as much on a data key as on a task (a step has hundreds of
        parameters). ``local_values`` maps such nodes' keys to the argument to pass."""
        keys = []
        run = f"r{next(cluster_runs)}" if remote else ""
        for label, members in zip(self.labels, self.members):
            _, serial, session = computed[members[-1]].key.rsplit("-", 2)
            keys.append(f"{label}-{serial}t{run}-{session}")  # "t": never a node's key
        sent = []
        for s, (producers, picks) in enumerate(self.selections):
            _, serial, session = keys[producers[-1]].rsplit("-", 2)
            sent.append(f"{self.labels[producers[-1]]}_send-{serial}s{s}-{session}")
            graph[sent[-1]] = Task(sent[-1], Selection(picks),
                                   *(TaskRef(keys[g]) for g in producers))
        for g, members in enumerate(self.members):
            nodes = [computed[p] for p in members]
            sources = _with_literals(self.sources[g], self.literal[g], nodes)
            args = []
            for kind, v in self.external[g]:
                if kind == 1:
                    args.append(TaskRef(keys[v]))
                elif kind == 2:
                    args.append(TaskRef(sent[v]))
                else:
                    key = order[v].key
                    args.append(local_values[key] if key in local_values else TaskRef(key))
            graph[keys[g]] = Task(keys[g], FusedTask(nodes, sources, self.returned[g],
                                                     self.release[g]), *args)
        tasks = len(self.members) + len(self.selections)
        sequential = [(keys[g], [keys[h] for h in free])
                      for g, free in zip(self.order, self.free_after)]
        if named_outputs:
            for node, (g, e) in zip(outputs, self.outputs):
                graph[node.key] = Task(node.key, operator.getitem, TaskRef(keys[g]), e)
            return Lowered(graph, [node.key for node in outputs], tasks=tasks + len(outputs),
                           plan=self)
        wanted = sorted({g for g, _ in self.outputs})
        position = {g: k for k, g in enumerate(wanted)}
        picks = [(position[g], e) for g, e in self.outputs]
        if remote:  # results are Futures of the group tuples
            workers = None
            if self.hosts:
                workers = dict(zip(keys, self.hosts))
                workers.update((key, self.hosts[producers[0]])
                               for key, (producers, _) in zip(sent, self.selections))
            scalar = [k for k, g in enumerate(wanted) if all(
                type(j) is int and not computed[self.members[g][j]].shape
                for j in self.returned[g])]
            return _held_results(graph, [keys[g] for g in wanted], picks, outputs, tasks,
                                 scalar, copied, workers,
                                 frozenset(sent) | {keys[wanted[k]] for k in scalar}, plan=self)
        return Lowered(graph, [keys[g] for g in wanted],
                       unpack=lambda results: [results[k][e] for k, e in picks], tasks=tasks,
                       plan=self, sequential=sequential)


def is_small(computed: list[Node], below: float, work: Sequence[float] | None = None) -> bool:
    """Whether the whole run is too little work (``below`` seconds) to profit from
    parallelism, the way XLA's CPU runtime runs small graphs sequentially."""
    if len(computed) < 2:
        return False
    if work is not None:
        return sum(work) < below
    total = 0.0
    for node in computed:
        total += estimated_seconds(node)
        if total >= below:
            return False
    return True


def _ref(node: Node, held: dict[str, Any]) -> Any:
    return held[node.key] if node.key in held else TaskRef(node.key)


def _one_task_per_node(graph: dict, computed: list[Node], outputs: list[Node],
                       held: dict[str, Any]) -> Lowered:
    check_computable(computed)
    for node in computed:
        args = [_ref(i, held) if isinstance(i, Node) else i for i in node.inputs]
        graph[node.key] = Task(node.key, NodeTask.of(node), *args)
    return Lowered(graph, [node.key for node in outputs], tasks=len(computed),
                   holders=list(range(len(outputs))))


class SinglePlan:
    """A run that is one task, as a template: each member's input sources (literal arguments
    are read from each run's nodes), the outside nodes it reads (positions in ``order``), and
    when its members' values can go."""

    def __init__(self, order: list[Node], computed: list[Node], outputs: list[Node]) -> None:
        check_computable(computed)
        in_order = {id(node): k for k, node in enumerate(order)}
        index: dict[int, int] = {}
        external: dict[int, int] = {}  # order position -> argument number
        self.sources: list[list] = []  # as GroupPlan's for one group
        self.literal: list[int] = []
        for position, node in enumerate(computed):
            sources = []
            for j, i in enumerate(node.inputs):
                if not isinstance(i, Node):
                    sources.append((LIT, j))
                elif id(i) in index:  # an earlier member
                    sources.append((ENV, index[id(i)]))
                else:
                    sources.append((EXT, external.setdefault(in_order[id(i)], len(external))))
            self.sources.append(sources)
            if any(kind == LIT for kind, _ in sources):
                self.literal.append(position)
            index[id(node)] = position
        self.external = list(external)
        self.outputs = [index[id(n)] for n in outputs]
        self.release = release_schedule(self.sources, self.outputs)

    def instantiate(self, order: list[Node], computed: list[Node]) -> tuple[FusedTask, list]:
        """This run's task and the outside nodes it takes as arguments."""
        return (FusedTask(computed, _with_literals(self.sources, self.literal, computed),
                          self.outputs, self.release),
                [order[k] for k in self.external])


def _with_literals(template: list[list], literal: list[int], nodes: list[Node]) -> list[list]:
    """The template's sources with this run's literal arguments (a learning rate), read
    from the nodes now: a node's inputs go once it is realized, maybe by another thread's
    run while this one's tasks still run."""
    if not literal:
        return template
    sources = list(template)
    for j in literal:
        node = nodes[j]
        sources[j] = [(LIT, node.inputs[v]) if kind == LIT else (kind, v)
                      for kind, v in template[j]]
    return sources


def _single_task(graph: dict, task: FusedTask, external: list[Node], outputs: list[Node],
                 held: dict[str, Any], parts: bool = False,
                 data: Callable[[], dict] | None = None,
                 copied: frozenset = frozenset()) -> Lowered:
    """One task for the run; ``data``: the values to add as data keys when the graph is
    built, which it is only if the run does not go inline."""
    whole = f"pargraph_run-{outputs[0].key}"
    if parts:  # on a cluster: this run's own key
        whole = tagged(whole, f"r{next(cluster_runs)}")

    def build() -> dict:
        if data is not None:
            graph.update((key, DataNode(key, value)) for key, value in data().items())
        graph[whole] = Task(whole, task, *(_ref(i, held) for i in external))
        if not parts:
            for k, node in enumerate(outputs):
                graph[node.key] = Task(node.key, operator.getitem, TaskRef(whole), k)
        return graph

    if parts:  # on a cluster: the outputs stay parts of the one task's Future
        return _held_results(build(), [whole], [(0, k) for k in range(len(outputs))], outputs,
                             1, copied=copied)
    return Lowered(build, [node.key for node in outputs], single=task, single_inputs=external,
                   tasks=1 + len(outputs))


def _held_results(graph: dict, keys: list[str], picks: list[tuple[int, int]],
                  outputs: list[Node], tasks: int, scalar: Sequence[int] = (),
                  copied: frozenset = frozenset(), workers: dict | None = None,
                  urgent: frozenset = frozenset(), **more: Any) -> Lowered:
    """A cluster run's Lowered: output ``i`` stays element ``picks[i][1]`` of the Future of
    ``keys[picks[i][0]]``, except a 0-d output (a loss, a metric), which comes back with the
    run: the ``item()`` that follows every step then costs no second round trip. The tuples
    of ``keys[k]`` for ``k`` in ``scalar`` hold 0-d values only: they are fetched whole, with
    no task picking the value out (a scheduler round trip more). The ``copied`` outputs are
    copied to a second worker: where their tuple holds other values too (an update group's
    gradients), a task on its worker picks them, and they are held as parts of its tuple."""
    run = f"p{next(cluster_runs)}"  # the picking tasks' keys are this run's own
    scalars = {i: tagged(node.key, run) for i, node in enumerate(outputs) if not node.shape}
    picks, keys = list(picks), list(keys)
    copies = _keep_copied(graph, keys, picks, scalars, copied, workers)
    if copies:
        tasks += len(copies)
        urgent = urgent | {keys[k] for k in copies}
    fetched_keys: dict[str, int] = {}
    for i, key in scalars.items():
        k, e = picks[i]
        if k in scalar:
            fetched_keys.setdefault(keys[k], len(fetched_keys))
        else:
            graph[key] = Task(key, operator.getitem, TaskRef(keys[k]), e)
            fetched_keys[key] = len(fetched_keys)
    order = [k for k in keys if k not in fetched_keys] + list(fetched_keys)
    picking = len(fetched_keys) - sum(k in fetched_keys for k in keys)

    def unpack(results: Sequence[Any]) -> list:
        by_key = dict(zip(order, results))
        values = []
        for i, (k, e) in enumerate(picks):
            if i not in scalars:
                values.append(HeldPart(by_key[keys[k]], e))
            elif keys[k] in fetched_keys:
                values.append(np.asarray(by_key[keys[k]][e]))
            else:
                values.append(np.asarray(by_key[scalars[i]]))
        return values

    position = {key: k for k, key in enumerate(order)}
    holders = [None if i in scalars else position[keys[k]] for i, (k, _) in enumerate(picks)]
    return Lowered(graph, order, unpack=unpack, tasks=tasks + picking,
                   fetched=len(fetched_keys), holders=holders, workers=workers, urgent=urgent,
                   **more)


def _keep_copied(graph: dict, keys: list[str], picks: list[tuple[int, int]],
                 scalars: dict[int, str], copied: frozenset, workers: dict | None) -> list[int]:
    """Where a tuple holds ``copied`` outputs beside others, a ``<label>_keep`` task on its
    worker that returns the copied ones (appended to ``keys``; ``picks`` now point into it),
    so that copying parameters to a second worker does not copy the gradients that share
    their update group's tuple (half the bytes of an SGD step). Returns the new positions."""
    held_by: dict[int, list[int]] = {}
    for i, (k, _) in enumerate(picks):
        if i not in scalars:
            held_by.setdefault(k, []).append(i)
    added = []
    for k, held in held_by.items():
        kept = [i for i in held if i in copied]
        if not kept or len(kept) == len(held):
            continue
        _, serial, session = keys[k].rsplit("-", 2)
        key = f"{keys[k].split('-', 1)[0]}_keep-{serial}k-{session}"  # key_split: <label>_keep
        graph[key] = Task(key, Selection([(0, picks[i][1]) for i in kept]), TaskRef(keys[k]))
        if workers is not None and keys[k] in workers:
            workers[key] = workers[keys[k]]
        added.append(len(keys))
        for j, i in enumerate(kept):
            picks[i] = (len(keys), j)
        keys.append(key)
    return added


def group_label(members: list[Node]) -> str:
    """The readable part of a group task's key: the module path its members share and the
    phase of its heaviest node (``towers.3_forward``; an underscore, since key_split drops a
    ``-backward`` word), or else that node's task prefix (``sgd_update``).
    ``dask.utils.key_split`` returns exactly this."""
    heaviest = max(members, key=estimated_seconds)
    path = _common_path([n.scope.split(" (")[0] for n in members if n.scope])
    return f"{path}_{heaviest.phase}" if path else heaviest.key.rsplit("-", 2)[0]


def _common_path(paths: list[str]) -> str:
    """The dotted module path all ``paths`` start with (``towers.3`` of ``towers.3.0``...)."""
    return ".".join(os.path.commonprefix([path.split(".") for path in paths])) if paths else ""
