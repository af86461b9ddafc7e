"""Rewrites: rules that record a cheaper node, with the same numbers, in place of a gradient
node about to be recorded.

A rule belongs to a primitive (``Primitive.rewrite``, set by :func:`rule`): it sees the call's
inputs and attributes and returns the node to record instead, or None to record the call as
it is. Rules apply only while gradients are recorded (a vjp's nodes), never to the forward ops
a user writes. The rules:

- **cross-entropy's backward**: ``log_softmax_backward`` of ``nll_loss_backward``'s gradient
  is one ``nll_log_softmax_backward`` node (two and a temporary otherwise); over logits
  concatenated from row blocks (``DataParallel``'s shards), one per block, so a shard's
  backward starts when its own forward ends;
- **a slice of a concatenation's gradient** (what ``cat``'s vjp hands each part): the part
  itself when the gradient is the concatenation, or the elementwise ops between them again on
  slices (up to :data:`PUSH_DEPTH` nodes), so that no slice of the whole and no join of the
  parts is waited for;
- **the gradients of rows of a tensor** (``x[0]``, ..., ``x[n - 1]``: a recurrent layer's
  time steps; an LSTM cell's state rows): one ``stack`` of them where they tile the tensor,
  else one ``rows_into_zeros``, where the sum of their scatters into zeros of the whole made
  a full-size array per row;
- **the gradients of slabs of a tensor** (``x[..., a:b]`` for slices that tile one
  dimension: attention's heads): one ``cat`` of them, where the sum of their scatters into
  zeros made a full-size array per slab;
- **a weight's gradients from many products** (a recurrent layer's hidden weights, read at
  every time step): the sum of ``linear_weight_grad(g_k, x_k)`` is one
  ``linear_weight_grad`` of the rows of every ``g_k`` and every ``x_k`` concatenated, one
  matrix product where there were one per step and their sum. Not the same bits: BLAS sums
  the steps' rows inside one product instead of product by product (PyTorch's fused RNN
  backward does the same).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pargraph.graph import FORWARD, Node, grad_mode, recording_phase
from pargraph.ops.composites import rows_into_zeros, stacked
from pargraph.ops.core import Primitive, normalize_dim
from pargraph.ops.elementwise import add_n
from pargraph.ops.linalg import linear_weight_grad
from pargraph.ops.nn import (
    log_softmax_backward,
    log_softmax_of,
    nll_log_softmax_backward,
    nll_loss_backward,
)
from pargraph.ops.shapes import cat, index, index_add, reshaped


def rule(op: Primitive) -> Callable[[Callable], Callable]:
    """Make the decorated function ``op``'s rewrite (one per primitive)."""

    def register(function: Callable) -> Callable:
        if op.rewrite is not None:
            raise ValueError(f"{op.name} has a rewrite already")
        op.rewrite = function
        return function

    return register


@rule(log_softmax_backward)
def _cross_entropy_backward(g: Node, result: Node, *, dim: tuple) -> Node | None:
    """One node for nll_loss's gradient followed by log_softmax's, unless the gradient is
    differentiable (``create_graph``), where the pair keeps its vjps."""
    if (recording_phase() == FORWARD or type(g) is not Node or g.op is not nll_loss_backward
            or grad_mode.enabled or not result.inputs):
        return None
    loss_gradient, target, *weight = g.inputs
    attrs = dict(dim=dim, reduction=g.attrs["reduction"], ignore_index=g.attrs["ignore_index"])
    x = result.inputs[0]
    if _row_parts(x, dim, attrs["reduction"]):
        return _cross_entropy_backward_by_parts(x, loss_gradient, target, weight, attrs)
    return nll_log_softmax_backward(result, loss_gradient, target, *weight, **attrs)


@rule(add_n)
def _sum_of_gradients(*parts: Node) -> Node | None:
    """``add_n``'s rules (see the module): slices that tile a tensor, then a weight's
    gradients from many products."""
    if recording_phase() == FORWARD or len(parts) < 2:
        return None
    return (_slices_tiling_a_tensor(*parts) or _slabs_tiling_a_tensor(*parts)
            or _weight_gradients_at_once(*parts))


#: The fewest products whose weight gradients are joined into one (below it, the copies of
#: the rows cost about what the separate products did).
JOIN_PRODUCTS = 4


