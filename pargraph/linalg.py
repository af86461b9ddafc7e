"""``pargraph.linalg``: norms (vector and matrix), inverses, determinants and solves,
Cholesky, singular values and symmetric eigendecompositions, each differentiable; the
functions PyTorch's ``torch.linalg`` gives training code."""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor
from pargraph.methods.products import kept_reciprocal, pseudoinverse, singular_tolerance
from pargraph.ops.linalg import LinAlgError

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh",
           "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor",
           "lu_factor_ex", "lu_solve", "matrix_exp", "matrix_norm", "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex",
           "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
           "vector_norm"]

#: What ``eigh`` returns, as ``torch.return_types``: a tuple with names.
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
SvdResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
QrResult = namedtuple("linalg_qr", ["Q", "R"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
LuFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LuFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LuResult = namedtuple("linalg_lu", ["P", "L", "U"])


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
    when ``dim`` is ``None``); a vector norm over one ``dim`` (or of a 1-D input), a matrix
    norm (:func:`matrix_norm`) over two.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.norm(pargraph.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(5.)
    """
    x = as_tensor(x)
    if ord is None:
        return x.norm(2, dim, keepdim)
    if isinstance(dim, int) or (dim is None and x.ndim == 1) or (
            dim is not None and len(dim) == 1):
        return x.norm(ord, dim, keepdim)
    if dim is None and x.ndim != 2:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {x.ndim}D.")
    return matrix_norm(x, ord, (-2, -1) if dim is None else dim, keepdim)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Sequence[int] = (-2, -1),
                keepdim: bool = False) -> Tensor:
    """The ``ord`` norm of each matrix over the dimensions ``dim``: ``"fro"``, ``"nuc"``
    (the sum of the singular values), 1 / -1 (the largest / smallest column sum of absolute
    values), ``inf`` / ``-inf`` (rows), 2 / -2 (the largest / smallest singular value).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.matrix_norm(pargraph.tensor([[1.0, -2.0], [3.0, 4.0]]), 1).item()
    6.0
    """
    A = as_tensor(A)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    rows, columns = (ops.normalize_dim(d, A.ndim) for d in dim)
    if ord == "fro":
        return A.norm(2, (rows, columns), keepdim)
    if ord in ("nuc", 2, -2):
        values = svdvals(A.movedim((rows, columns), (-2, -1)))
        out = values.sum(-1) if ord == "nuc" else values.amax(-1) if ord == 2 else \
            values.amin(-1)
    elif ord in (1, -1, math.inf, -math.inf):
        summed, reduced = (rows, columns) if ord in (1, -1) else (columns, rows)
        sums = A.abs().sum(summed, keepdim=True)
        out = sums.amax(reduced, keepdim=True) if ord > 0 else sums.amin(reduced, keepdim=True)
        return out if keepdim else out.squeeze(max(rows, columns)).squeeze(min(rows, columns))
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if keepdim:
        out = out.unsqueeze(min(rows, columns)).unsqueeze(max(rows, columns))
    return out


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


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False
                ) -> CholeskyExResult:
    """``(L, info)``: the Cholesky factor, and per matrix 0 or the order of the first leading
    minor that is not positive-definite, without raising (``check_errors=True`` raises as
    :func:`cholesky`); where it failed, ``L`` is what LAPACK left, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.cholesky_ex(pargraph.tensor([[4.0, 2.0], [2.0, 1.0]])).info
    tensor(2, dtype=pargraph.int32)
    """
    A = as_tensor(A)
    info = apply(ops.cholesky_info, A)
    if check_errors:
        return CholeskyExResult(apply(ops.cholesky, A, upper=upper), info)
    return CholeskyExResult(apply(ops.cholesky_ex, A, upper=upper), info)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """``(inverse, info)``: per matrix 0, or the position of the first zero pivot, where
    the inverse has infinities, without raising (``check_errors=True`` raises as
    :func:`inv`).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.inv_ex(pargraph.tensor([[2.0, 0.0], [0.0, 4.0]])).inverse
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    A = as_tensor(A)
    inverse = inv(A) if check_errors else apply(ops.inv_ex, A)
    return InvExResult(inverse, apply(ops.lu_info, A))


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False
             ) -> SolveExResult:
    """``(result, info)``: :func:`solve`'s result, and per matrix 0 or the position of the
    first zero pivot, where the result has infinities or NaN, without raising
    (``check_errors=True`` raises as :func:`solve`).

    Examples
    --------
    >>> import pargraph
    >>> A = pargraph.tensor([[2.0, 0.0], [0.0, 4.0]])
    >>> pargraph.linalg.solve_ex(A, pargraph.tensor([2.0, 2.0])).result
    tensor([1.0000, 0.5000])
    """
    A, B = as_tensor(A), as_tensor(B)
    info = apply(ops.lu_info, A)
    if check_errors:
        return SolveExResult(solve(A, B, left=left), info)
    vector = B.ndim == 1 or (left and B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if not left:  # X A = B  <=>  A^T X^T = B^T
        LU, pivots = lu_factor(A.mT)
        return SolveExResult(lu_solve(LU, pivots, B.mT).mT, info)
    LU, pivots = lu_factor(A)
    if vector:
        return SolveExResult(lu_solve(LU, pivots, B.unsqueeze(-1)).squeeze(-1), info)
    return SolveExResult(lu_solve(LU, pivots, B), info)


def lu_factor(A: Tensor, *, pivot: bool = True) -> LuFactorResult:
    """``(LU, pivots)``: the LU factorization with partial pivoting, packed (``L`` below
    the diagonal, its unit diagonal implied; ``U`` on and above), and the row swaps, 1-based
    int32 as LAPACK gives them. Differentiable for square matrices.

    Examples
    --------
    >>> import pargraph
    >>> LU, pivots = pargraph.linalg.lu_factor(pargraph.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> LU.tolist(), pivots.tolist()
    ([[3.0, 4.0], [0.3333333432674408, 0.6666666269302368]], [2, 2])
    """
    if not pivot:
        raise NotImplementedError("linalg.lu_factor: LU without pivoting is not implemented "
                                  "for CPU tensors, as in PyTorch")
    A = as_tensor(A)
    return LuFactorResult(apply(ops.lu_factor, A), apply(ops.lu_pivots, A))


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False
                 ) -> LuFactorExResult:
    """:func:`lu_factor` with ``info``: per matrix 0, or the 1-based position of the first
    zero pivot of ``U`` (``check_errors=True`` raises there).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.lu_factor_ex(pargraph.tensor([[1.0, 2.0], [2.0, 4.0]])).info
    tensor(2, dtype=pargraph.int32)
    """
    LU, pivots = lu_factor(A, pivot=pivot)
    info = apply(ops.lu_info, as_tensor(A))
    if check_errors and bool((info != 0).any()):
        raise LinAlgError("torch.linalg.lu_factor_ex: U[{0},{0}] is zero and using it on "
                          "lu_solve would result in a division by zero. If you still want to "
                          "perform the factorization, consider calling linalg.lu(A, pivot) or "
                          "linalg.lu_factor_ex(A, pivot)".format(int(info.max())))
    return LuFactorExResult(LU, pivots, info)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True) -> LuResult:
    """``(P, L, U)`` from :func:`lu_factor`'s packed result, with ``A = P L U``.

    Examples
    --------
    >>> import pargraph
    >>> P, L, U = pargraph.lu_unpack(*pargraph.linalg.lu_factor(pargraph.eye(2)))
    >>> P.tolist(), U.tolist()
    ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    """
    LU, pivots = as_tensor(LU_data), as_tensor(LU_pivots)
    m, n = LU.shape[-2:]
    k = min(m, n)
    P = apply(ops.lu_permutation, pivots, m=m, dtype=np.dtype(LU.dtype)) if unpack_pivots \
        else None
    if not unpack_data:
        return LuResult(P, None, None)
    L = LU[..., :, :k].tril(-1) + as_tensor(np.eye(m, k, dtype=np.dtype(LU.dtype)))
    return LuResult(P, L, LU[..., :k, :].triu())


