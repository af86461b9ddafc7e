"""Composite ops: compositions of primitives (mean, var, logsumexp, ...) that need no rule
of their own."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph.graph import Node
from pargraph.ops.core import (
    HALVES,
    ShapeError,
    _reduced_shape,
    _same_float,
    float_dtype,
    is_floating,
    normalize_dim,
    normalize_dims,
    primitive,
    result_dtype,
)
from pargraph.ops.elementwise import (
    add,
    cast,
    div,
    exp,
    gt,
    isinf,
    log,
    mul,
    stop_gradient,
    sub,
    where,
)
from pargraph.ops.reductions import amax
from pargraph.ops.shapes import _check_indices, any_outside, index, reshape, shown_as, sum_


def _count(x: Node, dims: tuple) -> int:
    return math.prod(x.shape[d] for d in dims)


def in_float32(composite: Callable) -> Callable:
    """A reduction of a half-precision tensor computed in float32 and rounded once at the
    end, as PyTorch accumulates them (the mean of 1,000 values of 100.0 is 100, not inf)."""

    def reduction(x: Node, *args: Any, **kwargs: Any) -> Node:
        if x.dtype not in HALVES:
            return composite(x, *args, **kwargs)
        out = composite(cast(x, dtype=np.dtype(np.float32)), *args, **kwargs)
        rounded = cast(out, dtype=x.dtype)
        rounded.grad_name = out.grad_name
        return rounded

    reduction.__name__ = reduction.__qualname__ = composite.__name__
    reduction.__doc__ = composite.__doc__
    return reduction


@in_float32
def mean(x: Node, dim=None, keepdim=False) -> Node:
    dims = normalize_dims(dim, len(x.shape))
    out = div(sum_(x, dim=dims, keepdim=keepdim), _count(x, dims))
    return shown_as(out, "MeanBackward0" if dim is None else "MeanBackward1")


@in_float32
def var(x: Node, dim=None, correction=1, keepdim=False) -> Node:
    dims = normalize_dims(dim, len(x.shape))
    centered = sub(x, mean(x, dims, keepdim=True))
    dof = max(_count(x, dims) - correction, 0)
    out = div(sum_(mul(centered, centered), dim=dims, keepdim=keepdim), dof)
    return shown_as(out, "VarBackward0")


@in_float32
def std(x: Node, dim=None, correction=1, keepdim=False) -> Node:
    return root_of_variance(var(x, dim, correction=correction, keepdim=keepdim))


@primitive("root_of_variance", _same_float, grad_name="StdBackward0")
def root_of_variance(v):
    """``sqrt`` of a variance: its gradient is 0 where the deviation is 0 (PyTorch's
    ``std_backward``), where sqrt's would be nan (a constant input)."""
    return np.sqrt(v)


root_of_variance.defvjp(lambda g, out, v: where(gt(out, 0), div(g, mul(out, 2.0)), 0.0))


@in_float32
def logsumexp(x: Node, dim, keepdim=False) -> Node:
    """Stable: the max is subtracted first; it carries no gradient since its terms cancel.
    An infinite max is not subtracted (a row of -inf gives -inf, as in PyTorch, not nan)."""
    dims = normalize_dims(dim, len(x.shape))
    shift = amax(x, dim=dims, keepdim=True)
    shift = stop_gradient(where(isinf(shift), 0.0, shift))
    total = log(sum_(exp(sub(x, shift)), dim=dims, keepdim=True))
    out = add(total, shift)
    out = out if keepdim else reshape(out, shape=_reduced_shape(x.shape, dims, False))
    return shown_as(out, "LogsumexpBackward0")


def _floating(x: Node) -> Node:
    """``x``, cast to the float dtype PyTorch would compute in if it is not a float."""
    return x if is_floating(x.dtype) or x.dtype.kind == "c" else cast(x, dtype=float_dtype(x.dtype))


def _class_weights(target, weight: tuple, ignore_index: int, dtype, classes: int) -> tuple:
    """Per target: its class (0 where ignored) and its weight (0 where ignored); ``None`` for
    weights when all are one (no ``weight``, nothing ignored): the common case stays cheap.
    A target outside ``[0, classes)`` that is not ignored raises, as in PyTorch."""
    if not 0 <= ignore_index < classes and not any_outside(target, classes):
        # Every target is a class, so none is ignore_index (-100 by default): one pass.
        return target, (weight[0][target].astype(dtype, copy=False) if weight else None)
    ignored = target == ignore_index
    some_ignored = ignored.any()
    _check_indices(target[~ignored] if some_ignored else target, classes, "IndexError",
                   "Target {index} is out of bounds.")
    if not weight and not some_ignored:
        return target, None
    classes = np.where(ignored, 0, target)
    weights = weight[0][classes] if weight else np.ones(classes.shape, dtype)
    return classes, np.where(ignored, 0, weights).astype(dtype, copy=False)


