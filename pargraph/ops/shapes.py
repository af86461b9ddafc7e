"""Shapes and indexing: views (reshape, permute, expand), indexing, gathering and
scattering, concatenation, padding, and the graph helpers that reshape gradients; and the
sum, the adjoint of broadcasting (an expand's gradient is a sum, a sum's an expand), so that
this family stands on ``core`` (and the fused gather and scatter of ``kernels``) alone and the
others on it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph.graph import Node
from pargraph.ops.core import (
    _INT64,
    HALVES,
    ShapeError,
    _reduction,
    _same,
    broadcast_shapes,
    normalize_dim,
    primitive,
    result_dtype,
    shape_of,
)
from pargraph.ops.kernels import kernels


def unbroadcast(g: Node, shape: tuple) -> Node:
    """Sum ``g`` down to ``shape``: the vjp of numpy broadcasting."""
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    kept = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if not kept:  # only leading dimensions go: one sum does it
        return sum_(g, dim=tuple(range(lead)), keepdim=False)
    return reshape(sum_(g, dim=tuple(range(lead)) + kept, keepdim=True), shape=shape)


def reshaped(x: Node, shape: tuple) -> Node:
    """``x`` with ``shape``: no node at all when it already has it (for vjps)."""
    return x if x.shape == tuple(shape) else reshape(x, shape=tuple(shape))


def swap_last(x: Node) -> Node:
    """``x`` with its last two dimensions swapped, for vjps: the transpose of a transpose is
    the original node, not a second permute."""
    if x.op is permute and x.inputs:  # a realized node may have had its inputs cut
        dims = x.attrs["dims"]
        combined = dims[:-2] + (dims[-1], dims[-2])
        if combined == tuple(range(len(combined))):
            return x.inputs[0]
    return transpose(x, -2, -1)


@primitive("flip", _same, view=True)
def flip(x, dims):
    return np.flip(x, dims)


flip.defvjp(lambda g, out, x, dims: flip(g, dims=dims))


def _along_shape(x, index, dim):
    return index.shape, x.dtype


def _along_grid(index: np.ndarray, dim: int) -> tuple:
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


@primitive("take_along_dim", _along_shape, grad_name="GatherBackward0")
def take_along_dim(x, index, dim):
    found = kernels.take_along(x, index, dim)
    return np.take_along_axis(x, index, axis=dim) if found is None else found


take_along_dim.defvjp(
    lambda g, out, x, index, dim: put_along_dim(g, index, shape=x.shape, dim=dim), None
)


@primitive("put_along_dim", lambda g, index, shape, dim: (shape, g.dtype))
def put_along_dim(g, index, shape, dim):
    """Scatter-add ``g`` into zeros of ``shape`` at ``index`` along ``dim``, in order (as
    PyTorch's kernels add): through flat positions, numpy's fast one-dimensional
    ``np.add.at``, where ``g`` has the other dimensions of ``shape``."""
    g = np.asarray(g)
    added = kernels.put_along(g, index, shape, dim)
    if added is not None:
        return added
    if any(g.shape[k] != shape[k] for k in range(len(shape)) if k != dim):
        out = np.zeros(shape, dtype=g.dtype)
        np.add.at(out, _along_grid(index, dim), g)
        return out
    moved = np.moveaxis(np.broadcast_to(index, g.shape), dim, -1)
    if moved.size and (moved.min() < -shape[dim] or moved.max() >= shape[dim]):
        raise IndexError(f"index out of bounds for axis {dim} with size {shape[dim]}")
    moved = np.where(moved < 0, moved + shape[dim], moved)  # counted from the end, per row
    out = np.zeros(moved.shape[:-1] + (shape[dim],), dtype=g.dtype)  # ``dim`` last
    rows = np.arange(math.prod(moved.shape[:-1])).reshape(moved.shape[:-1] + (1,))
    np.add.at(out.reshape(-1), (moved + rows * shape[dim]).ravel(),
              np.moveaxis(g, dim, -1).ravel())
    return np.ascontiguousarray(np.moveaxis(out, -1, dim))


put_along_dim.defvjp(lambda g, out, g_in, index, shape, dim: gather(g, index, dim))


def _scatter_shape(x, index, src, dim):
    if isinstance(src, Node) and src.shape != index.shape:
        raise ShapeError(f"src of shape {src.shape} does not match index of shape "
                         f"{index.shape}")
    return x.shape, x.dtype


@primitive("scatter", _scatter_shape, grad_name="ScatterBackward0")
def scatter(x, index, src, dim):
    """``x`` with ``src`` written at ``index`` along ``dim`` (``src``: same shape as ``index``,
    or a number); where an index repeats, one of its writes wins, as in PyTorch."""
    out = np.array(x, copy=True)
    out[_along_grid(index, dim)] = src
    return out


_INDEX_ERRORS = {"IndexError": IndexError, "RuntimeError": RuntimeError}


#: Each signed integer dtype's unsigned twin, for :func:`any_outside`.
_UNSIGNED = {np.dtype(t): np.dtype(t).str.replace("i", "u")
             for t in (np.int8, np.int16, np.int32, np.int64)}


def any_outside(index: np.ndarray, size: int) -> bool:
    """Whether a value of ``index`` is outside ``[0, size)``, in one pass: seen unsigned, a
    negative value is beyond any size."""
    unsigned = _UNSIGNED.get(index.dtype)
    return bool(((index if unsigned is None else index.view(unsigned)) >= size).any())


def _check_indices(index: np.ndarray, size: int, error: str, message: str | tuple) -> None:
    """PyTorch's bounds check of an index argument: every value in ``[0, size)``, negative
    ones included (they would wrap in numpy). ``message``: one text, or one for a value
    below 0 and one for a value too large; ``{index}`` stands for the first bad value."""
    if not index.size or not any_outside(index, size):
        return
    low, high = index.min(), index.max()
    if isinstance(message, tuple):
        message = message[0] if low < 0 else message[1]
    bad = low if low < 0 else high
    raise _INDEX_ERRORS[error](message.format(index=int(bad)))


@primitive("check_index", lambda index, *, size, error, message: (index.shape, index.dtype))
def check_index(index, *, size, error, message):
    """``index`` itself once its values passed :func:`_check_indices`: where an op's index
    is computed by the graph, the check runs in the task, named and pointing at the line."""
    _check_indices(index, size, error, message)
    return index


@primitive("check_values", lambda x, *, test, message: (x.shape, x.dtype))
def check_values(x, *, test, message):
    """``x`` itself once ``test(x)`` (elementwise booleans) held everywhere, else a
    ``ValueError`` with ``message`` and the values: a check whose values the graph computes
    runs in the task, named and pointing at the line that asked for it."""
    if not np.all(test(x)):
        raise ValueError(f"{message}:\n{x}")
    return x


check_values.defvjp(lambda g, out, x, *, test, message: g)  # the identity, checked


def checked_values(x: Node, test: Any, message: str) -> Node:
    """``x`` checked by ``test``: at once when its value is here, else in the task that
    computes it (see :func:`check_values`)."""
    if isinstance(x.value, np.ndarray):
        check_values.forward(x.value, test=test, message=message)
        return x
    return check_values(x, test=test, message=message)


def checked_index(index: Node, size: int, error: str, message: str | tuple, op: str) -> Node:
    """``index`` bounds-checked for ``op``, which refuses negative and too large values: at
    once when its value is here (the user's line raises), else in the task that reads it."""
    message = tuple(f"{op}: {text}" for text in message) if isinstance(message, tuple) \
        else f"{op}: {message}"
    if isinstance(index.value, np.ndarray):
        _check_indices(index.value, size, error, message)
        return index
    return check_index(index, size=size, error=error, message=message)


def out_of_bounds(dim: int, size: int) -> str:
    """gather's and scatter's message, as PyTorch words it."""
    return f"index {{index}} is out of bounds for dimension {dim} with size {size}"


def gather(x: Node, where: Node, dim: int) -> Node:
    """PyTorch's gather: ``take_along_dim`` of ``x`` cut to ``where``'s size in the other
    dimensions first (an index may be smaller than the tensor there)."""
    if any(n != m for d, (n, m) in enumerate(zip(x.shape, where.shape)) if d != dim):
        x = index(x, spec=tuple(slice(None) if d == dim else slice(0, n)
                                for d, n in enumerate(where.shape)))
    return take_along_dim(x, where, dim=dim)


scatter.defvjp(
    lambda g, out, x, index, src, dim: scatter(g, index, 0.0, dim=dim),
    None,
    lambda g, out, x, index, src, dim: gather(g, index, dim),
)


def _argsort_shape(x, dim, descending, stable):
    return x.shape, _INT64


@primitive("argsort", _argsort_shape)
def argsort(x, dim, descending, stable):
    """Stable sort order along ``dim`` (NaN last ascending, first descending, as PyTorch)."""
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    flipped = np.argsort(np.flip(x, dim), axis=dim, kind="stable")
    return x.shape[dim] - 1 - np.flip(flipped, dim)  # ties keep their order, as ascending


@primitive("mode_index", lambda x, dim: (x.shape[:dim] + (1,) + x.shape[dim + 1:], _INT64))
def mode_index(x, dim):
    """Per slice along ``dim``, the index of its mode, as PyTorch's CPU kernel picks it: the
    smallest of the most frequent values, at its last occurrence."""
    moved = np.moveaxis(x, dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    found = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        _, inverse, counts = np.unique(row, return_inverse=True, return_counts=True)
        found[r] = np.flatnonzero(inverse == np.argmax(counts))[-1]  # unique sorts: smallest
    return np.moveaxis(found.reshape(moved.shape[:-1] + (1,)), -1, dim)


def _histc_shape(x, bins, low, high):
    return (bins,), x.dtype


@primitive("histc", _histc_shape)
def histc(x, bins, low, high):
    """Counts of ``x`` in ``bins`` equal bins over ``[low, high]`` (the data's own range when
    both are equal; one wider each side if that is a point), values outside ignored, as
    ``torch.histc``."""
    if low == high:
        low, high = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    if low == high:
        low, high = low - 1, high + 1
    return np.histogram(x, bins, (low, high))[0].astype(x.dtype)


def _searchsorted_shape(sequence, values, right, dtype):
    if len(sequence.shape) > 1 and sequence.shape[:-1] != shape_of(values)[:-1]:
        raise ShapeError(f"boundaries tensor should be 1 dimension or the first N-1 dimensions "
                         f"of boundaries tensor and input value tensor must match, but we got "
                         f"boundaries tensor {list(sequence.shape)} and input value tensor "
                         f"{list(shape_of(values))}")
    return shape_of(values), dtype


@primitive("searchsorted", _searchsorted_shape)
def searchsorted(sequence, values, right, dtype):
    """Where each of ``values`` would go in ``sequence`` (sorted along its last dimension; a
    row per row of ``values``), leftmost or ``right``most, as ``torch.searchsorted``."""
    side = "right" if right else "left"
    if sequence.ndim <= 1:
        return np.searchsorted(sequence, values, side).astype(dtype)
    rows, values_rows = sequence.reshape(-1, sequence.shape[-1]), np.reshape(
        values, (-1, np.shape(values)[-1]))
    found = [np.searchsorted(row, v, side) for row, v in zip(rows, values_rows)]
    return np.asarray(found, dtype).reshape(np.shape(values))


def _reshape_shape(x, shape):
    size = math.prod(x.shape)
    if shape.count(-1) > 1:
        raise ShapeError("only one dimension can be inferred")
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {size}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {size}")
    return tuple(shape), x.dtype


@primitive("reshape", _reshape_shape, grad_name="ViewBackward0", view=True)
def reshape(x, shape):
    return np.reshape(x, shape)


reshape.defvjp(lambda g, out, x, shape: reshaped(g, x.shape))


def _permute_shape(x, dims):
    if sorted(dims) != list(range(len(x.shape))):
        raise ShapeError(f"dims {tuple(dims)} are not a permutation of the {len(x.shape)} "
                         f"dimensions of shape {x.shape}")
    return tuple(x.shape[d] for d in dims), x.dtype


@primitive("permute", _permute_shape, view=True)
def permute(x, dims):
    return np.transpose(x, dims)


permute.defvjp(lambda g, out, x, dims: permute(g, dims=tuple(np.argsort(dims).tolist())))


def _expand_shape(x, shape):
    lead = len(shape) - len(x.shape)
    if lead < 0 or any(n != s and n != 1 for n, s in zip(x.shape, shape[lead:])):
        raise ShapeError(f"shape {x.shape} cannot be expanded to {tuple(shape)}")
    return tuple(shape), x.dtype


@primitive("expand", _expand_shape, view=True)
def expand(x, shape):
    return np.broadcast_to(x, shape)


expand.defvjp(lambda g, out, x, shape: unbroadcast(g, x.shape))


class IndexSlot:
    """Stands in an index spec for the k-th index tensor, which is an input of the node."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k

    def __reduce__(self):
        return IndexSlot, (self.k,)

    def __eq__(self, other: object) -> bool:  # equal specs: equal structure (backward cache)
        return isinstance(other, IndexSlot) and other.k == self.k

    def __hash__(self) -> int:
        return hash((IndexSlot, self.k))


def fill_index(spec: tuple, index_values: tuple) -> tuple:
    return tuple(index_values[i.k] if isinstance(i, IndexSlot) else i for i in spec)


def _index_shape(x, *index_nodes, spec):
    shape = x.shape
    if not index_nodes and len(spec) <= len(shape) and all(
            type(i) is int and -n <= i < n for i, n in zip(spec, shape)):
        return shape[len(spec):], x.dtype  # ints in range (a sequence's step): no probe
    dummies = tuple(np.zeros(n.shape, dtype=np.intp) for n in index_nodes)
    probe = np.broadcast_to(np.zeros((), dtype=x.dtype), x.shape)
    try:
        return probe[fill_index(spec, dummies)].shape, x.dtype
    except IndexError as error:
        raise IndexError(f"index: {error} (tensor of shape {x.shape})") from None


def _index_cost(node: Node) -> float | None:
    """Basic indexing (ints, slices, None, ...) is a view in numpy: as free as a reshape."""
    basic = all(i is None or i is Ellipsis or isinstance(i, (int, slice))
                for i in node.attrs["spec"])
    return 1e-6 if basic and len(node.inputs) == 1 else None


@primitive("index", _index_shape, cost=_index_cost)
def index(x, *index_values, spec):
    return np.asarray(x)[fill_index(spec, index_values)]


index.defvjp(lambda g, out, x, *idx, spec: index_add(g, *idx, shape=x.shape, spec=spec), None)


@primitive("index_add", lambda g, *idx, shape, spec: (shape, g.dtype), grad_name="IndexBackward0")
def index_add(g, *index_values, shape, spec):
    """Scatter-add ``g`` into zeros of ``shape`` at ``spec`` (repeated indices add up)."""
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    if not index_values and all(i is None or i is Ellipsis or type(i) in (int, slice)
                                for i in spec):
        out[spec] = g  # basic indexing reaches each element once: adding is assigning
        return out
    np.add.at(out, fill_index(spec, index_values), g)
    return out


index_add.defvjp(lambda g, out, g_in, *idx, shape, spec: index(g, *idx, spec=spec), None)


def _index_put_shape(x, value, *index_nodes, spec):
    target_shape, _ = _index_shape(x, *index_nodes, spec=spec)
    try:
        broadcast_shapes(target_shape, shape_of(value))
        if len(shape_of(value)) > len(target_shape) and any(
                n != 1 for n in shape_of(value)[:len(shape_of(value)) - len(target_shape)]):
            raise ShapeError("")
    except ShapeError:
        raise ShapeError(f"shape mismatch: value tensor of shape {shape_of(value)} cannot be "
                         f"broadcast to indexing result of shape {target_shape}") from None
    return x.shape, x.dtype


@primitive("index_put", _index_put_shape, grad_name="IndexPutBackward0")
def index_put(x, value, *index_values, spec):
    """``x`` with ``x[spec] = value``: what ``x[key] = value`` records."""
    out = np.array(x, copy=True)
    out[fill_index(spec, index_values)] = value  # numpy drops the value's leading 1s too
    return out


def _index_put_value_vjp(g, out, x, value, *idx, spec):
    taken = index(g, *idx, spec=spec)
    extra = len(value.shape) - len(taken.shape)  # leading 1s the value may have beyond it
    core = value.shape[extra:] if extra > 0 else value.shape
    return reshaped(unbroadcast(taken, core), value.shape)


index_put.defvjp(
    lambda g, out, x, value, *idx, spec: index_put(g, 0.0, *idx, spec=spec),
    _index_put_value_vjp,
    None,
)


def _cat_shape(*xs, dim):
    if not xs:
        raise ShapeError("expected a non-empty sequence of tensors")
    first = xs[0].shape
    d = normalize_dim(dim, len(first))
    for x in xs[1:]:
        if len(x.shape) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(x.shape, first)) if i != d
        ):
            raise ShapeError(f"sizes of tensors must match except in dimension {d}: "
                             f"got {first} and {x.shape}")
    total = sum(x.shape[d] for x in xs)
    return first[:d] + (total,) + first[d + 1:], result_dtype(*xs)


@primitive("cat", _cat_shape)
def cat(*xs, dim):
    return np.concatenate(xs, axis=dim)


def _cat_vjp_of_many(g, out, positions, *xs, dim):
    d = normalize_dim(dim, len(out.shape))
    starts = np.cumsum([0] + [x.shape[d] for x in xs]).tolist()
    # A part's slice of the gradient (a rewrite may take it from the part: ops.rewrites).
    return [index(g, spec=(slice(None),) * d + (slice(starts[k], starts[k + 1]),))
            for k in positions]


cat.defvjp_of_many(_cat_vjp_of_many)


def _einsum_sizes(equation: str, shapes: list[tuple]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for term, shape in zip(equation.split("->")[0].split(","), shapes):
        for letter, n in zip(term, shape):
            known = sizes.get(letter, 1)
            if n != 1 and known != 1 and n != known:
                raise ShapeError(f"subscript {letter!r} has size {n} for one operand but "
                                 f"{known} for another")
            sizes[letter] = max(known, n)
    return sizes


def transpose(x: Node, dim0: int, dim1: int) -> Node:
    dims = list(range(len(x.shape)))
    a, b = normalize_dim(dim0, len(dims)), normalize_dim(dim1, len(dims))
    dims[a], dims[b] = dims[b], dims[a]
    return shown_as(permute(x, dims=tuple(dims)), "TransposeBackward0")


def mT(x: Node) -> Node:
    return transpose(x, -2, -1)


def shown_as(node: Node, grad_name: str, *inputs: Node) -> Node:
    """``node``, the result of a composite, with PyTorch's grad_fn name for the whole (its
    inputs are left alone if the composite returned one of them)."""
    if all(node is not i for i in inputs):
        node.grad_name = grad_name
    return node


# --- the sum: broadcasting's adjoint ----------------------------------------------------

@primitive("sum", _reduction)
def sum_(x, dim=None, keepdim=False):
    if x.dtype in HALVES:  # accumulated in float32 and rounded once, as PyTorch does
        return x.sum(axis=dim, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
    return x.sum(axis=dim, keepdims=keepdim)  # the method: np.sum adds a Python wrapper


sum_.defvjp(lambda g, out, x, dim=None, keepdim=False: expand(_keep(g, dim, keepdim), x.shape))


def _keep(g: Node, dims: tuple, keepdim: bool) -> Node:
    """Reinsert reduced dimensions as size 1 so that ``g`` broadcasts against the input."""
    if keepdim or not dims:
        return g
    shape = list(g.shape)
    for d in dims:
        shape.insert(d, 1)
    return reshaped(g, tuple(shape))


# --- padding --------------------------------------------------------------------------------

def _pad_shape(x, *, pads, value):
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    if any(n < 0 for n in shape):
        raise ShapeError(f"the padding {pads} makes the input of shape {x.shape} smaller than "
                         f"nothing (resulting shape {shape})")
    return shape, x.dtype


@primitive("constant_pad", _pad_shape, grad_name="ConstantPadNdBackward0")
def constant_pad(x, *, pads, value):
    """``x`` with ``(before, after)`` elements of ``value`` added per dimension; a negative
    count removes elements instead (PyTorch's F.pad)."""
    crop = tuple(slice(-lo if lo < 0 else 0, n + hi if hi < 0 else n)
                 for n, (lo, hi) in zip(x.shape, pads))
    grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads)
    return np.pad(np.asarray(x)[crop], grow, constant_values=value)


constant_pad.defvjp(
    lambda g, out, x, *, pads, value: constant_pad(
        g, pads=tuple((-lo, -hi) for lo, hi in pads), value=0)
)
