"""The backward driver: what ``Tensor.backward()`` and ``pargraph.autograd.grad`` run.

It checks the roots, seeds their gradients, has :mod:`pargraph.autograd.backward_graph` build
the gradient nodes, and hands them to execution: ``backward()`` accumulates them into the
leaves' ``.grad`` and defers the run to the next realization (usually ``optimizer.step()``),
so forward, backward and update become one dask graph; ``grad()`` realizes at once.

The facade sits above this module (a ``.grad`` is a Tensor); like ``torch.autograd``, which
reaches ``torch.Tensor`` through the package, it is read when a function runs, not imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pargraph import execution, ops
from pargraph.autograd.backward_graph import accumulate, gradients
from pargraph.autograd.mode import no_grad
from pargraph.graph import Node, user_site


def gradient_nodes(outputs: Sequence[Any], grad_outputs: Sequence[Any],
                   wrt: set[int] | None, create_graph: bool):
    """Check the roots, seed their gradients, and build the backward graph (not realized):
    ``(node, gradient node)`` pairs for the nodes whose ids are in ``wrt`` (by default the
    leaves that require grad and the nodes that retain theirs), and the region it went
    through."""
    from pargraph._tensor import as_tensor

    roots, seeds = [], []
    for k, (out, seed) in enumerate(zip(outputs, grad_outputs)):
        if not out.requires_grad:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        if seed is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            seed_node = ops.constant(np.ones(out.shape, dtype=out.dtype))
        else:
            seed_node = as_tensor(seed, dtype=out.dtype)._node
            if seed_node.shape != out.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of "
                                   f"{seed_node.shape} and output[{k}] has a shape of "
                                   f"{out.shape}.")
        roots.append(out._node)
        seeds.append(seed_node)
    return gradients(roots, seeds, wrt, create_graph)


def backward(tensors: Sequence[Any], grad_tensors: Sequence[Any] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (and of the
    tensors that retain theirs), as ``torch.autograd.backward`` does.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    >>> pargraph.autograd.backward([(x * x).sum()]); x.grad
    tensor([2., 4.])
    """
    from pargraph._tensor import Tensor

    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    grad_tensors = [None] * len(tensors) if grad_tensors is None else (
        [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors))
    retain_graph = create_graph if retain_graph is None else retain_graph
    grads, region = gradient_nodes(tensors, grad_tensors, None, create_graph)
    updated = []
    for node, g in grads:
        owner = node.owner_tensor()
        if owner is None:
            continue
        _accumulate_into(owner, g, create_graph, Tensor)
        updated.append(owner.grad._node)
    if not retain_graph:
        for node in region:
            node.free(keep_value=True)  # a second backward raises now; values go after the run
    # The roots too: the rest of the forward graph runs in the same dask graph as backward,
    # and that graph runs with the next realization (usually optimizer.step()).
    roots = [out._node for out in tensors]
    execution.defer(updated + roots, release=() if retain_graph else region,
                    site=user_site())


def _accumulate_into(owner: Any, g: Node, create_graph: bool, tensor_type: type) -> None:
    """``owner.grad += g``: a new tensor the first time; later a fan-in node, in place (the
    same ``.grad`` object, as in PyTorch) unless the gradient itself is differentiable."""
    if owner.grad is None:
        owner.grad = tensor_type(g)
    elif create_graph:
        owner.grad = tensor_type(accumulate([owner.grad._node, g]))
    else:
        with no_grad():
            owner.grad._rebind(accumulate([owner.grad._node, g]))


def zero_grads(tensors: Iterable[Any], set_to_none: bool = True) -> None:
    """Reset the ``.grad`` of each tensor: to ``None``, or to zeros in place."""
    for t in tensors:
        if t.grad is None:
            continue
        if set_to_none:
            t.grad = None
        else:
            t.grad.zero_()