def lu(A: Tensor, *, pivot: bool = True) -> LuResult:
    """``(P, L, U)`` with ``A = P L U``: ``P`` a permutation, ``L`` unit lower triangular
    (m x k), ``U`` upper triangular (k x n), ``k = min(m, n)``. Differentiable for square
    matrices.

    Examples
    --------
    >>> import pargraph
    >>> P, L, U = pargraph.linalg.lu(pargraph.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> (P @ L @ U).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    return lu_unpack(*lu_factor(A, pivot=pivot))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,
             adjoint: bool = False) -> Tensor:
    """``X`` with ``A X = B`` from ``A``'s :func:`lu_factor` (``left=False``: ``X A = B``;
    ``adjoint``: ``A^T`` in place of ``A``); differentiable in ``LU`` and ``B``.

    Examples
    --------
    >>> import pargraph
    >>> LU, pivots = pargraph.linalg.lu_factor(pargraph.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> pargraph.linalg.lu_solve(LU, pivots, pargraph.tensor([[1.0], [2.0]])).tolist()
    [[0.0], [0.5]]
    """
    P, L, U = lu_unpack(LU, pivots)
    B = as_tensor(B)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    if adjoint:  # A^T = U^T L^T P^T:  X = P L^-T U^-T B
        y = solve_triangular(U.mT, B, upper=False)
        return P @ solve_triangular(L.mT, y, upper=True, unitriangular=True)
    y = solve_triangular(L, P.mT @ B, upper=False, unitriangular=True)
    return solve_triangular(U, y, upper=True)


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


def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix; a singular one raises :class:`LinAlgError`.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.inv(pargraph.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    return as_tensor(A).inverse()


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The tensor ``X`` with ``tensordot(X, A, ind)`` the identity: ``A`` seen as a square
    matrix (its first ``ind`` dimensions against the rest), inverted, of shape
    ``A.shape[ind:] + A.shape[:ind]``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.tensorinv(pargraph.eye(4).reshape(4, 2, 2) * 2, ind=1).shape
    pargraph.Size([2, 2, 4])
    """
    A = as_tensor(A)
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, columns = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != columns:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {columns} != {rows}")
    return inv(A.reshape(rows, columns)).reshape(*A.shape[ind:], *A.shape[:ind])


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """The ``X`` with ``tensordot(A, X, X.ndim) == B``: ``A`` seen as a square matrix (its
    first ``B.ndim`` dimensions against the rest; ``dims``: dimensions of ``A`` moved to the
    end first), of shape ``A.shape[B.ndim:]``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.tensorsolve(pargraph.eye(6).reshape(2, 3, 6) * 2, pargraph.ones(2, 3))
    tensor([0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000])
    """
    A, B = as_tensor(A), as_tensor(B)
    if dims is not None:
        moved = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in moved], *moved)
    rows, columns = math.prod(A.shape[:B.ndim]), math.prod(A.shape[B.ndim:])
    if rows != columns:
        raise RuntimeError("Expected self to satisfy the requirement "
                           "prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but "
                           f"got {columns} != {rows}")
    return solve(A.reshape(rows, columns), B.reshape(rows)).reshape(A.shape[B.ndim:])


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """The Vandermonde matrix of each vector of ``x`` (its last dimension): its powers 0 up to
    ``N - 1`` (its length by default) as columns, of shape ``(*, n, N)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.vander(pargraph.tensor([1, 2, 3])).tolist()
    [[1, 1, 1], [1, 2, 4], [1, 3, 9]]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise RuntimeError("x must have at least one dimension.")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(np.int64)
    powers = as_tensor(np.arange(n).astype(dtype))
    return x.to(dtype).unsqueeze(-1) ** powers


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.det(pargraph.tensor([[2.0, 1.0], [1.0, 3.0]]))
    tensor(5.)
    """
    return as_tensor(A).det()


