"""A compiled step's updates of big state, written into the arrays they replace.

A replay computes every new parameter and optimizer state into a new array and lands them
(re-points the tensors) once the whole step has succeeded: that is what leaves an interrupted or
failed step all old or all new. The price is memory: the new values exist beside the old ones
until the landing. For each state of at least ``pargraph.in-place-bytes`` (1 MiB by default;
``None`` turns this off), the program takes the op that makes its new value out of the group
tasks, if the op can write into its input (``Primitive.writes_state``: ``adam_step``,
``sgd_step``...; ``Primitive.out``: an elementwise op), and runs it after every group task has
succeeded, in the calling thread, into the old array, then lands as before. Ctrl-C waits
meanwhile (the caller holds it across these updates and the landing), so an interrupted step is
still all old or all new; an error in a group task still leaves everything old. An update op
itself cannot fail on valid shapes, short of running out of memory for its temporaries, which
could leave the states before it new and the ones after it old.

A state is written in place only when nothing could tell: its tensor's node is held by the
tensor alone and its array by that node alone (no view of it, no array the user took with
``p.detach().numpy()``, no tensor on the old node, no other task's result; ``p.detach()``
follows its parameter, as PyTorch's shares its storage). Otherwise the op makes a new array, as
in the group tasks, and so does every update under anomaly detection, whose checks may raise.
Eager steps do not do this: a step recorded as it goes has no point where everything else is
known to have succeeded.
"""

from __future__ import annotations

import sys
from typing import Any

import dask
import numpy as np

from pargraph.capturing import Symbol
from pargraph.graph import FORWARD, Node
from pargraph.ops import leaf
from pargraph.runtime import Checks, run_node

#: The smallest state, in bytes, a replay updates in its own array.
IN_PLACE_BYTES = 1 << 20

#: Where an update's argument comes from at a replay.
SLOT, RESULT, UPDATE, LITERAL, SYMBOL = range(5)


def in_place_bytes() -> int | None:
    """``pargraph.in-place-bytes``: the smallest state a replay updates in place, or None."""
    value = dask.config.get("pargraph.in-place-bytes", IN_PLACE_BYTES)
    return None if value is None or value is False else int(value)


