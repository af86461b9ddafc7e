"""Lowering: from the node graph to a dask task graph.

A run lowers the not-yet-realized nodes its targets need; a realized node is a boundary whose
value enters as a literal argument (on a cluster, a key on a worker). Each group the
partitioner chose (:mod:`pargraph.engine.partition`) becomes one task, ``Task(group key,
FusedTask(...), *inputs)``, returning the tuple of its members used outside it; a run too
small to profit from parallelism is one task. The partition and the tasks' templates are a
plan (:class:`GroupPlan`, :class:`SinglePlan`), cached by the run's structure
(``PlanCache``), so a training loop's later steps only fill in keys and values. Keys name
what a task computes (``towers.3_forward-…``, ``sgd_update-…``: ``dask.utils.key_split``
gives the readable part). Where the values of a cluster run live is :mod:`pargraph.remote.layout`.
See docs/design.md ("Lowering") for keys and plans in full.
"""

from __future__ import annotations

import operator
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from dask.task_spec import DataNode, Task, TaskRef

from pargraph.costs import StructureCosts, decisions, describe
from pargraph.engine.partition import LOCAL, Granularity, estimated_seconds, placed_partition
from pargraph.graph import FORWARD, UPDATE, Node, StructureCache, last_model, toposort
from pargraph.ops.gemm import ONE_THREAD, ONE_THREAD_VECTOR
from pargraph.remote.layout import (
    INLINE_BYTES,
    HeldPart,
    held_results,
    is_future,
    return_kept_from_readers,
    rides,
    send_only_what_other_workers_read,
)
from pargraph.remote.recovery import fetch
from pargraph.remote.state import clusters
from pargraph.runtime import (
    ALL_BLAS,
    ANY_BLAS,
    ENV,
    EXT,
    LIT,
    ONE_BLAS,
    PART,
    Arg,
    FusedTask,
    GroupCall,
    Lowered,
    NodeTask,
    Selection,
    release_schedule,
    straight_line,
)


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
        lowered = _single_task(graph, *single, outputs, {}, local=True)
        lowered.blas = plan_.blas
        if plan_.costs.wants_timing() and _measuring():
            lowered.timing = Timing(plan_, key, order, computed, outputs, granularity)
        return lowered
    local_values = _realized_values(order, held, remote)
    if not isinstance(plan_, GroupPlan) or remote:
        # Data keys: what a task per node or a whole-run task reads; and on a cluster, a
        # value several tasks read is sent once, as one key. A small one (an index, a
        # scalar), and one that a single task reads (a dropout mask), rides in the tasks
        # that read it: a data key costs the scheduler a task.
        once = _read_once(plan_, single, order) if remote else frozenset()
        riding = {key: value for key, value in local_values.items()
                  if remote and rides(getattr(value, "nbytes", INLINE_BYTES + 1), key in once)}
        graph.update((key, DataNode(key, value)) for key, value in local_values.items()
                     if key not in riding)
        local_values = riding
    if remote:  # parts of group results are indexed inside the tasks that read them
        local_values.update((node.key, node.value.ref()) for node in order
                            if type(node.value) is HeldPart)
        local_values.update(held)
    if not granularity.fuse:
        return _one_task_per_node(graph, computed, outputs, local_values, granularity.workers)
    copied_ids = {id(node) for node in copied}
    copied_outputs = frozenset(i for i, node in enumerate(outputs) if id(node) in copied_ids)
    if single is not None:  # on a cluster
        return _single_task(graph, *single, outputs, local_values, parts=not named_outputs,
                            copied=copied_outputs, hosts=granularity.hosts)
    lowered = plan_.instantiate(graph, order, computed, outputs, local_values,
                                named_outputs=bool(named_outputs), remote=remote,
                                copied=copied_outputs)
    if not remote and plan_.costs.wants_timing() and _measuring():
        lowered.timing = Timing(plan_, key, order, computed, outputs, granularity)
    return lowered


