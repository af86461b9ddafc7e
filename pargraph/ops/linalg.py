"""Linear algebra: matrix products, linear layers as one node, einsum."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pargraph.graph import Node
from pargraph.ops.core import (
    ShapeError,
    broadcast_shapes,
    is_floating,
    primitive,
    result_dtype,
    shape_of,
    torch_name,
)
from pargraph.ops.elementwise import (
    add,
    constant,
    div,
    eq,
    mul,
    neg,
    sub,
    where,
)
from pargraph.ops.gemm import product
from pargraph.ops.shapes import (
    _einsum_sizes,
    cat,
    expand,
    index,
    reshape,
    reshaped,
    sum_,
    swap_last,
    unbroadcast,
)


def _gemm_cost(node: Node) -> float:
    """A matrix product's time at ~20 GFLOP/s plus a call: 2 * outputs * inner size."""
    x = node.inputs[0]
    inner = x.shape[-1] if x.shape else 1
    return 3e-6 + 2 * math.prod(node.shape) * inner / 20e9


def _products(x: Node, n: int, k: int) -> tuple:
    """The (m, n, k) numpy hands BLAS for ``x`` (..., k) times a (k, n) matrix: a product per
    matrix of ``x``, or one of all its rows at once (a 2-D right operand may be merged)."""
    m = x.shape[-2] if len(x.shape) > 1 else 1
    return (m, n, k), (math.prod(x.shape[:-1]), n, k)


def _matmul_products(node: Node) -> tuple:
    x, y = node.inputs
    return _products(x, y.shape[-1] if len(y.shape) > 1 else 1, x.shape[-1])


def _matmul_shape(x, y):
    if not x.shape or not y.shape:
        raise ShapeError(f"both arguments must be at least 1-D, got shapes {x.shape} and {y.shape}")
    xs = x.shape if len(x.shape) > 1 else (1,) + x.shape
    ys = y.shape if len(y.shape) > 1 else y.shape + (1,)
    if xs[-1] != ys[-2]:
        raise ShapeError(f"shapes {x.shape} and {y.shape} cannot be multiplied")
    if x.dtype != y.dtype:  # PyTorch does not promote in matmul
        raise ShapeError(f"expected m1 and m2 to have the same dtype, but got: {x.dtype} != "
                         f"{y.dtype}")
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    out = batch + (xs[-2] if len(x.shape) > 1 else None, ys[-1] if len(y.shape) > 1 else None)
    return tuple(n for n in out if n is not None), result_dtype(x, y)


@primitive("matmul", _matmul_shape, grad_name="MmBackward0", blas=True,
           cost=lambda node: _gemm_cost(node), products=_matmul_products)
def matmul(x, y):
    return _stacked_matmul(x, y)


def _stacked_matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x @ y``; a stack of matrices times one matrix as one BLAS product of all the stack's
    rows, where numpy's matmul makes one product per matrix of the stack."""
    if x.ndim > 2 and y.ndim == 2:
        rows = np.reshape(x, (math.prod(x.shape[:-1]), x.shape[-1]))
        return product(rows, y).reshape(x.shape[:-1] + (y.shape[1],))
    return product(x, y)  # numpy's matmul for what is not two matrices


def _matmul_vjp(which: int) -> Callable:
    """1-D operands are promoted to matrices, differentiated as such, and reshaped back."""

    def vjp(g, out, x, y):
        x2 = x if len(x.shape) > 1 else reshape(x, shape=(1,) + x.shape)
        y2 = y if len(y.shape) > 1 else reshape(y, shape=y.shape + (1,))
        out2 = broadcast_shapes(x2.shape[:-2], y2.shape[:-2]) + (x2.shape[-2], y2.shape[-1])
        g2 = reshaped(g, out2)
        if which == 0:
            return reshaped(unbroadcast(matmul(g2, swap_last(y2)), x2.shape), x.shape)
        return reshaped(unbroadcast(matmul(swap_last(x2), g2), y2.shape), y.shape)

    return vjp


matmul.defvjp(_matmul_vjp(0), _matmul_vjp(1))


def _linear_shape(x, w, b=None):
    if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"input of shape {x.shape} and weight of shape {w.shape} cannot be "
                         f"multiplied (expected the input's last dimension to be "
                         f"{w.shape[1] if len(w.shape) == 2 else '?'})")
    if b is not None and shape_of(b) not in ((), (w.shape[0],)):
        raise ShapeError(f"bias of shape {shape_of(b)} does not match {w.shape[0]} outputs")
    bias_node = isinstance(b, Node)
    if w.dtype != x.dtype or (bias_node and b.dtype != x.dtype):  # PyTorch does not promote
        other = w.dtype if w.dtype != x.dtype else b.dtype
        raise ShapeError(f"mat1 and mat2 must have the same dtype, but got "
                         f"{torch_name(x.dtype)} and {torch_name(other)}")
    shape = x.shape[:-1] + (w.shape[0],)
    return shape, x.dtype if b is None or bias_node else result_dtype(x, w, b)


