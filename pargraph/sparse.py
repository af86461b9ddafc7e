"""Sparse COO tensors and ``pargraph.sparse`` (``torch.sparse``): a graph's adjacency as
indices and values, multiplied into dense features without making the dense matrix.

A :class:`SparseTensor` holds two ordinary tensors, its ``indices`` (sparse dims x nnz,
int64) and ``values`` (nnz, dense dims...), and its size. It is also a Tensor of its dense
value (``ops.sparse_to_dense`` of the two): an op with no sparse form (``S + 1``,
``S.sum()``) reads that dense node, so its result is the dense op's, where PyTorch would
refuse; nothing makes the dense matrix until such an op runs, since nodes are computed only
when read. The sparse forms: ``S @ D``, ``S.mm(D)``, ``torch.sparse.mm``, ``torch.spmm``,
``torch.mm`` and ``torch.matmul`` with a 2-d sparse ``S`` and dense ``D`` (``ops.sparse_mm``,
scipy's CSR product; gradients reach ``D`` and the values), ``to_dense``, ``coalesce``,
``indices``/``values``, ``t``, ``to_sparse``, and ``torch.sparse.sum`` over all of it.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply, attach_methods
from pargraph.devices import sparse_coo
from pargraph.factories import as_tensor
from pargraph.pytree import node_kinds

__all__ = ["mm", "sum", "FloatTensor", "DoubleTensor", "LongTensor"]


class SparseTensor(Tensor):
    """A sparse COO tensor (see the module's docstring).

    Examples
    --------
    >>> import pargraph
    >>> s = pargraph.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> (s @ pargraph.ones(2, 1)).tolist()
    [[2.0], [3.0]]
    """

    __slots__ = ("_sparse_indices", "_sparse_values", "_sparse_coalesced")

    def __init__(self, indices: Tensor, values: Tensor, size: tuple,
                 coalesced: bool = False) -> None:
        super().__init__(apply(ops.sparse_to_dense, indices, values,
                               shape=tuple(int(n) for n in size))._node)
        self._sparse_indices, self._sparse_values = indices, values
        self._sparse_coalesced = coalesced

    @property
    def is_sparse(self) -> bool:
        return True

    @property
    def layout(self) -> Any:
        return sparse_coo

    def sparse_dim(self) -> int:
        return self._sparse_indices.shape[0]

    def dense_dim(self) -> int:
        return self.ndim - self.sparse_dim()

    def _nnz(self) -> int:
        return self._sparse_indices.shape[1]

    def indices(self) -> Tensor:
        """The indices (sparse dims x nnz) of a coalesced tensor, as PyTorch requires."""
        if not self._sparse_coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._sparse_indices

    def values(self) -> Tensor:
        """The values (nnz, dense dims...) of a coalesced tensor, as PyTorch requires."""
        if not self._sparse_coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._sparse_values

    def _indices(self) -> Tensor:
        """The indices, coalesced or not."""
        return self._sparse_indices

    def _values(self) -> Tensor:
        """The values, coalesced or not."""
        return self._sparse_values

    def is_coalesced(self) -> bool:
        return self._sparse_coalesced

    def coalesce(self) -> SparseTensor:
        """The same tensor with its indices sorted and each at most once, duplicates'
        values added (the indices are read now: their count depends on them)."""
        if self._sparse_coalesced:
            return self
        found = self._sparse_indices.detach().numpy()
        sparse_shape = tuple(self.shape[:found.shape[0]])
        unique, position = np.unique(np.ravel_multi_index(found, sparse_shape),
                                     return_inverse=True)
        rows = np.stack(np.unravel_index(unique, sparse_shape))
        summed = apply(ops.sparse_to_dense, as_tensor(position[None].astype(np.int64)),
                       self._sparse_values,
                       shape=(len(unique),) + tuple(self.shape[len(sparse_shape):]))
        return SparseTensor(as_tensor(rows.astype(np.int64)), summed, tuple(self.shape), True)

    def to_dense(self, dtype: Any = None, *, masked_grad: Any = None) -> Tensor:
        dense = self._wrap(self._node)
        return dense if dtype is None else dense.to(dtype)

    def t(self) -> SparseTensor:
        if self.ndim != 2 or self.sparse_dim() != 2:
            raise RuntimeError(f"t() expects a 2-D sparse tensor, but got size "
                               f"{tuple(self.shape)}")
        return SparseTensor(self._sparse_indices.flip(0), self._sparse_values,
                            tuple(self.shape)[::-1])

    def mm(self, mat2: Any) -> Tensor:
        dense = as_tensor(mat2)
        if dense.is_sparse:
            dense = dense.to_dense()
        if dense.ndim == 1:
            return self.mm(dense.unsqueeze(1)).squeeze(1)
        return apply(ops.sparse_mm, self._sparse_indices, self._sparse_values, dense,
                     shape=tuple(self.shape))

    matmul = __matmul__ = mm

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Pickled (and deep-copied) as its indices, values and size: a sparse tensor comes
        back sparse, its values' ``requires_grad`` kept."""
        return _rebuilt, (self._sparse_indices.detach(), self._sparse_values.detach(),
                          tuple(self.shape), self._sparse_coalesced,
                          self._sparse_values.requires_grad)

    def __repr__(self) -> str:
        return (f"tensor(indices={self._sparse_indices!r},\n"
                f"       values={self._sparse_values!r},\n"
                f"       size={tuple(self.shape)}, nnz={self._nnz()}, layout=torch.sparse_coo"
                + (", requires_grad=True)" if self.requires_grad else ")"))


def _rebuilt(indices: Tensor, values: Tensor, size: tuple, coalesced: bool,
             requires_grad: bool) -> SparseTensor:
    """A pickled or loaded sparse tensor, made again from its parts."""
    if requires_grad:
        values = values.requires_grad_(True)
    return SparseTensor(indices, values, size, coalesced)


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, requires_grad: bool = False,
                      check_invariants: Any = None, is_coalesced: Any = None) -> SparseTensor:
    """A sparse COO tensor with ``values`` at ``indices`` (sparse dims x nnz), of ``size``
    (default: each sparse dimension one past its largest index), as
    ``torch.sparse_coo_tensor``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.sparse_coo_tensor([[0, 2]], [1.0, 5.0]).to_dense().tolist()
    [1.0, 0.0, 5.0]
    """
    indices = as_tensor(indices)
    values = as_tensor(values, dtype=dtype)
    if indices.dtype.kind not in "iu":
        raise RuntimeError(f"indices must be an int64 tensor, got {indices.dtype}")
    found = indices.detach().numpy().astype(np.int64)
    if found.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: "
                           f"{list(found.shape)}")
    if found.size and (found < 0).any():
        raise RuntimeError("found negative index in indices of a sparse tensor")
    if size is None:
        size = tuple(int(n) + 1 for n in (found.max(1) if found.size else
                                          np.full(found.shape[0], -1))) + \
            tuple(values.shape[1:])
    size = tuple(int(n) for n in size)
    if len(size) != found.shape[0] + len(values.shape) - 1:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: "
                           f"len(size) = {len(size)}, sparse_dim = {found.shape[0]}, "
                           f"dense_dim = {len(values.shape) - 1}")
    for d in range(found.shape[0] if found.size else 0):
        if int(found[d].max()) >= size[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                               f"{size[d]} but found index {int(found[d].max())}")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseTensor(as_tensor(found), values, size, bool(is_coalesced))