def _read_once(plan: Any, single: Any, order: list[Node]) -> frozenset:
    """The keys of the realized values that one task of a run on a cluster alone reads: all
    of them where the run is one task, none where it is a task per node."""
    if single is not None:
        return frozenset(node.key for node in order)
    if isinstance(plan, GroupPlan):
        return frozenset(order[v].key for v in plan.read_once)
    return frozenset()


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
        if type(node.value) is np.ndarray or not is_future(node.value):
            values[node.key] = node.value
        elif not remote:
            values[node.key] = fetch(node)
    return values


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
            made = GroupPlan(order, computed, groups, outputs, granularity.workers)
            if len(granularity.hosts) > 1:
                made.hosts = [granularity.hosts[w][0] for w in workers]
            if granularity.remote:
                return_kept_from_readers(made, computed, outputs)
                if made.hosts:
                    send_only_what_other_workers_read(made, computed)
            return made
    return SinglePlan(order, computed, outputs, granularity.workers)


def realized_meanwhile(computed: Sequence[Node]) -> bool:
    """Whether another thread's run realized a node this run set out to compute: it may
    have cut the node's inputs while this run's plan read them (a value is stored before
    the inputs go), so the plan is made again (and never cached)."""
    return any(node.value is not None for node in computed)


def member_sources(members: list[Node], outside: Callable[[Node], tuple]
                   ) -> tuple[list[list], list[int], list]:
    """Where each member's arguments come from, as :class:`FusedTask` reads them:
    ``(LIT, input position)``, ``(ENV, member)``, or a task argument: ``outside(node)`` gives
    ``(argument, element)`` for an input that is not a member (``element`` None: the argument
    itself, ``(EXT, k)``; else that element of its tuple, ``(PART, (k, element))``). Returns
    the sources, the members that read literals with the positions of those literals, and the
    distinct arguments in order."""
    index: dict[int, int] = {}
    refs: dict[Any, int] = {}
    all_sources: list[list] = []
    literal: list[tuple[int, tuple[int, ...]]] = []
    for j, node in enumerate(members):
        sources: list = []
        for position, i in enumerate(node.inputs):
            if not isinstance(i, Node):
                sources.append((LIT, position))
            elif id(i) in index:
                sources.append((ENV, index[id(i)]))
            else:
                ref, element = outside(i)
                k = refs.setdefault(ref, len(refs))
                sources.append((EXT, k) if element is None else (PART, (k, element)))
        all_sources.append(sources)
        positions = tuple(p for p, (kind, _) in enumerate(sources) if kind == LIT)
        if positions:
            literal.append((j, positions))
        index[id(node)] = j
    return all_sources, literal, list(refs)


#: A run with a BLAS op that one thread would take this long on, by its shapes, keeps all
#: of BLAS's threads (see ``modes.BlasThreads``), unless its graph is wide.
WIDE_SECONDS = 0.5e-3
#: A graph this many times wider than the run's threads (estimated work over the longest
#: chain of estimated work) runs its branches side by side, one BLAS thread each: towers of
#: big products keep every thread busy that way, and between products too; with all of
#: BLAS's threads in each branch, their products, the ops between them and the parts of
#: split ops (``ops.intra_op``) contend.
WIDE_GRAPH = 0.75
#: Products BLAS runs on one thread, whatever its count (OpenBLAS's rule; ``ops.gemm``
#: keeps MKL to it).
OPENBLAS_ONE_THREAD, OPENBLAS_ONE_THREAD_VECTOR = ONE_THREAD, ONE_THREAD_VECTOR


def blas_threads_of(computed: list[Node], workers: int = 1) -> str:
    """How many of BLAS's threads a run of ``computed`` on ``workers`` threads takes, from
    its shapes alone (an op's float32 results depend on BLAS's thread count, so that count
    never depends on the way the run goes, nor on measured times): :data:`ALL_BLAS` with a
    BLAS op that one thread would take :data:`WIDE_SECONDS` on, unless the graph is
    :data:`WIDE_GRAPH` times wider than ``workers`` (:func:`width`); :data:`ANY_BLAS` when
    its BLAS ops are all matrix products small enough that OpenBLAS runs them on one thread
    anyway; else :data:`ONE_BLAS`."""
    threads = ANY_BLAS
    for node in computed:
        op = node.op
        if not op.blas:
            continue
        if estimated_seconds(node) >= WIDE_SECONDS:
            wide = workers > 1 and width(computed) >= WIDE_GRAPH * workers
            return ONE_BLAS if wide else ALL_BLAS
        if threads is ANY_BLAS and (op.products is None or not all(
                m * n * k <= (OPENBLAS_ONE_THREAD_VECTOR if min(m, n) == 1
                              else OPENBLAS_ONE_THREAD)
                for m, n, k in op.products(node))):
            threads = ONE_BLAS
    return threads


