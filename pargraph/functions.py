"""Functions over tensors: ``where``, ``cat``, ``stack``, ``compute`` (several tensors in one
run), and the function form of tensor methods (``pargraph.exp(x)`` is ``x.exp()``), derived
from the Tensor class: a method written there, or a primitive declared with ``method=True``
in :mod:`pargraph.ops`, is a function without a line written for it here.
"""

from __future__ import annotations

import inspect
import warnings
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pargraph import amp, autograd, ops
from pargraph._tensor import Tensor, apply, attach_methods, operand
from pargraph.engine import execution
from pargraph.factories import as_tensor, full_like, rand
from pargraph.graph import user_stacklevel


def where(condition: Tensor, input: Any = None, other: Any = None) -> Any:
    """Elements of ``input`` where ``condition`` holds, else of ``other``; with the condition
    alone, the indices where it holds (``nonzero(as_tuple=True)``).

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.tensor([-1.0, 2.0])
    >>> pargraph.where(x > 0, x, 0.0)
    tensor([0., 2.])
    >>> pargraph.where(x > 0)
    (tensor([1]),)
    """
    if input is None and other is None:
        return as_tensor(condition).nonzero(as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() takes the condition alone, or the condition, input and other")
    return apply(ops.where, operand(condition), operand(input), operand(other))


@amp.autocasts("promote")
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along an existing dimension.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cat([pargraph.ones(2), pargraph.zeros(1)]).tolist()
    [1.0, 1.0, 0.0]
    """
    tensors = [as_tensor(t) for t in tensors]
    if not tensors:
        raise RuntimeError("cat: expected a non-empty list of Tensors")
    return apply(ops.cat, *tensors, dim=ops.normalize_dim(dim, tensors[0].dim()))


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """:func:`cat` under its other name.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.concat([pargraph.ones(1), pargraph.zeros(1)]).tolist()
    [1.0, 0.0]
    """
    return cat(tensors, dim)


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """:func:`cat` with numpy's argument name.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.concatenate([pargraph.ones(1, 1), pargraph.zeros(1, 1)], axis=1).tolist()
    [[1.0, 0.0]]
    """
    return cat(tensors, axis)


@amp.autocasts("promote")
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack same-shaped tensors along a new dimension.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.stack([pargraph.ones(2), pargraph.zeros(2)]).shape
    pargraph.Size([2, 2])
    """
    return apply(ops.stack, [as_tensor(t) for t in tensors], dim)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation over the operands' subscripts, as ``torch.einsum`` (``...`` and
    the implicit output included; the operands may also come as one list).

    Examples
    --------
    >>> import pargraph
    >>> a, b = pargraph.ones(2, 3), pargraph.ones(3, 4)
    >>> pargraph.einsum("ij,jk->ik", a, b).shape
    pargraph.Size([2, 4])
    >>> pargraph.einsum("bij,bjk->bik", [pargraph.ones(5, 2, 3), pargraph.ones(5, 3, 4)]).shape
    pargraph.Size([5, 2, 4])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = [as_tensor(t) for t in operands]
    try:
        explicit = ops.parse_einsum(equation, [tuple(t.shape) for t in operands])
    except ops.ShapeError as error:
        raise RuntimeError(f"einsum(): {error}") from None
    return apply(ops.einsum, *operands, equation=explicit)


