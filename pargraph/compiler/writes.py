"""Where a compiled step's values come from and go: its slot kinds, the writes a capture
recorded (tensors rebound, ``.grad``, optimizer state), the optimizers it stepped, and landing
a replay's results on the tensors."""

from __future__ import annotations

import functools
import sys
import weakref

import numpy as np

from pargraph import ops
from pargraph._tensor import SharedData, Tensor
from pargraph.compiler.record import Record
from pargraph.graph import (
    FORWARD,
    REPLACED_OUTRIGHT,
    Node,
    keep_hooks,
)


class Writes:
    """What the captured call leaves behind: tensors it rebound, ``.grad`` it set, optimizer
    state and module buffers it replaced, and the tensors it returns."""

    def __init__(self, capture: Record, result: list) -> None:
        grads = {id(before) for _, before, _ in capture.grads.values() if before is not None}
        #: (tensor, node): the tensor holds the node's value after each call (a ``.grad`` is
        #: found through its parameter, below)
        self.tensors = [(t, t._node) for t, _ in capture.rebinds.values()
                        if not isinstance(t, SharedData) and id(t) not in grads]
        #: (param, final grad node or None, whether the grad tensor is the one from before)
        self.grads = []
        for p, before, _ in capture.grads.values():
            after = p.grad
            self.grads.append((p, after._node if after is not None else None,
                               after is not None and after is before))
        self.states = []  # (optimizer, param, name, node)
        for record in capture.optimizers.values():
            for p, name in record.writes.values():
                value = record.optimizer.state[p][name]
                self.states.append((record.optimizer, p, name, value._node))
        self.buffers = []  # (module, name, node or None)
        for module, name, _ in capture.buffers.values():
            value = module._buffers.get(name)
            self.buffers.append((module, name, value._node if value is not None else None))
        #: (module, name, node): a plain attribute the call set to a tensor
        self.attributes = []
        for module, name, _ in capture.module_attributes.values():
            value = module.__dict__.get(name)
            if isinstance(value, Tensor):
                self.attributes.append((module, name, value._node))
        self.results = [(k, v._node) for k, v in enumerate(result) if isinstance(v, Tensor)]

    def nodes(self) -> list[Node]:
        found = [node for _, node in self.tensors]
        found += [node for *_, node in self.attributes]
        found += [node for _, node, _ in self.grads if node is not None]
        found += [node for *_, node in self.states]
        found += [node for *_, node in self.buffers if node is not None]
        found += [node for _, node in self.results]
        return found


#: Slot kinds: where a leaf of the program comes from at each call.
ARGUMENT, TENSOR, GRAD, STATE, BUFFER, DRAW, CONSTANT = range(7)


def leaf_origins(capture: Record) -> dict[int, tuple]:
    """Where the leaves a capture replaced or drew come from at each call, by node id: a
    tensor it rebound (its old node), a ``.grad``, optimizer state or a buffer it replaced,
    and its ``k``-th random draw ``(DRAW, k)``. The first origin found wins."""
    origin: dict[int, tuple] = {}
    for p, _, node in capture.grads.values():
        if node is not None:
            origin.setdefault(id(node), (GRAD, p))
    for tensor, old in capture.rebinds.values():
        origin.setdefault(id(old), (TENSOR, tensor))
    for record in capture.optimizers.values():
        for node, p, name in record.reads.values():
            origin.setdefault(id(node), (STATE, record.optimizer, p, name))
    for module, name, before in capture.buffers.values():
        if before is not None:
            origin.setdefault(id(before._node), (BUFFER, module, name))
    for k, (node, _) in enumerate(capture.draws.values()):
        origin.setdefault(id(node), (DRAW, k))
    return origin


def leaf_slot(node: Node, capture: Record, origins: dict[int, tuple]) -> tuple:
    """The slot of a leaf ``node`` the captured call read: the call's argument, its origin
    (:func:`leaf_origins`), the tensor that held it before the capture began, or else a
    constant ``(CONSTANT, node)``."""
    position = capture.argument_nodes.get(id(node))
    if position is not None:
        return (ARGUMENT, position)
    found = origins.get(id(node))
    if found is None and node.uid < capture.mark:
        owner = node.owner_tensor()
        if owner is not None and owner._node is node or isinstance(owner, SharedData):
            found = (TENSOR, owner)
    return found if found is not None else (CONSTANT, node)


def slot_node(slot: tuple, flat: list) -> Node | str:
    """The node a slot of kind ARGUMENT, TENSOR, GRAD, STATE or BUFFER holds at this call,
    ``flat`` being the call's arguments; or what is missing, as a guard's failure."""
    kind = slot[0]
    if kind == ARGUMENT:
        return flat[slot[1]]._node
    if kind == TENSOR:
        return slot[1]._node
    if kind == GRAD:
        grad = slot[1].grad
        return "which parameters have a .grad" if grad is None else grad._node
    if kind == STATE:
        try:
            return slot[1].state[slot[2]][slot[3]]._node
        except (KeyError, AttributeError):
            return f"{type(slot[1]).__name__}'s state"
    buffer = slot[1]._buffers.get(slot[2])
    return f"buffer {slot[2]}" if buffer is None else buffer._node


def land(tensor: Tensor, node: Node) -> None:
    """Point ``tensor`` at ``node`` (a new leaf): what an optimizer's commit does, without its
    checks (the shapes and dtypes are the program's own)."""
    old = tensor._node
    old.overwritten = REPLACED_OUTRIGHT
    keep_hooks(old, node)
    tensor._node = node
    node.owner = weakref.ref(tensor)


@functools.cache
def reference_baseline() -> tuple[int, int]:
    """What ``sys.getrefcount(tensor._node)`` says of a leaf only its tensor refers to, and
    ``sys.getrefcount(param.grad)`` of a ``.grad`` only its parameter refers to: measured
    once, the way :meth:`Program._land` asks, as interpreters count differently."""
    param = Tensor(Node.replayed(ops.leaf, (), {}, (), np.dtype("float32"), FORWARD, "leaf",
                                 "", None, value=np.zeros(())))
    param.grad = Tensor(Node.replayed(ops.leaf, (), {}, (), np.dtype("float32"), FORWARD,
                                      "leaf", "", None, value=np.zeros(())))
    return sys.getrefcount(param._node), sys.getrefcount(param.grad)


def placeholder(node: Node) -> Node:
    """A value-less stand-in for a leaf the program read at capture (traces read inputs, and
    a forecast's placement reads ``requires_grad``: the parameters)."""
    made = Node.replayed(ops.leaf, (), {}, node.shape, node.dtype, node.phase,
                         node.key_prefix(), node.scope, node.site)
    made.requires_grad = node.requires_grad
    return made


def slot_name(slot: tuple) -> str:
    kind = slot[0]
    if kind == ARGUMENT:
        return f"argument {slot[1]}"
    if kind == GRAD:
        return "a .grad"
    if kind == STATE:
        return f"the optimizer's {slot[3]}"
    if kind == BUFFER:
        return f"buffer {slot[2]}"
    return "a tensor the function reads"