def width(computed: list[Node]) -> float:
    """The estimated work of ``computed`` (a topological order) over its longest chain of
    estimated work: how many threads its branches could keep busy (the trace's available
    parallelism, from estimates)."""
    finish: dict[int, float] = {}
    work = longest = 0.0
    for node in computed:
        seconds = estimated_seconds(node)
        work += seconds
        end = seconds + max([finish.get(id(i), 0.0) for i in node.inputs if type(i) is Node],
                            default=0.0)
        finish[id(node)] = end
        longest = max(longest, end)
    return work / longest if longest else 1.0


class GroupPlan:
    """One task per group, returning the tuple of its members used outside it, as templates
    in positions (members in ``computed``, realized inputs in ``order``) that
    :meth:`instantiate` fills with each run's nodes, keys and values."""

    def __init__(self, order: list[Node], computed: list[Node], groups: list[list[Node]],
                 outputs: list[Node], workers: int = 1) -> None:
        check_computable(computed)
        in_computed = {id(node): k for k, node in enumerate(computed)}
        self.members = [[in_computed[id(n)] for n in members] for members in groups]
        #: How many of BLAS's threads the run takes (see :func:`blas_threads_of`).
        self.blas = blas_threads_of(computed, workers)
        export_of = self._exports(groups, outputs)
        in_order = {id(node): k for k, node in enumerate(order)}

        def outside(node: Node) -> tuple:
            producer = export_of.get(id(node))
            if producer is None:
                return (Arg.INPUT, in_order[id(node)]), None
            return (Arg.GROUP, producer[0]), producer[1]

        #: Per group, each member's sources (``(LIT, input position)`` for a literal, which
        #: each run reads from its nodes), the members that read literals with their
        #: positions, and the task's arguments: ``(INPUT, order position)`` or ``(GROUP, g)``.
        self.sources: list[list[list]] = []
        self.literal: list[list[tuple[int, tuple[int, ...]]]] = []
        self.external: list[list[tuple[Arg, int]]] = []
        for members in groups:
            sources, literal, external = member_sources(members, outside)
            self.sources.append(sources)
            self.literal.append(literal)
            self.external.append(external)
        readers = Counter(v for external in self.external
                          for v in {v for kind, v in external if kind == Arg.INPUT})
        #: The realized inputs (positions in ``order``) that one group task alone reads.
        self.read_once = frozenset(v for v, n in readers.items() if n == 1)
        self.release = [release_schedule(group_sources, self.exported[g])
                        for g, group_sources in enumerate(self.sources)]
        self.outputs = [export_of[id(n)] for n in outputs]
        self.order = self._dependency_order()
        self.free_after = self._free_after()
        self.hosts: list[str] | None = None  # the worker address of each group, if placed
        #: What each group task returns: its exported members, then arguments passed through.
        self.returned: list[list] = [list(exported) for exported in self.exported]
        #: On a cluster: tasks that pick, on a group's worker, the parts that groups on
        #: another worker read (``(producer groups, [(producer, position)])``; a reader's
        #: ``(SELECTION, s)``).
        self.selections: list[tuple[list[int], list[tuple[int, int]]]] = []
        self.straight = StraightCode()
        self.early_parts: tuple | None = None  # see early()

    def _exports(self, groups: list[list[Node]], outputs: list[Node]
                 ) -> dict[int, tuple[int, int]]:
        """Set each group's label and exported members (those read outside it, or outputs);
        returns where each exported node is: (group, position in its tuple). A node the
        partition copied into several groups is exported by the first, its own."""
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
        return export_of

    def _free_after(self) -> list[list[int]]:
        """For a run in one thread: after the k-th group of ``order``, the groups whose
        results no later group reads (and that are not outputs), which can go."""
        wanted = {g for g, _ in self.outputs}
        last_reader = {}
        for k, g in enumerate(self.order):
            for kind, v in self.external[g]:
                if kind == Arg.GROUP:
                    last_reader[v] = k
        free_after: list[list[int]] = [[] for _ in self.order]
        for g, k in last_reader.items():
            if g not in wanted:
                free_after[k].append(g)
        return free_after

    def early(self) -> tuple[list[list[tuple[int, int]]], list[list[tuple[int, int]]],
                             frozenset[int]]:
        """``_early_parts``, found once, at the first local run (a cluster's layout changes
        ``returned`` and ``outputs`` first)."""
        if self.early_parts is None:
            self.early_parts = self._early_parts()
        return self.early_parts

    def _early_parts(self) -> tuple[list[list[tuple[int, int]]], list[list[tuple[int, int]]],
                                    frozenset[int]]:
        """The elements of group tuples that can go before their tuple: per group, the
        ``(producer group, element)`` pairs it reads that another group reads after it, or
        that belong to an output's tuple (kept to the end), outputs excepted; for a run in
        ``order``, per step, the pairs whose last reader it was; and the groups whose tuples
        have such elements (held as lists, to drop them). A tuple goes after its last reader
        of any element: without these, a big value of a tuple held by a small late one (a
        weight's gradient) stays until the run ends."""
        wanted = {g for g, _ in self.outputs}
        outputs = set(self.outputs)
        read: list[set[tuple[int, int]]] = []
        whole = set()  # tuples a group returns whole: none of their elements go early
        for sources, external, returned in zip(self.sources, self.external, self.returned):
            pairs = set()
            passed = [r for r in returned if type(r) is tuple]  # arguments passed through
            for kind, v in [source for member in sources for source in member] + passed:
                if kind == PART and external[v[0]][0] == Arg.GROUP:
                    pairs.add((external[v[0]][1], v[1]))
                elif kind == EXT and external[v][0] == Arg.GROUP:
                    whole.add(external[v][1])
            read.append(pairs)
        step = {g: k for k, g in enumerate(self.order)}
        last_of_part: dict[tuple[int, int], int] = {}
        last_of_group: dict[int, int] = {}
        readers_of_part: Counter = Counter()
        readers_of_group: Counter = Counter()
        for r, pairs in enumerate(read):
            for g in {g for g, _ in pairs}:
                readers_of_group[g] += 1
                last_of_group[g] = max(last_of_group.get(g, -1), step[r])
            for pair in pairs:
                readers_of_part[pair] += 1
                last_of_part[pair] = max(last_of_part.get(pair, -1), step[r])
        early = {pair for pair, n in readers_of_part.items()
                 if pair not in outputs and pair[0] not in whole
                 and (pair[0] in wanted or n < readers_of_group[pair[0]])}
        by_reader = [sorted(pairs & early) for pairs in read]
        by_step: list[list[tuple[int, int]]] = [[] for _ in self.order]
        for pair in early:
            if pair[0] in wanted or last_of_part[pair] < last_of_group[pair[0]]:
                by_step[last_of_part[pair]].append(pair)
        return by_reader, by_step, frozenset(g for g, _ in early)

    def _dependency_order(self) -> list[int]:
        """The groups in an order where each comes after the groups it reads from."""
        needs = [{v for kind, v in refs if kind == Arg.GROUP} for refs in self.external]
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

    def instantiate(self, graph: dict, order: list[Node], computed: list[Node],
                    outputs: list[Node], local_values: dict[str, Any],
                    named_outputs: bool = False, remote: bool = False,
                    copied: frozenset = frozenset()) -> Lowered:
        """Realized values held here are the tasks' literal arguments, not graph keys: dask's
        schedulers spend as much on a data key as on a task (a step has hundreds of
        parameters). ``local_values`` maps such nodes' keys to the argument to pass."""
        keys = []
        run = f"r{next(clusters.runs)}" if remote else ""
        for label, members in zip(self.labels, self.members):
            _, serial, session = computed[members[-1]].key.rsplit("-", 2)
            keys.append(f"{label}-{serial}t{run}-{session}")  # "t": never a node's key
        sent = []
        for s, (producers, picks) in enumerate(self.selections):
            _, serial, session = keys[producers[-1]].rsplit("-", 2)
            sent.append(f"{self.labels[producers[-1]]}_send-{serial}s{s}-{session}")
            graph[sent[-1]] = Task(sent[-1], Selection(picks),
                                   *(TaskRef(keys[g]) for g in producers))
        fused = []
        calls = {}  # a local run's: pargraph's runners call these, dask's get the graph
        for g, members in enumerate(self.members):
            nodes = [computed[p] for p in members]
            sources = _with_literals(self.sources[g], self.literal[g], nodes)
            args: list = []
            refs = []
            for kind, v in self.external[g]:
                if kind == Arg.INPUT and order[v].key in local_values:
                    args.append(local_values[order[v].key])
                    continue
                refs.append((len(args), keys[v] if kind == Arg.GROUP
                             else sent[v] if kind == Arg.SELECTION else order[v].key))
                args.append(None)
            fused.append(FusedTask(nodes, sources, self.returned[g], self.release[g]))
            calls[keys[g]] = GroupCall(fused[-1], args, refs)
        local = not remote and not named_outputs
        if local:
            graph = partial(_dask_graph, graph, calls)
        else:
            _dask_graph(graph, calls)
        if not remote:
            self.straight.attach(fused)
        tasks = len(self.members) + len(self.selections)
        by_reader, by_step, listed = self.early()
        sequential = [(keys[g], [keys[h] for h in free], [(keys[h], e) for h, e in drops])
                      for g, free, drops in zip(self.order, self.free_after, by_step)]
        parts = {keys[r]: [(keys[h], e) for h, e in pairs]
                 for r, pairs in enumerate(by_reader) if pairs}
        if named_outputs:
            for node, (g, e) in zip(outputs, self.outputs):
                graph[node.key] = Task(node.key, operator.getitem, TaskRef(keys[g]), e)
            return Lowered(graph, [node.key for node in outputs], tasks=tasks + len(outputs),
                           plan=self, blas=self.blas)
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
            return held_results(graph, [keys[g] for g in wanted], picks, outputs, tasks,
                                 scalar, copied, workers,
                                 frozenset(sent) | {keys[wanted[k]] for k in scalar}, plan=self)
        return Lowered(graph, [keys[g] for g in wanted],
                       unpack=lambda results: [results[k][e] for k, e in picks], tasks=tasks,
                       plan=self, sequential=sequential, parts=parts,
                       listed=frozenset(keys[g] for g in listed), blas=self.blas, calls=calls)