@primitive("linear", _linear_shape, grad_name="AddmmBackward0", blas=True,
           cost=lambda node: _gemm_cost(node),
           products=lambda node: _products(node.inputs[0], *node.inputs[1].shape))
def linear(x, w, b=None):
    """x @ w.T + b as one node: an MLP layer is one task and three vjp nodes, not a dozen."""
    out = _stacked_matmul(x, w.T)
    if b is not None:
        out += b
    return out


def _rows(t: Node) -> Node:
    """``t`` with its leading dimensions flattened into one: (..., n) -> (rows, n)."""
    return reshaped(t, (math.prod(t.shape[:-1]), t.shape[-1]))


def _weight_grad_shape(g, x):
    if not g.shape or g.shape[:-1] != x.shape[:-1]:
        raise ShapeError(f"gradient of shape {g.shape} for an input of shape {x.shape}")
    return (g.shape[-1], x.shape[-1]), result_dtype(g, x)


def _weight_grad_cost(node: Node) -> float:
    g = node.inputs[0]
    return 3e-6 + 2 * math.prod(node.shape) * math.prod(g.shape[:-1]) / 20e9


@primitive("linear_weight_grad", _weight_grad_shape, grad_name="MmBackward0", blas=True,
           cost=_weight_grad_cost,
           products=lambda node: ((*node.shape, math.prod(node.inputs[0].shape[:-1])),))
def linear_weight_grad(g, x):
    """Linear's weight gradient, ``rows(g).T @ rows(x)``, as one node (a transpose node and a
    matrix product before; the same BLAS call)."""
    if g.ndim != 2:
        g, x = np.reshape(g, (-1, g.shape[-1])), np.reshape(x, (-1, x.shape[-1]))
    if g.shape[0] == 1 and g.dtype == x.dtype and g.dtype.kind == "f" and g.itemsize >= 4:
        # One row: an outer product, the same numbers (one product each), which numpy's
        # multiply computes faster than a BLAS matrix product of inner dimension 1.
        return np.multiply(g.T, x)
    return product(g.T, x)


linear_weight_grad.defvjp(
    lambda gg, out, g, x: reshaped(matmul(_rows(x), swap_last(gg)), g.shape),
    lambda gg, out, g, x: reshaped(matmul(_rows(g), gg), x.shape),
)


linear.defvjp(
    lambda g, out, x, w, b=None: matmul(g, w),
    lambda g, out, x, w, b=None: linear_weight_grad(g, x),
    lambda g, out, x, w, b=None: unbroadcast(g, b.shape),
)


def parse_einsum(equation: str, shapes: list[tuple]) -> str:
    """``equation`` made explicit for these operand shapes: ``...`` spelled out with unused
    letters (right-aligned, as numpy and PyTorch broadcast them) and the output written out
    (implicit mode: the letters used once, in alphabetical order, after the ellipsis)."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"{len(terms)} operands in the equation {equation!r} but "
                         f"{len(shapes)} tensors given")
    spare = iter(sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
                        - set(equation)))
    widest = max((len(shape) - len(term.replace("...", "")) for term, shape in
                  zip(terms, shapes) if "..." in term), default=0)
    ellipsis = "".join(next(spare) for _ in range(widest))
    explicit = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            term = term.replace("...", ellipsis[widest - (len(shape) - len(term) + 3):])
        if len(term) != len(shape) or (term and not term.isalpha()):
            raise ShapeError(f"the subscripts {term!r} do not match an operand of shape {shape}")
        explicit.append(term)
    if arrow:
        output = output.replace("...", ellipsis)
    else:
        letters = "".join(explicit)
        output = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                           and c not in ellipsis))
    return ",".join(explicit) + "->" + output


def _einsum_shape(*xs, equation):
    sizes = _einsum_sizes(equation, [x.shape for x in xs])
    output = equation.split("->")[1]
    if any(c not in sizes for c in output) or len(set(output)) != len(output):
        raise ShapeError(f"invalid output subscripts in {equation!r}")
    return tuple(sizes[c] for c in output), result_dtype(*xs)


def _einsum_cost(node: Node) -> float:
    sizes = _einsum_sizes(node.attrs["equation"], [x.shape for x in node.inputs])
    return 3e-6 + 2 * math.prod(sizes.values()) / 20e9


@primitive("einsum", _einsum_shape, cost=_einsum_cost, blas=True)
def einsum(*xs, equation):
    """Einstein summation (``equation`` explicit, see :func:`parse_einsum`)."""
    return np.einsum(equation, *xs, optimize=len(xs) > 2)


def _einsum_vjp(position: int) -> Callable:
    def vjp(g, out, *xs, equation):
        terms, output = equation.split("->")
        terms = terms.split(",")
        term = terms[position]
        if len(set(term)) != len(term):
            raise NotImplementedError(f"einsum: the gradient of an operand with a repeated "
                                      f"subscript ({term!r}: a diagonal) is not supported")
        others = [t for k, t in enumerate(terms) if k != position]
        reached = set(output).union(*others)
        kept = "".join(c for c in term if c in reached)
        grad = einsum(g, *(x for k, x in enumerate(xs) if k != position),
                      equation=",".join([output, *others]) + "->" + kept)
        x = xs[position]
        grad = reshaped(grad, tuple(grad.shape[kept.index(c)] if c in reached else 1
                                    for c in term))
        wide = tuple(d for d, (n, m) in enumerate(zip(x.shape, grad.shape)) if n == 1 and m != 1)
        if wide:
            grad = sum_(grad, dim=wide, keepdim=True)
        return expand(grad, x.shape) if grad.shape != x.shape else grad  # x's own sums
    return vjp


einsum.defvjp_at(_einsum_vjp)


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on the values it got (``torch.linalg.LinAlgError``)."""