def compute(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Realize several tensors in one run (one dask graph); returns them.

    Examples
    --------
    >>> import pargraph
    >>> a, b = pargraph.compute(pargraph.ones(2) + 1, pargraph.ones(2) * 3)
    >>> a.tolist(), b.tolist()
    ([2.0, 2.0], [3.0, 3.0])
    """
    execution.realize([t._node for t in tensors])
    return tensors


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a pargraph Tensor.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.is_tensor(pargraph.ones(1)), pargraph.is_tensor([1.0])
    (True, False)
    """
    return isinstance(obj, Tensor)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether all elements are close: ``|input - other| <= atol + rtol * |other|``
    (realizes both).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.allclose(pargraph.ones(2), pargraph.ones(2) + 1e-9)
    True
    """
    a, b = as_tensor(input), as_tensor(other)
    compute(a, b)
    return bool(np.allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol,
                            equal_nan=equal_nan))


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of ``digamma`` at ``input``, as ``torch.polygamma(n, input)``.

    Examples
    --------
    >>> import pargraph
    >>> round(pargraph.polygamma(1, pargraph.tensor([1.0])).item(), 4)
    1.6449
    """
    return as_tensor(input).polygamma(n)


def _method_function(name: str):
    def function(input: Tensor, *args, out: Any = None, **kwargs):
        result = getattr(as_tensor(input), name)(*args, **kwargs)
        return result if out is None else write_out(out, result, name)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"Function form of :meth:`Tensor.{name}`: ``pargraph.{name}(x, ...)`` is "
        f"``x.{name}(...)``.\n\n"
        "Examples\n--------\n>>> import pargraph\n"
        f">>> pargraph.{name} is not None\nTrue\n"
    )
    return function