def _weight_gradients_at_once(*parts: Node) -> Node | None:
    """The ``linear_weight_grad`` parts of a sum as one product of their concatenated rows
    (the other parts added to it as before)."""
    products = [p for p in parts if type(p) is Node and p.op is linear_weight_grad
                and len(p.inputs) == 2 and all(type(i) is Node for i in p.inputs)]
    if len(products) < JOIN_PRODUCTS:
        return None
    first = products[0]
    if any(p.shape != first.shape or p.dtype != first.dtype
           or any(i.dtype != first.dtype for i in p.inputs) for p in products):
        return None
    rows = [reshaped(p.inputs[0], (-1, first.shape[0])) for p in products]
    columns = [reshaped(p.inputs[1], (-1, first.shape[1])) for p in products]
    joined = linear_weight_grad(cat(*rows, dim=0), cat(*columns, dim=0))
    joined_ids = {id(p) for p in products}
    rest = [p for p in parts if id(p) not in joined_ids]
    return add_n(joined, *rest) if rest else joined


def _slices_tiling_a_tensor(*parts: Node) -> Node | None:
    """``add_n`` of ``index_add(g_k, shape, spec=(k,))`` for distinct ``k`` of the first
    dimension: the ``stack`` of the ``g_k`` where every ``k`` has one, else the ``g_k``
    placed in one array of zeros."""
    first = parts[0]
    if type(first) is not Node or first.op is not index_add:
        return None
    shape = first.attrs["shape"]
    by_position: dict[int, Node] = {}
    for part in parts:
        if (type(part) is not Node or part.op is not index_add or len(part.inputs) != 1
                or part.attrs["shape"] != shape or part.dtype != first.dtype):
            return None
        spec = part.attrs["spec"]
        if len(spec) != 1 or not isinstance(spec[0], (int, np.integer)) or \
                isinstance(spec[0], bool):
            return None
        k = int(spec[0]) % shape[0]
        gradient = part.inputs[0]
        if k in by_position or type(gradient) is not Node or gradient.shape != shape[1:] \
                or gradient.dtype != first.dtype:
            return None
        by_position[k] = gradient
    if len(by_position) != shape[0]:
        rows = tuple(sorted(by_position))
        return rows_into_zeros(*(by_position[k] for k in rows), shape=shape, rows=rows)
    return stacked(*(by_position[k] for k in range(shape[0])), dim=0)


def _slab(spec: tuple, shape: tuple) -> tuple[int, int, int] | None:
    """``(dimension, start, stop)`` of a spec that takes one step-1 slice of one dimension
    and the whole of every other (``x[..., a:b]``, ``x[:, a:b]``), or None."""
    if any(i is None or type(i) is not slice for i in spec if i is not Ellipsis) or \
            spec.count(Ellipsis) > 1 or len(spec) - spec.count(Ellipsis) > len(shape):
        return None
    if Ellipsis in spec:
        k = spec.index(Ellipsis)
        spec = spec[:k] + (slice(None),) * (len(shape) - len(spec) + 1) + spec[k + 1:]
    found = None
    for d, (part, n) in enumerate(zip(spec, shape)):
        start, stop, step = part.indices(n)
        if (start, stop, step) == (0, n, 1):
            continue
        if step != 1 or found is not None or start >= stop:
            return None
        found = (d, start, stop)
    return found


def _slabs_tiling_a_tensor(*parts: Node) -> Node | None:
    """``add_n`` of ``index_add(g_k, shape, spec)`` whose specs are slices of one dimension
    that tile it (attention's heads, each a slice of the projections' last dimension): the
    ``cat`` of the ``g_k`` in order, with no array of zeros per part."""
    first = parts[0]
    if type(first) is not Node or first.op is not index_add:
        return None
    shape, slabs = first.attrs["shape"], []
    for part in parts:
        if (type(part) is not Node or part.op is not index_add or len(part.inputs) != 1
                or part.attrs["shape"] != shape or part.dtype != first.dtype
                or type(part.inputs[0]) is not Node or part.inputs[0].dtype != first.dtype):
            return None
        slab = _slab(part.attrs["spec"], shape)
        if slab is None or (slabs and slab[0] != slabs[0][0]):
            return None
        slabs.append(slab + (part.inputs[0],))
    slabs.sort(key=lambda slab: slab[1])
    d = slabs[0][0]
    if slabs[0][1] != 0 or slabs[-1][2] != shape[d] or any(
            a[2] != b[1] for a, b in zip(slabs, slabs[1:])):
        return None
    return cat(*(slab[3] for slab in slabs), dim=d)