def _square_float(name: str, a: Node) -> None:
    """PyTorch's checks of a batch of square floating point matrices, with its messages
    (raised as they are: the messages name the function already)."""
    if len(a.shape) < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 "
                           "dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they "
                           f"are {a.shape[-2]} by {a.shape[-1]} matrices")
    if not is_floating(a.dtype):
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {torch_name(a.dtype)}")


def _cholesky_shape(a, upper=False):
    _square_float("cholesky", a)
    return a.shape, a.dtype


@primitive("cholesky", _cholesky_shape, blas=True, grad_name="LinalgCholeskyExBackward0",
           cost=lambda node: 3e-6 + math.prod(node.shape) * node.shape[-1] / 20e9)
def cholesky(a, upper=False):
    try:
        lower = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise LinAlgError(_not_positive_definite(a)) from None
    return np.swapaxes(lower, -1, -2) if upper else lower


def _not_positive_definite(a: np.ndarray) -> str:
    """PyTorch's message, with the order of the first leading minor that is not positive
    definite (LAPACK's potrf tells it)."""
    from scipy.linalg import lapack

    flat = a.reshape(-1, *a.shape[-2:])
    for k, matrix in enumerate(flat):
        info = lapack.dpotrf(matrix.astype(np.float64), lower=True)[1]
        if info > 0:
            where = f"(Batch element {k}): " if len(flat) > 1 else ""
            return (f"linalg.cholesky: {where}The factorization could not be completed because "
                    f"the input is not positive-definite (the leading minor of order {info} is "
                    "not positive-definite).")
    return "linalg.cholesky: The factorization could not be completed (the input has NaN)"


def _triangle(x: Node, upper: bool, unit: bool = False) -> Node:
    """``x`` with the other triangle (and, ``unit``, the diagonal) of its last two dimensions
    zero."""
    n = x.shape[-1]
    mask = np.triu(np.ones((n, n), bool), 1 if unit else 0) if upper else \
        np.tril(np.ones((n, n), bool), -1 if unit else 0)
    return mul(x, constant(mask.astype(x.dtype)))


def _cholesky_vjp(g, out, a, upper=False):
    """PyTorch's ``cholesky_backward``: with ``A = L L^T``, ``phi = tril(L^T dL)`` with its
    diagonal halved, ``dA = L^{-T} phi L^{-1}``, symmetrized."""
    lower, g = (swap_last(out), swap_last(g)) if upper else (out, g)
    phi = _triangle(matmul(swap_last(lower), g), upper=False)
    n = lower.shape[-1]
    phi = mul(phi, constant((np.ones((n, n)) - 0.5 * np.eye(n)).astype(phi.dtype)))
    # L^{-T} phi L^{-1} = (L^{-T} (L^{-T} phi)^T)^T
    left = solve_triangular(swap_last(lower), phi, upper=True)
    grad = swap_last(solve_triangular(swap_last(lower), swap_last(left), upper=True))
    return mul(add(grad, swap_last(grad)), constant(np.asarray(0.5, grad.dtype)))


cholesky.defvjp(_cholesky_vjp)


def _lapack(name: str, dtype: np.dtype) -> Callable:
    """LAPACK's routine ``name`` (``potrf``, ``getrf``) for ``dtype`` (float32 or float64)."""
    from scipy.linalg import lapack

    return getattr(lapack, ("s" if dtype == np.float32 else "d") + name)


def _batched(a: np.ndarray, one: Callable) -> list:
    """``one(matrix)`` for each matrix of the batch ``a``, in order."""
    return [one(matrix) for matrix in a.reshape(-1, *a.shape[-2:])]