def write_out(out: Any, result: Any, name: str) -> Any:
    """``result`` written into ``out`` (a tensor, or a tuple of them for a tuple result), as
    PyTorch's ``out=``: cast to ``out``'s dtype where PyTorch casts, resized to the result's
    shape (with PyTorch's warning when ``out`` had elements); returns ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} "
                            f"Tensors")
        written = [write_out(o, r, name) for o, r in zip(out, result)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not isinstance(result, Tensor):
        result = as_tensor(result)
    if (out.requires_grad or result.requires_grad) and autograd.is_grad_enabled():
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    node = result._node
    if node.dtype != out.dtype:
        ops.check_cast(node.dtype, out.dtype)
        node = ops.cast(node, dtype=out.dtype)
    if node.shape != out.shape:
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had "
                          f"shape {list(out.shape)}, which does not match the required output "
                          f"shape {list(node.shape)}. This behavior is deprecated, and in a "
                          "future PyTorch release outputs will not be resized unless they have "
                          "zero elements.", UserWarning, stacklevel=user_stacklevel())
        out._replace(ops.clone(node))
    else:
        out._rebind(ops.clone(node) if node is result._node else node)
    return out


#: Tensor methods that PyTorch has as methods only (``torch.item`` does not exist), and
#: those whose ``torch.<name>`` is something else (the ``torch.cpu`` module, the
#: ``torch.float`` dtype; ``pargraph.trace`` is pargraph's trace of runs, the matrix trace is
#: ``x.trace()``; ``pargraph.hardshrink`` and ``pargraph.prelu`` come from ``nn.functional``).
METHOD_ONLY = frozenset(
    "backward bfloat16 bool byte char cpu cuda dim double expand expand_as float half int item "
    "long numpy register_hook repeat retain_grad short size to tolist trace type type_as view "
    "view_as sum_to_size is_pinned pin_memory register_post_accumulate_grad_hook hardshrink "
    "prelu".split())
#: Tensor methods that also exist as ``pargraph.<name>`` functions: every public method but
#: the in-place ones (``add_``) and :data:`METHOD_ONLY`. The primitives declared with
#: ``method=True`` are among them (see ``Tensor.REGISTRY_METHODS``).
#: (A function written in this module stays itself: ``pargraph.where(condition, x, y)``
#: takes other arguments than ``x.where(condition, y)``.)
METHOD_FUNCTIONS = sorted(
    name for name in dir(Tensor)
    if not name.startswith("_") and not name.endswith("_") and name not in METHOD_ONLY
    and inspect.isfunction(inspect.getattr_static(Tensor, name))
    and not (inspect.isfunction(globals().get(name)) and globals()[name].__module__ == __name__))
method_functions = {name: _method_function(name) for name in METHOD_FUNCTIONS}



def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along the first dimension of 1-D tensors, else the second.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.hstack([pargraph.ones(2), pargraph.zeros(1)]).tolist()
    [1.0, 1.0, 0.0]
    """
    tensors = [as_tensor(t) for t in tensors]
    return cat(tensors, 0 if tensors[0].dim() == 1 else 1)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one dimension (a 0-d one becomes 1-D); one tensor in, one
    out, else a tuple.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.atleast_1d(pargraph.tensor(1.0)).shape
    pargraph.Size([1])
    """
    return _at_least(tensors, lambda t: t.reshape(1) if t.dim() == 0 else t)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least two dimensions (a 1-D one becomes a row).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.atleast_2d(pargraph.ones(3)).shape
    pargraph.Size([1, 3])
    """
    return _at_least(tensors, lambda t: t.reshape((1,) * (2 - t.dim()) + tuple(t.shape))
                     if t.dim() < 2 else t)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least three dimensions, as PyTorch pads them: ``(n,)`` becomes
    ``(1, n, 1)``, ``(m, n)`` becomes ``(m, n, 1)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.atleast_3d(pargraph.ones(2, 3)).shape
    pargraph.Size([2, 3, 1])
    """
    def padded(t: Tensor) -> Tensor:
        if t.dim() == 0:
            return t.reshape(1, 1, 1)
        if t.dim() == 1:
            return t.reshape(1, -1, 1)
        return t.unsqueeze(-1) if t.dim() == 2 else t

    return _at_least(tensors, padded)


def _at_least(tensors: tuple, reshaped: Callable[[Tensor], Tensor]) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(reshaped(as_tensor(t)) for t in tensors[0])
    out = tuple(reshaped(as_tensor(t)) for t in tensors)
    return out[0] if len(out) == 1 else out


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors side by side as columns (1-D ones become columns).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.column_stack([pargraph.ones(2), pargraph.zeros(2)]).tolist()
    [[1.0, 0.0], [1.0, 0.0]]
    """
    tensors = [as_tensor(t) for t in tensors]
    return cat([t.reshape(-1, 1) if t.dim() <= 1 else t for t in tensors], 1)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors concatenated along a third dimension (``atleast_3d`` first).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.dstack([pargraph.ones(2), pargraph.zeros(2)]).shape
    pargraph.Size([1, 2, 2])
    """
    return cat(list(atleast_3d(list(tensors))), 2)


def block_diag(*tensors: Any) -> Tensor:
    """A matrix with the tensors (0-d, 1-D as rows, or 2-D) as blocks along its diagonal,
    zeros elsewhere.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.block_diag(pargraph.ones(1, 2), pargraph.tensor(3.0)).tolist()
    [[1.0, 1.0, 0.0], [0.0, 0.0, 3.0]]
    """
    blocks = []
    for k, t in enumerate(tensors):
        t = as_tensor(t)
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {k} has {t.dim()} dimensions")
        blocks.append(t.reshape((1,) * (2 - t.dim()) + tuple(t.shape)) if t.dim() < 2 else t)
    if not blocks:
        return as_tensor(np.zeros((1, 0), dtype=ops.defaults.float))
    dtype = ops.result_dtype(*[b._node for b in blocks])
    columns = sum(b.shape[1] for b in blocks)
    rows, start = [], 0
    for b in blocks:
        parts = [as_tensor(np.zeros((b.shape[0], start), dtype)), b.to(dtype),
                 as_tensor(np.zeros((b.shape[0], columns - start - b.shape[1]), dtype))]
        rows.append(cat(parts, 1))
        start += b.shape[1]
    return cat(rows, 0)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How many times each non-negative integer occurs in the 1-D ``input`` (or the sum of
    its ``weights``), ``max(input) + 1`` counts at least ``minlength``. The length depends on
    the values, so they are computed now.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.bincount(pargraph.tensor([1, 1, 3])).tolist()
    [0, 2, 0, 1]
    """
    input = as_tensor(input)
    values = input.detach().numpy()
    if values.dtype.kind == "f":
        raise RuntimeError(f'"bincount_cpu" not implemented for '
                           f"'{ops.torch_name(values.dtype)}'")
    if input.dim() != 1 or values.dtype.kind not in "iub" or (values < 0).any():
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return as_tensor(np.bincount(values, minlength=minlength).astype(np.int64))
    weights = as_tensor(weights)
    if weights.dim() != 1 or weights.shape[0] != values.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    dtype = weights.dtype if weights.dtype in (np.float32, np.float64) else np.float64
    counts = np.bincount(values, weights.detach().numpy().astype(np.float64),
                         minlength=minlength)
    return as_tensor(counts.astype(dtype))


HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def histogram(input: Tensor, bins: Any = 100, *, range: Any = None, weight: Any = None,
              density: bool = False) -> HistogramResult:
    """Counts of ``input``'s values in ``bins`` equal bins over ``range`` (default: the
    values' own), or between the edges of a 1-D tensor ``bins``, as ``torch.histogram``;
    ``weight`` sums weights, ``density`` divides by the total and the bins' widths.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.histogram(pargraph.tensor([1.0, 2.0, 1.0]), bins=2).hist.tolist()
    [2.0, 1.0]
    """
    input = as_tensor(input)
    if input.dtype.kind != "f":
        raise RuntimeError(f"torch.histogram: input tensor and bins tensors should have the "
                           f"same dtype, but got input {input.dtype} and bins {input.dtype}")
    values = input.detach().numpy().reshape(-1)
    edges = as_tensor(bins).detach().numpy() if isinstance(bins, Tensor) else bins
    hist, edges = np.histogram(values, edges, range=range,
                               weights=None if weight is None else
                               as_tensor(weight).detach().numpy().reshape(-1),
                               density=density)
    return HistogramResult(as_tensor(hist.astype(input.dtype)),
                           as_tensor(edges.astype(input.dtype)))


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Stack rows: 1-D tensors become rows, higher ones concatenate along the first
    dimension.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.vstack([pargraph.ones(2), pargraph.zeros(2)]).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    tensors = [as_tensor(t) for t in tensors]
    return cat([t.reshape((1, -1)) if t.dim() == 1 else t for t in tensors], 0)


def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of ``input`` flattened, at ``index``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.take(pargraph.tensor([[1, 2], [3, 4]]), pargraph.tensor([0, 3])).tolist()
    [1, 4]
    """
    return as_tensor(input).flatten()[as_tensor(index)]


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Contract ``dims`` (a count of trailing/leading dimensions, or two lists) of ``a`` and
    ``b``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.tensordot(pargraph.ones(2, 3), pargraph.ones(3, 4), dims=1).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    a, b = as_tensor(a), as_tensor(b)
    if isinstance(dims, int):
        dims_a, dims_b = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    names_a = [next(letters) for _ in range(a.dim())]
    names_b = [next(letters) for _ in range(b.dim())]
    for da, db in zip(dims_a, dims_b):
        names_b[db % b.dim()] = names_a[da % a.dim()]
    contracted = {names_a[d % a.dim()] for d in dims_a}
    out = [n for n in names_a if n not in contracted] + [n for n in names_b
                                                         if n not in contracted]
    return einsum(f"{''.join(names_a)},{''.join(names_b)}->{''.join(out)}", a, b)


def clip(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """``clamp`` by its other name.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.clip(pargraph.tensor([-2.0, 2.0]), -1.0, 1.0).tolist()
    [-1.0, 1.0]
    """
    return as_tensor(input).clamp(min, max)


def logical_not(input: Tensor) -> Tensor:
    """Elementwise ``not`` of truth values.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.logical_not(pargraph.tensor([1, 0])).tolist()
    [False, True]
    """
    return apply(ops.logical_not, as_tensor(input))


def broadcast_shapes(*shapes: Any) -> Any:
    """The shape that tensors of ``shapes`` broadcast to.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.broadcast_shapes((3, 1), (2,))
    pargraph.Size([3, 2])
    """
    from pargraph._tensor import Size

    try:
        return Size(np.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s)
                                          for s in shapes]))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: "
                           f"{', '.join(str(list(s)) for s in shapes)}") from None


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common shape (views).

    Examples
    --------
    >>> import pargraph
    >>> a, b = pargraph.broadcast_tensors(pargraph.ones(3, 1), pargraph.zeros(2))
    >>> tuple(a.shape), tuple(b.shape)
    ((3, 2), (3, 2))
    """
    shape = broadcast_shapes(*[as_tensor(t).shape for t in tensors])
    return tuple(as_tensor(t).expand(*shape) for t in tensors)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Any = None) -> Tensor:
    """Draws of 1 with probability ``input`` (or ``p``), else 0, in ``input``'s dtype; not
    differentiable.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.bernoulli(pargraph.tensor([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """
    input = as_tensor(input)
    probs = input.detach() if p is None else full_like(input, p)
    draws = rand(*probs.shape, dtype=probs.dtype, generator=generator)
    return (draws < probs).to(input.dtype)


