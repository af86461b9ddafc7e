"""Partitioning: which nodes of a run share one dask task.

A graph node is the unit of meaning; a dask task is the unit of scheduling, and costs far
more than many nodes' work. So each run's node graph is cut into coarse groups of nodes that
run one after another inside one task. Every group is convex (the quotient graph stays
acyclic, since a task needs all its inputs before it starts), and its members keep their
topological order. The algorithm, in three steps: linear clustering along dominant
predecessors (:func:`_linear_clusters`), coarsening of small groups (``_Groups.coarsen``),
and duplication of next-to-free nodes into the groups that read them
(``_Groups.duplicate_sources``); on a cluster of several workers the linear clusters are
placed first (:mod:`pargraph.engine.placement`). Reachability is kept as integer bitsets.
docs/design.md ("Partitioning") describes each step and why.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from pargraph.engine.placement import SECONDS_PER_BYTE, TRANSFER_LATENCY, place, transfer_seconds
from pargraph.graph import Node

#: Seconds one task costs the scheduler and the worker: dask's threaded scheduler and a
#: distributed cluster (its scheduler's per-task work plus a round trip).
TASK_COST_LOCAL = 40e-6
TASK_COST_CLUSTER = 1e-3
#: Groups smaller than this many task costs of work merge into a neighbour. A cluster asks
#: for coarser tasks than its task cost alone says (dask's guidance is ~100 ms there: a
#: task's inputs travel too, and a worker hears of its next task a scheduler round trip after
#: the last one ended); the estimates run above measured times, hence the larger factor.
#: Both values were chosen by measuring the benchmark steps (see the commit history).
DEFAULT_GRAIN = 100.0
DEFAULT_CLUSTER_GRAIN = 200.0
#: A node that depends on values held before the run only and whose estimated work is below
#: this fraction of a task's cost (a view, a slice, a scalar) is computed again by every group
#: that reads it rather than waited for.
FREE_FRACTION = 1 / 8
#: On a cluster, where not copying costs a scheduler round trip and often a transfer: a
#: DataParallel step's loss is computed by every task that reads its gradient, and none
#: waits for another worker's loss task.
FREE_FRACTION_CLUSTER = 1 / 2
#: Seconds of estimated work below which a whole run is one task, locally.
DEFAULT_SINGLE_TASK_BELOW = 1e-3


def estimated_seconds(node: Node) -> float:
    """A rough estimate of a node's numpy time, from its shapes: the primitive's own ``cost``
    (matrix products), nothing for views, else ~1 ns per element read or written plus a call.
    """
    op = node.op
    if op.view:
        return 1e-6
    seconds = op.cost(node) if op.cost is not None else None
    if seconds is not None:
        return seconds
    elements = math.prod(node.shape) + sum(
        math.prod(i.shape) for i in node.inputs if isinstance(i, Node)
    )
    return 2e-6 + elements * 1e-9


def task_cost(remote: bool) -> float:
    return TASK_COST_CLUSTER if remote else TASK_COST_LOCAL


@dataclass(frozen=True)
class Granularity:
    """How coarse a run's tasks are; the execution layer makes it from dask's config
    (``pargraph.fuse``, ``pargraph.single-task-below``, ``pargraph.task-grain``) and from
    where the run goes."""

    remote: bool = False
    workers: int = 1
    fuse: bool = True  # False: one task per node
    single_task_below: float = DEFAULT_SINGLE_TASK_BELOW  # seconds of work: one task
    grain: float = DEFAULT_GRAIN * TASK_COST_LOCAL  # seconds: smaller groups merge
    #: (address, threads) of each worker process that pargraph places the run's nodes on
    #: (:mod:`pargraph.engine.placement`); empty: dask's scheduler places the tasks.
    hosts: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, remote: bool, workers: int, fuse: bool = True,
           single_task_below: float | None = None, grain: float | None = None,
           hosts: tuple[tuple[str, int], ...] = ()) -> Granularity:
        """Defaults scaled to the cost of a task where the run goes."""
        scale = task_cost(remote) / TASK_COST_LOCAL
        return cls(remote, workers, fuse,
                   DEFAULT_SINGLE_TASK_BELOW * scale if single_task_below is None
                   else float(single_task_below),
                   (DEFAULT_CLUSTER_GRAIN if remote else DEFAULT_GRAIN) * task_cost(remote)
                   if grain is None else float(grain) * task_cost(remote), hosts)


LOCAL = Granularity()


def partition(computed: Sequence[Node], granularity: Granularity = LOCAL) -> list[list[Node]]:
    """Groups of ``computed`` (a topological order), each in topological order, whose
    quotient graph is acyclic, for ``granularity.workers`` tasks running at once."""
    return placed_partition(computed, granularity)[0]


def placed_partition(computed: Sequence[Node], granularity: Granularity = LOCAL,
                     outputs: Sequence[Node] = (), work: Sequence[float] | None = None
                     ) -> tuple[list[list[Node]], list[int]]:
    """``partition``, and the worker (index into ``granularity.hosts``) of each group: with
    several hosts, the linear clusters are placed on them (:mod:`pargraph.engine.placement`) before
    coarsening, which then merges only groups of one worker. A node whose work, with all it
    depends on in the run, is next to nothing is copied into each group that reads it (a
    group left with such nodes only goes unless it holds one of the run's ``outputs``): a
    node can be a member of several groups. ``work``: each node's seconds (default: the
    estimates of :func:`estimated_seconds`; a structure's measured runs give their own)."""
    work = list(work) if work is not None else [estimated_seconds(node) for node in computed]
    placed = len(granularity.hosts) > 1
    patience = task_cost(granularity.remote)
    # Copied into their readers at the end, so no group waits for them (none when not fused).
    free_seconds = patience * (FREE_FRACTION_CLUSTER if granularity.remote else FREE_FRACTION)
    groups = _linear_clusters(computed, work, patience,
                              free_seconds if granularity.grain > 0 else -math.inf)
    if placed:
        groups.place(computed, work, [t for _, t in granularity.hosts])
    groups.coarsen(work, granularity.grain, granularity.workers, patience,
                   per_thread=1 if granularity.remote else 2)
    if granularity.grain > 0:
        returned = {id(node) for node in outputs}
        groups.duplicate_sources(computed, work, free_seconds,
                                 {k for k, n in enumerate(computed) if id(n) in returned},
                                 placed=placed)
        if granularity.remote:
            groups.detach_scalars([k for k, n in enumerate(computed)
                                   if id(n) in returned and not n.shape], work,
                                  free_seconds)
    order = groups.in_order()
    return [groups.members(computed, g) for g in order], [groups.worker[g] for g in order]


class _Groups:
    """Groups under construction: members (positions), work, ancestors as bitsets."""

    def __init__(self, size: int) -> None:
        self.of = [0] * size  # position -> group
        self.worker: list[int] = []  # group -> worker (0 unless placed); merges stay on one
        self.placed = False
        self.members_of: list[list[int]] = []
        self.tail: list[int] = []
        self.ancestors: list[int] = []  # bit g set: depends on group g (transitively)
        # The transpose (bit g set: group g depends on this one), kept while coarsening, so
        # that a merge updates the groups below it only, not every group.
        self.descendants: list[int] = []
        self.alive: list[bool] = []
        # Per position: the positions it reads, and when it would finish on unbounded
        # workers (ASAP); set by _linear_clusters, read to estimate when a group can start.
        self.inputs: list[list[int]] = []
        self.finish: list[float] = []
        # Per position: whether it is next to free (see _linear_clusters); whether it is also
        # read by several nodes, each group of which copies it; and those readers.
        self.free: list[bool] = []
        self.copied: list[bool] = []
        self.copied_readers: dict[int, list[int]] = {}

    def new(self, position: int, producers: set[int]) -> None:
        g = len(self.members_of)
        self.members_of.append([position])
        self.tail.append(position)
        self.ancestors.append(self._closure(producers))
        self.alive.append(True)
        self.worker.append(0)
        self.of[position] = g

    def _closure(self, producers: set[int]) -> int:
        bits = 0
        for p in producers:
            bits |= self.ancestors[p] | (1 << p)
        return bits

    def can_join(self, g: int, producers: set[int]) -> bool:
        """Whether a node fed by ``producers`` may join group ``g`` (no cycle through another
        group that depends on ``g``)."""
        return all(p == g or not (self.ancestors[p] >> g) & 1 for p in producers)

    def join(self, position: int, g: int, producers: set[int], as_tail: bool) -> None:
        self.members_of[g].append(position)
        self.of[position] = g
        if as_tail:
            self.tail[g] = position
        added = self._closure(producers - {g}) & ~(1 << g)
        if added & ~self.ancestors[g]:
            self._add_ancestors(g, added)

    def _add_ancestors(self, g: int, added: int) -> None:
        self.ancestors[g] |= added
        bit = 1 << g
        for other, bits in enumerate(self.ancestors):
            if bits & bit:
                self.ancestors[other] = bits | added

    def can_merge(self, small: int, into: int) -> bool:
        """Whether merging group ``small`` into group ``into`` keeps the quotient acyclic:
        no third group lies on a path between them, and both run on one worker."""
        if self.worker[small] != self.worker[into]:
            return False
        return not any((self.ancestors[x] >> b) & 1
                       for a, b in ((small, into), (into, small))
                       for x in _bits(self.ancestors[a] & ~(1 << b)))

    def merge(self, small: int, into: int) -> None:
        self.members_of[into] += self.members_of[small]
        for position in self.members_of[small]:
            self.of[position] = into
        self.members_of[small] = []
        self.alive[small] = False
        small_bit, into_bit = 1 << small, 1 << into
        ancestors, descendants = self.ancestors, self.descendants
        combined = (ancestors[small] | ancestors[into]) & ~(small_bit | into_bit)
        below = (descendants[small] | descendants[into]) & ~(small_bit | into_bit)
        ancestors[into], ancestors[small] = combined, 0
        descendants[into], descendants[small] = below, 0
        for other in _bits(below):
            ancestors[other] = (ancestors[other] & ~small_bit) | into_bit | combined
        for other in _bits(combined):
            descendants[other] = (descendants[other] & ~small_bit) | into_bit | below

    def ready(self, g: int, besides: int = -1) -> float:
        """When group ``g``'s task can start, in the ASAP estimate: its last input from
        another group (not ``besides``) is there."""
        of, finish = self.of, self.finish
        return max((finish[i] for p in self.members_of[g] for i in self.inputs[p]
                    if of[i] != g and of[i] != besides), default=0.0)

    def holds_back(self, first: int, then: int, work_of_first: float) -> float:
        """How long running group ``then`` after group ``first`` in one task would hold back
        ``first``'s work: a task starts when all its inputs are there, so ``first`` would
        wait for ``then``'s other inputs too (a tower's forward merged into the loss that
        reads every tower). At most ``first``'s work: that much would have run meanwhile."""
        return _held_back(self.ready(then, besides=first) - self.ready(first, besides=then),
                          work_of_first)

    def coarsen(self, work: list[float], grain: float, workers: int,
                patience: float = 0.0, per_thread: int = 2) -> None:
        """Merge groups below ``grain`` of work: into the one group they read from (unless,
        run one after another there, they would lose more than the tasks saved), then
        independent ones of one depth into bundles (keeping at least ``per_thread`` tasks per
        worker thread at that depth where there were that many), then what is left into the
        producer it waits on or its consumer, unless that would hold back work by more than
        ``patience`` (a task's cost: what the merge saves).

        Locally two bundles per thread even out the threads' loads. On a cluster one does:
        a worker learns of its next task only when the scheduler has heard that the one
        before finished, a round trip later, so every task more on a worker is a gap."""
        if grain <= 0:
            return
        self.descendants = [0] * len(self.ancestors)
        for g, bits in enumerate(self.ancestors):
            for a in _bits(bits):
                self.descendants[a] |= 1 << g
        totals = [sum(work[p] for p in members) for members in self.members_of]
        # A value every reader copies stays alone: merged, it would hold back what it joins.
        alone = [bool(members) and all(self.free[p] for p in members)
                 and any(self.copied[p] for p in members) for members in self.members_of]

        def absorb(g: int, into: int) -> None:
            self.merge(g, into)
            totals[into] += totals[g]

        tails: dict[int, list[int]] = {}
        for g in range(len(self.members_of)):
            producer = self._only_producer(g) if totals[g] < grain else None
            if producer is not None:
                tails.setdefault(producer, []).append(g)
        for producer, small in tails.items():
            # Joined, the tails run one after another in the producer's task: what that loses
            # (their work, less their time side by side on the workers) must be no more than
            # the tasks it saves. A fan-out (a loss feeding 32 towers) is bundled below.
            total = sum(totals[g] for g in small)
            side_by_side = max(total / max(workers, 1), max(totals[g] for g in small))
            if total - side_by_side > patience * len(small):
                continue
            for g in small:
                # A producer that was itself a small tail may have gone into its own producer.
                # Only if its other inputs come no later than the producer's task could
                # start: the producer's work would wait for them too.
                if self.alive[producer] and self.can_merge(g, producer) and \
                        self.holds_back(producer, g, totals[producer]) <= patience:
                    absorb(g, producer)
        # Placed, each worker bundles its own groups of a depth, for its own threads.
        levels: dict[tuple[int, int], list[int]] = {}
        for g, level in self._depths().items():
            if alone[g]:
                continue
            levels.setdefault((level, self.worker[g]), []).append(g)
        if self.placed:
            workers = max(1, workers // len(set(self.worker)))
        bundles: set[int] = set()
        for level_groups in levels.values():
            small = sorted((g for g in level_groups if totals[g] < grain),
                           key=totals.__getitem__, reverse=True)
            if len(small) < 2:
                continue
            wanted = min(len(level_groups), per_thread * workers) - (len(level_groups) - len(small))
            bins = max(1, min(len(small), max(int(sum(totals[g] for g in small) / grain),
                                              wanted)))
            heads = small[:bins]
            # When each can start; a bundle, when its last member can (one depth: the groups
            # do not read each other).
            start = {g: self.ready(g) for g in small}
            for g in small[bins:]:  # the lightest bin that can take it gets the next group
                for head in sorted(heads, key=totals.__getitem__):
                    # A bundle starts when all its members' inputs are there: members ready
                    # at different times would hold back the earlier ones.
                    held = max(_held_back(start[head] - start[g], totals[g]),
                               _held_back(start[g] - start[head], totals[head]))
                    if held <= patience and self.can_merge(g, head):
                        absorb(g, head)
                        start[head] = max(start[head], start[g])
                        break
            if bins > 1:
                bundles.update(heads)
        for g in range(len(self.members_of)):
            if not self.alive[g] or totals[g] >= grain or alone[g]:
                continue
            for target in self._neighbours(g, bundle=g in bundles):
                delays = totals[g] > TASK_COST_CLUSTER and self._read_elsewhere(target, g)
                producer = (self.ancestors[g] >> target) & 1
                first, then = (target, g) if producer else (g, target)
                delays = delays or self.holds_back(first, then, totals[first]) > patience
                if not delays and self.can_merge(g, target):
                    absorb(g, target)
                    break

    def duplicate_sources(self, computed: Sequence[Node], work: list[float],
                          free_seconds: float, returned: set[int], placed: bool = False) -> None:
        """Task duplication (Kruatrachue & Lewis' duplication scheduling heuristic): a node
        whose work, with all it depends on in the run, is below ``free_seconds`` (a
        DataParallel shard of the batch, a slice, a loss's seed gradient) is computed again in
        every group that reads it, so that no group waits for the task that holds it (and,
        placed, fetches it from another worker). So is a node whose work with what it depends
        on inside its own group is that small (a shard's slice of the loss's gradient, bundled
        with one worker's backward pass: the other worker's backward waited for all of it);
        the copy reads that group's inputs instead, which the reader waited for anyway (placed:
        if they are not much bigger than the node). A group that no other group reads any more
        goes, unless it holds values the run returns. Runs last: the ancestor bitsets are not
        updated."""
        inputs, of = self.inputs, self.of
        # What a copy costs in all: with everything it depends on in the run, or in its group.
        closure_seconds = [0.0] * len(computed)
        local_seconds = [0.0] * len(computed)
        for k in range(len(computed)):
            closure_seconds[k] = work[k] + sum(closure_seconds[p] for p in inputs[k])
            local_seconds[k] = work[k] + sum(local_seconds[p] for p in inputs[k]
                                             if of[p] == of[k])
        free = [seconds <= free_seconds for seconds in closure_seconds]
        copied: dict[int, set[int]] = {}  # group -> positions it computes again
        read = set()  # groups another group reads from
        for k in range(len(computed)):
            g = of[k]
            wanted = [p for p in inputs[k] if of[p] != g]
            while wanted:  # what g reads from other groups, and what its copies read
                p = wanted.pop()
                h = of[p]
                if h == g or p in copied.get(g, ()):
                    continue
                if free[p]:
                    self._copy(p, g, copied, lambda q: True)
                    continue
                if local_seconds[p] <= free_seconds:
                    mine = self._copy(p, g, {}, lambda q, h=h: of[q] == h)
                    outside = {i for q in mine for i in inputs[q] if i not in mine}
                    if not placed or self._fetches_little(computed, g, p, outside):
                        copied.setdefault(g, set()).update(mine)
                        wanted.extend(outside)
                        continue
                read.add(h)
        for g, positions in copied.items():
            self.members_of[g] = self.members_of[g] + sorted(positions)
        copies = set().union(*copied.values()) if copied else set()
        for h, members in enumerate(self.members_of):
            own = [p for p in members if of[p] == h]
            if own and h not in read and all(p in copies and p not in returned for p in own):
                self.members_of[h] = []
                self.alive[h] = False

    def detach_scalars(self, scalars: list[int], work: list[float], free_seconds: float) -> None:
        """On a cluster, a 0-d value the run returns (a loss, for the ``item()`` after the
        step) that takes next to no work from its group's inputs is its own task: the client
        gathers it when it is ready instead of after the group's other work (a worker's whole
        backward pass) and a task picking it out of the group's tuple (a scheduler round trip
        more). What the group's other members read of it they still compute themselves."""
        for k in scalars:
            g = self.of[k]
            members = set(self.members_of[g])
            own = self._within(k, members)
            if len(own) == len(members) or sum(work[q] for q in own) > free_seconds:
                continue
            rest = members - own
            shared: set[int] = set()
            for q in rest:
                for i in self.inputs[q]:
                    if i in own and i not in shared:
                        shared |= self._within(i, own)
            h = len(self.members_of)
            self.members_of.append(sorted(own))
            self.members_of[g] = sorted(rest | shared)
            self.tail.append(k)
            self.ancestors.append(self.ancestors[g])
            self.alive.append(True)
            self.worker.append(self.worker[g])
            for q in own - shared:
                if self.of[q] == g:
                    self.of[q] = h

    def _within(self, k: int, members: set[int]) -> set[int]:
        """``k`` and what it depends on among ``members``."""
        found, stack = set(), [k]
        while stack:
            q = stack.pop()
            if q in members and q not in found:
                found.add(q)
                stack.extend(self.inputs[q])
        return found

    def _fetches_little(self, computed: Sequence[Node], g: int, p: int,
                        inputs: set[int]) -> bool:
        """Whether group ``g``, computing ``p`` from ``inputs`` rather than reading it, fetches
        from other workers at most one transfer's latency worth of bytes more."""
        worker = self.worker[g]
        fetched = [computed[i] for i in inputs if self.worker[self.of[i]] != worker]
        instead = [computed[p]] if self.worker[self.of[p]] != worker else []
        return _nbytes(fetched) <= _nbytes(instead) + TRANSFER_LATENCY / SECONDS_PER_BYTE

    def _copy(self, p: int, g: int, copied: dict[int, set[int]], within) -> set[int]:
        """Add to ``copied[g]`` node ``p`` and what it depends on (``within`` says which),
        except what ``g`` computes itself; returns the positions added."""
        mine, stack = copied.setdefault(g, set()), [p]
        added = set()
        while stack:
            q = stack.pop()
            if self.of[q] != g and q not in mine and within(q):
                mine.add(q)
                added.add(q)
                stack.extend(self.inputs[q])
        return added

    def place(self, computed: Sequence[Node], work: list[float], threads: list[int]) -> None:
        """Put each group on a worker (:func:`pargraph.engine.placement.place`): what a group reads
        from another group costs a transfer when the two are on different workers, and groups
        that read one parameter share a worker."""
        # An ancestor has fewer ancestors than its descendant: a topological order.
        order = sorted(range(len(self.members_of)), key=lambda g: self.ancestors[g].bit_count())
        unit = {g: u for u, g in enumerate(order)}
        reads: list[dict[int, float]] = [{} for _ in order]
        owns: list[set[int]] = [set() for _ in order]
        counted: set[tuple[int, int]] = set()  # (reading group, value): one transfer each
        position = {id(node): k for k, node in enumerate(computed)}
        for k, node in enumerate(computed):
            u = unit[self.of[k]]
            for i in node.input_nodes():
                producer = position.get(id(i))
                if producer is None:
                    if i.requires_grad:
                        owns[u].add(id(i))
                    continue
                if self.copied[producer]:
                    continue  # computed again by each reader
                p = unit[self.of[producer]]
                if p != u and (u, id(i)) not in counted:
                    counted.add((u, id(i)))
                    reads[u][p] = reads[u].get(p, 0.0) + transfer_seconds(i)
        totals = [sum(work[p] for p in self.members_of[g]) for g in order]
        workers = place(totals, [list(r.items()) for r in reads], [list(o) for o in owns],
                        threads)
        for g, u in unit.items():
            self.worker[g] = workers[u]
        self.placed = True

    def _read_elsewhere(self, producer: int, g: int) -> bool:
        """Whether groups on another worker read ``producer`` (not ``g``, one of its readers):
        merging ``g`` into it would make them wait for ``g``'s work too (a batch split that
        every tower reads, on two workers). ``coarsen`` lets a group of next to no work (a
        task's cost) merge all the same."""
        if not self.placed or not (self.ancestors[g] >> producer) & 1:
            return False
        return any(self.alive[c] and self.worker[c] != self.worker[producer]
                   for c in _bits(self.descendants[producer]))

    def _direct_producers(self, g: int) -> int:
        """The groups ``g`` reads from directly, as a bitset: the ancestors no other ancestor
        depends on (only these can merge with ``g`` without a group on a path between)."""
        covered = 0
        for a in _bits(self.ancestors[g]):
            covered |= self.ancestors[a]
        return self.ancestors[g] & ~covered

    def _only_producer(self, g: int) -> int | None:
        """The one group ``g`` reads from directly, if there is exactly one."""
        if not self.alive[g] or not self.ancestors[g]:
            return None
        direct = self._direct_producers(g)
        return direct.bit_length() - 1 if direct and not direct & (direct - 1) else None

    def _depths(self) -> dict[int, int]:
        """Each live group's depth in the quotient graph: groups of one depth are independent.
        An ancestor has fewer ancestors than its descendant, so that count orders them."""
        alive = [g for g in range(len(self.alive)) if self.alive[g]]
        alive.sort(key=lambda g: self.ancestors[g].bit_count())
        depth: dict[int, int] = {}
        for g in alive:
            depth[g] = 1 + max((depth[a] for a in _bits(self.ancestors[g])), default=-1)
        return depth

    def _neighbours(self, g: int, bundle: bool = False) -> list[int]:
        """Where small group ``g`` may go: producer groups, the one it depends on most
        directly first, then consumers. A merge makes readers wait for work they did not
        need: merging ``g`` into a consumer makes every other reader of ``g`` wait for that
        consumer, so only a consumer all of them wait for anyway qualifies. A ``bundle`` of
        branches is parallel work: it goes only where nothing waits for it in addition (not
        into the input slice that other bundles read too)."""
        def readers(a: int) -> list[int]:
            return [c for c in _bits(self.descendants[a]) if self.alive[c]]

        def waited_for(target: int, of: list[int]) -> bool:
            return all(d == target or (self.ancestors[d] >> target) & 1 for d in of)

        # Only direct neighbours can pass can_merge: a group between would make a cycle.
        producers = sorted(_bits(self._direct_producers(g)), reverse=True)
        if bundle:
            return [p for p in producers if waited_for(g, readers(p))]
        mine = readers(g)
        among = sum(1 << c for c in mine)  # a consumer reading another one is not direct
        return producers + [s for s in self._siblings(g) if waited_for(s, mine)] + [
            c for c in mine if not self.ancestors[c] & among and waited_for(c, mine)]

    def _siblings(self, g: int) -> list[int]:
        """The live groups besides ``g`` that read a value ``g`` reads and that every group
        will copy (a tower's slice of the loss's gradient, which its weight's gradient and its
        input's read): those the copies made independent of each other."""
        of, copied = self.of, self.copied
        shared = {i for p in self.members_of[g] for i in self.inputs[p] if copied[i]}
        found = {of[r] for i in shared for r in self.copied_readers[i]} - {g}
        return sorted(h for h in found if self.alive[h] and not self.free[self.tail[h]])

    def in_order(self) -> list[int]:
        """The groups left, each after those it depended on before duplication: a node's own
        group comes before the groups that compute it again (where its value is taken from).
        An ancestor has fewer ancestors than its descendant."""
        return sorted((g for g, members in enumerate(self.members_of) if members),
                      key=lambda g: self.ancestors[g].bit_count())

    def members(self, computed: Sequence[Node], g: int) -> list[Node]:
        return [computed[p] for p in sorted(self.members_of[g])]


def _held_back(late: float, work: float) -> float:
    """How long work that could start now waits in a task whose other inputs come ``late``
    seconds later: at most the work itself, which would have run meanwhile."""
    return min(max(late, 0.0), work)


def _nbytes(nodes: Sequence[Node]) -> int:
    return sum(math.prod(n.shape) * n.dtype.itemsize for n in nodes)


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, lowest first: the groups of an ancestor
    bitset. A wide mask is unpacked by numpy: one bit at a time costs a pass over the whole
    integer per bit, quadratic in a graph of thousands of groups."""
    if mask >> 256:
        raw = np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"), np.uint8)
        yield from np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()
        return
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


#: A node that more than this many nodes of its own phase read is a fan-out to branches.
FAN_OUT = 3


def _linear_clusters(computed: Sequence[Node], work: list[float], patience: float = 0.0,
                     free_seconds: float = -math.inf) -> _Groups:
    """Step 1 of the module's algorithm. A node with inputs from other groups does not join
    its dominant predecessor's chain if they come so late that the chain's task, which starts
    when all its inputs are there, would hold back its earlier work by more than ``patience``
    (DSC's clusters are processors that can start a node at a time; a task cannot). A node
    whose work with all it depends on in the run is at most ``free_seconds`` (a slice of the
    loss's gradient, a scalar product of an input) is copied into each group that reads it
    (``duplicate_sources``), so reading it makes no group wait for another."""
    position = {id(node): k for k, node in enumerate(computed)}
    groups = _Groups(len(computed))
    finish = groups.finish = [0.0] * len(computed)
    inputs_of = groups.inputs = [[position[id(i)] for i in node.input_nodes() if id(i) in position]
                                 for node in computed]
    closure = [0.0] * len(computed)
    for k, inputs in enumerate(inputs_of):
        closure[k] = work[k] + sum(closure[i] for i in inputs)
        finish[k] = max((finish[i] for i in inputs), default=0.0) + work[k]
    free = groups.free = [seconds <= free_seconds for seconds in closure]
    read_by: list[list[int]] = [[] for _ in computed]
    readers = [0] * len(computed)
    late_reader = [False] * len(computed)  # read by a node whose other inputs come later
    for k, (node, inputs) in enumerate(zip(computed, inputs_of)):
        # The latest input, and the latest but that one: what each input's others reach.
        first = max(inputs, key=finish.__getitem__, default=None)
        second = max((finish[j] for j in inputs if j != first), default=0.0)
        for i in inputs:
            if computed[i].phase == node.phase:
                readers[i] += 1
            read_by[i].append(k)
            others = second if i == first else finish[first]
            if others - finish[i] > patience:
                late_reader[i] = True
    copied = groups.copied = [free[k] and len(read_by[k]) > 1 for k in range(len(computed))]
    groups.copied_readers = {k: read_by[k] for k in range(len(computed)) if copied[k]}
    ready: list[float] = []  # per group: when its task can start
    chain_work: list[float] = []
    for k, inputs in enumerate(inputs_of):
        inputs = [i for i in inputs if not copied[i]]
        if not inputs:
            groups.new(k, set())
            ready.append(0.0)
            chain_work.append(work[k])
            continue
        dominant = max(inputs, key=finish.__getitem__)
        producers = {groups.of[i] for i in inputs}
        g = groups.of[dominant]
        if (producers == {g} and groups.tail[g] != dominant
                and work[k] <= FREE_FRACTION * TASK_COST_LOCAL):
            # A cheap side read of a chain (a slice of a node the chain went on from: an LSTM
            # cell's cell-state gradient) stays in the chain, off its tail: a group of its
            # own would make the chain's next task wait for one more task.
            groups.join(k, g, producers, as_tail=False)
            continue
        others = max((finish[i] for i in inputs if groups.of[i] != g), default=0.0)
        # A fan-out ends its chain: its other readers would wait for the rest of the chain.
        # So does a cheap value that starts no chain yet and that a later chain reads too (the
        # sum of two branches, read by the two directions of the next layer): alone, it is
        # copied into each reader, and the later chain does not wait for this one.
        fan_out = readers[dominant] > FAN_OUT or (
            late_reader[dominant] and groups.members_of[g] == [dominant]
            and work[dominant] <= free_seconds)
        held_back = _held_back(others - ready[g], chain_work[g]) > patience
        if (not fan_out and not held_back and groups.tail[g] == dominant
                and groups.can_join(g, producers)):
            groups.join(k, g, producers, as_tail=True)
            ready[g] = max(ready[g], others)
            chain_work[g] += work[k]
        else:
            groups.new(k, producers)
            ready.append(max(finish[i] for i in inputs))
            chain_work.append(work[k])
    return groups
