"""Activation checkpointing's side of the backward: the nodes a ``checkpoint`` call computed
are *recomputed* for its backward, so the forward's values inside it need not be kept for
the backward (they go after their last forward reader), as in PyTorch.

``utils.checkpoint`` marks the nodes; the backward graph gives each vjp of a marked node a
twin of it (and of the marked nodes it reads): the same op on the same inputs, computed again
in the backward part of the run. Leaves made inside (constants, random draws) are not
recomputed: their values are kept, so the recomputation uses dropout's mask again, as
PyTorch's ``preserve_rng_state`` does.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from pargraph.context import context
from pargraph.graph import BACKWARD, Node, grad_mode, naming, toposort, uid_mark
from pargraph.ops import after


class Recomputed:
    """The nodes checkpointed functions computed, by call (while their graphs are alive)."""

    def __init__(self) -> None:
        self.call: weakref.WeakKeyDictionary[Node, int] = weakref.WeakKeyDictionary()
        self._calls = itertools.count()

    def mark(self, nodes: list[Node]) -> None:
        """``nodes`` are what one checkpointed call computed."""
        call = next(self._calls)
        for node in nodes:
            self.call[node] = call

    def __bool__(self) -> bool:
        return bool(self.call)

    def __contains__(self, node: Node) -> bool:
        return node in self.call


#: The process's checkpointed nodes.
recomputed = context.register("recomputed", Recomputed())


class Twins:
    """One backward's twins of checkpointed nodes, each made once. A call's twins read the
    values from outside it through ``after(value, trigger)``: so they are computed when the
    backward reaches the call, not as soon as their inputs exist (which would keep both copies
    at once). The trigger is ``g``, the first gradient the backward brought to the call, once
    the vjps of the later calls ``g`` came through are done too: a scheduler that runs the
    gradient's path first (dask's order does) would otherwise recompute every call before
    the weights' gradients read, and free, the earlier recomputations."""

    def __init__(self) -> None:
        self.made: dict[Node, Node] = {}
        self.triggers: dict[int, Node] = {}
        self.waiting: dict[tuple[int, int], Node] = {}
        self.begun = uid_mark()  # the backward's nodes have higher uids
        #: Each twin's call, and per call the gradients made by vjps that read its twins.
        self.call_of: dict[Node, int] = {}
        self.made_by: dict[int, list[Node]] = {}
        #: Gradients and triggers already looked behind: a walk stops there.
        self.walked: set[Node] = set()

    def of(self, node: Node, g: Node) -> Node:
        """``node``'s twin if a checkpointed call computed it, else ``node`` itself; ``g``:
        the gradient the vjp asking for it received."""
        if type(node) is not Node or node not in recomputed:
            return node
        twin = self.made.get(node)
        if twin is None:
            call = recomputed.call[node]
            with naming(BACKWARD, f"{node.op.name}_recomputed", node.scope):
                trigger = self.triggers.get(call)
                if trigger is None:
                    trigger = self.triggers[call] = self._after_later_calls(g)
                inputs = tuple(self._input(i, call, trigger) for i in node.inputs)
                twin = Node(node.op, inputs, node.attrs, node.shape, node.dtype,
                            site=node.site)
            twin.history = node.history and grad_mode.enabled  # create_graph=True
            self.made[node] = twin
            self.call_of[twin] = call
        return twin

    def vjps_made(self, read: tuple, gradients: list[Node]) -> None:
        """Vjps that read ``read`` (twins among them) made ``gradients``: they free the
        twins' calls' values."""
        for call in {self.call_of[t] for t in read if type(t) is Node and t in self.call_of}:
            self.made_by.setdefault(call, []).extend(gradients)

    def _after_later_calls(self, g: Node) -> Node:
        """``g`` once every gradient made so far by the calls whose twins ``g`` was computed
        from is computed: those read, and so free, the twins."""
        walked, begun = self.walked, self.begun
        behind = toposort([g], stop=lambda n: n.uid < begun or (n in walked and n is not g))
        calls = sorted({self.call_of[n] for n in behind if n in self.call_of})
        trigger = g
        for call in calls:
            for gradient in self.made_by.get(call, ()):
                trigger = after(trigger, gradient)
        walked.update((g, trigger))
        return trigger

    def _input(self, value: Any, call: int, trigger: Node) -> Any:
        if type(value) is not Node:
            return value
        if recomputed.call.get(value) == call:
            return self.of(value, trigger)
        waiting = self.waiting.get((id(value), call))
        if waiting is None:
            waiting = self.waiting[(id(value), call)] = after(value, trigger)
        return waiting
