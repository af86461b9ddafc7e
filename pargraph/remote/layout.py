"""Where a run's values live on a cluster: parts of group tuples held on the workers.

On a cluster a kept value is a :class:`HeldPart`: its group's Future and its position in the
tuple. A held part keeps the whole tuple on its worker, so a group whose tuple also carries
values only the step's other tasks read hands its kept parts to a reader on the same worker,
which returns them as well (:func:`return_kept_from_readers`). A worker fetches a task's whole
tuple, so where groups on another worker read a small part of a big tuple, a task on the
producer's worker picks those parts and only they travel
(:func:`send_only_what_other_workers_read`). A value held here of at most ``INLINE_BYTES``,
or that one task reads, rides inside each cluster task that reads it. A 0-d output (a loss)
comes back with the run (:func:`held_results`). What is copied to a second worker
(parameters, optimizer state) is picked out of an update group's tuple, which also holds the
gradients, by a ``<label>_keep`` task on its worker (:func:`keep_copied`): half the bytes
travel.
"""

from __future__ import annotations

import math
import operator
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np
from dask.task_spec import Task, TaskRef

from pargraph.graph import Node
from pargraph.remote.state import clusters
from pargraph.remote.waiting import settled
from pargraph.runtime import EXT, PART, Arg, Lowered, Selection


class HeldPart:
    """A value kept on a cluster as element ``index`` of a group task's tuple result.

    A training step keeps every parameter, gradient and optimizer state; one ``getitem`` task
    per kept value (so that each became a Future of its own) cost the scheduler a task each.
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
        part = self.client.submit(operator.getitem, self.future, self.index, key=key)
        return settled([part], part.result)

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




def tagged(key: str, tag: str) -> str:
    """``key`` (``<name>-<serial>-<session>``) with ``tag`` after its serial number: the
    same name in the dashboard (``dask.utils.key_split``), another key."""
    name, serial, session = key.rsplit("-", 2)
    return f"{name}-{serial}{tag}-{session}"


#: Bytes up to which a value held here travels inside each cluster task that reads it (a
#: copy per task: only indices and scalars, such as those a loss makes every step).
INLINE_BYTES = 8 * 1024


def rides(nbytes: int, one_reader: bool) -> bool:
    """Whether a value held here that a cluster run reads travels inside the tasks that read
    it rather than as a data key of its own (which costs the scheduler a task): a small one
    (a copy per task), or one that a single task reads, whatever its size."""
    return one_reader or nbytes <= INLINE_BYTES


#: Bytes a task picking the parts another worker reads must keep from travelling: it adds a
#: scheduler round trip before its readers, about what 1 MiB costs on a 1 Gbit/s link.
SEND_PARTS_SAVING = 1 << 20


def held_results(graph: dict, keys: list[str], picks: list[tuple[int, int]],
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
    run = f"p{next(clusters.runs)}"  # the picking tasks' keys are this run's own
    scalars = {i: tagged(node.key, run) for i, node in enumerate(outputs) if not node.shape}
    picks, keys = list(picks), list(keys)
    copies = keep_copied(graph, keys, picks, scalars, copied, workers)
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


def keep_copied(graph: dict, keys: list[str], picks: list[tuple[int, int]],
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


def return_kept_from_readers(plan: Any, computed: list[Node], outputs: list[Node]) -> None:
    """On a cluster a kept value is a part of its group's tuple, which stays on its worker,
    with every other value the group exports for the step's other tasks, for as long as
    the part is held (and ``pargraph.replicas`` copies all of it). A group whose kept
    parts can all move does not hold them: a group on the same worker that reads it
    already and exports nothing else the run drops returns them too (passed through, not
    copied), and the first group's tuple goes once its readers ran."""
    kept = {id(n) for n in outputs}
    exports = [[computed[plan.members[g][j]] for j in exported]
               for g, exported in enumerate(plan.exported)]
    dropped = [sum(n.dtype.itemsize * math.prod(n.shape) for n in nodes if id(n) not in kept)
               for nodes in exports]
    holders: dict[int, int] = {}
    for g, refs in enumerate(plan.external):
        for kind, v in refs:
            if (kind == Arg.GROUP and dropped[v] and not dropped[g] and v not in holders
                    and (plan.hosts is None or plan.hosts[v] == plan.hosts[g])):
                holders[v] = g
    for i, (g, e) in enumerate(plan.outputs):
        h = holders.get(g)
        if h is not None:
            part = (PART, (plan.external[h].index((Arg.GROUP, g)), e))
            if part not in plan.returned[h]:
                plan.returned[h].append(part)
            plan.outputs[i] = (h, plan.returned[h].index(part))