def slogdet(A: Tensor) -> SlogdetResult:
    """``(sign, logabsdet)`` of each determinant (``logabsdet`` is differentiable).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.slogdet(pargraph.tensor([[0.0, 2.0], [1.0, 0.0]])).sign
    tensor(-1.)
    """
    return SlogdetResult(*as_tensor(A).slogdet())


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``), batched and broadcast; ``B`` a
    vector (or a batch of them) where PyTorch takes it for one. A singular ``A`` raises
    :class:`LinAlgError`.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.solve(pargraph.tensor([[2.0, 0.0], [0.0, 4.0]]),
    ...                       pargraph.tensor([2.0, 2.0]))
    tensor([1.0000, 0.5000])
    """
    A, B = as_tensor(A), as_tensor(B)
    vector = B.ndim == 1 or (left and B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return apply(ops.solve, A.mT, B.mT).mT
    if vector:
        return apply(ops.solve, A, B.unsqueeze(-1)).squeeze(-1)
    return apply(ops.solve, A, B)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """Each square matrix to the integer power ``n``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.matrix_power(pargraph.tensor([[1.0, 1.0], [0.0, 1.0]]), 2)
    tensor([[1., 2.],
            [0., 1.]])
    """
    return as_tensor(A).matrix_power(n)


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of a chain of matrices (the first may be a row vector, the last a column
    one), as ``torch.linalg.multi_dot``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.multi_dot([pargraph.ones(2), pargraph.ones(2, 3), pargraph.ones(3)])
    tensor(6.)
    """
    tensors = [as_tensor(t) for t in tensors]
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for k, t in enumerate(tensors):
        allowed = (1, 2) if k in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            where = "first" if k == 0 else "last" if k == len(tensors) - 1 else None
            raise RuntimeError(
                f"multi_dot(): the {where} tensor must be 1D or 2D but got {t.ndim}D" if where
                else f"multi_dot(): tensor {k} must be 2D but got {t.ndim}D")
    out = tensors[0]
    for t in tensors[1:]:
        out = out @ t
    return out


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of the vectors along ``dim`` (broadcast).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.vecdot(pargraph.tensor([1.0, 2.0]), pargraph.tensor([3.0, 4.0]))
    tensor(11.)
    """
    return (as_tensor(x) * as_tensor(y)).sum(dim)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcast).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.cross(pargraph.tensor([1.0, 0.0, 0.0]), pargraph.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    input, other = as_tensor(input), as_tensor(other)
    shape = tuple(np.broadcast_shapes(tuple(input.shape), tuple(other.shape)))
    return input.expand(*shape).cross(other.expand(*shape), dim=dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of the matrices (``offset`` above the main one, below if negative).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.diagonal(pargraph.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([1., 4.])
    """
    return as_tensor(A).diagonal(offset, dim1, dim2)


