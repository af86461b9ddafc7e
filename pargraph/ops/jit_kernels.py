"""The numba kernels: formulas numpy runs as many passes, here in one pass each.

Imported only where numba is installed and chosen (:mod:`pargraph.ops.kernels` decides). Every
kernel releases the GIL and is cached on disk (``cache=True``: a first run in a fresh
environment compiles, later processes load). The LSTM cell's are float32, compiled with
numpy's error model (a division is then no branch, so loops vectorize) and the fast-math
flags that keep NaN and infinities (``_FAST``: LLVM's ``nnan`` made a NaN gate 1); pooling's
indices and the row gather and scatter compile per dtype at first use and do no arithmetic
that fast-math would change.

libm's scalar ``tanh`` and ``exp`` keep loops from vectorizing, so :func:`tanh32` is Eigen's
rational approximation of float32 ``tanh`` (within a few ulp of the exact value), and a
sigmoid is ``0.5 + 0.5 tanh(x / 2)``.
"""

from __future__ import annotations

import numba
import numpy as np

_FAST = {"contract", "arcp", "afn", "nsz"}
_JIT = dict(fastmath=_FAST, nogil=True, cache=True, error_model="numpy")
#: For kernels that sum a row: reassociation lets the sum run in vector lanes (the order of
#: the additions changes, as in PyTorch's vectorized sums).
_SUM_JIT = dict(_JIT, fastmath=_FAST | {"reassoc"})
_HALF, _LIMIT = np.float32(0.5), np.float32(7.90531110763549805)


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def tanh32(x):  # pragma: no cover - compiled
    """``tanh(x)`` of a float32, as Eigen's ``ptanh_float``: beyond ±7.905 it is ±1 in
    float32, inside a 13/6 odd rational function."""
    x = _LIMIT if x > _LIMIT else x
    x = -_LIMIT if x < -_LIMIT else x
    x2 = x * x
    p = np.float32(-2.76076847742355e-16)
    p = p * x2 + np.float32(2.00018790482477e-13)
    p = p * x2 + np.float32(-8.60467152213735e-11)
    p = p * x2 + np.float32(5.12229709037114e-08)
    p = p * x2 + np.float32(1.48572235717979e-05)
    p = p * x2 + np.float32(6.37261928875436e-04)
    p = p * x2 + np.float32(4.89352455891786e-03)
    q = np.float32(1.19825839466702e-06)
    q = q * x2 + np.float32(1.18534705686654e-04)
    q = q * x2 + np.float32(2.26843463243900e-03)
    q = q * x2 + np.float32(4.89352518554385e-03)
    return p * x / q


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def sigmoid32(x):  # pragma: no cover - compiled
    return _HALF + _HALF * tanh32(_HALF * x)


@numba.njit(**_JIT)
def lstm_forward(hw, gx, bias, c, out):  # pragma: no cover - compiled
    """An LSTM cell from its hidden part of the gates ``hw`` (``h W_hh^T``), its input part
    ``gx`` and the hidden bias (gate order i, f, g, o): ``out`` gets ``[h', c', i, f, o, g]``."""
    rows, n = c.shape
    for b in range(rows):
        for j in range(n):
            i = sigmoid32(hw[b, j] + gx[b, j] + bias[j])
            f = sigmoid32(hw[b, n + j] + gx[b, n + j] + bias[n + j])
            g = tanh32(hw[b, 2 * n + j] + gx[b, 2 * n + j] + bias[2 * n + j])
            o = sigmoid32(hw[b, 3 * n + j] + gx[b, 3 * n + j] + bias[3 * n + j])
            c_new = f * c[b, j] + i * g
            out[0, b, j] = o * tanh32(c_new)
            out[1, b, j] = c_new
            out[2, b, j] = i
            out[3, b, j] = f
            out[4, b, j] = o
            out[5, b, j] = g


@numba.njit(**_JIT)
def lstm_backward(grad, out, c, result):  # pragma: no cover - compiled
    """The gradient of :func:`lstm_forward` with respect to its gates' pre-activations
    (``result``'s first ``4n`` columns) and the last cell state (the last ``n``), from the
    gradient of its six rows ``grad`` and its result ``out``. One loop per part: a loop that
    reads and writes more arrays than LLVM checks for overlap at run time does not
    vectorize."""
    rows, n = c.shape
    one = np.float32(1)
    d_c, tanh_c = np.empty(n, np.float32), np.empty(n, np.float32)
    for b in range(rows):
        for j in range(n):
            tanh_c[j] = tanh32(out[1, b, j])
        for j in range(n):
            d_c[j] = grad[1, b, j] + grad[0, b, j] * out[4, b, j] * (one - tanh_c[j] ** 2)
        for j in range(n):
            i = out[2, b, j]
            result[b, j] = (d_c[j] * out[5, b, j] + grad[2, b, j]) * i * (one - i)
        for j in range(n):
            f = out[3, b, j]
            result[b, n + j] = (d_c[j] * c[b, j] + grad[3, b, j]) * f * (one - f)
        for j in range(n):
            g = out[5, b, j]
            result[b, 2 * n + j] = (d_c[j] * out[2, b, j] + grad[5, b, j]) * (one - g * g)
        for j in range(n):
            o = out[4, b, j]
            result[b, 3 * n + j] = (grad[0, b, j] * tanh_c[j] + grad[4, b, j]) * o * (one - o)
        for j in range(n):
            result[b, 4 * n + j] = d_c[j] * out[3, b, j]


