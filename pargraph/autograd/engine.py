"""The backward driver: what ``Tensor.backward()`` and ``pargraph.autograd.grad`` run.

It checks the roots, seeds their gradients, has :mod:`pargraph.autograd.backward_graph` build
the gradient nodes, and hands them to execution: ``backward()`` accumulates them into the
leaves' ``.grad`` and defers the run to the next realization (usually ``optimizer.step()``),
so forward, backward and update become one dask graph; ``grad()`` realizes at once.

It works on the facade's tensors without importing it (the facade sits above), through the
interface it declares, :class:`GradTarget`, which the facade's Tensor implements. Seeds come in
as nodes; the facade converts what the user passed.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from pargraph import ops
from pargraph.autograd.anomaly import anomaly_mode
from pargraph.autograd.backward_graph import gradients
from pargraph.capturing import recording
from pargraph.context import context
from pargraph.engine import execution
from pargraph.graph import Node, user_site
from pargraph.interrupts import interrupts


class GradTarget(Protocol):
    """What the autograd layer needs of a tensor (the facade's Tensor implements it): its
    node, whether it requires grad, its ``.grad``, a way to add a gradient node to that, and
    a way to make a tensor of its kind around a node (what ``grad()``, hooks and custom
    Functions hand the user), and the facade's one way to apply an op."""

    _node: Node
    requires_grad: bool
    grad: Any

    def numel(self) -> int: ...

    @staticmethod
    def _wrap(node: Node) -> Any: ...

    @staticmethod
    def _apply(op: Any, *inputs: Any, **attrs: Any) -> Any:
        """``op`` applied to ``inputs`` (nodes, tensors, numbers), as a new tensor."""
        ...

    def _accumulate_grad(self, g: Node, create_graph: bool) -> Node:
        """``self.grad += g`` (a new ``.grad`` the first time); returns the node it holds."""
        ...


class PostAccumulateHooks:
    """The hooks ``Tensor.register_post_accumulate_grad_hook`` gave leaf tensors, by tensor
    (not by node: a parameter's node changes at every update, its hooks stay). Kept by the
    tensor's identity (a tensor's ``==`` compares values) while it lives."""

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[weakref.ref, list]] = {}

    def of(self, tensor: Any) -> list:
        """The list of ``tensor``'s hooks (made empty the first time)."""
        key = id(tensor)
        found = self.by_id.get(key)
        if found is None or found[0]() is not tensor:
            def forget(ref: weakref.ref, key: int = key) -> None:
                if self.by_id.get(key, (None,))[0] is ref:
                    del self.by_id[key]

            found = self.by_id[key] = (weakref.ref(tensor, forget), [])
        return found[1]

    def run(self, tensor: Any) -> bool:
        """Call ``tensor``'s hooks with it; whether it has any."""
        found = self.by_id.get(id(tensor))
        if found is None or found[0]() is not tensor or not found[1]:
            return False
        for hook in list(found[1]):
            hook(tensor)
        return True


post_accumulate_hooks = context.register("post_accumulate_hooks", PostAccumulateHooks())


def gradient_nodes(outputs: Sequence[Any], seeds: Sequence[Node | None],
                   wrt: set[int] | None, create_graph: bool):
    """Check the roots, seed their gradients (``None``: ones, for a scalar), and build the
    backward graph (not realized): ``(node, gradient node)`` pairs for the nodes whose ids are
    in ``wrt`` (by default the leaves that require grad and the nodes that retain theirs), and
    the region it went through. ``outputs`` are tensors; ``seeds`` are nodes."""
    roots, seed_nodes = [], []
    for k, (out, seed) in enumerate(zip(outputs, seeds)):
        if not out.requires_grad:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        if seed is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            seed = ops.constant(np.ones(out.shape, dtype=out.dtype))
        elif seed.shape != out.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of "
                               f"{seed.shape} and output[{k}] has a shape of {out.shape}.")
        roots.append(out._node)
        seed_nodes.append(seed)
    return gradients(roots, seed_nodes, wrt, create_graph)


def backward(outputs: Sequence[Any], seeds: Sequence[Node | None], retain_graph: bool | None,
             create_graph: bool, inputs: Sequence[Any] | None = None) -> None:
    """Accumulate the gradients of ``outputs`` (tensors) into the ``.grad`` of the leaves and
    of the tensors that retain theirs (``inputs``: of those tensors only); the run is
    deferred to the next realization."""
    retain_graph = create_graph if retain_graph is None else retain_graph
    wrt = None
    if inputs is not None:
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        wrt = {id(x._node) for x in inputs}
    # Every .grad accumulated, or none; grad mode restored; the collector paused meanwhile.
    with interrupts.deferred(), execution.local.collector:
        _backward(outputs, seeds, retain_graph, create_graph, wrt)


def _backward(outputs: Sequence[Any], seeds: Sequence[Node | None], retain_graph: bool,
              create_graph: bool, wrt: set[int] | None) -> None:
    grads, region = gradient_nodes(outputs, seeds, wrt, create_graph)
    updated = []
    for node, g in grads:
        owner = node.owner_tensor()
        if owner is None:
            continue
        held = owner._accumulate_grad(g, create_graph)
        if post_accumulate_hooks.run(owner) and (owner.grad is None or
                                                 owner.grad._node is not held):
            continue  # the hook took the gradient (an optimizer stepped and cleared it)
        updated.append(held)
    if not retain_graph:
        for node in region:
            node.free(keep_value=True)  # a second backward raises now; values go after the run
    # The roots too: the rest of the forward graph runs in the same dask graph as backward,
    # and that graph runs with the next realization (usually optimizer.step()).
    roots = [out._node for out in outputs]
    execution.defer(updated + roots, release=() if retain_graph else region,
                    site=user_site())
    if anomaly_mode.enabled:  # the check's error comes from this call, as in PyTorch
        execution.realize([])


def zero_grads(tensors: Iterable[Any], set_to_none: bool = True) -> None:
    """Reset the ``.grad`` of each tensor: to ``None``, or to zeros in place; all of them, even
    when Ctrl-C is pressed meanwhile."""
    recorder = recording.recorder
    with interrupts.deferred():
        for t in tensors:
            if t.grad is None:
                continue
            if recorder is not None:
                recorder.grad_set(t)
            if set_to_none:
                t.grad = None
            else:
                t.grad.zero_()