def to_sparse(input: Tensor, sparse_dim: int | None = None, *, layout: Any = None,
              blocksize: Any = None, dense_dim: Any = None) -> SparseTensor:
    """The COO form of a dense tensor: the positions of its nonzero elements (over its first
    ``sparse_dim`` dimensions, default all) and their values, read now; gradients of the
    values reach the dense tensor.

    Examples
    --------
    >>> import pargraph
    >>> s = pargraph.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> s.indices().tolist(), s.values().tolist()
    ([[0, 1], [1, 0]], [2.0, 3.0])
    """
    dense = as_tensor(input)
    if getattr(dense, "is_sparse", False):
        return dense
    dims = dense.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < dims <= dense.ndim:
        raise RuntimeError(f"sparse_dim must be in [1, {dense.ndim}], got {sparse_dim}")
    value = dense.detach().numpy()
    nonzero = value.reshape(value.shape[:dims] + (-1,)).any(-1) if dims < value.ndim else \
        value != 0
    indices = as_tensor(np.stack(np.nonzero(nonzero)).astype(np.int64).reshape(dims, -1))
    values = apply(ops.sparse_gather, dense, indices)
    return SparseTensor(indices, values, tuple(dense.shape), True)


attach_methods(to_sparse=to_sparse, to_sparse_coo=to_sparse)
# A compiled step flattens a sparse argument into its indices and values (bound anew at each
# call), its size and coalescing part of the arguments' structure.
node_kinds.register(SparseTensor, lambda s: ([s._sparse_indices, s._sparse_values],
                                             (tuple(s.shape), s._sparse_coalesced)),
                    lambda context, children: SparseTensor(*children, *context))