def send_only_what_other_workers_read(plan: Any, computed: list[Node]) -> None:
    """A worker fetches a whole task result, but a group's tuple holds everything its
    readers on its own worker need too (a tower's activations, kept for its backward),
    often megabytes where a reader on another worker wants a few kilobytes (the tower's
    logits, for the loss). Where that keeps at least ``SEND_PARTS_SAVING`` bytes from
    travelling, a task on the producer's worker picks the parts the groups on another
    worker read, and they read its result instead: one such task for the groups of a
    worker that the same readers wait for. It runs first on its worker (``urgent``)."""
    nbytes = [[computed[plan.members[g][j]].dtype.itemsize
               * math.prod(computed[plan.members[g][j]].shape) for j in exported]
              for g, exported in enumerate(plan.exported)]
    read: dict[tuple[int, int], set[int]] = {}  # (producer, reader) -> positions read
    for h, group_sources in enumerate(plan.sources):
        for sources in group_sources:
            for kind, v in sources:
                if kind == PART and plan.external[h][v[0]][0] == Arg.GROUP:
                    g = plan.external[h][v[0]][1]
                    if plan.hosts[g] != plan.hosts[h]:
                        read.setdefault((g, h), set()).add(v[1])
    remote: dict[tuple[int, str], set[int]] = {}  # (producer, reader's host) -> readers
    for g, h in read:
        remote.setdefault((g, plan.hosts[h]), set()).add(h)
    bundles: dict[tuple[str, str, frozenset], list[int]] = {}
    for (g, host), readers in sorted(remote.items()):
        wanted = set().union(*(read[g, h] for h in readers))
        saved = sum(nbytes[g]) - sum(nbytes[g][e] for e in wanted if e < len(nbytes[g]))
        if saved >= SEND_PARTS_SAVING:
            bundles.setdefault((plan.hosts[g], host, frozenset(readers)), []).append(g)
    for (_, _, readers), producers in bundles.items():
        picks: list[tuple[int, int]] = []
        position: dict[tuple[int, int], int] = {}
        for p, g in enumerate(producers):
            for e in sorted(set().union(*(read[g, h] for h in readers))):
                position[g, e] = len(picks)
                picks.append((p, e))
        s = len(plan.selections)
        plan.selections.append((producers, picks))
        for h in readers:
            _read_from_selection(plan, h, s, producers, position)


def _read_from_selection(plan: Any, h: int, s: int, producers: list[int],
                         position: dict[tuple[int, int], int]) -> None:
    """Group ``h`` reads selection ``s`` in place of the tuples of ``producers``."""
    refs = plan.external[h]
    slots = {k: g for k, (kind, g) in enumerate(refs) if kind == Arg.GROUP and g in producers}
    k_new = min(slots)
    refs[k_new] = (Arg.SELECTION, s)
    # The other producers' argument slots go: the arguments after them move up.
    kept = [k for k in range(len(refs)) if k == k_new or k not in slots]
    renumber = {k: j for j, k in enumerate(kept)}
    plan.external[h] = [refs[k] for k in kept]

    def remapped(source: tuple) -> tuple:
        kind, v = source
        if kind == PART and v[0] in slots:
            return PART, (renumber[k_new], position[slots[v[0]], v[1]])
        if kind == PART:
            return PART, (renumber[v[0]], v[1])
        if kind == EXT:
            return EXT, renumber[v]
        return source

    plan.sources[h] = [[remapped(source) for source in sources]
                       for sources in plan.sources[h]]
    plan.returned[h] = [remapped(r) if type(r) is tuple else r for r in plan.returned[h]]