def _picked_gradient(g, target, weight: tuple, shape: tuple, reduction: str,
                     ignore_index: int, rows: tuple[int, int] | None = None) -> np.ndarray:
    """nll_loss's gradient, for the targets ``target[start:stop]`` if ``rows`` is given (the
    mean still divides by the whole target's weight)."""
    classes, weights = _class_weights(target, weight, ignore_index, g.dtype, shape[-1])
    scale = -g
    if reduction == "mean":
        total = classes.size if weights is None else weights.sum()
        # Every target ignored: no class gets a gradient (PyTorch's zeros), not -g / 0.
        scale = scale / total if total else np.zeros_like(scale)
    if rows is not None:
        classes = classes[rows[0]:rows[1]]
        weights = None if weights is None else weights[rows[0]:rows[1]]
    if weights is not None:
        scale = scale * weights
    out = np.zeros(shape, g.dtype)
    if len(shape) == 1:
        out[classes] = scale
    else:
        out[np.arange(shape[0]), classes] = scale
    return out


def squeeze(x: Node, dim=None) -> Node:
    dims = normalize_dims(dim, len(x.shape))
    shape = tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1))
    return shown_as(reshape(x, shape=shape), "SqueezeBackward0" if dim is None else
                    "SqueezeBackward1")


def unsqueeze(x: Node, dim: int) -> Node:
    d = normalize_dim(dim, len(x.shape) + 1)
    return shown_as(reshape(x, shape=x.shape[:d] + (1,) + x.shape[d:]), "UnsqueezeBackward0")


def flatten(x: Node, start_dim=0, end_dim=-1) -> Node:
    if not x.shape:
        return reshape(x, shape=(1,))
    a, b = normalize_dim(start_dim, len(x.shape)), normalize_dim(end_dim, len(x.shape))
    return reshape(x, shape=x.shape[:a] + (math.prod(x.shape[a:b + 1]),) + x.shape[b + 1:])


def stack(xs: list[Node], dim=0) -> Node:
    if not xs:
        raise RuntimeError("stack: expected a non-empty sequence of tensors")
    return stacked(*xs, dim=normalize_dim(dim, len(xs[0].shape) + 1))


def _stack_shape(*xs, dim):
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            raise ShapeError(f"expects each tensor to be equal size, but got {xs[0].shape} and "
                             f"{x.shape}")
    return xs[0].shape[:dim] + (len(xs),) + xs[0].shape[dim:], result_dtype(*xs)


@primitive("stack", _stack_shape, grad_name="StackBackward0")
def stacked(*xs, dim):
    """One node for the whole stack (unsqueezing each input and a cat made 2n + 1), whose
    backward is one view of the gradient per input."""
    return np.stack(xs, axis=dim)


stacked.defvjp_of_many(lambda g, out, positions, *xs, dim: [
    index(g, spec=(slice(None),) * dim + (k,)) for k in positions])


def _rows_shape(*gs, shape, rows):
    return tuple(shape), result_dtype(*gs)


@primitive("rows_into_zeros", _rows_shape, grad_name="IndexBackward0")
def rows_into_zeros(*gs, shape, rows):
    """Zeros of ``shape`` with ``gs[k]`` at row ``rows[k]`` of the first dimension: the sum
    of the gradients of some of a tensor's rows (``stack`` where every row has one), one
    array where each gradient's scatter made a full-size one."""
    out = np.zeros(shape, dtype=np.result_type(*gs))
    for g, row in zip(gs, rows):
        out[row] = g
    return out


rows_into_zeros.defvjp_of_many(lambda g, out, positions, *gs, shape, rows: [
    index(g, spec=(rows[k],)) for k in positions])


def split(x: Node, split_size_or_sections, dim=0) -> list[Node]:
    d = normalize_dim(dim, len(x.shape))
    length = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got "
                               f"split_size={step}")
        if step == 0 and length != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {length}")
        step = max(step, 1)
        sizes = [min(step, length - s) for s in range(0, length, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != length:
            raise RuntimeError(f"split: sizes {sizes} do not add up to {length}, "
                               f"the size of dimension {d}")
    pieces, start = [], 0
    for size in sizes:
        pieces.append(index(x, spec=(slice(None),) * d + (slice(start, start + size),)))
        start += size
    return pieces


def chunk(x: Node, chunks: int, dim=0) -> list[Node]:
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    length = x.shape[normalize_dim(dim, len(x.shape))]
    return split(x, max(-(-length // chunks), 1), dim)
