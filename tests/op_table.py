"""The op table: one row per op (or op variant) with its numpy reference and inputs.

Shared by tests/test_ops.py (forward, gradients, coverage of the registry) and
tests/test_execution.py (every op on every scheduler).
"""


import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import pargraph
from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.nn import functional as F

R = np.random.default_rng(1234)


def normal(*shape):
    return R.standard_normal(shape)


def positive(*shape):
    return R.uniform(0.5, 2.0, shape)


def away(*shape):
    """Normal values kept away from 0, where abs/relu/sign have a kink."""
    x = R.standard_normal(shape)
    return np.where(np.abs(x) < 0.2, np.sign(x + 1e-9) * 0.5, x)


def _fold_ref(x, size, k):
    """col2im by hand: each column's k x k block added at its place (stride 1, no padding)."""
    n, ck, _ = x.shape
    out = np.zeros((n, ck // (k * k)) + size)
    cols = x.reshape(n, ck // (k * k), k, k, size[0] - k + 1, size[1] - k + 1)
    for i in range(size[0] - k + 1):
        for j in range(size[1] - k + 1):
            out[:, :, i:i + k, j:j + k] += cols[:, :, :, :, i, j]
    return out


def distinct(*shape):
    """A permutation of well separated values: no ties for max/min/maximum."""
    return R.permutation(np.arange(int(np.prod(shape))) * 0.37 - 1.1).reshape(shape)


def with_zero(*shape):
    x = R.uniform(0.5, 2.0, shape)
    x.flat[1] = 0.0
    return x


def node_op(prim, *args, **attrs):
    """Call a primitive directly on tensors (for ops only the backward pass records)."""
    return Tensor(prim(*(a._node if isinstance(a, Tensor) else a for a in args), **attrs))


@dataclass
class Case:
    name: str
    fn: Callable
    ref: Callable
    inputs: list  # numpy arrays; float arrays are differentiated
    eps: float = 1e-6
    atol: float = 1e-5
    differentiable: bool = True
    extra: dict = field(default_factory=dict)


_SAMPLES = np.random.default_rng(9).random((2, 3, 2))
_UNIFORMS = np.stack([np.random.default_rng(10 + k).random(4) for k in range(2)])


def _fractional_ref(x, kernel, out):
    """Fractional max pooling by its definition: along each dimension, window ``i`` starts at
    ``floor((i + u) * a) - floor(u * a)`` with ``a = (size - kernel) / (out - 1)``, the last at
    ``size - kernel``; the sample ``u`` for the width comes first."""
    def starts(u, size, k, n):
        a = (size - k) / (n - 1)
        return [math.floor((i + u) * a) - math.floor(u * a) for i in range(n - 1)] + [size - k]

    result = np.empty(x.shape[:2] + out)
    for b in range(x.shape[0]):
        for c in range(x.shape[1]):
            rows = starts(_SAMPLES[b, c, 1], x.shape[2], kernel[0], out[0])
            cols = starts(_SAMPLES[b, c, 0], x.shape[3], kernel[1], out[1])
            for i, r in enumerate(rows):
                for j, q in enumerate(cols):
                    result[b, c, i, j] = x[b, c, r:r + kernel[0], q:q + kernel[1]].max()
    return result


def _spd(a):
    return a @ a.mT + 3 * pargraph.eye(a.shape[-1], dtype=a.dtype)


def _spd_ref(a):
    return a @ np.swapaxes(a, -1, -2) + 3 * np.eye(a.shape[-1])


def _ctc_ref(logits, targets, lengths):
    """CTC's loss by enumerating every alignment of each element: the paths of its length
    over the classes that collapse (repeats merged, then blanks, 0, dropped) to its target."""
    import itertools

    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    out = []
    for n, (target, steps) in enumerate(zip(targets, lengths)):
        total = 0.0
        for path in itertools.product(range(logits.shape[2]), repeat=steps):
            merged = [c for k, c in enumerate(path) if k == 0 or c != path[k - 1]]
            if [c for c in merged if c != 0] == list(target):
                total += np.exp(sum(log_probs[t, n, c] for t, c in enumerate(path)))
        out.append(-np.log(total))
    return np.array(out)


def _grid_sample_ref(x, grid):
    """Bilinear sampling by hand, pixel by pixel (zeros outside, align_corners=False)."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[1:3])
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                px = ((grid[b, i, j, 0] + 1) * w - 1) / 2
                py = ((grid[b, i, j, 1] + 1) * h - 1) / 2
                x0, y0 = int(np.floor(px)), int(np.floor(py))
                for yy, xx in ((y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)):
                    if 0 <= yy < h and 0 <= xx < w:
                        out[b, :, i, j] += x[b, :, yy, xx] * (1 - abs(px - xx)) * (
                            1 - abs(py - yy))
    return out


def _eigh_parts(result):
    w, v = result
    return pargraph.cat([w, (v * v).flatten(-2)], -1)


def _eigh_parts_ref(result):
    w, v = result
    return np.concatenate([w, (v * v).reshape(*v.shape[:-2], -1)], -1)


def _svd_parts(result, k=None):
    u, s, vh = result
    k = k or s.shape[-1]
    return pargraph.cat([s, (u[..., :k] * u[..., :k]).flatten(-2),
                         (vh[..., :k, :] * vh[..., :k, :]).flatten(-2)], -1)


def _svd_parts_ref(result, k=None):
    u, s, vh = result
    k = k or s.shape[-1]
    return np.concatenate([s, (u[..., :k] ** 2).reshape(*u.shape[:-2], -1),
                           (vh[..., :k, :] ** 2).reshape(*vh.shape[:-2], -1)], -1)


def _scatter_extreme_ref(x, s, pick):
    out = x.copy()
    for row, columns in enumerate([[0, 2, 0], [1, 1, 2]]):
        for k, column in enumerate(columns):
            out[row, column] = pick(out[row, column], s[row, k])
    return out


def _well_conditioned(a):
    return a + 4 * pargraph.eye(a.shape[-1], dtype=a.dtype)


def _well_conditioned_ref(a):
    return a + 4 * np.eye(a.shape[-1])


#: Standard gamma draws, at the levels _GAMMA_LEVELS of the concentrations in the table.
_GAMMA_LEVELS = np.array([0.3, 0.6, 0.8])
_GAMMA_X = __import__("scipy.special").special.gammaincinv(np.array([0.4, 1.5, 6.0]),
                                                           _GAMMA_LEVELS)


def _gamma_quantile_slope(a):
    """d/da of the gamma quantile at ``_GAMMA_X``'s levels: the implicit gradient."""
    from scipy import special

    h = 1e-6 * a
    return (special.gammaincinv(a + h, _GAMMA_LEVELS)
            - special.gammaincinv(a - h, _GAMMA_LEVELS)) / (2 * h)


def _product(*matrices):
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out


def _put(x, value, key):
    y = x * 1  # a non-leaf copy: item assignment is in place
    y[key] = value
    return y


def _put_ref(x, value, key):
    y = x.copy()
    y[key] = value
    return y


def unary(name, fn, ref, gen=normal, shape=(3, 4)):
    return Case(name, fn, ref, [gen(*shape)])


INT_INDEX = np.array([2, 0, 2, 1])
MASK = np.array([True, False, True])
TARGETS = np.array([2, 0, 1, 2])
CLASS_WEIGHTS = np.array([0.5, 2.0, 1.5])

CASES = [
    unary("neg", lambda x: -x, np.negative),
    unary("exp", lambda x: x.exp(), np.exp),
    unary("log", lambda x: x.log(), np.log, positive),
    unary("sqrt", pargraph.sqrt, np.sqrt, positive),
    unary("abs", lambda x: x.abs(), np.abs, away),
    unary("sign", lambda x: x.sign() * x, lambda x: np.sign(x) * x, away),
    unary("sin", pargraph.sin, np.sin),
    unary("asin", pargraph.asin, np.arcsin, lambda *s: R.uniform(-0.9, 0.9, s)),
    unary("acos", lambda x: x.acos(), np.arccos, lambda *s: R.uniform(-0.9, 0.9, s)),
    unary("atan", pargraph.atan, np.arctan),
    unary("asinh", pargraph.asinh, np.arcsinh),
    unary("acosh", pargraph.acosh, np.arccosh, lambda *s: R.uniform(1.2, 3.0, s)),
    unary("atanh", pargraph.atanh, np.arctanh, lambda *s: R.uniform(-0.9, 0.9, s)),
    unary("expm1", pargraph.expm1, np.expm1),
    unary("exp2", pargraph.exp2, np.exp2),
    unary("erfc", pargraph.erfc, lambda x: np.vectorize(math.erfc)(x)),
    unary("erfinv", pargraph.erfinv, lambda x: __import__("scipy.special").special.erfinv(x),
          lambda *s: R.uniform(-0.9, 0.9, s)),
    unary("lgamma", pargraph.lgamma, lambda x: __import__("scipy.special").special.gammaln(x),
          positive),
    Case("bessel", lambda x: pargraph.special.i0(x) + pargraph.special.i0e(x) * 2
         + pargraph.special.i1(x) * 3 + pargraph.special.i1e(x) * 4,
         lambda x: sum(k * getattr(__import__("scipy.special").special, f)(x)
                       for k, f in ((1, "i0"), (2, "i0e"), (3, "i1"), (4, "i1e"))),
         [normal(3, 4) * 2]),
    Case("incomplete_gamma", lambda x: pargraph.special.gammainc(pargraph.tensor(2.5), x)
         + pargraph.special.gammaincc(pargraph.tensor(0.7), x),
         lambda x: __import__("scipy.special").special.gammainc(2.5, x)
         + __import__("scipy.special").special.gammaincc(0.7, x), [positive(3, 4)]),
    unary("digamma", pargraph.digamma, lambda x: __import__("scipy.special").special.psi(x),
          positive),
    unary("polygamma", lambda x: pargraph.polygamma(2, x),
          lambda x: __import__("scipy.special").special.polygamma(2, x), positive),
    unary("ndtri", lambda x: pargraph.special.ndtri(x),
          lambda x: __import__("scipy.special").special.ndtri(x),
          lambda *s: R.uniform(0.1, 0.9, s)),
    unary("log_ndtr", lambda x: pargraph.special.log_ndtr(x),
          lambda x: __import__("scipy.special").special.log_ndtr(x)),
    unary("reciprocal", pargraph.reciprocal, np.reciprocal, away),
    Case("sinc", pargraph.sinc, np.sinc, [np.array([0.0, 0.3, -1.7, 2.2])]),
    Case("heaviside", lambda x, v: pargraph.heaviside(x.detach(), v.detach()), np.heaviside,
         [np.array([-1.0, 0.0, 2.0]), np.array([0.5, 0.25, 0.0])], differentiable=False),
    Case("hypot", pargraph.hypot, np.hypot, [normal(3, 4), normal(4)]),
    Case("logaddexp", pargraph.logaddexp, np.logaddexp, [normal(3, 4), normal(3, 1)]),
    Case("fmod", pargraph.fmod, np.fmod, [normal(3, 4) * 3, positive(4)]),
    Case("copysign", pargraph.copysign, np.copysign, [away(3, 4), normal(3, 4)]),
    Case("xlogy", pargraph.xlogy, lambda x, y: x * np.log(y), [normal(3, 4), positive(3, 4)]),
    Case("cumprod", lambda x: pargraph.cumprod(x, 1), lambda x: np.cumprod(x, 1),
         [normal(3, 4)]),
    Case("cumprod_with_zeros", lambda x: pargraph.cumprod(x * pargraph.tensor(
        [[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]), 1),
         lambda x: np.cumprod(x * np.array([[1.0, 0, 1, 1], [1, 1, 1, 0], [0, 1, 0, 1]]), 1),
         [normal(3, 4)]),
    unary("tan", pargraph.tan, np.tan, lambda *s: R.uniform(-1.2, 1.2, s)),
    unary("sinh", pargraph.sinh, np.sinh), unary("cosh", lambda x: x.cosh(), np.cosh),
    unary("log2", pargraph.log2, np.log2, positive),
    unary("log10", lambda x: x.log10(), np.log10, positive),
    # piecewise constant: a zero gradient, as PyTorch's (values away from the steps)
    unary("floor", lambda x: x.floor() + x, lambda x: np.floor(x) + x, away),
    unary("ceil", pargraph.ceil, np.ceil, away), unary("trunc", pargraph.trunc, np.trunc, away),
    unary("round", lambda x: x.round(decimals=1) * x, lambda x: np.round(x, 1) * x, away),
    Case("atan2", pargraph.atan2, np.arctan2, [normal(3, 4), away(4)]),
    Case("lstm_cell", lambda gx, h, c, w, b: node_op(ops.lstm_cell, gx, h, c, w, b),
         lambda gx, h, c, w, b: _lstm_ref(gx, h, c, w, b),
         [normal(2, 12), normal(2, 3), normal(2, 3), normal(12, 3), normal(12)]),
    # the cell's gradient node (no derivative of its own: no double backward through it)
    Case("lstm_cell_grads", lambda g, gx, h, c, w, b: node_op(
             ops.lstm_cell_grads, g, node_op(ops.lstm_cell, gx, h, c, w, b), c),
         lambda g, gx, h, c, w, b: _lstm_grads_ref(g, gx, h, c, w, b),
         [normal(6, 2, 3), normal(2, 12), normal(2, 3), normal(2, 3), normal(12, 3), normal(12)],
         differentiable=False),
    # a whole direction as one node, both ways; gradients of every input by differences
    Case("lstm_sequence", lambda gx, h, c, w, b: node_op(ops.lstm_sequence, gx, h, c, w, b,
                                                       reverse=False),
         lambda gx, h, c, w, b: _lstm_sequence_ref(gx, h, c, w, b, False),
         [normal(3, 2, 8), normal(2, 2), normal(2, 2), normal(8, 2), normal(8)]),
    Case("lstm_sequence_reverse", lambda gx, h, c, w: node_op(
             ops.lstm_sequence, gx, h, c, w, None, reverse=True),
         lambda gx, h, c, w: _lstm_sequence_ref(gx, h, c, w, 0.0, True),
         [normal(4, 8), normal(2), normal(2), normal(8, 2)]),
    Case("lstm_sequence_grads", lambda g, gx, h, c, w, b: node_op(
             ops.lstm_sequence_grads, g, node_op(ops.lstm_sequence, gx, h, c, w, b,
                                                 reverse=True), h, c, w, reverse=True),
         lambda g, gx, h, c, w, b: _lstm_sequence_grads_ref(g, gx, h, c, w, b, True),
         [normal(3, 6, 2, 2), normal(3, 2, 8), normal(2, 2), normal(2, 2), normal(8, 2),
          normal(8)], differentiable=False),
    Case("rnn_sequence_gru", lambda gx, h, w, b: node_op(ops.rnn_sequence, gx, h, w, b,
                                                       mode="GRU", reverse=False),
         lambda gx, h, w, b: _rnn_sequence_ref(gx, h, w, b, "GRU", False),
         [normal(3, 2, 6), normal(2, 2), normal(6, 2), normal(6)]),
    Case("rnn_sequence_tanh_reverse", lambda gx, h, w: node_op(
             ops.rnn_sequence, gx, h, w, None, mode="RNN_TANH", reverse=True),
         lambda gx, h, w: _rnn_sequence_ref(gx, h, w, 0.0, "RNN_TANH", True),
         [normal(4, 2, 3), normal(2, 3), normal(3, 3)]),
    Case("rnn_sequence_relu", lambda gx, h, w, b: node_op(
             ops.rnn_sequence, gx, h, w, b, mode="RNN_RELU", reverse=False),
         lambda gx, h, w, b: _rnn_sequence_ref(gx, h, w, b, "RNN_RELU", False),
         [away(4, 3), away(3), normal(3, 3) * 0.1, normal(3) * 0.1]),
    Case("rnn_sequence_grads", lambda g, gx, h, w, b: node_op(
             ops.rnn_sequence_grads, g, node_op(ops.rnn_sequence, gx, h, w, b, mode="GRU",
                                                reverse=True), h, w, mode="GRU", reverse=True),
         lambda g, gx, h, w, b: _rnn_sequence_grads_ref(g, gx, h, w, b),
         [normal(3, 5, 2, 2), normal(3, 2, 6), normal(2, 2), normal(6, 2), normal(6)],
         differentiable=False),
    # sparse COO: duplicates add up; gradients of the values and of the dense operand
    Case("sparse_to_dense", lambda v: node_op(ops.sparse_to_dense, pargraph.tensor(
             [[0, 2, 0], [1, 0, 1]]), v, shape=(3, 2, 2)),
         lambda v: _sparse_dense_ref(np.array([[0, 2, 0], [1, 0, 1]]), v, (3, 2, 2)),
         [normal(3, 2)]),
    Case("sparse_gather", lambda x: node_op(ops.sparse_gather, x, pargraph.tensor(
             [[2, 0, 2]])), lambda x: x[[2, 0, 2]], [normal(3, 4)]),
    Case("sparse_mm", lambda v, d: node_op(ops.sparse_mm, pargraph.tensor(
             [[0, 2, 0, 1], [1, 0, 1, 1]]), v, d, shape=(3, 2)),
         lambda v, d: _sparse_dense_ref(np.array([[0, 2, 0, 1], [1, 0, 1, 1]]), v, (3, 2)) @ d,
         [normal(4), normal(2, 5)]),
    Case("remainder", lambda x, y: x % y + x, lambda x, y: np.remainder(x, y) + x,
         [normal(3, 4), positive(4) + 1.0]),
    Case("floor_divide_int", lambda x, y: x // y, np.floor_divide,
         [np.array([[-7, 7, 5]]), np.array([2, -3, 4])], differentiable=False),
    Case("isfinite", lambda x: x.isfinite(),
         np.isfinite, [np.array([1.0, np.inf, np.nan])], differentiable=False),
    Case("logical_ops", lambda x, y: x.logical_and(y).logical_or(x).logical_xor(y),
         lambda x, y: np.logical_xor(np.logical_or(np.logical_and(x, y), x), y),
         [np.array([1, 0, 2, 0]), np.array([1, 1, 0, 0])], differentiable=False),
    unary("cos", lambda x: x.cos(), np.cos),
    unary("tanh", lambda x: x.tanh(), np.tanh),
    unary("sigmoid", lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    unary("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), away),
    Case("check_values", lambda x: node_op(ops.check_values, x, test=np.isfinite,
                                           message="finite"), lambda x: x, [normal(3)]),
    Case("threshold_backward", lambda g, r: node_op(ops.threshold_backward, g, r),
         lambda g, r: g * (r > 0), [normal(3, 4), away(3, 4)]),
    unary("clamp", lambda x: x.clamp(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), distinct),
    unary("clamp_min", lambda x: x.clamp(min=0.1), lambda x: np.clip(x, 0.1, None), distinct),
    unary("clone", lambda x: x.clone(), np.copy),
    Case("mode_index", lambda x: node_op(ops.mode_index, x, dim=1),
         lambda x: np.array([[2], [3]]), [np.array([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 1.0, 1.0]])],
         differentiable=False),
    Case("histc", lambda x: node_op(ops.histc, x, bins=4, low=0.0, high=3.0),
         lambda x: np.histogram(x, 4, (0.0, 3.0))[0].astype(x.dtype),
         [np.array([1.0, 2.0, 1.0, 2.5, 4.0])], differentiable=False),
    Case("searchsorted", lambda s, v: node_op(ops.searchsorted, s, v, right=False,
                                              dtype=np.dtype(np.int64)),
         lambda s, v: np.searchsorted(s, v), [np.array([1.0, 3.0, 5.0]),
                                              np.array([0.5, 3.0, 6.0])],
         differentiable=False),
    # numpy's Generator.choice draws these uniforms (a generator seeded 10 + row) and picks
    Case("multinomial_draws", lambda w, u: node_op(ops.multinomial_draws, w, u),
         lambda w, u: np.stack([np.random.default_rng(10 + k).choice(3, 4, p=row / row.sum())
                                for k, row in enumerate(w)]),
         [np.array([[0.2, 0.0, 0.8], [1.0, 1.0, 2.0]]), _UNIFORMS], differentiable=False),
    # x once t is computed (an order for recomputation): x's gradient passes, t gets none
    Case("after", lambda x, t: node_op(ops.after, x, t) + t, lambda x, t: x + t,
         [normal(3, 4), normal(3, 4)]),
    Case("add", lambda x, y: x + y, np.add, [normal(3, 4), normal(4)]),
    Case("add_3d", lambda x, y: x + y, np.add, [normal(2, 1, 3), normal(4, 1)]),
    Case("sub", lambda x, y: x - y, np.subtract, [normal(3, 1), normal(1, 4)]),
    Case("mul", lambda x, y: x * y, np.multiply, [normal(3, 4), normal(3, 4)]),
    Case("div", lambda x, y: x / y, np.divide, [normal(3, 4), positive(4)]),
    Case("pow", lambda x, y: x ** y, np.power, [positive(3, 4), normal(3, 4)]),
    Case("pow_scalar", lambda x: x ** 3, lambda x: x ** 3, [normal(3, 4)]),
    Case("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, [normal(3)]),
    Case("scalars", lambda x: (2.0 - x) / 3 + 1 / (x * x + 1),
         lambda x: (2 - x) / 3 + 1 / (x * x + 1), [normal(5)]),
    Case("maximum", pargraph.maximum, np.maximum, [distinct(3, 4), distinct(4) + 0.05]),
    Case("minimum", lambda x, y: x.minimum(y), np.minimum, [distinct(3, 4), distinct(3, 4) + 0.05]),
    Case("where", lambda x, y: pargraph.where(x > 0, x, y), lambda x, y: np.where(x > 0, x, y),
         [away(3, 4), normal(4)]),
    Case("sum_all", lambda x: x.sum(), np.sum, [normal(3, 4)]),
    Case("sum_dim", lambda x: x.sum(1), lambda x: x.sum(1), [normal(3, 4)]),
    Case("sum_dims_keepdim", lambda x: x.sum((0, 2), keepdim=True),
         lambda x: x.sum((0, 2), keepdims=True), [normal(2, 3, 4)]),
    Case("mean", lambda x: x.mean(-1), lambda x: x.mean(-1), [normal(3, 4)]),
    Case("var", lambda x: x.var(0), lambda x: x.var(0, ddof=1), [normal(5, 3)]),
    Case("std", lambda x: x.std(unbiased=False), lambda x: x.std(), [normal(5, 3)]),
    Case("prod", lambda x: x.prod(1), lambda x: x.prod(1), [positive(3, 4)]),
    Case("prod_zero", lambda x: x.prod(), np.prod, [with_zero(2, 3)]),
    Case("max_all", lambda x: x.max(), np.max, [distinct(3, 4)]),
    Case("min_all", lambda x: x.min(), np.min, [distinct(3, 4)]),
    Case("amax_dim", lambda x: x.amax(1, keepdim=True), lambda x: x.max(1, keepdims=True),
         [distinct(3, 4)]),
    Case("amin_dims", lambda x: pargraph.amin(x, (0, 1)), lambda x: x.min((0, 1)),
         [distinct(2, 3, 2)]),
    Case("max_dim", lambda x: x.max(1).values, lambda x: x.max(1), [distinct(3, 4)]),
    Case("min_dim_keepdim", lambda x: x.min(0, keepdim=True)[0], lambda x: x.min(0, keepdims=True),
         [distinct(3, 4)]),
    Case("argmax", lambda x: x.argmax(1), lambda x: x.argmax(1), [distinct(3, 4)],
         differentiable=False),
    Case("argmin", lambda x: x.argmin(), lambda x: x.argmin(), [distinct(3, 4)],
         differentiable=False),
    Case("max_indices", lambda x: x.max(-1).indices, lambda x: x.argmax(-1), [distinct(3, 4)],
         differentiable=False),
    Case("logsumexp", lambda x: x.logsumexp(1),
         lambda x: np.log(np.exp(x).sum(1)), [normal(3, 4)]),
    Case("softmax", lambda x: x.softmax(-1),
         lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True), [normal(3, 4)]),
    Case("softmax_backward", lambda g, r: node_op(ops.softmax_backward, g, r, dim=(1,)),
         lambda g, r: r * (g - (g * r).sum(1, keepdims=True)), [normal(3, 4), normal(3, 4)]),
    Case("log_softmax", lambda x: x.log_softmax(0),
         lambda x: x - np.log(np.exp(x).sum(0, keepdims=True)), [normal(3, 4)]),
    Case("log_softmax_3d", lambda x: x.log_softmax(-1),
         lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)), [normal(2, 3, 4)]),
    Case("log_softmax_backward",
         lambda g, r: node_op(ops.log_softmax_backward, g, r, dim=(1,)),
         lambda g, r: g - np.exp(r) * g.sum(1, keepdims=True), [normal(3, 4), normal(3, 4)]),
    Case("binary_cross_entropy", lambda p, t: F.binary_cross_entropy(p, t, reduction="none"),
         lambda p, t: -(t * np.log(p) + (1 - t) * np.log1p(-p)),
         [R.uniform(0.05, 0.95, (3, 4)), R.uniform(0, 1, (3, 4))]),
    Case("nll_loss", lambda x: F.nll_loss(x, pargraph.tensor(TARGETS)),
         lambda x: _nll_ref(x, TARGETS, np.ones(3), -100, "mean"), [normal(4, 3)]),
    Case("nll_loss_weighted_ignored", lambda x: F.nll_loss(
        x, pargraph.tensor(TARGETS), pargraph.tensor(CLASS_WEIGHTS), ignore_index=0),
         lambda x: _nll_ref(x, TARGETS, CLASS_WEIGHTS, 0, "mean"), [normal(4, 3)]),
    Case("nll_loss_none", lambda x: F.nll_loss(
        x, pargraph.tensor(TARGETS), pargraph.tensor(CLASS_WEIGHTS), reduction="none"),
         lambda x: _nll_ref(x, TARGETS, CLASS_WEIGHTS, -100, "none"), [normal(4, 3)]),
    Case("nll_loss_sum_1d", lambda x: F.nll_loss(x, pargraph.tensor(2), reduction="sum"),
         lambda x: -x[2], [normal(3)]),
    Case("nll_loss_backward", lambda g, t: node_op(
        ops.nll_loss_backward, g, t, shape=(4, 3), reduction="none", ignore_index=0),
         lambda g, t: -_scattered(g * (t != 0), t), [normal(4), TARGETS]),
    Case("nll_log_softmax_backward", lambda r, g, t: node_op(
        ops.nll_log_softmax_backward, r, g, t, dim=(1,), reduction="none", ignore_index=0),
         lambda r, g, t: _log_softmax_gradient(-_scattered(g * (t != 0), t), r),
         [normal(4, 3), normal(4), TARGETS], differentiable=False),
    Case("reshape", lambda x: x.reshape(2, -1), lambda x: x.reshape(2, -1), [normal(3, 4)]),
    Case("view_flatten", lambda x: x.view(12).flatten(), lambda x: x.reshape(12), [normal(3, 4)]),
    Case("flatten_range", lambda x: x.flatten(1), lambda x: x.reshape(2, 12), [normal(2, 3, 4)]),
    Case("permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1),
         [normal(2, 3, 4)]),
    Case("transpose", lambda x: x.transpose(0, 1), lambda x: x.swapaxes(0, 1), [normal(3, 4)]),
    Case("T", lambda x: x.T, lambda x: x.T, [normal(3, 4)]),
    Case("squeeze", lambda x: x.squeeze(), np.squeeze, [normal(3, 1, 4, 1)]),
    Case("unsqueeze", lambda x: x.unsqueeze(1), lambda x: x[:, None], [normal(3, 4)]),
    Case("expand", lambda x: x.expand(2, 3, -1), lambda x: np.broadcast_to(x, (2, 3, 4)),
         [normal(3, 1) * np.ones((1, 4))]),
    Case("expand_ones", lambda x: x.expand(3, 4), lambda x: np.broadcast_to(x, (3, 4)),
         [normal(3, 1)]),
    Case("index_basic", lambda x: x[1:, None, ..., ::2], lambda x: x[1:, None, ..., ::2],
         [normal(3, 4)]),
    Case("index_int", lambda x: x[-1, 2], lambda x: x[-1, 2], [normal(3, 4)]),
    Case("index_tensor", lambda x: x[pargraph.tensor(INT_INDEX)], lambda x: x[INT_INDEX],
         [normal(3, 4)]),
    Case("index_list", lambda x: x[:, [0, 3, 3]], lambda x: x[:, [0, 3, 3]], [normal(3, 4)]),
    Case("index_mask", lambda x: x[pargraph.tensor(MASK)], lambda x: x[MASK], [normal(3, 4)]),
    Case("index_bool_tensor_self", lambda x: x[x > 0], lambda x: x[x > 0], [away(3, 4)]),
    Case("cat", lambda x, y: pargraph.cat([x, y, x], dim=1),
         lambda x, y: np.concatenate([x, y, x], 1), [normal(3, 2), normal(3, 4)]),
    Case("stack", lambda x, y: pargraph.stack([x, y], dim=-1),
         lambda x, y: np.stack([x, y], -1), [normal(3, 2), normal(3, 2)]),
    Case("stack_middle", lambda x, y, z: pargraph.stack([x, y, z], dim=1),
         lambda x, y, z: np.stack([x, y, z], 1), [normal(3, 2), normal(3, 2), normal(3, 2)]),
    Case("rows_into_zeros",
         lambda x, y: node_op(ops.rows_into_zeros, x, y, shape=(4, 3, 2), rows=(0, 2)),
         lambda x, y: np.stack([x, np.zeros_like(x), y, np.zeros_like(x)]),
         [normal(3, 2), normal(3, 2)]),
    Case("linear_weight_grad", lambda g, x: node_op(ops.linear_weight_grad, g, x),
         lambda g, x: g.reshape(-1, 4).T @ x.reshape(-1, 5), [normal(2, 3, 4), normal(2, 3, 5)]),
    Case("split", lambda x: x.split(2, dim=1)[1] * 2, lambda x: x[:, 2:4] * 2, [normal(3, 5)]),
    Case("chunk", lambda x: x.chunk(2)[1], lambda x: x[2:], [normal(3, 5)]),
    Case("matmul", lambda x, y: x @ y, np.matmul, [normal(3, 4), normal(4, 5)]),
    Case("matmul_vec_mat", lambda x, y: x @ y, np.matmul, [normal(4), normal(4, 5)]),
    Case("matmul_mat_vec", pargraph.matmul, np.matmul, [normal(3, 4), normal(4)]),
    Case("matmul_dot", lambda x, y: x @ y, np.matmul, [normal(4), normal(4)]),
    Case("matmul_batch", lambda x, y: x @ y, np.matmul, [normal(2, 3, 4), normal(4, 5)]),
    Case("matmul_broadcast", lambda x, y: x @ y, np.matmul, [normal(2, 1, 3, 4), normal(3, 4, 2)]),
    Case("linear", lambda x, w, b: node_op(ops.linear, x, w, b), lambda x, w, b: x @ w.T + b,
         [normal(5, 4), normal(3, 4), normal(3)]),
    Case("linear_batched", lambda x, w: node_op(ops.linear, x, w),
         lambda x, w: x @ w.T, [normal(2, 5, 4), normal(3, 4)]),
    Case("cast", lambda x: x.float().double() * 2, lambda x: x.astype(np.float32) * 2.0,
         [normal(3, 4)], eps=1e-2, atol=1e-4),
    Case("cast_int", lambda x: x.long(), lambda x: x.astype(np.int64), [normal(3, 4) * 5],
         differentiable=False),
    Case("view_dtype", lambda x: x.float().view(pargraph.int32),
         lambda x: x.astype(np.float32).view(np.int32), [normal(3, 4)], differentiable=False),
    Case("compare", lambda x, y: (x < y) | (x >= 1) & ~(x == y) | (x != 0) & (x <= y) & (x > -9),
         lambda x, y: (x < y) | (x >= 1) & ~(x == y) | (x != 0) & (x <= y) & (x > -9),
         [normal(3, 4), normal(4)], differentiable=False),
    Case("bitwise_int", lambda x, y: (x ^ y) & ~x | y, lambda x, y: (x ^ y) & ~x | y,
         [np.array([[5, -3, 12]]), np.array([6, 7, -8])], differentiable=False),
    Case("all", lambda x: (x > 0).all(), lambda x: (x > 0).all(), [normal(3, 4)],
         differentiable=False),
    Case("shifts", lambda x, y: (x << y) + (x >> y) + (3 << y) + (x >> 70),
         lambda x, y: (x << y) + (x >> y) + (3 << y) + (x >> 63),
         [np.array([[5, -3, 12]]), np.array([6, 0, 2])], differentiable=False),
    Case("nextafter", lambda x, y: x.nextafter(y), np.nextafter, [normal(3, 4), normal(4)]),
    Case("gcd_lcm", lambda x, y: x.gcd(y) * 1000 + x.lcm(y),
         lambda x, y: np.gcd(x, y) * 1000 + np.lcm(x, y),
         [np.array([[12, -18, 0]]), np.array([8, 12, 0])], differentiable=False),
    Case("frexp", lambda x: x.frexp()[0] + x.frexp()[1], lambda x: sum(np.frexp(x)),
         [normal(3, 4) * 10]),
    Case("index_put", lambda x, v: _put(x, v, ([0, 2], slice(1, 3))),
         lambda x, v: _put_ref(x, v, ([0, 2], slice(1, 3))), [normal(3, 4), normal(2, 2)]),
    Case("index_put_broadcast", lambda x, v: _put(x, v, (slice(None), 1)),
         lambda x, v: _put_ref(x, v, (slice(None), 1)), [normal(3, 4), normal(1)]),
    Case("add_n", lambda x, y, z: node_op(ops.add_n, x, y, z), lambda x, y, z: x + y + z,
         [normal(3, 4), normal(4), normal(3, 1)]),
    Case("index_add", lambda g: node_op(ops.index_add, g, shape=(3, 4), spec=(INT_INDEX,)),
         lambda g: _index_add(g), [normal(4, 4)]),
    Case("put_along_dim",
         lambda g: node_op(ops.put_along_dim, g, pargraph.tensor([[1], [3], [0]]), shape=(3, 4),
                           dim=1),
         lambda g: _put_along(g), [normal(3, 1)]),
    Case("prod_others", lambda x: node_op(ops.prod_others, x, dim=(1,)),
         lambda x: np.stack([np.prod(np.delete(x, i, axis=1), axis=1) for i in range(4)], 1),
         [with_zero(3, 4)], differentiable=False),
    unary("log1p", lambda x: x.log1p(), np.log1p, positive),
    Case("isnan_isinf", lambda x: pargraph.isnan(x.log()) | x.exp().isinf(),
         lambda x: _nan_or_inf(x),
         [np.array([-1.0, 0.5, 800.0, 2.0])], differentiable=False),
    Case("norm_dim", lambda x: x.norm(2, 1, keepdim=True),
         lambda x: np.linalg.norm(x, axis=1, keepdims=True), [normal(3, 4)]),
    Case("norm_all", lambda x: pargraph.linalg.norm(x), lambda x: np.linalg.norm(x),
         [normal(3, 4)]),
    Case("norm_p", lambda x: x.norm(1) + x.norm(3, 0).sum() + x.norm(float("inf")),
         lambda x: np.abs(x).sum() + (np.abs(x) ** 3).sum(0).__pow__(1 / 3).sum()
         + np.abs(x).max(), [away(3, 4)]),
    Case("mm", lambda a, b: pargraph.mm(a, b), lambda a, b: a @ b, [normal(3, 4), normal(4, 2)]),
    Case("bmm", lambda a, b: a.bmm(b), lambda a, b: a @ b, [normal(2, 3, 4), normal(2, 4, 5)]),
    Case("square_rsqrt", lambda x: x.square() + x.rsqrt(), lambda x: x * x + 1 / np.sqrt(x),
         [positive(3, 4)]),
    Case("smooth_l1_loss",
         lambda x, y: pargraph.nn.functional.smooth_l1_loss(x, y, beta=0.5),
         lambda x, y: np.mean(np.where(np.abs(x - y) < 0.5, 0.5 * (x - y) ** 2 / 0.5,
                                       np.abs(x - y) - 0.25)),
         [np.array([0.1, 2.0, -1.5, 0.3]), np.array([0.0, 0.5, 0.1, -0.1])]),
    Case("cumsum", lambda x: x.cumsum(1) + x.cumsum(-2), lambda x: np.cumsum(x, 1) +
         np.cumsum(x, 0), [normal(3, 4)]),
    Case("cumsum_int", lambda x: x.cumsum(0), lambda x: np.cumsum(x, 0),
         [np.array([1, 2, 3], dtype=np.int32)], differentiable=False),
    Case("flip", lambda x: x.flip(0, 1) * pargraph.arange(4.0), lambda x: x[::-1, ::-1] *
         np.arange(4.0), [normal(3, 4)]),
    Case("repeat", lambda x: x.repeat(2, 1, 3), lambda x: np.tile(x, (2, 1, 3)), [normal(3, 4)]),
    Case("masked_fill", lambda x: x.masked_fill(pargraph.tensor([True, False, False, True]), 2.5),
         lambda x: np.where(np.array([True, False, False, True]), 2.5, x), [normal(3, 4)]),
    Case("tril_triu", lambda x: x.tril(-1) * 2 + x.triu(1), lambda x: np.tril(x, -1) * 2 +
         np.triu(x, 1), [normal(2, 3, 4)]),
    Case("leaky_relu", lambda x: pargraph.nn.functional.leaky_relu(x, 0.2),
         lambda x: np.where(x > 0, x, 0.2 * x), [away(3, 4)]),
    Case("silu", lambda x: pargraph.nn.functional.silu(x), lambda x: x / (1 + np.exp(-x)),
         [normal(3, 4)]),
    Case("softplus", lambda x: pargraph.nn.functional.softplus(x, beta=2.0, threshold=3.0),
         lambda x: np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2),
         [np.array([-30.0, -1.0, 0.0, 0.5, 1.2, 2.0, 40.0])]),
    Case("one_hot", lambda i: pargraph.nn.functional.one_hot(i, 4),
         lambda i: np.eye(4, dtype=np.int64)[i], [np.array([[0, 3], [2, 2]])],
         differentiable=False),
    Case("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2),
                                            dilation=(1, 2), groups=2),
         lambda x, w, b: _conv_ref(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                   groups=2), [normal(2, 4, 5, 4), normal(4, 2, 3, 2), normal(4)]),
    Case("conv1d_same", lambda x, w: F.conv1d(x, w, padding="same"),
         lambda x, w: _conv_ref(x[..., None], w[..., None], None, stride=(1, 1),
                                padding=(1, 0), dilation=(1, 1), groups=1)[..., 0],
         [normal(2, 3, 6), normal(2, 3, 3)]),
    Case("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True),
         lambda x: _max_pool_ref(x, 3, 2, 1, ceil_mode=True), [distinct(2, 3, 6, 5)]),
    Case("avg_pool2d", lambda x: F.avg_pool2d(x, 2, padding=1, count_include_pad=False),
         lambda x: _avg_pool_ref(x), [normal(1, 2, 4, 5)]),
    Case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
         lambda x: np.stack([np.stack([x[..., i * 5 // 2:-(-(i + 1) * 5 // 2),
                                         j * 4 // 3:-(-(j + 1) * 4 // 3)].mean((-2, -1))
                                       for j in range(3)], -1) for i in range(2)], -2),
         [normal(2, 3, 5, 4)]),
    Case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 3)),
         lambda x: np.stack([np.stack([x[..., i * 5 // 2:-(-(i + 1) * 5 // 2),
                                         j * 4 // 3:-(-(j + 1) * 4 // 3)].max((-2, -1))
                                       for j in range(3)], -1) for i in range(2)], -2),
         [distinct(2, 3, 5, 4)]),
    Case("fractional_max_pool2d",
         lambda x: F.fractional_max_pool2d(x, (2, 3), (3, 2), _random_samples=_SAMPLES),
         lambda x: _fractional_ref(x, (2, 3), (3, 2)), [distinct(2, 3, 5, 6)]),
    Case("unfold", lambda x: F.unfold(x, 2, padding=1, stride=(1, 2)),
         lambda x: np.stack([np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))[
             :, :, i:i + 4, j:j + 5:2].reshape(2, 3, -1) for i in range(2) for j in range(2)],
             axis=2).reshape(2, 12, -1), [normal(2, 3, 3, 4)]),
    Case("fold", lambda x: F.fold(x, (3, 4), 2),
         lambda x: _fold_ref(x, (3, 4), 2), [normal(2, 8, 6)]),
    Case("pad_constant", lambda x: F.pad(x, (1, -1, 2, 0), value=0.5),
         lambda x: np.pad(x[:, :-1], ((2, 0), (1, 0)), constant_values=0.5), [normal(3, 4)]),
    Case("pad_reflect", lambda x: F.pad(x, (2, 1), mode="reflect"),
         lambda x: np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="reflect"), [normal(2, 3, 4)]),
    unary("erf", lambda x: x.erf(), lambda x: np.vectorize(math.erf)(x)),
    unary("gelu", F.gelu, lambda x: x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) / 2),
    unary("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
          lambda x: x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))) / 2),
    Case("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b, eps=1e-3),
         lambda x, w, b: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True)
                                                                  + 1e-3) * w + b,
         [normal(3, 4), normal(4), normal(4)]),
    Case("batch_norm", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
         lambda x, w, b: (x - x.mean((0, 2), keepdims=True)) / np.sqrt(
             x.var((0, 2), keepdims=True) + 1e-5) * w[:, None] + b[:, None],
         [normal(4, 3, 2), normal(3), normal(3)]),
    Case("embedding", lambda w: F.embedding(pargraph.tensor([[0, 2], [2, 3]]), w),
         lambda w: w[np.array([[0, 2], [2, 3]])], [normal(4, 3)]),
    # Symmetric positive-definite inputs: the function symmetrizes what it is given, so the
    # finite differences stay on symmetric matrices.
    Case("cholesky", lambda a: pargraph.linalg.cholesky(_spd(a)),
         lambda a: np.linalg.cholesky(_spd_ref(a)), [normal(2, 3, 3)]),
    Case("cholesky_upper", lambda a: pargraph.linalg.cholesky(_spd(a), upper=True),
         lambda a: np.swapaxes(np.linalg.cholesky(_spd_ref(a)), -1, -2), [normal(3, 3)]),
    Case("solve_triangular_lower", lambda a, b: pargraph.linalg.solve_triangular(
        _well_conditioned(a).tril(), b, upper=False),
         lambda a, b: np.linalg.solve(np.tril(_well_conditioned_ref(a)), b),
         [normal(2, 3, 3), normal(2, 3, 2)]),
    Case("solve_triangular_upper_broadcast", lambda a, b: pargraph.linalg.solve_triangular(
        _well_conditioned(a).triu(), b, upper=True),
         lambda a, b: np.linalg.solve(np.triu(_well_conditioned_ref(a)), b),
         [normal(3, 3), normal(2, 3, 4)]),
    Case("solve_triangular_right_unit", lambda a, b: pargraph.linalg.solve_triangular(
        a, b, upper=True, left=False, unitriangular=True),
         lambda a, b: b @ np.linalg.inv(np.triu(a, 1) + np.eye(3)),
         [normal(3, 3), normal(4, 3)]),
    Case("cummax", lambda x: x.cummax(1).values, lambda x: np.maximum.accumulate(x, 1),
         [distinct(3, 5)]),
    Case("cummin_indices", lambda x: x.cummin(0).indices,
         lambda x: np.array([[int(np.argmin(np.where(np.arange(3)[:, None] <= k, x, np.inf)
                                             [:, j]))
                              for j in range(4)] for k in range(3)]),
         [distinct(3, 4)], differentiable=False),
    Case("logcumsumexp", lambda x: x.logcumsumexp(1), lambda x: np.logaddexp.accumulate(x, 1),
         [normal(3, 5)]),
    Case("grid_sample", lambda x, g: F.grid_sample(x, g, align_corners=False),
         lambda x, g: _grid_sample_ref(x, g), [normal(2, 2, 3, 4), R.uniform(-0.9, 0.9,
                                                                           (2, 3, 2, 2))]),
    Case("ctc_loss", lambda x: F.ctc_loss(x.log_softmax(2), pargraph.tensor([[1, 2], [2, 2]]),
                                          (4, 3), (2, 2), reduction="none"),
         lambda x: _ctc_ref(x, [[1, 2], [2, 2]], (4, 3)), [normal(4, 2, 3)]),
    Case("inv", lambda a: pargraph.linalg.inv(_well_conditioned(a)),
         lambda a: np.linalg.inv(_well_conditioned_ref(a)), [normal(2, 3, 3)]),
    Case("cholesky_ex", lambda a: pargraph.linalg.cholesky_ex(_spd(a)).L
         * (1 + pargraph.linalg.cholesky_ex(_spd(a)).info)[..., None, None],
         lambda a: np.linalg.cholesky(_spd_ref(a)), [normal(2, 3, 3)]),
    Case("inv_ex", lambda a: pargraph.linalg.inv_ex(_well_conditioned(a)).inverse
         * (1 + pargraph.linalg.inv_ex(_well_conditioned(a)).info)[..., None, None],
         lambda a: np.linalg.inv(_well_conditioned_ref(a)), [normal(2, 3, 3)]),
    Case("lu", lambda a: _product(*pargraph.linalg.lu(_well_conditioned(a))),
         lambda a: _well_conditioned_ref(a), [normal(2, 3, 3)]),
    Case("lu_factor", lambda a: pargraph.linalg.lu_factor(a).LU,
         lambda a: __import__("scipy.linalg").linalg.lu_factor(a)[0], [normal(4, 4)]),
    # Its gradient is not the finite differences' (the sample is held at its quantile): the
    # distributions' tests check it against the quantile's derivative and by Monte Carlo.
    Case("gamma_sample", lambda a: (node_op(ops.gamma_reparameterized, a, pargraph.tensor(
         _GAMMA_X)) + node_op(ops.standard_gamma_grad, a, pargraph.tensor(_GAMMA_X))).detach(),
         lambda a: _GAMMA_X + _gamma_quantile_slope(a), [np.array([0.4, 1.5, 6.0])],
         differentiable=False, atol=1e-4),
    Case("det", lambda a: pargraph.linalg.det(_well_conditioned(a)),
         lambda a: np.linalg.det(_well_conditioned_ref(a)), [normal(2, 3, 3)]),
    Case("slogdet_logabsdet", lambda a: pargraph.linalg.slogdet(a).logabsdet,
         lambda a: np.linalg.slogdet(a)[1], [normal(2, 3, 3)]),
    Case("slogdet_sign", lambda a: pargraph.linalg.slogdet(a).sign,
         lambda a: np.linalg.slogdet(a)[0], [normal(2, 3, 3)], differentiable=False),
    Case("solve_broadcast", lambda a, b: pargraph.linalg.solve(_well_conditioned(a), b),
         lambda a, b: np.linalg.solve(_well_conditioned_ref(a), b),
         [normal(3, 3), normal(2, 3, 2)]),
    Case("svdvals", lambda a: pargraph.linalg.svdvals(a),
         lambda a: np.linalg.svd(a, compute_uv=False), [distinct(2, 3, 4)]),
    Case("matrix_exp", lambda a: pargraph.linalg.matrix_exp(a),
         lambda a: np.stack([__import__("scipy.linalg").linalg.expm(m) for m in a]),
         [normal(2, 3, 3)]),
    Case("scatter_reduce_amax", lambda x, s: x.scatter_reduce(
        1, pargraph.tensor([[0, 2, 0], [1, 1, 2]]), s, "amax"),
         lambda x, s: _scatter_extreme_ref(x, s, np.maximum), [distinct(2, 4), distinct(2, 3)]),
    # Singular vectors' signs are LAPACK's choice too: the cases read sign-free functions.
    Case("svd_tall", lambda a: _svd_parts(pargraph.linalg.svd(a, full_matrices=False)),
         lambda a: _svd_parts_ref(np.linalg.svd(a, full_matrices=False)), [distinct(2, 4, 3)]),
    Case("svd_wide_full", lambda a: _svd_parts(pargraph.linalg.svd(a), 2),
         lambda a: _svd_parts_ref(np.linalg.svd(a), 2), [distinct(3, 4)]),
    Case("qr_tall", lambda a: pargraph.cat([t.flatten(-2) for t in pargraph.linalg.qr(a)], -1),
         lambda a: np.concatenate([t.reshape(*t.shape[:-2], -1) for t in np.linalg.qr(a)], -1),
         [normal(2, 4, 3)]),
    Case("qr_wide", lambda a: pargraph.cat([t.flatten(-2) for t in pargraph.linalg.qr(a)], -1),
         lambda a: np.concatenate([t.reshape(*t.shape[:-2], -1) for t in np.linalg.qr(a)], -1),
         [normal(2, 5)]),
    # The eigenvectors' signs are LAPACK's choice: the case reads sign-free functions of them.
    Case("eigh", lambda a: _eigh_parts(pargraph.linalg.eigh(_spd(a))),
         lambda a: _eigh_parts_ref(np.linalg.eigh(_spd_ref(a))), [normal(2, 3, 3)]),
    Case("einsum_attention", lambda q, k: pargraph.einsum("bhqd,bhkd->bhqk", q, k),
         lambda q, k: np.einsum("bhqd,bhkd->bhqk", q, k), [normal(2, 2, 3, 4), normal(2, 2, 5, 4)]),
    Case("einsum_bilinear", lambda x, a, y: pargraph.einsum("bn,anm,bm->ba", x, a, y),
         lambda x, a, y: np.einsum("bn,anm,bm->ba", x, a, y),
         [normal(2, 3), normal(4, 3, 5), normal(2, 5)]),
    Case("einsum_implicit_broadcast", lambda x, y: pargraph.einsum("...ij,jk", x, y),
         lambda x, y: np.einsum("...ij,jk", x, y), [normal(2, 1, 4, 3), normal(3, 2)]),
    Case("einsum_sums_own_axis", lambda x, y: pargraph.einsum("ij,k->k", x, y),
         lambda x, y: x.sum() * y, [normal(3, 4), normal(2)]),
    Case("scaled_dot_product_attention",
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda q, k, v: _attention_ref(q, k, v), [normal(2, 3, 4), normal(2, 3, 4),
                                                   normal(2, 3, 5)]),
    Case("gather_smaller_index", lambda x: x.gather(1, pargraph.tensor([[3, 0], [1, 1]])),
         lambda x: np.take_along_axis(x[:2], np.array([[3, 0], [1, 1]]), 1), [normal(3, 4)]),
    # an index the graph computes is checked in its task (check_index)
    Case("gather_computed_index", lambda x: x.gather(1, x.argsort(1)[:, :2]),
         lambda x: np.take_along_axis(x, np.argsort(x, 1, kind="stable")[:, :2], 1),
         [distinct(3, 4)]),
    Case("scatter", lambda x, s: x.scatter(1, pargraph.tensor([[3, 0], [1, 2]]), s),
         lambda x, s: _scatter_ref(x, s), [normal(3, 4), normal(2, 2)]),
    Case("scatter_add", lambda x, s: x.scatter_add(0, pargraph.tensor([[2, 0, 2, 1]]), s),
         lambda x, s: x + _added_rows(s), [normal(3, 4), normal(1, 4)]),
    Case("index_select", lambda x: x.index_select(-1, pargraph.tensor([3, 0, 3])),
         lambda x: x[:, [3, 0, 3]], [normal(3, 4)]),
    Case("sort_values", lambda x: x.sort(0, descending=True).values,
         lambda x: -np.sort(-x, 0), [distinct(3, 4)]),
    Case("topk_values", lambda x: x.topk(2, largest=False).values,
         lambda x: np.sort(x, 1)[:, :2], [distinct(3, 4)]),
    Case("argsort", lambda x: x.argsort(1, descending=True),
         lambda x: np.argsort(-x, 1), [distinct(3, 4)], differentiable=False),
    # the optimizers' update formulas (torch.optim's documented algorithms)
    Case("momentum_buffer",
         lambda g, p, b: node_op(ops.momentum_buffer, g, p, b, momentum=0.9, dampening=0.1,
                                 weight_decay=0.01),
         lambda g, p, b: 0.9 * b + 0.9 * (g + 0.01 * p), [normal(3, 4)] * 3,
         differentiable=False),
    Case("momentum_buffer_first",
         lambda g, p: node_op(ops.momentum_buffer, g, p, momentum=0.9, dampening=0.1,
                              weight_decay=0.0),
         lambda g, p: g, [normal(3, 4), normal(3, 4)], differentiable=False),
    Case("sgd_step_nesterov",
         lambda p, g, b: node_op(ops.sgd_step, p, g, b, lr=0.1, momentum=0.9, weight_decay=0.0,
                                 nesterov=True),
         lambda p, g, b: p - 0.1 * (g + 0.9 * b), [normal(3, 4), normal(3, 4), normal(3, 4)],
         differentiable=False),
    Case("sgd_step_plain",
         lambda p, g: node_op(ops.sgd_step, p, g, lr=0.1, momentum=0.0, weight_decay=0.2,
                              nesterov=False),
         lambda p, g: p - 0.1 * (g + 0.2 * p), [normal(3, 4), normal(3, 4)],
         differentiable=False),
    Case("adam_moment",
         lambda g, p, v: node_op(ops.adam_moment, g, p, v, beta=0.99, weight_decay=0.1,
                                 square=True),
         lambda g, p, v: 0.99 * v + 0.01 * (g + 0.1 * p) ** 2,
         [normal(3, 4), normal(3, 4), positive(3, 4)], differentiable=False),
    Case("adam_step",
         lambda p, m, v: node_op(ops.adam_step, p, m, v, lr=0.1, bias1=0.5, bias2_sqrt=0.25,
                                 eps=1e-8, decoupled_decay=0.01),
         lambda p, m, v: p * 0.99 - 0.2 * m / (np.sqrt(v) / 0.25 + 1e-8),
         [normal(3, 4), normal(3, 4), positive(3, 4)], differentiable=False),
    Case("root_mean_square_centered",
         lambda s, a: node_op(ops.root_mean_square, s, a, eps=1e-8),
         lambda s, a: np.sqrt(s - a * a) + 1e-8, [positive(3, 4) + 1, normal(3, 4) * 0.3],
         differentiable=False),
    Case("root_mean_square", lambda s: node_op(ops.root_mean_square, s, eps=1e-8),
         lambda s: np.sqrt(s) + 1e-8, [positive(3, 4)], differentiable=False),
    Case("rmsprop_buffer",
         lambda g, p, a, b: node_op(ops.rmsprop_buffer, g, p, a, b, momentum=0.9,
                                    weight_decay=0.01),
         lambda g, p, a, b: 0.9 * b + (g + 0.01 * p) / a,
         [normal(3, 4), normal(3, 4), positive(3, 4), normal(3, 4)], differentiable=False),
    Case("rmsprop_step",
         lambda p, g, a: node_op(ops.rmsprop_step, p, g, a, lr=0.1, weight_decay=0.01),
         lambda p, g, a: p - 0.1 * ((g + 0.01 * p) / a),
         [normal(3, 4), normal(3, 4), positive(3, 4)], differentiable=False),
    Case("scaled_step", lambda p, d: node_op(ops.scaled_step, p, d, lr=0.1),
         lambda p, d: p - 0.1 * d, [normal(3, 4), normal(3, 4)], differentiable=False),
    Case("adagrad_sum",
         lambda g, p, t: node_op(ops.adagrad_sum, g, p, t, weight_decay=0.1, initial=0.3),
         lambda g, p, t: t + (g + 0.1 * p) ** 2, [normal(3, 4), normal(3, 4), positive(3, 4)],
         differentiable=False),
    Case("adagrad_sum_first",
         lambda g, p: node_op(ops.adagrad_sum, g, p, weight_decay=0.0, initial=0.3),
         lambda g, p: 0.3 + g * g, [normal(3, 4), normal(3, 4)], differentiable=False),
    Case("adagrad_step",
         lambda p, g, t: node_op(ops.adagrad_step, p, g, t, lr=0.1, eps=1e-10,
                                 weight_decay=0.1),
         lambda p, g, t: p - 0.1 * ((g + 0.1 * p) / (np.sqrt(t) + 1e-10)),
         [normal(3, 4), normal(3, 4), positive(3, 4)], differentiable=False),
    Case("adadelta_delta",
         lambda g, p, s, a: node_op(ops.adadelta_delta, g, p, s, a, eps=1e-6,
                                    weight_decay=0.1),
         lambda g, p, s, a: np.sqrt(a + 1e-6) / np.sqrt(s + 1e-6) * (g + 0.1 * p),
         [normal(3, 4), normal(3, 4), positive(3, 4), positive(3, 4)], differentiable=False),
]


