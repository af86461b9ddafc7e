"""Tensor methods that select and order along a dimension: ``gather``, ``scatter``,
``scatter_add``, ``index_select``, ``sort``, ``argsort``, ``topk`` (a mixin of the Tensor class,
with PyTorch's arguments, checks and result types)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.graph import Node

#: What ``sort`` and ``topk`` return, as ``torch.return_types``: a tuple with names.
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])


class SelectionMethods:
    """The methods; a subclass has ``_node``, ``shape``, ``ndim``, ``_wrap(node)`` and, for
    the in-place forms, ``_check_in_place()`` and ``_rebind(node)``."""

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
        return self._wrap(ops.gather(self._node, index, dim))

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
        if reduce == "add":
            return self.scatter_add(dim, index, source)
        if reduce is not None:
            raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported (expected "
                                      "None or 'add')")
        dim, index = self._along(dim, index, "scatter")
        out = ops.scatter(self._node, index, self._source(source, index, dim), dim=dim)
        return self._wrap(out if src is not None else ops.shown_as(out, "ScatterBackward1"))

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
        return self._wrap(ops.shown_as(ops.add(self._node, added), "ScatterAddBackward0"))

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
        return self._wrap(ops.shown_as(picked, "IndexSelectBackward0"))

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