class InPlaceUpdates:
    """The updates a program runs after its group tasks (see the module's docstring): which
    nodes, where their arguments come from, which state each may overwrite."""

    def __init__(self, updates: list[Node], computed: list[Node], outputs: list[Node],
                 slot_of_leaf: dict[int, int], targets: dict[int, tuple[Any, int]]) -> None:
        chosen = {id(node) for node in updates}
        #: What the group tasks compute, and return: the outputs that are not updates, then
        #: what the updates read of them.
        self.computed = [node for node in computed if id(node) not in chosen]
        returned = [node for node in outputs if id(node) not in chosen]
        known = {id(node) for node in returned}
        for node in updates:
            for i in node.inputs:
                if type(i) is Node and i.value is None and id(i) not in chosen \
                        and id(i) not in known:
                    known.add(id(i))
                    returned.append(i)
        self.plan_outputs = returned
        result = {id(node): k for k, node in enumerate(returned)}
        update = {id(node): j for j, node in enumerate(updates)}
        self.nodes = updates
        #: Per update: its arguments' sources, and (holder, slot) of the state it may write.
        self.arguments = [[_source(i, slot_of_leaf, result, update) for i in node.inputs]
                          for node in updates]
        self.targets = [targets.get(id(node)) for node in updates]
        #: Per output of the program: (from the group tasks?, position).
        self.picks = [(True, result[id(node)]) if id(node) in result
                      else (False, update[id(node)]) for node in outputs]
        self.sole = _sole_references()
        #: States written into their own arrays so far (tests and benchmarks read it).
        self.written = 0

    @classmethod
    def of(cls, computed: list[Node], outputs: list[Node], slot_of_leaf: dict[int, int],
           candidates: list[tuple[Node, Any, Node]]) -> InPlaceUpdates | None:
        """The updates of ``candidates`` (the node a write lands, the holder of its state
        (a tensor, or ``(state, param, name)``), the leaf it replaces) that can write into the
        state they replace; None if there are none or it is turned off."""
        least = in_place_bytes()
        if least is None:
            return None
        landed: dict[int, int] = {}
        for node, _, _ in candidates:
            landed[id(node)] = landed.get(id(node), 0) + 1
        targets: dict[int, tuple[Any, int]] = {}
        replaced: dict[int, int] = {}  # id(update) -> id(the leaf it overwrites)
        for node, holder, old in candidates:
            if not ((node.op.out or node.op.writes_state) and landed[id(node)] == 1
                    and id(old) in slot_of_leaf
                    and any(i is old for i in node.inputs) and old.shape == node.shape
                    and old.dtype == node.dtype and node.value is None
                    and int(np.prod(node.shape)) * node.dtype.itemsize >= least):
                continue
            targets[id(node)] = (holder, slot_of_leaf[id(old)])
            replaced[id(node)] = id(old)
        if not targets:
            return None
        position = {id(node): k for k, node in enumerate(computed)}
        while True:
            # An update another task reads stays a task; one runs after the other updates
            # that read the value it overwrites, or stays a task.
            dropped = {id(i) for node in computed if id(node) not in targets
                       for i in node.inputs if type(i) is Node and id(i) in targets}
            writer = {replaced[key]: key for key in targets}
            for node in computed:
                if id(node) in targets:
                    for i in node.inputs:
                        key = writer.get(id(i)) if type(i) is Node else None
                        if key is not None and key != id(node) and \
                                position[id(node)] > position[key]:
                            dropped.add(key)
            if not dropped:
                break
            for key in dropped:
                del targets[key]
        if not targets:
            return None
        updates = [node for node in computed if id(node) in targets]
        return cls(updates, computed, outputs, slot_of_leaf, targets)

    def run(self, results: list, values: list, symbols: list | None, first: bool) -> list:
        """Run the updates on the group tasks' ``results`` and the call's slot ``values``,
        each into the state it replaces where nothing else holds it (not at the capturing
        call, whose state the capture still holds); returns the program's outputs."""
        made: list = []
        sole = self.sole
        count = sys.getrefcount
        with np.errstate(all="ignore"):
            for node, arguments, target in zip(self.nodes, self.arguments, self.targets):
                out = None
                # Under anomaly detection a result's check may raise: nothing is overwritten.
                if target is not None and not first and Checks.result is None:
                    holder, s = target
                    state = _tensor_of(holder)._node
                    old = values[s]
                    if (count(state) == sole[0] and state.value is old and type(old) is
                            np.ndarray and count(old) == sole[1]):
                        flags = old.flags
                        if flags.owndata and flags.writeable:
                            out = old
                            self.written += 1
                    state = old = None
                args = [results[v] if kind == RESULT else made[v] if kind == UPDATE
                        else values[v] if kind == SLOT else symbols[v] if kind == SYMBOL
                        else v for kind, v in arguments]
                made.append(run_node(node, args, out))
                out = args = None
        return [results[k] if from_tasks else made[k] for from_tasks, k in self.picks]


def _source(value: Any, slot_of_leaf: dict[int, int], result: dict[int, int],
            update: dict[int, int]) -> tuple[int, Any]:
    if type(value) is Node:
        if id(value) in update:
            return UPDATE, update[id(value)]
        if id(value) in result:
            return RESULT, result[id(value)]
        return SLOT, slot_of_leaf[id(value)]
    if type(value) is Symbol:
        return SYMBOL, value.index
    return LITERAL, value


def _tensor_of(holder: Any) -> Any:
    """The tensor holding a state now: ``holder`` itself, or ``state[param][name]`` of an
    optimizer's ``(state, param, name)``."""
    return holder if type(holder) is not tuple else holder[0][holder[1]][holder[2]]


def _held(holder: Any) -> tuple[int, int]:
    """The references to a state's node and to its array, counted as :meth:`run` counts."""
    count = sys.getrefcount
    state = _tensor_of(holder)._node
    values = [state.value]
    old = values[0]
    return count(state), count(old)


_BASELINE: list = []


def _sole_references() -> tuple[int, int]:
    """What :meth:`InPlaceUpdates.run` counts for a state held by nothing else: measured once
    on a tensor of pargraph's own, as interpreters count differently."""
    if not _BASELINE:
        from pargraph._tensor import Tensor

        tensor = Tensor(Node.replayed(leaf, (), {}, (1,), np.dtype("float32"), FORWARD,
                                      "leaf", "", None, value=np.zeros(1, np.float32)))
        _BASELINE[:] = _held(tensor)
    return _BASELINE[0], _BASELINE[1]