def _dask_graph(graph: dict, calls: dict[str, GroupCall]) -> dict:
    """``graph`` with a dask task per group call (a local run's graph, built only if a dask
    scheduler runs it)."""
    for key, call in calls.items():
        args = list(call.args)
        for position, ref in call.refs:
            args[position] = TaskRef(ref)
        graph[key] = Task(key, call.function, *args)
    return graph


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
                       held: dict[str, Any], workers: int = 1) -> Lowered:
    check_computable(computed)
    for node in computed:
        args = [_ref(i, held) if isinstance(i, Node) else i for i in node.inputs]
        graph[node.key] = Task(node.key, NodeTask.of(node), *args)
    return Lowered(graph, [node.key for node in outputs], tasks=len(computed),
                   blas=blas_threads_of(computed, workers),
                   holders=list(range(len(outputs))))


class SinglePlan:
    """A run that is one task, as a template: each member's input sources (literal arguments
    are read from each run's nodes), the outside nodes it reads (positions in ``order``), and
    when its members' values can go."""

    def __init__(self, order: list[Node], computed: list[Node], outputs: list[Node],
                 workers: int = 1) -> None:
        check_computable(computed)
        in_order = {id(node): k for k, node in enumerate(order)}
        #: As GroupPlan's for one group; the arguments are positions in ``order``.
        self.sources, self.literal, self.external = member_sources(
            computed, lambda node: (in_order[id(node)], None))
        index = {id(node): j for j, node in enumerate(computed)}
        self.outputs = [index[id(n)] for n in outputs]
        self.release = release_schedule(self.sources, self.outputs)
        #: How many of BLAS's threads the run takes (see :func:`blas_threads_of`).
        self.blas = blas_threads_of(computed, workers)
        self.straight = StraightCode()

    def instantiate(self, order: list[Node], computed: list[Node]) -> tuple[FusedTask, list]:
        """This run's task and the outside nodes it takes as arguments."""
        task = FusedTask(computed, _with_literals(self.sources, self.literal, computed),
                         self.outputs, self.release)
        self.straight.attach([task])
        return task, [order[k] for k in self.external]