@primitive("cholesky_ex", _cholesky_shape, blas=True, grad_name="LinalgCholeskyExBackward0",
           cost=lambda node: 3e-6 + math.prod(node.shape) * node.shape[-1] / 20e9)
def cholesky_ex(a, upper=False):
    """The Cholesky factor without raising: where a leading minor is not positive-definite,
    what LAPACK's potrf left (PyTorch's ``cholesky_ex``)."""
    potrf = _lapack("potrf", a.dtype)
    factors = [potrf(m, lower=True, clean=True)[0] for m in a.reshape(-1, *a.shape[-2:])]
    lower = np.stack(factors).reshape(a.shape) if factors else np.zeros_like(a)
    return np.swapaxes(lower, -1, -2) if upper else lower


cholesky_ex.defvjp(_cholesky_vjp)


@primitive("cholesky_info", lambda a, upper=False: (a.shape[:-2], np.dtype(np.int32)))
def cholesky_info(a, upper=False):
    """Per matrix, 0, or the order of the first leading minor that is not positive-definite."""
    potrf = _lapack("potrf", a.dtype)
    infos = _batched(a, lambda m: potrf(m, lower=True)[1])
    return np.asarray(infos, np.int32).reshape(a.shape[:-2])


def _lu_shape(name: str) -> Callable:
    def shape(a, *_, **__):
        if len(a.shape) < 2:
            raise RuntimeError(f"torch.linalg.{name}: Expected tensor with 2 or more "
                               f"dimensions. Got size: {list(a.shape)} instead")
        if not is_floating(a.dtype):
            raise RuntimeError(f"{name}: Expected a floating point or complex tensor as "
                               f"input. Got {torch_name(a.dtype)}")
        return a.shape, a.dtype
    return shape


def _getrf(a: np.ndarray) -> list:
    getrf = _lapack("getrf", a.dtype)
    return _batched(a, lambda m: getrf(m))


def _factorization_cost(node: Node) -> float:
    """Seconds of an O(m n min(m, n)) factorization of each matrix of the node's input."""
    shape = node.inputs[0].shape
    return 3e-6 + math.prod(shape) * min(shape[-2:]) / 10e9


@primitive("lu_factor", _lu_shape("lu_factor"), blas=True, grad_name="LinalgLuFactorExBackward0",
           cost=_factorization_cost)
def lu_factor(a):
    """The packed LU factorization with partial pivoting (LAPACK's getrf): ``L`` below the
    diagonal (its unit diagonal implied), ``U`` on and above."""
    done = _getrf(a)
    return np.stack([lu for lu, _, _ in done]).reshape(a.shape) if done else np.zeros_like(a)


def _k(shape: tuple) -> int:
    return min(shape[-2:])


@primitive("lu_pivots", lambda a: (a.shape[:-2] + (_k(a.shape),), np.dtype(np.int32)))
def lu_pivots(a):
    """The row swaps of ``lu_factor``, 1-based as LAPACK and PyTorch give them."""
    k = _k(a.shape)
    done = _getrf(a)
    pivots = [piv + 1 for _, piv, _ in done] or [np.zeros(k, np.int32)]
    return np.asarray(pivots, np.int32).reshape(a.shape[:-2] + (k,))


@primitive("lu_info", lambda a: (a.shape[:-2], np.dtype(np.int32)))
def lu_info(a):
    """Per matrix, 0, or the 1-based position of the first zero pivot of ``U``."""
    return np.asarray([info for _, _, info in _getrf(a)], np.int32).reshape(a.shape[:-2])


@primitive("lu_permutation", lambda pivots, m, dtype: (pivots.shape[:-1] + (m, m), dtype))
def lu_permutation(pivots, m, dtype):
    """``P`` of ``A = P L U`` from LAPACK's pivots: the identity's rows swapped in order."""
    flat = pivots.reshape(-1, pivots.shape[-1])
    out = np.zeros((len(flat), m, m), dtype)
    for b, swaps in enumerate(flat):
        order = np.arange(m)
        for i, j in enumerate(swaps - 1):
            order[i], order[j] = order[j], order[i]
        out[b, order, np.arange(m)] = 1
    return out.reshape(pivots.shape[:-1] + (m, m))


def _lu_factor_vjp(g, out, a):
    """PyTorch's LU backward for square matrices: with ``A = P L U``,
    ``dA = P L^{-H} (tril(L^H dL, -1) + triu(dU U^H)) U^{-H}``, ``dL`` and ``dU`` the parts
    of the packed gradient."""
    m, n = a.shape[-2:]
    if m != n:
        raise NotImplementedError("the gradient of lu_factor and lu is implemented for square "
                                  f"matrices only (got {m} x {n})")
    eye = constant(np.eye(n, dtype=out.dtype))
    lower = add(_triangle(out, upper=False, unit=True), eye)
    upper = _triangle(out, upper=True)
    g_lower, g_upper = _triangle(g, upper=False, unit=True), _triangle(g, upper=True)
    phi = add(_triangle(matmul(swap_last(lower), g_lower), upper=False, unit=True),
              _triangle(matmul(g_upper, swap_last(upper)), upper=True))
    # P L^{-T} phi U^{-T}: two triangular solves, then the permutation
    right = swap_last(solve_triangular(upper, swap_last(phi), upper=True))
    inner = solve_triangular(swap_last(lower), right, upper=True, unitriangular=True)
    perm = lu_permutation(lu_pivots(a), m=m, dtype=out.dtype)
    return matmul(perm, inner)


