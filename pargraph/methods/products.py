"""Tensor methods of linear algebra: products (``dot``, ``outer``, ``addmm``...), decompositions,
inverses and determinants."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from pargraph import amp, ops

#: What ``slogdet``, ``svd`` and ``qr`` return, as ``torch.return_types``: tuples with names.

SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
SvdResult = namedtuple("svd", ["U", "S", "V"])
QrResult = namedtuple("qr", ["Q", "R"])
GeqrfResult = namedtuple("geqrf", ["a", "tau"])


class ProductMethods:
    """Tensor's linear algebra: a mixin of ``Tensor`` (``pargraph.methods`` says what the class it
    joins has)."""

    @amp.autocasts("lower")
    def mm(self, mat2: Any) -> Any:
        """Matrix product of two 2-D tensors (no broadcasting, unlike ``@``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).mm(pargraph.ones(3, 1)).tolist()
        [[3.0], [3.0]]
        """
        return _checked_product(self, mat2, 2, "mm")

    @amp.autocasts("lower")
    def bmm(self, mat2: Any) -> Any:
        """Batched matrix product of two 3-D tensors with the same batch size.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(4, 2, 3).bmm(pargraph.ones(4, 3, 5)).shape
        pargraph.Size([4, 2, 5])
        """
        return _checked_product(self, mat2, 3, "bmm")

    def dot(self, other: Any) -> Any:
        """The inner product of two 1-D tensors.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0]).dot(pargraph.tensor([3.0, 4.0])).item()
        11.0
        """
        if self.dim() != 1 or other.dim() != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and "
                               f"{other.dim()}D tensors")
        return self @ other

    def mv(self, vec: Any) -> Any:
        """The product of this matrix and the vector ``vec`` (``torch.mv``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).mv(pargraph.tensor([1.0, 2.0, 3.0])).tolist()
        [6.0, 6.0]
        """
        if self.dim() != 2 or vec.dim() != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got 1, {self.dim()}, "
                               f"{vec.dim()}")
        if self.shape[1] != vec.shape[0]:
            raise RuntimeError(f"size mismatch, got input ({self.shape[0]}), mat "
                               f"({self.shape[0]}x{self.shape[1]}), vec ({vec.shape[0]})")
        return self @ vec

    def inner(self, other: Any) -> Any:
        """The products of the last dimension's entries summed, for every pair of the two
        tensors' other indices (shape ``self.shape[:-1] + other.shape[:-1]``), as
        ``torch.inner``; a 0-d tensor multiplies.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.inner(pargraph.tensor([1.0, 2.0]), pargraph.tensor([[3.0, 4.0]])).tolist()
        [11.0]
        """
        if self.dim() == 0 or other.dim() == 0:
            return self * other
        if self.shape[-1] != other.shape[-1]:
            raise RuntimeError(f"inner() the last dimension must match on both input tensors "
                               f"but got shapes {list(self.shape)} and {list(other.shape)}")
        size = self.shape[-1]
        product = self.reshape((-1, size)) @ other.reshape((-1, size)).T
        return product.reshape(tuple(self.shape[:-1]) + tuple(other.shape[:-1]))

    def vdot(self, other: Any) -> Any:
        """``dot`` of two 1-D tensors (the first conjugated: the same for real tensors).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0]).vdot(pargraph.tensor([3.0, 4.0])).item()
        11.0
        """
        return self.dot(other)

    def ger(self, vec2: Any) -> Any:
        """``outer`` (PyTorch's older name)."""
        return self.outer(vec2)

    def outer(self, vec2: Any) -> Any:
        """The outer product of two 1-D tensors.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).outer(pargraph.tensor([3, 4])).tolist()
        [[3, 4], [6, 8]]
        """
        for name, vector in (("self", self), ("vec2", vec2)):
            if vector.ndim != 1:
                raise RuntimeError(f"outer: Expected 1-D argument {name}, but got "
                                   f"{vector.ndim}-D")
        return self.reshape((-1, 1)) * vec2.reshape((1, -1))

    @amp.autocasts("lower")
    def addmm(self, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * (mat1 @ mat2)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, 1).addmm(pargraph.ones(1, 2), pargraph.ones(2, 1)).tolist()
        [[2.0]]
        """
        return self._added(lambda wide: wide(mat1) @ wide(mat2), beta, alpha)

    def _added(self, product: Any, beta: float, alpha: float, once: bool = True) -> Any:
        """``beta * self + alpha * product(wide)``; with ``beta`` 0, ``self`` is ignored (its
        NaN and inf do not propagate), as PyTorch documents. ``product`` makes the product of
        its operands passed through ``wide``: for float16 and bfloat16 (``once``), as
        PyTorch's matrix kernels, the whole sum is computed in float32 and rounded once."""
        half = once and np.dtype(self.dtype) in ops.HALVES

        def wide(t: Any) -> Any:
            if not hasattr(t, "_node"):  # a number or an array
                t = self._wrap(self._operand(t))
            return t.float() if half else t

        start = self.float() if half else self
        made = product(wide)
        made = made if alpha == 1 else made * alpha
        if beta == 0:
            made = made + self._constant(np.zeros(tuple(start.shape), np.dtype(start.dtype)))
        else:
            made = (start if beta == 1 else start * beta) + made
        return made.to(self.dtype) if half else made

    def addmv(self, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * (mat @ vec)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).addmv(pargraph.ones(2, 3), pargraph.ones(3), alpha=2).tolist()
        [7.0, 7.0]
        """
        return self._added(lambda wide: wide(mat) @ wide(vec), beta, alpha)

    def addr(self, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * outer(vec1, vec2)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 2).addr(pargraph.ones(2), pargraph.tensor([1.0, 2.0])).tolist()
        [[1.0, 2.0], [1.0, 2.0]]
        """
        return self._added(lambda wide: wide(vec1).outer(wide(vec2)), beta, alpha, once=False)

    @amp.autocasts("lower")
    def addbmm(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * sum_b (batch1[b] @ batch2[b])``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, 1).addbmm(pargraph.ones(3, 1, 2), pargraph.ones(3, 2, 1)).tolist()
        [[6.0]]
        """
        return self._added(lambda wide: (wide(batch1) @ wide(batch2)).sum(0), beta, alpha)

    def addmm_(self, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addmm` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(1, 1)
        >>> x.addmm_(pargraph.ones(1, 2), pargraph.ones(2, 1)) is x
        True
        """
        return self._in_place(self.addmm(mat1, mat2, beta=beta, alpha=alpha).to(self.dtype))

    def baddbmm_(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`baddbmm` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2, 1, 1)
        >>> x.baddbmm_(pargraph.ones(2, 1, 3), pargraph.ones(2, 3, 1)) is x
        True
        """
        return self._in_place(self.baddbmm(batch1, batch2, beta=beta, alpha=alpha)
                              .to(self.dtype))

    def addmv_(self, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addmv` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2)
        >>> x.addmv_(pargraph.ones(2, 3), pargraph.ones(3)) is x
        True
        """
        return self._in_place(self.addmv(mat, vec, beta=beta, alpha=alpha).to(self.dtype))

    def addr_(self, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addr` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2, 2)
        >>> x.addr_(pargraph.ones(2), pargraph.ones(2)) is x
        True
        """
        return self._in_place(self.addr(vec1, vec2, beta=beta, alpha=alpha).to(self.dtype))

    def addbmm_(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addbmm` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(1, 1)
        >>> x.addbmm_(pargraph.ones(3, 1, 2), pargraph.ones(3, 2, 1)) is x
        True
        """
        return self._in_place(self.addbmm(batch1, batch2, beta=beta, alpha=alpha)
                              .to(self.dtype))

    def cholesky(self, upper: bool = False) -> Any:
        """The Cholesky factor (``torch.cholesky``; :func:`pargraph.linalg.cholesky`).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[4.0, 2.0], [2.0, 2.0]]).cholesky().tolist()
        [[2.0, 0.0], [1.0, 1.0]]
        """
        return self._apply(ops.cholesky, self._node, upper=upper)

    def cholesky_inverse(self, upper: bool = False) -> Any:
        """The inverse of ``A`` from its Cholesky factor (this tensor, lower or ``upper``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 0.0], [1.0, 1.0]]).cholesky_inverse().tolist()
        [[0.5, -0.5], [-0.5, 1.0]]
        """
        eye = self._constant(np.eye(self.shape[-1], dtype=np.dtype(self.dtype)))
        return eye.cholesky_solve(self, upper)

    def cholesky_solve(self, input2: Any, upper: bool = False) -> Any:
        """``X`` with ``A X = self``, ``A``'s Cholesky factor ``input2`` (lower or ``upper``).

        Examples
        --------
        >>> import pargraph
        >>> L = pargraph.tensor([[2.0, 0.0], [1.0, 1.0]])
        >>> pargraph.tensor([[2.0], [2.0]]).cholesky_solve(L).tolist()
        [[0.0], [1.0]]
        """
        factor = self._wrap(self._operand(input2))
        lower = factor.mT if upper else factor
        inner = self._apply(ops.solve_triangular, lower._node, self._node, upper=False)
        return self._apply(ops.solve_triangular, lower.mT._node, inner._node, upper=True)

    @amp.autocasts("lower")
    def baddbmm(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * (batch1 @ batch2)``, batch by batch.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.zeros(2, 1, 1).baddbmm(pargraph.ones(2, 1, 3),
        ...                                       pargraph.ones(2, 3, 1)).shape)
        (2, 1, 1)
        """
        return self.addmm(batch1, batch2, beta=beta, alpha=alpha)

    def inverse(self) -> Any:
        """The inverse of each square matrix (the last two dimensions), as
        ``torch.linalg.inv``; a singular one raises ``linalg.LinAlgError`` naming it.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 0.0], [0.0, 4.0]]).inverse().tolist()
        [[0.5, 0.0], [0.0, 0.25]]
        """
        return self._apply(ops.inv, self._node)

    def svd(self, some: bool = True, compute_uv: bool = True) -> Any:
        """``(U, S, V)`` with ``self = U diag(S) V^T`` (``torch.svd``: ``V``, not ``V^T``;
        ``some=False``: square ``U`` and ``V``; ``compute_uv=False``: square zeros for them).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0, 0.0], [0.0, -4.0]]).svd().S
        tensor([4., 3.])
        """
        if not compute_uv:  # zeros of the square shapes, whatever ``some`` says
            m, n = self.shape[-2:]
            return SvdResult(self.new_zeros(self.shape[:-2] + (m, m)),
                             self._apply(ops.svdvals, self._node),
                             self.new_zeros(self.shape[:-2] + (n, n)))
        u, s, vh = self._svd_factors(not some)
        return SvdResult(u, s, vh.mT)

    def _svd_factors(self, full_matrices: bool) -> tuple:
        """``(U, S, Vh)`` of ``linalg.svd``, from one node holding all three."""
        packed = self._apply(ops.svd, self._node, full_matrices=full_matrices)
        m, n = self.shape[-2:]
        k = min(m, n)
        u = packed[..., :m, :m if full_matrices else k]
        v = packed[..., m + 1:, :n if full_matrices else k]
        return u, packed[..., m, :k], v.mT

    def qr(self, some: bool = True) -> Any:
        """``(Q, R)`` with ``self = Q R`` (``some=False``: square ``Q``), as ``torch.qr``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0], [4.0]]).qr().R.abs()
        tensor([[5.]])
        """
        return QrResult(*self._qr_factors("reduced" if some else "complete"))

    def _qr_factors(self, mode: str) -> tuple:
        """``(Q, R)`` of ``linalg.qr`` in ``mode``, from one node holding both."""
        packed = self._apply(ops.qr, self._node, mode=mode)
        m, n = self.shape[-2:]
        r = packed[..., m:, :n]
        if mode == "r":
            return self.new_zeros((0,)), r
        return packed[..., :m, :m if mode == "complete" else min(m, n)], r

    def geqrf(self) -> Any:
        """LAPACK's QR factorization in its compact form ``(a, tau)``: ``R`` in the upper
        triangle of ``a``, the Householder vectors below it (not differentiable, as in
        PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> a, tau = pargraph.tensor([[3.0], [4.0]]).geqrf()
        >>> a[0].abs().item(), tau.shape
        (5.0, pargraph.Size([1]))
        """
        values = self._value()
        if values.ndim < 2:
            raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
        flat = values.reshape(-1, *values.shape[-2:])
        pairs = [np.linalg.qr(m, mode="raw") for m in flat]
        a = np.stack([h.T for h, _ in pairs]).reshape(values.shape).astype(values.dtype)
        tau = np.stack([t for _, t in pairs]).reshape(values.shape[:-2] + (-1,))
        return GeqrfResult(self._constant(a), self._constant(tau.astype(values.dtype)))

    def pinverse(self, rcond: float = 1e-15) -> Any:
        """The pseudoinverse, singular values below ``rcond`` times the largest dropped.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 0.0], [0.0, 0.0]]).pinverse()
        tensor([[0.5000, 0.0000],
                [0.0000, 0.0000]])
        """
        u, s, vh = self._svd_factors(False)
        return pseudoinverse(u, s, vh, s > singular_tolerance(s, self, None, rcond))

    def matrix_exp(self) -> Any:
        """The exponential of each square matrix (``linalg.matrix_exp``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, 1).matrix_exp().tolist()
        [[1.0]]
        """
        return self._apply(ops.matrix_exp, self._node)

    def det(self) -> Any:
        """The determinant of each square matrix.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 1.0], [1.0, 3.0]]).det().item()
        5.0
        """
        return self._apply(ops.det, self._node)

    def slogdet(self) -> Any:
        """``(sign, logabsdet)`` of each square matrix's determinant.

        Examples
        --------
        >>> import pargraph
        >>> [round(t.item(), 4) for t in pargraph.tensor([[1.0, 2.0], [3.0, 4.0]]).slogdet()]
        [-1.0, 0.6931]
        """
        return SlogdetResult(self._apply(ops.slogdet_sign, self._node),
                             self._apply(ops.logabsdet, self._node))

    def logdet(self) -> Any:
        """The logarithm of each square matrix's determinant: NaN where it is negative.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([[2.0, 1.0], [1.0, 3.0]]).logdet().item(), 4)
        1.6094
        """
        sign, logabsdet = self.slogdet()
        return logabsdet.masked_fill(sign < 0, float("nan"))

    def matrix_power(self, n: int) -> Any:
        """Each square matrix to the integer power ``n`` (the inverse's for negative ``n``;
        identity matrices for 0), by repeated squaring.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 1.0], [0.0, 1.0]]).matrix_power(3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
        """
        if self.ndim < 2 or self.shape[-1] != self.shape[-2]:
            raise RuntimeError(
                "linalg.matrix_power: A must be batches of square matrices, but they are "
                + (f"{self.shape[-2]} by {self.shape[-1]} matrices" if self.ndim >= 2 else
                   "not matrices"))
        if n == 0:
            eye = np.broadcast_to(np.eye(self.shape[-1], dtype=self.dtype), self.shape)
            return self._constant(eye)
        base, result = (self.inverse() if n < 0 else self), None
        n = abs(n)
        while n:
            if n & 1:
                result = base if result is None else result @ base
            n >>= 1
            if n:
                base = base @ base
        return result

    def cross(self, other: Any, dim: int | None = None) -> Any:
        """The cross product of 3-vectors along ``dim`` (the first of size 3 if None).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 0, 0]).cross(pargraph.tensor([0.0, 1, 0])).tolist()
        [0.0, 0.0, 1.0]
        """
        if dim is None:
            dim = next(d for d, n in enumerate(self.shape) if n == 3)
        d = ops.normalize_dim(dim, self.dim())
        if self.shape[d] != 3:
            raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                               f"{self.shape[d]} and {other.shape[d]}")
        a = [self.narrow(d, k, 1) for k in range(3)]
        b = [other.narrow(d, k, 1) for k in range(3)]
        parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
        return self._apply(ops.cat, *[p._node for p in parts], dim=d)

    def kron(self, other: Any) -> Any:
        """The Kronecker product.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).kron(pargraph.tensor([1, 10])).tolist()
        [1, 10, 2, 20]
        """
        n = max(self.dim(), other.dim())
        a = self.reshape((1,) * (n - self.dim()) + tuple(self.shape))
        b = other.reshape((1,) * (n - other.dim()) + tuple(other.shape))
        spread_a = a.reshape(tuple(x for s in a.shape for x in (s, 1)))
        spread_b = b.reshape(tuple(x for s in b.shape for x in (1, s)))
        return (spread_a * spread_b).reshape(tuple(p * q for p, q in zip(a.shape, b.shape)))


