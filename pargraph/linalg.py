"""``pargraph.linalg``: the norms that training code uses (vector norms, Frobenius), the
Cholesky factorization and triangular solves (what a multivariate normal needs)."""

from __future__ import annotations

from typing import Any

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor
from pargraph.ops.linalg import LinAlgError

__all__ = ["LinAlgError", "cholesky", "norm", "solve_triangular", "vector_norm"]


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (all elements by default).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.vector_norm(pargraph.tensor([3.0, 4.0]))
    tensor(5.)
    """
    return as_tensor(x).norm(ord, dim, keepdim)


def norm(x: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``ord=None``: the 2-norm of a vector, the Frobenius norm of a matrix (of all elements
    when ``dim`` is ``None``); a number: a vector norm (1-D input or one ``dim``). Matrix norms
    other than Frobenius raise ``NotImplementedError``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.norm(pargraph.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(5.)
    """
    x = as_tensor(x)
    if ord is None or ord == "fro":
        return x.norm(2, dim, keepdim)
    if x.ndim == 1 or isinstance(dim, int):
        return x.norm(ord, dim, keepdim)
    raise NotImplementedError(f"linalg.norm: ord={ord!r} over a matrix (a matrix norm) is not "
                              "supported; pass dim= for a vector norm")


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of symmetric positive-definite matrices (the last two dimensions):
    lower ``L`` with ``A = L L^T``, or ``upper`` ``U = L^T``; differentiable.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.cholesky(pargraph.tensor([[4.0, 2.0], [2.0, 2.0]]))
    tensor([[2., 0.],
            [1., 1.]])
    """
    return apply(ops.cholesky, as_tensor(A), upper=upper)


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``) for triangular ``A`` (``upper``
    or lower; ``unitriangular``: its diagonal taken as ones), batched; differentiable.

    Examples
    --------
    >>> import pargraph
    >>> L = pargraph.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> pargraph.linalg.solve_triangular(L, pargraph.tensor([[2.0], [3.0]]), upper=False)
    tensor([[1.],
            [2.]])
    """
    A, B = as_tensor(A), as_tensor(B)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return apply(ops.solve_triangular, A.mT, B.mT, upper=not upper,
                     unitriangular=unitriangular).mT
    return apply(ops.solve_triangular, A, B, upper=upper, unitriangular=unitriangular)