lu_factor.defvjp(_lu_factor_vjp)


def _system_shape(name: str) -> Callable:
    """The shape rule of ``linalg.<name>``: ``X`` with ``A X = B``, batches broadcast."""
    def shape(a, b, *_, **__):
        _square_float(name, a)
        if len(b.shape) < 2 or b.shape[-2] != a.shape[-1]:
            raise RuntimeError(f"linalg.{name}: Incompatible shapes of A and B for the equation "
                               f"AX = B ({a.shape[-2]}x{a.shape[-1]} and "
                               f"{'x'.join(map(str, b.shape[-2:]))})")
        if a.dtype != b.dtype:
            raise RuntimeError(f"linalg.{name}: Expected A and B to have the same dtype, but "
                               f"found A of type {a.dtype} and B of type {b.dtype} instead")
        return broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], a.dtype
    return shape


@primitive("solve_triangular", _system_shape("solve_triangular"), blas=True,
           grad_name="LinalgSolveTriangularBackward0",
           cost=lambda node: 3e-6 + math.prod(node.shape) * node.shape[-2] / 20e9)
def solve_triangular(a, b, upper, unitriangular=False):
    from scipy.linalg import solve_triangular as solve

    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    with np.errstate(all="ignore"):  # a zero on the diagonal gives inf, as in PyTorch
        out = [solve(x, y, lower=not upper, unit_diagonal=unitriangular, check_finite=False)
               for x, y in zip(a, b)]
    return np.stack(out).reshape(batch + b.shape[-2:]).astype(b.dtype, copy=False)


def _solve_a_vjp(g, out, a, b, upper, unitriangular=False):
    """``dA = -A^{-T} dX X^T`` in ``A``'s triangle."""
    gb = solve_triangular(swap_last(a), g, upper=not upper, unitriangular=unitriangular)
    ga = neg(matmul(gb, swap_last(out)))
    return unbroadcast(_triangle(ga, upper, unitriangular), a.shape)


def _solve_b_vjp(g, out, a, b, upper, unitriangular=False):
    """``dB = A^{-T} dX``."""
    gb = solve_triangular(swap_last(a), g, upper=not upper, unitriangular=unitriangular)
    return unbroadcast(gb, b.shape)


solve_triangular.defvjp(_solve_a_vjp, _solve_b_vjp)


def _square_matrices(name: str) -> Callable:
    def shape(a, *_, **__):
        _square_float(name, a)
        return a.shape, a.dtype
    return shape


def _batch_of(name: str) -> Callable:
    """The shape rule of a function of square matrices that gives one number per matrix."""
    def shape(a):
        _square_float(name, a)
        return a.shape[:-2], a.dtype
    return shape


def _cubic(node: Node) -> float:
    """Seconds of an O(n^3) factorization of each matrix of the node's input."""
    a = node.inputs[0]
    return 3e-6 + math.prod(a.shape) * a.shape[-1] / 10e9


def _singular(name: str, a: np.ndarray) -> str:
    """PyTorch's message for a singular matrix: the first zero pivot of its LU factorization
    (LAPACK's getrf tells it), and the batch element."""
    from scipy.linalg import lapack

    flat = a.reshape(-1, *a.shape[-2:])
    for k, matrix in enumerate(flat):
        info = lapack.dgetrf(matrix.astype(np.float64))[2]
        if info > 0:
            where = f"(Batch element {k}): " if len(flat) > 1 else ""
            return (f"linalg.{name}: {where}The diagonal element {info} is zero, the inversion "
                    "could not be completed because the input matrix is singular.")
    return f"linalg.{name}: The input matrix is singular."


@primitive("inv", _square_matrices("inv"), blas=True, grad_name="LinalgInvExBackward0",
           cost=_cubic)