@rule(index)
def _slice_of_concatenation(g: Node, *index_values: Node, spec: tuple) -> Node | None:
    """A slice at a concatenation's part boundaries, taken from the part (see the module)."""
    if recording_phase() == FORWARD or type(g) is not Node or index_values:
        return None
    d = len(spec) - 1
    last = spec[-1] if spec else None
    if (type(last) is not slice or last.step is not None or type(last.start) is not int
            or type(last.stop) is not int or d >= len(g.shape)
            or any(type(s) is not slice or s != slice(None) for s in spec[:-1])):
        return None
    rows = (d, last.start, last.stop)
    return _part(g, rows, PUSH_DEPTH) if _from_part(g, rows, PUSH_DEPTH) else None


def _row_parts(x: Node, dim: tuple, reduction: str) -> bool:
    """Whether ``x`` is a concatenation of row blocks (``DataParallel``'s shards) under a
    log_softmax over classes, reduced to one loss."""
    return (x.op is cat and len(x.shape) == 2 and dim == (1,) and reduction != "none"
            and normalize_dim(x.attrs["dim"], 2) == 0
            and all(isinstance(part, Node) for part in x.inputs))


def _cross_entropy_backward_by_parts(x: Node, loss_gradient: Node, target: Node,
                                     weight: list, attrs: dict) -> Node:
    """Cross-entropy's gradient for logits concatenated from row blocks, block by block: each
    block's gradient needs its own logits (log_softmax is computed again for them, row by row
    the same numbers) and the whole target only for the mean's divisor, never the other
    blocks. So a shard's backward starts when its own forward ends, on its own worker,
    instead of waiting for every shard's logits to meet on one. ``cat``'s vjp hands each
    block its part without slicing."""
    parts, start = [], 0
    for part in x.inputs:
        stop = start + part.shape[0]
        parts.append(nll_log_softmax_backward(log_softmax_of(part, dim=attrs["dim"]),
                                              loss_gradient, target, *weight,
                                              rows=(start, stop), **attrs))
        start = stop
    return cat(*parts, dim=0)


#: How many elementwise nodes a slice of a concatenation's gradient is pushed through.
PUSH_DEPTH = 8


def _from_part(g: Node, rows: tuple[int, int, int], depth: int) -> bool:
    """Whether ``g[start:stop]`` along ``d`` (``rows``) can be computed from the part of a
    concatenation it comes from: ``g`` is a concatenation with that part, or elementwise on
    such a node, other operands broadcast along ``d`` or of ``g``'s shape (sliced)."""
    d, start, stop = rows
    if g.op is cat:
        if normalize_dim(g.attrs["dim"], len(g.shape)) != d:
            return False
        edge = 0
        for part in g.inputs:
            if edge == start:
                return (isinstance(part, Node) and edge + part.shape[d] == stop
                        and part.dtype == g.dtype)
            edge += part.shape[d]
        return False
    if depth == 0 or not (g.op.out or g.op is add_n):
        return False
    full = [i for i in g.inputs if isinstance(i, Node) and not _broadcast_along(i, g, d)]
    return (all(i.shape == g.shape for i in full)
            and any(_from_part(i, rows, depth - 1) for i in full))


def _broadcast_along(x: Node, g: Node, d: int) -> bool:
    """Whether operand ``x`` of ``g`` broadcasts along ``g``'s dimension ``d``."""
    axis = d - (len(g.shape) - len(x.shape))
    return axis < 0 or x.shape[axis] == 1


def _part(g: Node, rows: tuple[int, int, int], depth: int = PUSH_DEPTH,
          made: dict | None = None) -> Node:
    """``g[start:stop]`` along ``d`` where :func:`_from_part` says so, computed from the part
    of the concatenation it comes from (elementwise ops again on slices: the same numbers).
    A data-parallel loss's gradient for one shard then reads that shard alone, and the
    shard's backward starts when its own forward ends (DataParallel's outputs, concatenated,
    under an elementwise loss such as ``mse_loss``)."""
    d, start, stop = rows
    if g.op is cat:
        edge = 0
        for part in g.inputs:
            if edge == start:
                return part
            edge += part.shape[d]
    made = {} if made is None else made  # a node read twice is sliced once
    if g in made:
        return made[g]
    inputs = []
    for i in g.inputs:
        if not isinstance(i, Node) or _broadcast_along(i, g, d):
            inputs.append(i)
        elif i in made:
            inputs.append(made[i])
        elif _from_part(i, rows, depth - 1):
            inputs.append(_part(i, rows, depth - 1, made))
        else:  # an operand of the whole's shape from elsewhere (a target): its slice
            made[i] = index(i, spec=(slice(None),) * d + (slice(start, stop),))
            inputs.append(made[i])
    made[g] = g.op(*inputs, **g.attrs)
    return made[g]
