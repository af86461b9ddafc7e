"""Sparse COO primitives: a sparse tensor is its ``indices`` (sparse dims x nnz, int64) and
``values`` (nnz, dense dims...), two ordinary nodes; these ops read them.

:func:`sparse_to_dense` scatters the values into zeros (duplicates add up) and
:func:`sparse_gather` reads a dense tensor at the indices: each is the other's vjp, so their
derivatives of any order are these two again. :func:`sparse_mm` multiplies a 2-d sparse
matrix by a dense one through scipy's CSR product; its vjp is a product with the transposed
matrix (the indices' rows swapped) for the dense operand, and a gather of both sides for the
values.
"""

from __future__ import annotations

import numpy as np

from pargraph.graph import Node
from pargraph.ops.core import ShapeError, primitive, result_dtype
from pargraph.ops.elementwise import mul
from pargraph.ops.shapes import flip, index, sum_


def _check_indices(indices, values, shape: tuple) -> int:
    """The sparse dims, after PyTorch's checks of the indices' and values' shapes."""
    if len(indices.shape) != 2 or indices.dtype.kind not in "iu":
        raise ShapeError(f"indices must be an int64 tensor of shape (sparse dims, nnz), got "
                         f"{indices.dtype} of shape {indices.shape}")
    sparse_dims, nnz = indices.shape
    if not values.shape or values.shape[0] != nnz:
        raise ShapeError(f"indices and values must have the same nnz, but got nnz from "
                         f"indices: {nnz}, nnz from values: "
                         f"{values.shape[0] if values.shape else 0}")
    if sparse_dims + len(values.shape) - 1 != len(shape) or \
            tuple(values.shape[1:]) != tuple(shape[sparse_dims:]):
        raise ShapeError(f"values of shape {values.shape} and {sparse_dims} sparse dims do "
                         f"not make a tensor of size {shape}")
    return sparse_dims


def _to_dense_shape(indices, values, *, shape):
    _check_indices(indices, values, shape)
    return tuple(shape), values.dtype


@primitive("sparse_to_dense", _to_dense_shape, grad_name="ToDenseBackward0")
def sparse_to_dense(indices, values, *, shape):
    """The dense tensor of ``shape`` holding ``values`` at ``indices`` (duplicates added)."""
    out = np.zeros(shape, values.dtype)
    np.add.at(out, tuple(indices), values)
    return out


def _gather_shape(x, indices):
    if len(indices.shape) != 2 or indices.shape[0] > len(x.shape):
        raise ShapeError(f"sparse_gather: indices of shape {indices.shape} for a tensor of "
                         f"shape {x.shape}")
    return (indices.shape[1],) + tuple(x.shape[indices.shape[0]:]), x.dtype


@primitive("sparse_gather", _gather_shape)
def sparse_gather(x, indices):
    """``x`` read at the columns of ``indices``: what the values of a sparse tensor with
    those indices see of ``x`` (nnz, the remaining dims...)."""
    return np.asarray(x)[tuple(indices)]


sparse_to_dense.defvjp(None, lambda g, out, indices, values, *, shape: sparse_gather(g, indices))
sparse_gather.defvjp(lambda g, out, x, indices: sparse_to_dense(indices, g, shape=x.shape), None)


def _mm_shape(indices, values, dense, *, shape):
    if len(shape) != 2 or _check_indices(indices, values, shape) != 2:
        raise ShapeError(f"sparse.mm: expected a 2-D sparse matrix, got size {shape} with "
                         f"{indices.shape[0]} sparse dims")
    if len(dense.shape) != 2 or dense.shape[0] != shape[1]:
        raise ShapeError(f"sparse.mm: mat1 and mat2 shapes cannot be multiplied "
                         f"({shape[0]}x{shape[1]} and "
                         f"{'x'.join(str(n) for n in dense.shape)})")
    if values.dtype != dense.dtype:
        raise ShapeError(f"sparse.mm: expected mat1 and mat2 to have the same dtype, but "
                         f"got: {values.dtype} != {dense.dtype}")
    return (shape[0], dense.shape[1]), result_dtype(values, dense)


def _mm_cost(node: Node) -> float:
    return 5e-6 + 2 * node.inputs[1].shape[0] * node.inputs[2].shape[1] / 2e9


@primitive("sparse_mm", _mm_shape, grad_name="SparseAddmmBackward0", cost=_mm_cost)
def sparse_mm(indices, values, dense, *, shape):
    """A 2-d sparse matrix (``indices``, ``values``, ``shape``) times a dense matrix, through
    scipy's CSR product (duplicates added)."""
    from scipy import sparse

    matrix = sparse.coo_array((values, (indices[0], indices[1])), shape=tuple(shape))
    return np.asarray(matrix.tocsr() @ dense, dtype=np.result_type(values, dense))


def _values_grad(g, indices, dense):
    """d<S @ dense, g>/d values: row ``k`` of ``g`` at the value's row, dotted with the
    dense operand's row at its column."""
    rows, columns = (index(indices, spec=(slice(k, k + 1),)) for k in (0, 1))
    return sum_(mul(sparse_gather(g, rows), sparse_gather(dense, columns)), dim=(1,))


sparse_mm.defvjp(
    None,
    lambda g, out, indices, values, dense, *, shape: _values_grad(g, indices, dense),
    lambda g, out, indices, values, dense, *, shape: sparse_mm(
        flip(indices, dims=(0,)), values, g, shape=(shape[1], shape[0])),
)