#: ``cblas_?gemm``'s row-major layout and transposition flags.
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@numba.njit(**_JIT)
def lstm_sequence_forward(gemm, gx, h0, c0, w_hh, bias, out, reverse):  # pragma: no cover
    """A whole LSTM direction (``ops.lstm_sequence``): at every step of the input's gates
    ``gx`` (steps, rows, 4n), last first with ``reverse``, the hidden product through BLAS's
    ``gemm`` (a ``cblas_sgemm`` pointer), then :func:`lstm_forward` into ``out[t]``. One call
    for the sequence: a step costs no Python."""
    count = gx.shape[0]
    rows, n = c0.shape
    hw = np.empty((rows, 4 * n), np.float32)
    for s in range(count):
        t = count - 1 - s if reverse else s
        if s == 0:
            h, c = h0, c0
        else:
            before = t + 1 if reverse else t - 1
            h, c = out[before, 0], out[before, 1]
        gemm(_ROW_MAJOR, _NO_TRANS, _TRANS, rows, 4 * n, n, 1.0, h.ctypes.data, n,
             w_hh.ctypes.data, n, 0.0, hw.ctypes.data, 4 * n)
        lstm_forward(hw, gx[t], bias, c, out[t])


@numba.njit(**_JIT)
def lstm_sequence_backward(gemm, gh, rest, has_rest, out, c0, w_hh, result,
                           reverse):  # pragma: no cover - compiled
    """The gradient of :func:`lstm_sequence_forward` (``ops.lstm_sequence_grads``): ``gh``
    (steps, rows, n) is the gradient of the outputs h', ``rest`` (steps, 5, rows, n) that of
    the other rows where ``has_rest``. Steps run backward, each passing its states' gradients
    to the step before (h''s through BLAS's ``gemm``); ``result[t]`` gets step ``t``'s gates'
    gradient (i, f, g, o) and ``result[steps]`` the first states' (h0's columns, then c0's).
    One loop per part, as in :func:`lstm_backward`."""
    count, _, rows, n = out.shape
    one = np.float32(1)
    d_h = np.zeros((rows, n), np.float32)
    d_c = np.zeros((rows, n), np.float32)
    g0, total, tanh_c = np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)
    for s in range(count):
        t = s if reverse else count - 1 - s
        first = t == count - 1 if reverse else t == 0
        c = c0 if first else out[t + 1 if reverse else t - 1, 1]
        o_t, d_gates = out[t], result[t]
        for b in range(rows):
            for j in range(n):
                g0[j] = gh[t, b, j] + d_h[b, j]
            for j in range(n):
                tanh_c[j] = tanh32(o_t[1, b, j])
            if has_rest:
                for j in range(n):
                    d_c[b, j] += rest[t, 0, b, j]
            for j in range(n):  # the gradient of c': its own, then through h' = o tanh(c')
                total[j] = d_c[b, j] + g0[j] * o_t[4, b, j] * (one - tanh_c[j] ** 2)
            for j in range(n):
                d_gates[b, j] = total[j] * o_t[5, b, j]
            for j in range(n):
                d_gates[b, n + j] = total[j] * c[b, j]
            for j in range(n):
                d_gates[b, 2 * n + j] = total[j] * o_t[2, b, j]
            for j in range(n):
                d_gates[b, 3 * n + j] = g0[j] * tanh_c[j]
            if has_rest:
                for j in range(n):
                    d_gates[b, j] += rest[t, 1, b, j]
                for j in range(n):
                    d_gates[b, n + j] += rest[t, 2, b, j]
                for j in range(n):
                    d_gates[b, 2 * n + j] += rest[t, 4, b, j]
                for j in range(n):
                    d_gates[b, 3 * n + j] += rest[t, 3, b, j]
            for j in range(n):  # through the sigmoids and the tanh
                i = o_t[2, b, j]
                d_gates[b, j] *= i * (one - i)
            for j in range(n):
                f = o_t[3, b, j]
                d_gates[b, n + j] *= f * (one - f)
            for j in range(n):
                g = o_t[5, b, j]
                d_gates[b, 2 * n + j] *= one - g * g
            for j in range(n):
                o = o_t[4, b, j]
                d_gates[b, 3 * n + j] *= o * (one - o)
            for j in range(n):
                d_c[b, j] = total[j] * o_t[3, b, j]
        gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, rows, n, 4 * n, 1.0, d_gates.ctypes.data,
             4 * n, w_hh.ctypes.data, n, 0.0, d_h.ctypes.data, n)
    for b in range(rows):
        for j in range(n):
            result[count, b, j] = d_h[b, j]
            result[count, b, n + j] = d_c[b, j]


