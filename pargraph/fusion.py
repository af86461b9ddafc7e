"""Fusion: which nodes share a dask task.

A dask task costs tens of microseconds on threads and about a millisecond on a cluster, far
more than many nodes' work (a bias add on a small batch, a reshape). So the lowering groups
nodes into tasks; a group runs its members one after another inside one task and returns the
value of its root. The grouping never changes results (the same numpy calls run in the same
order on the same values), only how many tasks dask sees.

The rules, applied from the outputs backwards:

1. A node whose value leaves the run (a requested or kept node) or that has no consumer in
   the run is the root of its own group.
2. A view (reshape, permute, expand, alias; free in numpy) joins the group of every consumer:
   it is recomputed in each, which costs nothing and keeps the consumers independent.
3. A node with exactly one consumer joins that consumer's group if it is cheap (estimated below
   ``pargraph.fuse-below`` seconds), or if the consumer waits for nothing else that is computed
   in this run (then fusing cannot delay anything).
4. Everything else is a root: expensive nodes with several consumers stay separate tasks so that
   independent branches can run at the same time.

And before all that: a graph whose total estimated work is below ``pargraph.single-task-below``
seconds cannot profit from parallelism (the way XLA's CPU runtime runs small graphs
sequentially), so it runs as one single task.

Both thresholds default to 50 µs and 1 ms on local schedulers and to 40 times that on a
cluster, where a task costs about a millisecond.

Costs are rough estimates from shapes: a matmul at ~20 GFLOP/s, other ops at ~1 ns per element
read or written, plus ~2 µs per numpy call.
"""

from __future__ import annotations

import math

import dask

from pargraph.graph import Node

VIEW_OPS = frozenset({"reshape", "permute", "expand", "alias"})
DEFAULT_FUSE_BELOW = 50e-6
DEFAULT_SINGLE_TASK_BELOW = 1e-3
CLUSTER_SCALE = 40.0


def estimated_seconds(node: Node) -> float:
    """A rough estimate of a node's numpy time, from its shapes."""
    name = node.op.name
    if name in VIEW_OPS:
        return 1e-6
    if name == "matmul":
        x, y = node.inputs
        inner = x.shape[-1]
        return 2e-6 + 2 * math.prod(node.shape) * inner / 20e9
    elements = math.prod(node.shape) + sum(
        math.prod(i.shape) for i in node.inputs if isinstance(i, Node)
    )
    return 2e-6 + elements * 1e-9


def thresholds(remote: bool = False) -> tuple[float, float]:
    """``(fuse_below, single_task_below)`` in seconds; 0 turns a rule off.

    A cluster task costs about a millisecond of scheduler and worker time, some 40 times a
    threaded one, so by default a cluster fuses nodes up to 40 times more work."""
    if not dask.config.get("pargraph.fuse", True):
        return 0.0, 0.0
    scale = CLUSTER_SCALE if remote else 1.0
    fuse = dask.config.get("pargraph.fuse-below", None)
    single = dask.config.get("pargraph.single-task-below", None)
    return (float(fuse if fuse is not None else DEFAULT_FUSE_BELOW * scale),
            float(single if single is not None else DEFAULT_SINGLE_TASK_BELOW * scale))


def is_small(computed: list[Node], single_task_below: float) -> bool:
    """Whether the whole run is too little work to profit from parallelism."""
    if len(computed) < 2:
        return False
    total = 0.0
    for node in computed:
        total += estimated_seconds(node)
        if total >= single_task_below:
            return False
    return True


def group(computed: list[Node], outputs: set[int], fuse_below: float) -> list[list[Node]]:
    """Partition (with views possibly in several groups) ``computed`` into tasks.

    Each group lists its members in topological order; its root (last member) is the node
    whose value the task returns. Inputs of a member are either members of the same group,
    roots of other groups, or realized values.
    """
    position = {id(n): k for k, n in enumerate(computed)}
    consumers: dict[int, list[Node]] = {id(n): [] for n in computed}
    for node in computed:
        for i in node.inputs:
            users = consumers.get(id(i))
            if users is not None and (not users or users[-1] is not node):  # x * x: once
                users.append(node)
    groups: list[list[Node]] = []
    member_of: dict[int, list[int]] = {}
    for node in reversed(computed):
        users = consumers[id(node)]
        targets = _joinable_groups(node, users, outputs, member_of, fuse_below)
        if targets is None:
            member_of[id(node)] = [len(groups)]
            groups.append([node])
        else:
            member_of[id(node)] = targets
            for g in targets:
                groups[g].append(node)
    return [sorted(members, key=lambda n: position[id(n)]) for members in groups]


def _joinable_groups(node: Node, users: list[Node], outputs: set[int],
                     member_of: dict[int, list[int]], fuse_below: float) -> list[int] | None:
    """The groups ``node`` joins, or ``None`` if it roots a group of its own."""
    if id(node) in outputs or not users or fuse_below <= 0:
        return None
    if node.op.name in VIEW_OPS:
        return sorted({g for user in users for g in member_of[id(user)]})
    if len(users) != 1:
        return None
    user_groups = member_of[id(users[0])]
    if len(user_groups) != 1:
        return None
    if _waits_only_for(users[0], node) or estimated_seconds(node) < fuse_below:
        return user_groups
    return None


def _waits_only_for(user: Node, node: Node) -> bool:
    """Whether every other input of ``user`` is already realized (so it cannot wait longer)."""
    return all(i is node or i.value is not None for i in user.input_nodes())