class StraightCode:
    """A plan's group tasks as generated straight-line code (``runtime.straight_line``),
    made at the structure's :data:`AFTER`-th run (a loop's step, not a one-off) and given to
    the tasks of every later run."""

    #: The run of a structure that makes its straight-line code.
    AFTER = 3

    def __init__(self) -> None:
        self.functions: list | None = None
        self.runs = 0

    def attach(self, tasks: list[FusedTask]) -> None:
        self.runs += 1
        if self.functions is None and self.runs >= self.AFTER:
            self.functions = [straight_line(task, per_run=True) for task in tasks]
        if self.functions is not None:
            for task, function in zip(tasks, self.functions):
                task.straight = function


def _with_literals(template: list[list], literal: list[tuple[int, tuple[int, ...]]],
                   nodes: list[Node]) -> list[list]:
    """The template's sources with this run's literal arguments (a learning rate), read
    from the nodes now: a node's inputs go once it is realized, maybe by another thread's
    run while this one's tasks still run. ``literal``: the members that read literals, each
    with the positions of its literals."""
    if not literal:
        return template
    sources = list(template)
    for j, positions in literal:
        row = list(template[j])
        inputs = nodes[j].inputs
        for p in positions:
            row[p] = (LIT, inputs[p])
        sources[j] = row
    return sources


