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
    """A value-less stand-in for a leaf the program read at capture (traces read inputs)."""
    return Node.replayed(ops.leaf, (), {}, node.shape, node.dtype, node.phase,
                         node.key_prefix(), node.scope, node.site)


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