def binomial(count: Tensor, prob: Tensor, generator: Any = None) -> Tensor:
    """Draws of the number of successes in ``count`` trials of probability ``prob``, in
    ``count``'s dtype; not differentiable (the draws read the values).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.binomial(pargraph.tensor([5.0, 5.0]), pargraph.tensor([0.0, 1.0])).tolist()
    [0.0, 5.0]
    """
    from pargraph.factories import _source

    count, prob = as_tensor(count), as_tensor(prob)
    counts, probs = np.broadcast_arrays(count.detach().numpy(), prob.detach().numpy())
    drawn = _source(generator).binomial(counts.astype(np.int64), probs.astype(np.float64))
    return as_tensor(drawn.astype(np.dtype(count.dtype)))


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """Poisson draws of rate ``input``, in its dtype; not differentiable (the draws read the
    values).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.poisson(pargraph.zeros(2)).tolist()
    [0.0, 0.0]
    """
    from pargraph.factories import _source

    rates = as_tensor(input)
    drawn = _source(generator).poisson(rates.detach().numpy().astype(np.float64))
    return as_tensor(drawn.astype(np.dtype(rates.dtype)))


def expand_copy(input: Tensor, size: Sequence[int], *, implicit: bool = False) -> Tensor:
    """``input.expand(size)`` as a new tensor (not a view).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.expand_copy(pargraph.tensor([1, 2]), (2, 2)).tolist()
    [[1, 2], [1, 2]]
    """
    return as_tensor(input).expand(*size).clone()


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D tensors (``indexing="ij"``: the first varies along dimension 0;
    ``"xy"``: the first two swapped), as ``torch.meshgrid``, with its warning when
    ``indexing`` is not given.

    Examples
    --------
    >>> import pargraph
    >>> rows, cols = pargraph.meshgrid(pargraph.arange(2), pargraph.arange(3), indexing="ij")
    >>> rows.tolist()
    [[0, 0, 0], [1, 1, 1]]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings

        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=user_stacklevel())
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    tensors = tuple(as_tensor(t) for t in tensors)
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t.dim()}D")
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = [t.shape[0] for t in flat]
    grids = [t.reshape([1] * k + [-1] + [1] * (len(flat) - k - 1)).expand(shape)
             for k, t in enumerate(flat)]
    if swap:  # the grids of (second, first, ...) in "ij", given back in the inputs' order
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of the 1-D tensors' entries, one per row, as
    ``torch.cartesian_prod`` (one tensor: itself).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cartesian_prod(pargraph.tensor([1, 2]), pargraph.tensor([3, 4])).tolist()
    [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    if len(tensors) == 1:
        return as_tensor(tensors[0])
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], dim=1)