def svdvals(A: Tensor) -> Tensor:
    """The singular values of each matrix, in descending order; differentiable (once).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.svdvals(pargraph.tensor([[3.0, 0.0], [0.0, -4.0]]))
    tensor([4., 3.])
    """
    return apply(ops.svdvals, as_tensor(A))


def matrix_exp(A: Tensor) -> Tensor:
    """The exponential of each square matrix; differentiable (any number of times).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.matrix_exp(pargraph.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    return apply(ops.matrix_exp, as_tensor(A))


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> SvdResult:
    """``A = U diag(S) Vh`` for each matrix, singular values descending; differentiable, as
    PyTorch's (only through the first ``min(m, n)`` singular vectors; repeated singular values
    make the vectors' gradient infinite). Singular vectors are defined up to their signs.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.svd(pargraph.tensor([[3.0, 0.0], [0.0, -4.0]])).S
    tensor([4., 3.])
    """
    return SvdResult(*as_tensor(A)._svd_factors(bool(full_matrices)))


def qr(A: Tensor, mode: str = "reduced") -> QrResult:
    """``A = Q R`` for each matrix, ``Q`` with orthonormal columns and ``R`` upper triangular
    (``mode``: ``"reduced"``, ``"complete"``, or ``"r"``: ``R`` only, ``Q`` empty);
    differentiable as PyTorch's.

    Examples
    --------
    >>> import pargraph
    >>> q, r = pargraph.linalg.qr(pargraph.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> (q @ r).round(decimals=4)
    tensor([[3., 1.],
            [4., 2.]])
    """
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    return QrResult(*as_tensor(A)._qr_factors(mode))


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of the product of the Householder reflections
    ``I - tau_i v_i v_i^T``, ``v_i`` column ``i`` of ``A`` below its diagonal with a 1 on it
    (LAPACK's ``orgqr``, what :func:`pargraph.geqrf` gives); differentiable.

    Examples
    --------
    >>> import pargraph
    >>> a, tau = pargraph.geqrf(pargraph.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> pargraph.linalg.householder_product(a, tau).abs().round(decimals=2)
    tensor([[0.6000, 0.8000],
            [0.8000, 0.6000]])
    """
    A, tau = as_tensor(A), as_tensor(tau)
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater "
                           "than or equal to input.shape[-1]")
    if tau.shape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater "
                           "than or equal to tau.shape[-1]")
    eye = as_tensor(np.eye(m, n, dtype=A.dtype))
    vectors = A.tril(-1) + eye  # 1 on the diagonal
    q = eye.expand(A.shape)
    for i in reversed(range(tau.shape[-1])):  # H_0 (H_1 (... I)), on I's first n columns
        v = vectors[..., :, i:i + 1]
        q = q - (tau[..., i, None, None] * v) @ (v.mT @ q)
    return q


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudoinverse of each matrix, from its singular values above
    PyTorch's tolerance (``hermitian``: from a symmetric matrix's eigenvalues);
    differentiable.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.pinv(pargraph.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    A = as_tensor(A)
    if hermitian:
        w, v = eigh(A)
        keep = w.abs() > singular_tolerance(w.abs(), A, atol, rtol)
        return (v * kept_reciprocal(w, keep).unsqueeze(-2)) @ v.mT
    u, s, vh = svd(A, full_matrices=False)
    keep = s > singular_tolerance(s, A, atol, rtol)
    return pseudoinverse(u, s, vh, keep)


def matrix_rank(A: Tensor, *, atol: Any = None, rtol: Any = None,
                hermitian: bool = False) -> Tensor:
    """The number of singular values (``hermitian``: eigenvalues' magnitudes) above PyTorch's
    tolerance, per matrix (int64).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.matrix_rank(pargraph.ones(3, 3))
    tensor(1)
    """
    A = as_tensor(A)
    s = eigvalsh(A).abs() if hermitian else svdvals(A)
    return (s > singular_tolerance(s, A, atol, rtol)).sum(-1)


def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number of each matrix in the ``p``-norm: ``S_max / S_min`` for ``None``
    and 2 (``S_min / S_max`` for -2), else ``norm(A, p) * norm(inv(A), p)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.cond(pargraph.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor(2.)
    """
    A = as_tensor(A)
    if p in (None, 2, -2):
        s = svdvals(A)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *,
          driver: str | None = None) -> LstsqResult:
    """The least-squares solution of ``A X = B`` for each matrix (``B`` may be a vector),
    from the pseudoinverse; ``residuals``, ``rank`` and ``singular_values`` as PyTorch's
    ``driver`` gives them (``"gelsy"`` by default: the rank only); differentiable.

    Examples
    --------
    >>> import pargraph
    >>> A = pargraph.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> pargraph.linalg.lstsq(A, pargraph.tensor([1.0, 2.0, 3.0])).solution
    tensor([1., 2.])
    """
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, "
                           f"gelsy, gelsd, gelss), but got {driver}")
    A, B = as_tensor(A), as_tensor(B)
    vector = B.ndim == 1
    B = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    u, s, vh = svd(A, full_matrices=False)  # one factorization: solution, rank, values
    keep = s > singular_tolerance(s, A, None,
                                  rcond if rcond is not None and rcond > 0 else None)
    solution = pseudoinverse(u, s, vh, keep) @ B
    rank = keep.sum(-1)
    empty = A.new_zeros((0,))
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        residuals = (A @ solution - B).pow(2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return LstsqResult(solution.squeeze(-1) if vector else solution, residuals,
                       rank if driver != "gels" else rank.new_zeros((0,)),
                       s if driver in ("gelsd", "gelss") else empty)


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """The eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices, read
    from their lower triangle (``UPLO="U"``: the upper one); differentiable, as PyTorch's
    (repeated eigenvalues make the eigenvectors' gradient infinite).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.eigh(pargraph.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
    tensor([1., 2.])
    """
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    packed = apply(ops.eigh, as_tensor(A), upper=UPLO == "U")
    return EighResult(packed[..., 0, :], packed[..., 1:, :])


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of symmetric matrices; differentiable.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.eigvalsh(pargraph.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor([1., 2.])
    """
    return eigh(A, UPLO).eigenvalues