def _single_task(graph: dict, task: FusedTask, external: list[Node], outputs: list[Node],
                 held: dict[str, Any], parts: bool = False, local: bool = False,
                 copied: frozenset = frozenset(), hosts: tuple = ()) -> Lowered:
    """One task for the run. ``local``: its inputs' values are read now, while the run is
    planned (another thread's commit may free a saved value before this run starts), and
    become data keys if a graph is built, which it is only if the run does not go inline.
    On a cluster with ``hosts``, the run goes to the first of them (loosely), step after
    step: its state stays there, and the task that picks what is copied runs beside it (left
    to the scheduler, it may run on the other worker, which then fetches the whole result,
    gradients and all)."""
    _, serial, session = outputs[0].key.rsplit("-", 2)
    tag = f"r{next(clusters.runs)}" if parts else ""  # on a cluster: this run's own key

    values = [i.value for i in external] if local else []

    def build(whole: str) -> dict:
        graph.update((i.key, DataNode(i.key, local_value(i, v)))
                     for i, v in zip(external, values))
        graph[whole] = Task(whole, task, *(_ref(i, held) for i in external))
        if not parts:
            for k, node in enumerate(outputs):
                graph[node.key] = Task(node.key, operator.getitem, TaskRef(whole), k)
        return graph

    def key() -> str:  # "w": never a node's key; named only when a graph is built (not inline)
        return f"{run_label(task.nodes)}-{serial}w{tag}-{session}"

    if parts:  # on a cluster: the outputs stay parts of the one task's Future
        whole = key()
        return held_results(build(whole), [whole], [(0, k) for k in range(len(outputs))],
                            outputs, 1, copied=copied,
                            workers={whole: hosts[0][0]} if hosts else None)
    return Lowered(lambda: build(key()), [node.key for node in outputs], single=task,
                   single_inputs=external, single_values=values, tasks=1 + len(outputs))


def local_value(node: Node, value: Any) -> Any:
    """``value``, read from ``node`` when its run was planned, as a local array (a value a
    cluster holds is gathered)."""
    return value if type(value) is np.ndarray or not is_future(value) else fetch(node)


def group_label(members: list[Node]) -> str:
    """The readable part of a group task's key: the module path its members share and the
    phase of its heaviest node (``towers.3_forward``; an underscore, since key_split drops a
    ``-backward`` word), or else that node's task prefix (``sgd_update``).
    ``dask.utils.key_split`` returns exactly this."""
    heaviest = max(members, key=estimated_seconds)
    path = _members_path(members)
    return f"{path}_{heaviest.phase}" if path else heaviest.key_prefix()


def run_label(members: list[Node]) -> str:
    """The readable part of a one-task run's key: the module path its members share, or else
    the model this thread called last, and what the run does (``Net_step``: a forward with its
    backward or updates; ``Net_forward``, ``Net_backward``); updates alone are named after
    their op (``adam_update``)."""
    phases = {n.phase for n in members}
    if phases == {UPDATE}:
        return max(members, key=estimated_seconds).key_prefix()
    if FORWARD in phases and len(phases) > 1:
        word = "step"
    elif phases == {FORWARD}:
        word = "forward"
    else:
        word = "backward_update" if UPDATE in phases else "backward"
    owner = _members_path(members) or last_model() or \
        max(members, key=estimated_seconds).key_prefix()
    return f"{owner}_{word}"


def _members_path(members: list[Node]) -> str:
    """The module path the members recorded inside share (``""``: none)."""
    return _common_path([n.scope.split(" (")[0] for n in members if n.scope])


def _common_path(paths: list[str]) -> str:
    """The dotted module path all ``paths`` start with (``towers.3`` of ``towers.3.0``...)."""
    return ".".join(os.path.commonprefix([path.split(".") for path in paths])) if paths else ""