def inv(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise LinAlgError(_singular("inv", a)) from None


# d(A^-1) = -A^-1 dA A^-1: dA = -A^-T G A^-T, differentiable again (it is made of ops).
inv.defvjp(lambda g, out, a: neg(matmul(swap_last(out), matmul(g, swap_last(out)))))


@primitive("inv_ex", _square_matrices("inv_ex"), blas=True, grad_name="LinalgInvExBackward0",
           cost=_cubic)
def inv_ex(a):
    """The inverse without raising: a singular matrix's has infinities and NaN, as
    PyTorch's ``inv_ex`` gives."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        pass
    getrf, getrs = _lapack("getrf", a.dtype), _lapack("getrs", a.dtype)
    eye = np.eye(a.shape[-1], dtype=a.dtype)

    def one(matrix):
        lu, piv, _ = getrf(matrix)
        with np.errstate(all="ignore"):
            return getrs(lu, piv, eye)[0]

    return np.stack(_batched(a, one)).reshape(a.shape)


inv_ex.defvjp(inv.vjps[0])


@primitive("det", _batch_of("det"), blas=True, grad_name="LinalgDetBackward0", cost=_cubic)
def det(a):
    return np.asarray(np.linalg.det(a), dtype=a.dtype)


def _det_vjp(g, out, a):
    """``dA = g det(A) A^-T``."""
    scale = reshape(mul(g, out), shape=out.shape + (1, 1))
    return mul(scale, swap_last(inv(a)))


det.defvjp(_det_vjp)


@primitive("slogdet_sign", _batch_of("slogdet"), blas=True, cost=_cubic)
def slogdet_sign(a):
    return np.asarray(np.linalg.slogdet(a)[0], dtype=a.dtype)


@primitive("logabsdet", _batch_of("slogdet"), blas=True, grad_name="LinalgSlogdetBackward0",
           cost=_cubic)
def logabsdet(a):
    with np.errstate(divide="ignore"):  # a singular matrix: -inf, as in PyTorch
        return np.asarray(np.linalg.slogdet(a)[1], dtype=a.dtype)


# d log|det A| = tr(A^-1 dA): dA = g A^-T.
logabsdet.defvjp(lambda g, out, a: mul(reshape(g, shape=g.shape + (1, 1)), swap_last(inv(a))))


@primitive("solve", _system_shape("solve"), blas=True, grad_name="LinalgSolveExBackward0",
           cost=lambda node: 3e-6 + math.prod(node.inputs[0].shape) * node.inputs[0].shape[-1]
           / 10e9 + math.prod(node.shape) * node.shape[-2] / 20e9)
def solve(a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    try:
        return np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]),
                               np.broadcast_to(b, batch + b.shape[-2:]))
    except np.linalg.LinAlgError:
        raise LinAlgError("linalg.solve: The solver failed because the input matrix is "
                          "singular.") from None


def _solve_b(g, out, a, b):
    """``dB = A^-T G``."""
    return unbroadcast(solve(swap_last(a), g), b.shape)


def _solve_a(g, out, a, b):
    """``dA = -dB X^T``."""
    return unbroadcast(neg(matmul(solve(swap_last(a), g), swap_last(out))), a.shape)


solve.defvjp(_solve_a, _solve_b)


def _svdvals_shape(a):
    if len(a.shape) < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    if not is_floating(a.dtype):
        raise RuntimeError(f"linalg.svd: Expected a floating point or complex tensor as input. "
                           f"Got {torch_name(a.dtype)}")
    return a.shape[:-2] + (min(a.shape[-2:]),), a.dtype


@primitive("svdvals", _svdvals_shape, blas=True, grad_name="LinalgSvdBackward0",
           cost=lambda node: 3e-6 + math.prod(node.inputs[0].shape) * min(
               node.inputs[0].shape[-2:]) / 2e9)
def svdvals(a):
    return np.linalg.svd(a, compute_uv=False).astype(a.dtype, copy=False)


def _svdvals_backward_shape(g, a):
    return a.shape, a.dtype


@primitive("svdvals_backward", _svdvals_backward_shape, blas=True,
           cost=lambda node: 3e-6 + math.prod(node.shape) * min(node.shape[-2:]) / 2e9)
def svdvals_backward(g, a):
    """``U diag(g) V^T``: each singular value's gradient is its singular vectors' product."""
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return ((u * g[..., None, :]) @ vh).astype(a.dtype, copy=False)


svdvals.defvjp(lambda g, out, a: svdvals_backward(g, a))


def _no_second_derivative(name: str) -> Callable:
    def vjp(*_, **__):
        raise NotImplementedError(f"the second derivative of linalg.{name} is not supported")
    return vjp


svdvals_backward.defvjp(_no_second_derivative("svdvals"), _no_second_derivative("svdvals"))


def _eigh_shape(a, upper=False):
    _square_float("eigh", a)
    n = a.shape[-1]
    return a.shape[:-2] + (n + 1, n), a.dtype


@primitive("eigh", _eigh_shape, blas=True, grad_name="LinalgEighBackward0",
           cost=lambda node: 3e-6 + math.prod(node.inputs[0].shape) * node.shape[-1] / 2e9)
def eigh(a, upper=False):
    """The eigenvalues (first row, ascending) and the eigenvectors (the columns of the rest)
    of symmetric matrices, read from their lower triangle (``upper``: the upper one), packed
    in one array: the two results of one factorization."""
    w, v = np.linalg.eigh(a, UPLO="U" if upper else "L")
    return np.concatenate([w[..., None, :], v], axis=-2).astype(a.dtype, copy=False)


def _eigh_vjp(g, out, a, upper=False):
    """PyTorch's ``linalg_eig_backward`` for symmetric matrices: with ``A = V diag(w) V^T``,
    ``dA = V (skew(V^T dV) / E + diag(dw)) V^T``, ``E_ij = w_j - w_i``."""
    n = a.shape[-1]
    rows = (slice(None),) * (len(a.shape) - 2)
    gw, gv = index(g, spec=rows + (0,)), index(g, spec=rows + (slice(1, None),))
    w, v = index(out, spec=rows + (0,)), index(out, spec=rows + (slice(1, None),))
    vt = swap_last(v)
    inner = matmul(vt, gv)
    skew = mul(sub(inner, swap_last(inner)), constant(np.asarray(0.5, a.dtype)))
    eye = np.eye(n, dtype=a.dtype)
    row, column = (reshape(w, shape=w.shape[:-1] + (1, n)), reshape(w, shape=w.shape + (1,)))
    gaps = sub(row, column)
    gaps = add(mul(gaps, constant(1 - eye)), constant(eye))  # 1 on the diagonal
    middle = add(mul(div(skew, gaps), constant(1 - eye)),
                 mul(reshape(gw, shape=gw.shape + (1,)), constant(eye)))
    return matmul(v, matmul(middle, vt))


eigh.defvjp(_eigh_vjp)


def _svd_shape(a, full_matrices=False):
    _svdvals_shape(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    return a.shape[:-2] + (m + 1 + n, max(m, n) if full_matrices else k), a.dtype


@primitive("svd", _svd_shape, blas=True, grad_name="LinalgSvdBackward0",
           cost=lambda node: 3e-6 + math.prod(node.inputs[0].shape) * min(
               node.inputs[0].shape[-2:]) / 1e9)
def svd(a, full_matrices=False):
    """``A = U diag(S) V^T`` packed in one array: the rows of ``U``, then ``S``, then the rows
    of ``V`` (``full_matrices``: square ``U`` and ``V``, padded to the wider's columns)."""
    m, n = a.shape[-2:]
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    width = max(m, n) if full_matrices else min(m, n)
    out = np.zeros(a.shape[:-2] + (m + 1 + n, width), dtype=a.dtype)
    out[..., :m, :u.shape[-1]] = u
    out[..., m, :s.shape[-1]] = s
    out[..., m + 1:, :vh.shape[-2]] = np.swapaxes(vh, -1, -2)
    return out


def _quotient(x, y):
    """``x / y``, zero where ``x`` is: an unused part of a packed gradient is zeros, and must
    not make 0 / 0 where singular values repeat or vanish."""
    return where(eq(x, constant(np.zeros((), x.dtype))), constant(np.zeros((), x.dtype)),
                 div(x, y))


def _svd_vjp(g, out, a, full_matrices=False):
    """PyTorch's ``svd_backward`` on the first ``k`` singular vectors: with ``A = U S V^T``,
    ``E_jk = S_k^2 - S_j^2``, ``dA = U [(skew(U^T dU) S + S skew(V^T dV)) / E + diag(dS)] V^T``
    plus ``(I - U U^T) dU S^-1 V^T`` for tall and ``U S^-1 dV^T (I - V V^T)`` for wide
    matrices."""
    m, n = a.shape[-2:]
    k = min(m, n)
    rows = (slice(None),) * (len(a.shape) - 2)
    columns = slice(0, k)
    u, gu = (index(x, spec=rows + (slice(0, m), columns)) for x in (out, g))
    s, gs = (index(x, spec=rows + (m, columns)) for x in (out, g))
    v, gv = (index(x, spec=rows + (slice(m + 1, None), columns)) for x in (out, g))
    vh, gvh = swap_last(v), swap_last(gv)
    row_s = reshape(s, shape=s.shape[:-1] + (1, k))
    column_s = reshape(s, shape=s.shape + (1,))
    eye = np.eye(k, dtype=a.dtype)
    uhgu, vhgv = matmul(swap_last(u), gu), matmul(vh, gv)
    skew_u, skew_v = sub(uhgu, swap_last(uhgu)), sub(vhgv, swap_last(vhgv))
    squares = mul(s, s)
    gaps = sub(reshape(squares, shape=squares.shape[:-1] + (1, k)),
               reshape(squares, shape=squares.shape + (1,)))
    gaps = add(mul(gaps, constant(1 - eye)), constant(eye))
    inner = _quotient(add(mul(skew_u, row_s), mul(column_s, skew_v)), gaps)
    inner = add(inner, mul(reshape(gs, shape=gs.shape + (1,)), constant(eye)))
    if m > n:
        ga = matmul(u, inner)
        gus = _quotient(gu, row_s)
        ga = add(ga, sub(gus, matmul(u, matmul(swap_last(u), gus))))
        return matmul(ga, vh)
    if m < n:
        ga = matmul(inner, vh)
        sgvh = _quotient(gvh, column_s)
        ga = add(ga, sub(sgvh, matmul(matmul(sgvh, v), vh)))
        return matmul(u, ga)
    return matmul(u, matmul(inner, vh))


svd.defvjp(_svd_vjp)


def _qr_shape(a, mode="reduced"):
    if len(a.shape) < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    if not is_floating(a.dtype):
        raise RuntimeError(f"linalg.qr: Expected a floating point or complex tensor as input. "
                           f"Got {torch_name(a.dtype)}")
    m, n = a.shape[-2:]
    q_columns = m if mode == "complete" else min(m, n)
    r_rows = m if mode == "complete" else min(m, n)
    return a.shape[:-2] + (m + r_rows, max(q_columns, n)), a.dtype


@primitive("qr", _qr_shape, blas=True, grad_name="LinalgQrBackward0",
           cost=lambda node: 3e-6 + math.prod(node.inputs[0].shape) * min(
               node.inputs[0].shape[-2:]) / 2e9)
def qr(a, mode="reduced"):
    """``A = Q R`` packed in one array: the rows of ``Q``, then those of ``R``, padded to the
    wider's columns (``mode="r"``: ``Q`` is zeros)."""
    m, n = a.shape[-2:]
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        q = np.zeros_like(q)
    out = np.zeros(a.shape[:-2] + (m + r.shape[-2], max(q.shape[-1], n)), dtype=a.dtype)
    out[..., :m, :q.shape[-1]] = q
    out[..., m:, :n] = r
    return out


def _right_solve_transposed(upper, b):
    """``X`` with ``X upper^T = b`` (``upper`` upper triangular): ``X = b upper^-T``."""
    return swap_last(solve_triangular(upper, swap_last(b), upper=True))


def _qr_vjp(g, out, a, mode="reduced"):
    """PyTorch's ``linalg_qr_backward``: with ``M = dR R^T - Q^T dQ``, for ``m >= n``
    ``dA = (Q (triu(M) + triu(M)^T - diag(M)) + dQ) R^-T``; for ``m < n`` the square part
    from the skew part of ``-M``, then ``Q dR``."""
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    m, n = a.shape[-2:]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    k = m if mode == "complete" else min(m, n)
    rows = (slice(None),) * (len(a.shape) - 2)
    q, gq = (index(x, spec=rows + (slice(0, m), slice(0, k))) for x in (out, g))
    r, gr = (index(x, spec=rows + (slice(m, None), slice(0, n))) for x in (out, g))
    product = sub(matmul(gr, swap_last(r)), matmul(swap_last(q), gq))
    if m >= n:
        upper = _triangle(product, upper=True)
        eye = np.eye(k, dtype=a.dtype)
        sym = add(upper, swap_last(upper))
        sym = sub(sym, mul(mul(sym, constant(eye)), constant(np.asarray(0.5, a.dtype))))
        ga = add(matmul(q, sym), gq)
        return _right_solve_transposed(r, ga)
    x = neg(product)
    skew = _triangle(sub(x, swap_last(x)), upper=False)
    ga = matmul(q, skew)
    square = index(r, spec=rows + (slice(None), slice(0, m)))
    ga = _right_solve_transposed(square, ga)
    ga = cat(ga, constant(np.zeros(ga.shape[:-1] + (n - m,), a.dtype)), dim=len(a.shape) - 1)
    return add(ga, matmul(q, gr))


qr.defvjp(_qr_vjp)


@primitive("matrix_exp", _square_matrices("matrix_exp"), blas=True,
           grad_name="LinalgMatrixExpBackward0", cost=_cubic)
def matrix_exp(a):
    from scipy.linalg import expm

    return np.asarray(expm(a), dtype=a.dtype)


def _matrix_exp_vjp(g, out, a):
    """The upper right block of ``exp([[A^T, G], [0, A^T]])`` (the derivative of the
    exponential, as PyTorch computes it): made of ops, so differentiable again."""
    n = a.shape[-1]
    at = swap_last(a)
    zeros = constant(np.zeros(a.shape, a.dtype))
    last = len(a.shape) - 1
    block = cat(cat(at, g, dim=last), cat(zeros, at, dim=last), dim=last - 1)
    rows = (slice(None),) * (len(a.shape) - 2)
    return index(matrix_exp(block), spec=rows + (slice(0, n), slice(n, None)))


matrix_exp.defvjp(_matrix_exp_vjp)