def _conv_ref(x, w, b, stride, padding, dilation, groups):
    """Direct 2-d cross-correlation, loop by loop: an independent reference for conv."""
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // (o // groups)
        for i in range(oh):
            for j in range(ow):
                rows = i * stride[0] + dilation[0] * np.arange(kh)
                cols = j * stride[1] + dilation[1] * np.arange(kw)
                patch = x[:, g * cg:(g + 1) * cg][:, :, rows][:, :, :, cols]
                out[:, oc, i, j] = (patch * w[oc]).sum((1, 2, 3))
    return out if b is None else out + b[:, None, None]


def _max_pool_ref(x, k, s, p, ceil_mode):
    x = np.pad(x, ((0, 0), (0, 0), (p, p + s), (p, p + s)), constant_values=-np.inf)
    sizes = []
    for n in x.shape[2:]:
        n -= 2 * p + s
        out = -(-(n + 2 * p - k) // s) + 1 if ceil_mode else (n + 2 * p - k) // s + 1
        sizes.append(out - ((out - 1) * s >= n + p))
    return np.array([[[[x[a, c, i * s:i * s + k, j * s:j * s + k].max()
                        for j in range(sizes[1])] for i in range(sizes[0])]
                      for c in range(x.shape[1])] for a in range(x.shape[0])])


def _avg_pool_ref(x):
    """2x2 windows, stride 2, padding 1, padding not counted."""
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    return np.array([[[[np.nanmean(x[a, c, i * 2:i * 2 + 2, j * 2:j * 2 + 2])
                        for j in range(3)] for i in range(3)]
                      for c in range(x.shape[1])] for a in range(x.shape[0])])


def _scatter_ref(x, s):
    y = x.copy()
    y[0, 3], y[0, 0], y[1, 1], y[1, 2] = s[0, 0], s[0, 1], s[1, 0], s[1, 1]
    return y


def _added_rows(s):
    out = np.zeros((3, 4))
    for column, row in enumerate([2, 0, 2, 1]):
        out[row, column] += s[0, column]
    return out


def _lstm_ref(gates_x, h, c, w, b):
    gates = gates_x + h @ w.T + b
    i, f, g, o = np.split(gates, 4, -1)
    i, f, o = (1 / (1 + np.exp(-z)) for z in (i, f, o))
    g = np.tanh(g)
    c_new = f * c + i * g
    return np.stack([o * np.tanh(c_new), c_new, i, f, o, g])  # the gates kept for backward


def _lstm_grads_ref(grad, gates_x, h, c, w, b):
    """d sum(grad * lstm) / d (gates_x, c), by central differences."""
    def loss(gx, cc):
        return float((grad * _lstm_ref(gx, h, cc, w, b)).sum())

    out = []
    for which in (0, 1):
        base = (gates_x, c)[which]
        d = np.zeros_like(base)
        for k in np.ndindex(base.shape):
            up, down = base.copy(), base.copy()
            up[k] += 1e-6
            down[k] -= 1e-6
            args = [(up, c), (gates_x, up)][which], [(down, c), (gates_x, down)][which]
            d[k] = (loss(*args[0]) - loss(*args[1])) / 2e-6
        out.append(d)
    return np.concatenate(out, -1)


def _lstm_sequence_ref(gates_x, h, c, w, b, reverse):
    """``_lstm_ref`` step by step, the last step first when ``reverse``."""
    out = np.empty((gates_x.shape[0], 6) + c.shape)
    steps = range(gates_x.shape[0])
    for t in (reversed(steps) if reverse else steps):
        out[t] = _lstm_ref(gates_x[t], h, c, w, b)
        h, c = out[t, 0], out[t, 1]
    return out


def _lstm_sequence_grads_ref(grad, gates_x, h, c, w, b, reverse):
    """d sum(grad * lstm_sequence) / d (gates_x, h, c), by central differences: the gates'
    rows, then h's and c's in the last row (zeros after them)."""
    def loss(*args):
        return float((grad * _lstm_sequence_ref(*args, w, b, reverse)).sum())

    args = [gates_x, h, c]
    found = []
    for which, base in enumerate(args):
        d = np.zeros_like(base)
        for k in np.ndindex(base.shape):
            up, down = list(args), list(args)
            up[which], down[which] = base.copy(), base.copy()
            up[which][k] += 1e-6
            down[which][k] -= 1e-6
            d[k] = (loss(*up) - loss(*down)) / 2e-6
        found.append(d)
    last = np.zeros((1,) + gates_x.shape[1:])
    n = c.shape[-1]
    last[0, ..., :n], last[0, ..., n:2 * n] = found[1], found[2]
    return np.concatenate([found[0], last])


def _rnn_sequence_ref(gates_x, h, w, b, mode, reverse):
    """An Elman or GRU recurrence step by step: ``[h']``, or a GRU's ``[h', r, z, n, hn]``."""
    rows = 5 if mode == "GRU" else 1
    out = np.empty((gates_x.shape[0], rows) + h.shape)
    steps = range(gates_x.shape[0])
    for t in (reversed(steps) if reverse else steps):
        hidden = h @ w.T + b
        if mode == "GRU":
            x_r, x_z, x_n = np.split(gates_x[t], 3, -1)
            h_r, h_z, h_n = np.split(hidden, 3, -1)
            r, z = 1 / (1 + np.exp(-(x_r + h_r))), 1 / (1 + np.exp(-(x_z + h_z)))
            n = np.tanh(x_n + r * h_n)
            out[t] = np.stack([(1 - z) * n + z * h, r, z, n, h_n])
        else:
            total = gates_x[t] + hidden
            out[t, 0] = np.tanh(total) if mode == "RNN_TANH" else np.maximum(total, 0)
        h = out[t, 0]
    return out


def _rnn_sequence_grads_ref(grad, gates_x, h, w, b):
    """A reversed GRU's gradient by central differences, in rnn_sequence_grads' layout: per
    step the input gates' (r, z, n) then the hidden product's (r, z, hn: by the chain rule
    through ``n``'s ``r * hn``, checked against the differences of the gates), h0's last."""
    def loss(gx, hh):
        return float((grad * _rnn_sequence_ref(gx, hh, w, b, "GRU", True)).sum())

    found = []
    for which, base in enumerate((gates_x, h)):
        d = np.zeros_like(base)
        for k in np.ndindex(base.shape):
            up, down = base.copy(), base.copy()
            up[k] += 1e-6
            down[k] -= 1e-6
            args = ((up, h), (down, h)) if which == 0 else ((gates_x, up), (gates_x, down))
            d[k] = (loss(*args[0]) - loss(*args[1])) / 2e-6
        found.append(d)
    n = h.shape[-1]
    forward = _rnn_sequence_ref(gates_x, h, w, b, "GRU", True)
    r = forward[:, 1]
    d_npre = found[0][..., 2 * n:]
    hidden = np.concatenate([found[0][..., :2 * n], d_npre * r + grad[:, 4]], -1)
    rows = np.concatenate([found[0], hidden], -1)
    last = np.zeros((1,) + rows.shape[1:])
    last[0, ..., :n] = found[1]
    return np.concatenate([rows, last])


def _sparse_dense_ref(indices, values, shape):
    out = np.zeros(shape)
    for k, where in enumerate(indices.T):
        out[tuple(where)] += values[k]
    return out


def _attention_ref(q, k, v):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


def _nan_or_inf(x):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.isnan(np.log(x)) | np.isinf(np.exp(x))


def _index_add(g):
    out = np.zeros((3, 4))
    np.add.at(out, INT_INDEX, g)
    return out



def _nll_ref(x, target, weight, ignore_index, reduction):
    losses = np.array([0.0 if t == ignore_index else -weight[t] * x[i, t]
                       for i, t in enumerate(target)])
    if reduction == "none":
        return losses
    total_weight = sum(weight[t] for t in target if t != ignore_index)
    return losses.sum() / (total_weight if reduction == "mean" else 1)


def _log_softmax_gradient(g, result):
    return g - np.exp(result) * g.sum(1, keepdims=True)


def _scattered(values, columns):
    out = np.zeros((len(columns), 3))
    for row, (value, column) in enumerate(zip(values, columns)):
        out[row, column] = value
    return out

def _put_along(g):
    out = np.zeros((3, 4))
    out[[0, 1, 2], [1, 3, 0]] = g[:, 0]
    return out


def tensors_of(case: Case, requires_grad: bool):
    """The case's inputs as leaf tensors (float ones require grad if asked)."""
    return [pargraph.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
            for a in case.inputs]