@amp.autocasts("fp32")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The ``p``-norm distance between every row of ``x1`` (``..., P, M``) and of ``x2``
    (``..., R, M``): shape ``..., P, R``, as ``torch.cdist`` (computed directly, each pair's
    difference: PyTorch's matrix-product shortcut for p=2 on many rows rounds differently).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cdist(pargraph.tensor([[0.0, 0.0]]), pargraph.tensor([[3.0, 4.0]])).tolist()
    [[5.0]]
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if x1.dim() < 2 or x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    from pargraph import linalg

    difference = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return linalg.vector_norm(difference, ord=p, dim=-1)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` is one of ``test_elements`` (``invert``: is not).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.isin(pargraph.tensor([1, 2, 3]), pargraph.tensor([2, 5])).tolist()
    [False, True, False]
    """
    elements, test = as_tensor(elements), as_tensor(test_elements)
    found = (elements.unsqueeze(-1) == test.reshape(-1)).any(-1)
    return ~found if invert else found


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
              dim: int = -1) -> Tensor:
    """The trapezoidal rule's integral of ``y`` along ``dim``, at the points ``x`` or
    spaced ``dx`` (1 by default).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.trapezoid(pargraph.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    return _trapezoids(as_tensor(y), x, dx, dim).sum(dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> Tensor:
    """The trapezoidal rule's running integral of ``y`` along ``dim`` (one fewer element).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cumulative_trapezoid(pargraph.tensor([1.0, 2.0, 3.0]))
    tensor([1.5000, 4.0000])
    """
    return _trapezoids(as_tensor(y), x, dx, dim).cumsum(dim)


def _trapezoids(y: Tensor, x: Any, dx: float | None, dim: int) -> Tensor:
    """Each interval's area along ``dim``."""
    if x is not None and dx is not None:
        raise RuntimeError("trapezoid: received both x and dx; expected only one")
    d = ops.normalize_dim(dim, max(y.ndim, 1))
    n = y.shape[d]
    means = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2 if n else y.narrow(d, 0, 0)
    if x is None:
        return means * (1.0 if dx is None else dx)
    x = as_tensor(x)
    if x.ndim == 1:
        widths = x[1:] - x[:-1]
        shape = [1] * y.ndim
        shape[d] = widths.shape[0]
        widths = widths.reshape(shape)
    else:
        widths = x.diff(dim=d)
    return means * widths


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None,
             edge_order: int = 1) -> tuple[Tensor, ...]:
    """The derivative of ``input`` along each dimension of ``dim`` (all by default) by
    central differences inside and one-sided ones of ``edge_order`` (1 or 2) at the edges;
    ``spacing``: one step for every dimension, one per dimension, or each dimension's
    coordinates (1-D tensors). One tensor per dimension, as ``numpy.gradient``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.gradient(pargraph.tensor([1.0, 4.0, 9.0, 16.0]))
    (tensor([3., 4., 6., 7.]),)
    """
    input = as_tensor(input)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.ndim)) if dim is None else \
        [dim] if isinstance(dim, int) else list(dim)
    dims = [ops.normalize_dim(d, input.ndim) for d in dims]
    steps = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(steps) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                           f"it's spacing and dim arguments to have the same length, but got a "
                           f"spacing argument of length {len(steps)} and a dim argument of "
                           f"length {len(dims)}.")
    if not ops.is_floating(input.dtype):
        input = input.to(ops.defaults.float)
    return tuple(_derivative(input, d, step, edge_order) for d, step in zip(dims, steps))


def _derivative(f: Tensor, d: int, step: Any, edge_order: int) -> Tensor:
    """``gradient`` along one dimension: three-point weights from the coordinates' steps
    (numpy's formulas, which are the plain differences for even steps), differentiable in
    coordinates given as a tensor as in PyTorch."""
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")
    if isinstance(step, Tensor):
        h = step.to(f.dtype).diff()
    else:
        h = as_tensor(np.full(n - 1, float(step), f.dtype))
    shape = [1] * f.ndim
    shape[d] = -1

    def along(weights: Tensor) -> Tensor:  # weights along d, broadcast over the rest
        return weights.reshape(shape)

    a, b = h[:-1], h[1:]
    inner = (-b / (a * (a + b)), (b - a) / (a * b), a / (b * (a + b)))
    if edge_order == 1:
        first = ((0, -1 / h[:1]), (1, 1 / h[:1]))
        last = ((n - 2, -1 / h[-1:]), (n - 1, 1 / h[-1:]))
    else:
        a, b = h[:1], h[1:2]
        first = ((0, -(2 * a + b) / (a * (a + b))), (1, (a + b) / (a * b)),
                 (2, -a / (b * (a + b))))
        a, b = h[-2:-1], h[-1:]
        last = ((n - 3, b / (a * (a + b))), (n - 2, -(a + b) / (a * b)),
                (n - 1, (2 * b + a) / (b * (a + b))))

    def edge(terms: tuple) -> Tensor:
        return sum(f.narrow(d, k, 1) * along(w) for k, w in terms)

    parts = [edge(first)]
    if n > 2:
        parts.append(sum(f.narrow(d, k, n - 2) * along(w) for k, w in enumerate(inner)))
    parts.append(edge(last))
    return cat(parts, d)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The ``r``-element combinations of a vector's elements, one per row, in
    ``itertools.combinations`` order (``with_replacement``: ``combinations_with_replacement``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.combinations(pargraph.tensor([1, 2, 3])).tolist()
    [[1, 2], [1, 3], [2, 3]]
    """
    import itertools

    input = as_tensor(input)
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_zeros((0,))
    make = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    picked = np.asarray(list(make(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    return input[as_tensor(picked)]


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm distance between each pair of rows ``i < j`` of an ``(N, M)`` matrix,
    as the upper triangle of ``cdist(input, input)`` read row by row.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.pdist(pargraph.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    input = as_tensor(input)
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    rows, columns = np.triu_indices(input.shape[0], 1)
    from pargraph import linalg

    return linalg.vector_norm(input[as_tensor(rows)] - input[as_tensor(columns)], ord=p,
                              dim=-1)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of a vector: its powers ``N - 1`` down to 0 as columns
    (``increasing``: 0 up).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.vander(pargraph.tensor([1, 2, 3]), 3).tolist()
    [[1, 1, 1], [4, 2, 1], [9, 3, 1]]
    """
    x = as_tensor(x)
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    powers = np.arange(n) if increasing else np.arange(n)[::-1].copy()
    dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(np.int64)
    if n == 0:
        return x.new_zeros((x.shape[0], 0)).to(dtype)
    return x.to(dtype).unsqueeze(-1) ** as_tensor(powers.astype(dtype))


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of the matrices, in the cheapest order (``linalg.multi_dot``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.chain_matmul(pargraph.eye(2), pargraph.ones(2, 1)).tolist()
    [[1.0], [1.0]]
    """
    from pargraph import linalg

    if len(matrices) == 1:
        return as_tensor(matrices[0])
    return linalg.multi_dot(matrices)



def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None
                 ) -> Tensor:
    """Where each value of ``input`` would go in ``sorted_sequence`` to keep it sorted (along
    its last dimension, row by row), as ``torch.searchsorted``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.searchsorted(pargraph.tensor([1, 3, 5, 7]), pargraph.tensor([3, 6])).tolist()
    [1, 3]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    sequence = as_tensor(sorted_sequence)
    if sorter is not None:
        sequence = sequence.gather(-1, as_tensor(sorter))
    if isinstance(input, Tensor):
        values = input._node
    elif isinstance(input, (int, float)) and not isinstance(input, bool):
        values = np.asarray(input)
    else:  # PyTorch takes a tensor or a number (a list's shape would be lost here)
        raise TypeError(f"searchsorted() expects a tensor or a number of values, but got "
                        f"{type(input).__name__}")
    dtype = np.dtype(np.int32 if out_int32 else np.int64)
    return sequence._apply(ops.searchsorted, sequence.detach()._node, values, right=bool(right),
                                           dtype=dtype)


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False,
              right: bool = False) -> Tensor:
    """The bucket of each value of ``input`` between the 1-D sorted ``boundaries`` (``right``:
    a value equal to a boundary goes to the bucket after it), as ``torch.bucketize``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.bucketize(pargraph.tensor([3, 6, 9]), pargraph.tensor([1, 3, 5, 7])).tolist()
    [1, 3, 4]
    """
    boundaries = as_tensor(boundaries)
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.dim()})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


attach_methods(allclose=allclose, bernoulli=bernoulli, take=take, bincount=bincount,
               histogram=histogram)