def singular_tolerance(S: Any, A: Any, atol: Any, rtol: Any) -> Any:
    """PyTorch's cut for small singular values of ``A``: ``max(atol, rtol * S_max)``,
    ``rtol`` ``eps * max(m, n)`` when neither is given, and 0 when only ``atol`` is."""
    if rtol is None:
        rtol = np.finfo(A.dtype).eps * max(A.shape[-2:]) if atol is None or (
            not hasattr(atol, "_node") and atol <= 0) else 0.0
    atol = 0.0 if atol is None else atol
    largest = S.amax(-1, keepdim=True) if S.shape[-1] else S.new_zeros(S.shape[:-1] + (1,))
    bound = atol.to(S.dtype) if hasattr(atol, "_node") else S._constant(atol, S.dtype)
    return (largest * rtol).maximum(bound)


def kept_reciprocal(values: Any, keep: Any) -> Any:
    """``1 / values`` where ``keep``, 0 elsewhere (no division by the values dropped)."""
    return (1 / values.where(keep, values.new_ones(()))).where(keep, values.new_zeros(()))


def pseudoinverse(u: Any, s: Any, vh: Any, keep: Any) -> Any:
    """``V diag(1 / S) U^T`` from a reduced SVD, over the singular values ``keep`` marks."""
    return (vh.mT * kept_reciprocal(s, keep).unsqueeze(-2)) @ u.mT


def _checked_product(a: Any, b: Any, ndim: int, op: str) -> Any:
    """``a @ b`` of two 2-d (``ndim`` 2) or 3-d tensors, with PyTorch's errors."""
    if not hasattr(b, "_node"):  # data, as PyTorch takes it
        b = a._wrap(a._operand(b))
    what = "2D" if ndim == 2 else "3D"
    for name, t in (("self", a), ("mat2", b)):
        if t.ndim != ndim:
            raise RuntimeError(f"{op}: {name} must be a {what} tensor, got {t.ndim}D")
    if ndim == 3 and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"{op}: batch1 and batch2 must have the same batch size, got "
                           f"{a.shape[0]} and {b.shape[0]}")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                           f"({'x'.join(map(str, a.shape[-2:]))} and "
                           f"{'x'.join(map(str, b.shape[-2:]))})")
    return a @ b