def mm(mat1: Any, mat2: Any) -> Tensor:
    """``mat1 @ mat2`` for a 2-d sparse ``mat1`` and a dense ``mat2`` (``torch.sparse.mm``);
    gradients reach ``mat2`` and ``mat1``'s values.

    Examples
    --------
    >>> import pargraph
    >>> s = pargraph.sparse_coo_tensor([[0, 0], [0, 1]], [1.0, 1.0], (1, 2))
    >>> pargraph.sparse.mm(s, pargraph.tensor([[1.0], [2.0]])).tolist()
    [[3.0]]
    """
    return as_tensor(mat1).mm(mat2)


def sum(input: Any, dim: Any = None, dtype: Any = None) -> Tensor:  # noqa: A001
    """The sum of a sparse tensor's elements (over ``dim``), as ``torch.sparse.sum``: a
    dense tensor (all of them: of the values, without the dense matrix).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.sparse.sum(pargraph.sparse_coo_tensor([[0, 3]], [1.0, 2.0])).item()
    3.0
    """
    tensor = as_tensor(input)
    if dim is None and tensor.is_sparse:
        total = tensor._sparse_values.sum()
    else:
        total = tensor.to_dense().sum(dim) if tensor.is_sparse else tensor.sum(dim)
    return total if dtype is None else total.to(dtype)


def _legacy(dtype: Any) -> Any:
    """``torch.sparse.FloatTensor(indices, values, size)``, the constructor old programs
    (pygcn) call."""
    def construct(indices: Any, values: Any, size: Any = None) -> SparseTensor:
        warnings.warn("torch.sparse.SparseTensor(indices, values, shape, *, device=) is "
                      "deprecated.  Please use torch.sparse_coo_tensor(indices, values, shape, "
                      "dtype=, device=).", UserWarning, stacklevel=2)
        return sparse_coo_tensor(indices, values, size, dtype=dtype)
    return construct


FloatTensor = _legacy(np.float32)
DoubleTensor = _legacy(np.float64)
LongTensor = _legacy(np.int64)


def spmm(input: Any, mat2: Any) -> Tensor:
    """``torch.spmm``: :func:`mm`.

    Examples
    --------
    >>> import pargraph
    >>> s = pargraph.sparse_coo_tensor([[0], [1]], [2.0], (1, 2))
    >>> pargraph.spmm(s, pargraph.ones(2, 1)).tolist()
    [[2.0]]
    """
    return mm(input, mat2)