@numba.njit(nogil=True, cache=True)
def pool_argmax2d(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                  dilation_w, out):  # pragma: no cover - compiled
    """Max pooling's indices over (N, C, H, W) in one pass, as PyTorch's CPU kernel scans a
    window: from its first position inside the input, a value replaces the maximum when
    larger or NaN (so the first of equal values, the last NaN), padding never. Each window's
    rows and columns inside the input are found first, so the scan has no bounds tests."""
    height, width = x.shape[2], x.shape[3]
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for i in range(out.shape[2]):
                top = i * stride_h - pad_h
                a0, a1 = 0, kernel_h
                while top + a0 * dilation_h < 0:
                    a0 += 1
                while a1 > a0 and top + (a1 - 1) * dilation_h >= height:
                    a1 -= 1
                for j in range(out.shape[3]):
                    left = j * stride_w - pad_w
                    b0, b1 = 0, kernel_w
                    while left + b0 * dilation_w < 0:
                        b0 += 1
                    while b1 > b0 and left + (b1 - 1) * dilation_w >= width:
                        b1 -= 1
                    h, w = top + a0 * dilation_h, left + b0 * dilation_w
                    if a0 == a1 or b0 == b1:  # a window of padding only: no value to read
                        out[n, c, i, j] = h * width + w
                        continue
                    best, best_index = x[n, c, h, w], h * width + w
                    for a in range(a0, a1):
                        h = top + a * dilation_h
                        for b in range(b0, b1):
                            w = left + b * dilation_w
                            value = x[n, c, h, w]
                            if value > best or value != value:
                                best, best_index = value, h * width + w
                    out[n, c, i, j] = best_index


@numba.njit(nogil=True, cache=True)
def take_rows(x, index, out):  # pragma: no cover - compiled
    """``out[r, j] = x[r, index[r, j]]`` (a negative index counts from the end, as numpy's);
    False, with ``out`` partly written, at the first index out of range."""
    n = x.shape[1]
    for r in range(index.shape[0]):
        for j in range(index.shape[1]):
            k = index[r, j]
            if k < 0:
                k += n
            if k < 0 or k >= n:
                return False
            out[r, j] = x[r, k]
    return True


@numba.njit(nogil=True, cache=True)
def put_rows(g, index, out):  # pragma: no cover - compiled
    """``out[r, index[r, j]] += g[r, j]`` in order (a negative index counts from the end);
    False at the first index out of range."""
    n = out.shape[1]
    for r in range(index.shape[0]):
        for j in range(index.shape[1]):
            k = index[r, j]
            if k < 0:
                k += n
            if k < 0 or k >= n:
                return False
            out[r, k] += g[r, j]
    return True


@numba.njit(**_JIT)
def softmax_shift_rows(x, out):  # pragma: no cover - compiled
    """``out[r] = x[r] - max(x[r])``, the maximum by ``>`` from the row's first value: a
    NaN then makes its row NaN through the sum (first: the maximum; later: its own ``exp``),
    as numpy's NaN-propagating maximum does."""
    rows, n = x.shape
    for r in range(rows):
        top = x[r, 0]
        for j in range(1, n):
            v = x[r, j]
            top = v if v > top else top
        for j in range(n):
            out[r, j] = x[r, j] - top


@numba.njit(**_SUM_JIT)
def softmax_scale_rows(out):  # pragma: no cover - compiled
    """``out[r] /= sum(out[r])`` (summed in float64)."""
    rows, n = out.shape
    for r in range(rows):
        total = 0.0
        for j in range(n):
            total += out[r, j]
        scale = 1.0 / total
        for j in range(n):
            out[r, j] = out[r, j] * scale


@numba.njit(**_SUM_JIT)
def softmax_grad_rows(g, y, out):  # pragma: no cover - compiled
    """``out[r] = y[r] * (g[r] - sum(g[r] * y[r]))``: softmax's gradient from its result,
    one read of each row for the sum and one for the result (summed in float64)."""
    rows, n = g.shape
    for r in range(rows):
        total = 0.0
        for j in range(n):
            total += g[r, j] * y[r, j]
        for j in range(n):
            out[r, j] = y[r, j] * (g[r, j] - total)
