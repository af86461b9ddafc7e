"""Tensor methods that select and order along a dimension: ``gather``, ``scatter``,
``scatter_add``, ``index_select``, ``sort``, ``argsort``, ``topk`` (a mixin of the Tensor class,
with PyTorch's arguments, checks and result types)."""

from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.graph import Node, user_stacklevel

#: What ``sort`` and ``topk`` return, as ``torch.return_types``: a tuple with names.
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
AminmaxResult = namedtuple("aminmax", ["min", "max"])
CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])
#: PyTorch's warning for ``scatter(..., reduce=)`` with a tensor source.
SCATTER_REDUCE_DEPRECATED = (
    "The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in "
    "a future PyTorch release. Use torch.scatter_reduce instead for more reduction options.")
#: PyTorch's warning for ``index_reduce``, whose API may change.
INDEX_REDUCE_BETA = "index_reduce() is in beta and the API may change at any time."
#: ``quantile``'s ways between two neighbouring values.
INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


class SelectionMethods:
    """The methods; a subclass has ``_node``, ``shape``, ``ndim``, ``_apply(op, ...)`` (the one
    way to apply an op), ``_wrap(node)`` and, for the in-place forms, ``_check_in_place()``
    and ``_rebind(node)``."""

    __slots__ = ()

    def gather(self, dim: int, index: Any) -> Any:
        """The elements at ``index`` along ``dim``: ``out[i][j] = self[index[i][j]][j]`` for
        ``dim=0`` (``index`` may be smaller than ``self`` in the other dimensions).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([[1, 2], [3, 4]])
        >>> x.gather(1, pargraph.tensor([[0, 0], [1, 0]])).tolist()
        [[1, 1], [4, 3]]
        """
        dim, index = self._along(dim, index, "gather")
        return self._apply(ops.gather, self._node, index, dim)

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None,
                reduce: str | None = None) -> Any:
        """A copy with ``src`` (a tensor, or a number ``value``) written at ``index`` along
        ``dim``; ``reduce="add"`` adds instead (``scatter_add``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 3).scatter(1, pargraph.tensor([[2], [0]]), 5.0).tolist()
        [[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]
        """
        source = value if src is None else src
        if source is None:
            raise TypeError("scatter() missing the src tensor or value")
        if reduce is not None:
            return self._scatter_reduced(dim, index, source, reduce)
        dim, index = self._along(dim, index, "scatter")
        out = ops.scatter(self._node, index, self._source(source, index, dim), dim=dim)
        return self._wrap(out if src is not None else ops.shown_as(out, "ScatterBackward1"))

    def _scatter_reduced(self, dim: int, index: Any, source: Any, reduce: str) -> Any:
        """``scatter(..., reduce="add" or "multiply")``, PyTorch's older form of
        ``scatter_reduce`` (with its deprecation warning for a tensor ``src``)."""
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if hasattr(source, "_node"):
            warnings.warn(SCATTER_REDUCE_DEPRECATED, UserWarning, stacklevel=user_stacklevel())
        if reduce == "add":
            return self.scatter_add(dim, index, source)
        if not hasattr(source, "_node"):
            index = index if hasattr(index, "_node") else self._constant(index)
            source = self._apply(ops.expand, ops.constant(np.asarray(source, dtype=self.dtype)),
                                           shape=tuple(index.shape))
        return self.scatter_reduce(dim, index, source, "prod")

    def scatter_(self, dim: int, index: Any, src: Any = None, *, value: Any = None,
                 reduce: str | None = None) -> Any:
        """In-place :meth:`scatter`.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 3).scatter_(1, pargraph.tensor([[1], [2]]), 1.0).tolist()
        [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
        """
        self._check_in_place()
        return self._rebind(self.scatter(dim, index, src, value=value, reduce=reduce)._node)

    def scatter_add_(self, dim: int, index: Any, src: Any) -> Any:
        """In-place :meth:`scatter_add`.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).scatter_add_(0, pargraph.tensor([1, 1]), pargraph.ones(2)).tolist()
        [0.0, 2.0]
        """
        self._check_in_place()
        return self._rebind(self.scatter_add(dim, index, src)._node)

    def scatter_add(self, dim: int, index: Any, src: Any) -> Any:
        """A copy with ``src`` added at ``index`` along ``dim`` (repeated indices add up).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).scatter_add(0, pargraph.tensor([0, 2, 0]), pargraph.ones(3))
        tensor([2., 0., 1.])
        """
        dim, index = self._along(dim, index, "scatter_add")
        source = self._source(src, index, dim)
        if not isinstance(source, Node):
            source = ops.expand(ops.constant(np.asarray(source, dtype=self.dtype)),
                                shape=index.shape)
        added = ops.put_along_dim(source, index, shape=tuple(self.shape), dim=dim)
        return self._apply(ops.shown_as, ops.add(self._node, added), "ScatterAddBackward0")

    def scatter_reduce(self, dim: int, index: Any, src: Any, reduce: str, *,
                       include_self: bool = True) -> Any:
        """A copy with ``src``'s elements reduced into it at ``index`` along ``dim``:
        ``reduce`` is ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"`` (as
        PyTorch, ``"max"`` and ``"min"`` too); ``include_self=False`` leaves this tensor's
        values out where something is scattered. Differentiable but for ``"prod"``; an
        extreme's gradient is split between its ties.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2)
        >>> x.scatter_reduce(0, pargraph.tensor([0, 0, 1]), pargraph.tensor([3.0, 5.0, 1.0]),
        ...                  "amax").tolist()
        [5.0, 1.0]
        """
        reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)
        if reduce not in ("sum", "prod", "mean", "amax", "amin"):
            raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                               f"got {reduce}")
        dim, index = self._along(dim, index, "scatter_reduce")
        if not hasattr(src, "_node"):
            raise TypeError(f"scatter_reduce(): src must be a tensor, got {type(src).__name__}")
        self._source(src, index, dim)  # the checks
        if reduce in ("sum", "mean"):
            base = self if include_self else self.scatter(dim, self._wrap(index), 0)
            total = base.scatter_add(dim, self._wrap(index), src)
            if reduce == "sum":
                return total
            ones = self._apply(ops.expand, ops.constant(np.ones((), self.dtype)),
                                         shape=tuple(self.shape))
            counted = ones if include_self else ones.scatter(dim, self._wrap(index), 0)
            count = counted.scatter_add(dim, self._wrap(index), src.new_ones(src.shape))
            if self.dtype.kind in "iub":
                return total.div(count, rounding_mode="floor")
            return total / count
        return self._apply(ops.scatter_reduce, self._node, index, src._node, dim=dim,
                                             reduce=reduce, include_self=include_self)

    def scatter_reduce_(self, dim: int, index: Any, src: Any, reduce: str, *,
                        include_self: bool = True) -> Any:
        """In-place :meth:`scatter_reduce`.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).scatter_reduce_(0, pargraph.tensor([1]), pargraph.tensor([4.0]),
        ...                                  "sum").tolist()
        [1.0, 5.0]
        """
        self._check_in_place()
        return self._rebind(self.scatter_reduce(dim, index, src, reduce,
                                                include_self=include_self)._node)

    def index_reduce(self, dim: int, index: Any, source: Any, reduce: str, *,
                     include_self: bool = True) -> Any:
        """A copy with the slices of ``source`` reduced into the slices at ``index`` along
        ``dim``: ``reduce`` is ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``
        (``include_self=False``: this tensor's values left out where something lands).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(3).index_reduce(0, pargraph.tensor([0, 0]),
        ...                               pargraph.tensor([2.0, 4.0]), "mean").tolist()
        [2.3333332538604736, 1.0, 1.0]
        """
        return self._index_reduced(dim, index, source, reduce, include_self, "index_reduce")

    def index_reduce_(self, dim: int, index: Any, source: Any, reduce: str, *,
                      include_self: bool = True) -> Any:
        """In-place :meth:`index_reduce`.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).index_reduce_(0, pargraph.tensor([1]), pargraph.tensor([5.0]),
        ...                                "amax").tolist()
        [1.0, 5.0]
        """
        self._check_in_place()
        return self._rebind(self._index_reduced(dim, index, source, reduce, include_self,
                                                "index_reduce_")._node)

    def _index_reduced(self, dim: int, index: Any, source: Any, reduce: str,
                       include_self: bool, name: str) -> Any:
        if reduce not in ("prod", "mean", "amax", "amin"):
            raise RuntimeError(f"{name}(): Expected reduce to be one of prod, mean, amax or "
                               f"amin but got {reduce}.")
        d = ops.normalize_dim(dim, max(self.ndim, 1))
        index = index if hasattr(index, "_node") else self._constant(index)
        if index.ndim > 1:
            raise IndexError(f"{name}(): Index is supposed to be a vector")
        if not hasattr(source, "_node"):
            raise TypeError(f"{name}(): source must be a tensor, got {type(source).__name__}")
        if index.numel() != (source.shape[d] if source.ndim else 1):
            raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                               f"equal to source.size(dim): ({source.shape[d]}), for dim: {dim}")
        warnings.warn(INDEX_REDUCE_BETA, UserWarning, stacklevel=user_stacklevel())
        along = [1] * source.ndim
        if source.ndim:
            along[d] = -1
        spread = index.reshape(along).expand(*source.shape)
        return self.scatter_reduce(d, spread, source, reduce, include_self=include_self)

    def index_select(self, dim: int, index: Any) -> Any:
        """The slices at the 1-D integer ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(6).reshape(2, 3).index_select(1, pargraph.tensor([2, 0])).tolist()
        [[2, 0], [5, 3]]
        """
        index = _as_index_node(index, "index_select")
        if len(index.shape) > 1:
            raise IndexError(f"index_select(): Index is supposed to be a vector, got "
                             f"{len(index.shape)}-D")
        dim = ops.normalize_dim(dim, max(self.ndim, 1))
        index = ops.checked_index(index, self.shape[dim] if self.ndim else 1, "IndexError",
                                  "index out of range in self", "index_select")
        spec = (slice(None),) * dim + (ops.IndexSlot(0),)
        picked = ops.index(self._node, ops.reshape(index, shape=(-1,)), spec=spec)
        return self._apply(ops.shown_as, picked, "IndexSelectBackward0")

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> SortResult:
        """Values in order along ``dim`` and where they came from (ties keep their order).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0, 1.0, 2.0]).sort(descending=True)
        sort(values=tensor([3., 2., 1.]), indices=tensor([0, 2, 1]))
        """
        dim = ops.normalize_dim(dim, max(self.ndim, 1))
        order = ops.argsort(self._node, dim=dim, descending=descending, stable=True)
        values = ops.shown_as(ops.take_along_dim(self._node, order, dim=dim), "SortBackward0")
        return SortResult(self._wrap(values), self._wrap(order))

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """The indices that sort along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0, 1.0, 2.0]).argsort().tolist()
        [1, 2, 0]
        """
        return self.sort(dim, descending, stable).indices

    def topk(self, k: int, dim: int = -1, largest: bool = True,
             sorted: bool = True) -> TopkResult:
        """The ``k`` largest (or smallest) values along ``dim`` and their indices.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 5.0, 3.0, 4.0]).topk(2).indices.tolist()
        [1, 3]
        """
        dim = ops.normalize_dim(dim, max(self.ndim, 1))
        size = self.shape[dim] if self.ndim else 1
        if not 0 <= k <= size:
            raise RuntimeError(f"selected index k out of range: k={k} for dimension {dim} of "
                               f"size {size}")
        order = ops.argsort(self._node, dim=dim, descending=largest, stable=True)
        first = ops.index(order, spec=(slice(None),) * dim + (slice(0, k),))
        values = ops.shown_as(ops.take_along_dim(self._node, first, dim=dim), "TopkBackward0")
        return TopkResult(self._wrap(values), self._wrap(first))

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> KthvalueResult:
        """The ``k``-th smallest value along ``dim`` and its index.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0, 1.0, 2.0]).kthvalue(2)
        kthvalue(values=tensor(2.), indices=tensor(2))
        """
        dim = ops.normalize_dim(dim, max(self.ndim, 1))
        length = self.shape[dim] if self.ndim else 1
        if not 1 <= k <= length:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
        ordered = self.sort(dim)
        values, indices = (t.narrow(dim, k - 1, 1) for t in ordered)
        if not keepdim and self.ndim:
            values, indices = values.squeeze(dim), indices.squeeze(dim)
        return KthvalueResult(values, indices)

    def cummax(self, dim: int) -> CummaxResult:
        """The running maximum along ``dim`` and where each was found (the latest of equal
        values; NaN once one came).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 3.0, 2.0]).cummax(0).values.tolist()
        [1.0, 3.0, 3.0]
        """
        values, indices = self._running_extreme(dim, largest=True)
        return CummaxResult(values, indices)

    def cummin(self, dim: int) -> CumminResult:
        """The running minimum along ``dim`` and where each was found.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2.0, 1.0, 3.0]).cummin(0).indices.tolist()
        [0, 1, 1]
        """
        values, indices = self._running_extreme(dim, largest=False)
        return CumminResult(values, indices)

    def _running_extreme(self, dim: int, largest: bool) -> tuple:
        """The values at the running extreme's indices: their gradient goes where each came
        from, as PyTorch's."""
        if self.ndim == 0:
            return self, self._apply(ops.constant, np.asarray(0, np.int64))
        dim = ops.normalize_dim(dim, self.ndim)
        indices = ops.cumulative_argextreme(self.detach()._node, dim=dim, largest=largest)
        values = ops.take_along_dim(self._node, indices, dim=dim)
        return self._wrap(values), self._wrap(indices)

    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> AminmaxResult:
        """The smallest and the largest values (over ``dim``, or all).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0, 1.0, 2.0]).aminmax()
        aminmax(min=tensor(1.), max=tensor(3.))
        """
        if (self.shape[dim] if dim is not None and self.ndim else self.numel()) == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        if dim is None:
            low, high = self.amin(), self.amax()
            if keepdim:
                low, high = (t.reshape((1,) * self.ndim) for t in (low, high))
            return AminmaxResult(low, high)
        return AminmaxResult(self.amin(dim, keepdim), self.amax(dim, keepdim))

    def masked_select(self, mask: Any) -> Any:
        """The values where ``mask`` (broadcast against this tensor) is True, in a 1-D tensor.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([1.0, 5.0, 3.0])
        >>> x.masked_select(x > 2).tolist()
        [5.0, 3.0]
        """
        if getattr(mask, "dtype", None) != np.bool_:
            raise RuntimeError("masked_select: expected BoolTensor for mask")
        shape = np.broadcast_shapes(tuple(self.shape), tuple(mask.shape))
        return self.expand(*shape)[mask.expand(*shape)]

    def quantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                  interpolation: str = "linear") -> Any:
        """The ``q``-th quantiles (a number, or a 1-D tensor of them: a first dimension)
        along ``dim`` (of all values if None), between neighbouring values as
        ``interpolation`` says; NaN where a NaN is among the values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0, 3.0, 4.0]).quantile(0.5).item()
        2.5
        """
        return self._quantile("quantile", q, dim, keepdim, interpolation, ignore_nan=False)

    def nanquantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                    interpolation: str = "linear") -> Any:
        """``quantile`` of the values that are not NaN.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, float("nan"), 3.0]).nanquantile(0.5).item()
        2.0
        """
        return self._quantile("nanquantile", q, dim, keepdim, interpolation, ignore_nan=True)

    def _quantile(self, name: str, q: Any, dim: int | None, keepdim: bool, interpolation: str,
                  ignore_nan: bool) -> Any:
        """PyTorch's way: the values sorted along the last dimension, each quantile's rank in
        them, the values at the ranks either side, and a lerp between them."""
        if self.dtype not in (np.float32, np.float64):
            raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
        if interpolation not in INTERPOLATIONS:
            raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                               f"midpoint or nearest, but got {interpolation}")
        one = not hasattr(q, "_node")
        if not one and q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if not one and q.dtype != self.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        qs = np.atleast_1d(np.asarray(q if one else q.detach().numpy(), dtype=self.dtype))
        if ((qs < 0) | (qs > 1)).any():
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}" if one
                               else f"{name}() q values must be in the range [0, 1]")
        if self.numel() == 0:
            raise RuntimeError(f"{name}() input tensor must be non-empty")
        x = self.reshape(-1) if dim is None else self.movedim(dim, -1)
        values = x.sort(-1).values
        nans = values.isnan()
        if ignore_nan:
            kept = (~nans).sum(-1, keepdim=True).to(self.dtype)
            ranks = (self._constant(qs) * (kept - 1)).clamp(min=0)
        else:
            last = values.shape[-1] - 1
            ranks = self._constant(qs * last).expand(*values.shape[:-1], len(qs)).masked_fill(
                nans.sum(-1, keepdim=True) > 0, last)
        if interpolation in ("lower", "higher", "nearest"):
            ranks = {"lower": ranks.floor, "higher": ranks.ceil, "nearest": ranks.round}[
                interpolation]()
        below = ranks.long()
        result = values.gather(-1, below)
        if interpolation in ("linear", "midpoint"):
            above = values.gather(-1, ranks.ceil().long())
            weight = ranks - below.to(self.dtype) if interpolation == "linear" else 0.5
            result = result.lerp(above, weight)
        result = result.movedim(-1, 0)  # the quantiles first, as PyTorch puts them
        if keepdim:
            kept_shape = [1] * self.ndim if dim is None else list(self.shape)
            if dim is not None:
                kept_shape[ops.normalize_dim(dim, self.ndim)] = 1
            result = result.reshape(len(qs), *kept_shape)
        return result[0] if one else result

    def _along(self, dim: int, index: Any, op: str) -> tuple[int, Node]:
        """``dim`` normalized and ``index`` checked as PyTorch's gather/scatter check it."""
        index = _as_index_node(index, op)
        dim = ops.normalize_dim(dim, max(self.ndim, 1))
        if len(index.shape) != self.ndim:
            raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions "
                               f"as self tensor")
        for d, (n, m) in enumerate(zip(index.shape, self.shape)):
            if d != dim and n > m:
                raise RuntimeError(f"{op}(): Size does not match at dimension {d} expected "
                                   f"index {list(index.shape)} to be smaller than self "
                                   f"{list(self.shape)} apart from dimension {dim}")
        size = self.shape[dim] if self.ndim else 1
        return dim, ops.checked_index(index, size, "RuntimeError", ops.out_of_bounds(dim, size), op)

    def _source(self, src: Any, index: Node, dim: int) -> Any:
        """``src`` as a node of ``index``'s shape (a larger src is cut, as PyTorch reads only
        that part), or a plain number."""
        if not hasattr(src, "_node"):
            if isinstance(src, (int, float, bool)):
                return src
            raise TypeError(f"scatter: src must be a tensor or a number, got "
                            f"{type(src).__name__}")
        node = src._node
        if node.dtype != self.dtype:
            raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype, got "
                               f"{self.dtype} and {node.dtype}")
        if len(node.shape) != len(index.shape) or any(
                n < m for n, m in zip(node.shape, index.shape)):
            raise RuntimeError(f"scatter(): Expected src {list(node.shape)} to be at least as "
                               f"large as index {list(index.shape)} in every dimension")
        if node.shape != index.shape:
            node = ops.index(node, spec=tuple(slice(0, n) for n in index.shape))
        return node


def _as_index_node(index: Any, op: str) -> Node:
    node = index._node if hasattr(index, "_node") else ops.constant(np.asarray(index))
    if node.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {node.dtype}")
    return node
