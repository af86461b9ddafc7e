"""Neural-network kernels: softmax and log_softmax, cross-entropy's pieces, and their
fused backwards."""

from __future__ import annotations

import math

import numpy as np

from pargraph.graph import Node
from pargraph.ops.composites import _class_weights, _floating, _picked_gradient
from pargraph.ops.core import (
    HALVES,
    ShapeError,
    _gradient_shape,
    _same,
    normalize_dims,
    primitive,
    result_dtype,
    shape_of,
)
from pargraph.ops.elementwise import (
    add,
    div,
    exp,
    log,
    log1p,
    logistic,
    maximum,
    mul,
    neg,
    sub,
)
from pargraph.ops.gemm import blas, product
from pargraph.ops.kernels import kernels
from pargraph.ops.linalg import linear_weight_grad, matmul
from pargraph.ops.shapes import index, index_add, reshaped, sum_


def log_softmax(x: Node, dim: int) -> Node:
    x = _floating(x)
    return log_softmax_of(x, dim=normalize_dims(dim, len(x.shape)))


@primitive("log_softmax", _same, grad_name="LogSoftmaxBackward0")
def log_softmax_of(x, *, dim):
    """``x - logsumexp(x)`` as one node (the composite made eight, and ten for its backward),
    with the same numpy operations in the same order: the max is subtracted first."""
    if x.dtype in HALVES:  # in float32, rounded once, as PyTorch does
        return log_softmax_of.forward(x.astype(np.float32), dim=dim).astype(x.dtype)
    if not x.size:
        return x.copy()
    shift = x.max(axis=dim, keepdims=True)
    if not x.ndim:  # 0-d: numpy's arithmetic gives scalars, which take no out=
        return x - (np.log(np.exp(x - shift).sum(axis=dim, keepdims=True)) + shift)
    # The same operations in the same order, into two temporaries instead of five arrays.
    shifted = np.subtract(x, shift)
    total = np.exp(shifted, out=shifted).sum(axis=dim, keepdims=True)
    np.log(total, out=total)
    np.add(total, shift, out=total)
    return np.subtract(x, total, out=shifted)


# Cross-entropy's backward fuses with nll_loss's (a rewrite: ops.rewrites).
log_softmax_of.defvjp(lambda g, out, x, dim: log_softmax_backward(g, out, dim=dim))


@primitive("log_softmax_backward", _gradient_shape, grad_name="LogSoftmaxBackwardBackward0")
def log_softmax_backward(g, result, *, dim):
    """``g - exp(result) * sum(g)``: log_softmax's gradient from its result."""
    if g.dtype in HALVES:
        return log_softmax_backward.forward(g.astype(np.float32), result.astype(np.float32),
                                            dim=dim).astype(g.dtype)
    if not result.ndim or g.dtype != result.dtype:
        return g - np.exp(result) * g.sum(axis=dim, keepdims=True)
    scaled = np.exp(result)  # the same operations, in one temporary
    np.multiply(scaled, g.sum(axis=dim, keepdims=True), out=scaled)
    return np.subtract(g, scaled, out=scaled)


log_softmax_backward.defvjp(
    lambda gg, out, g, result, dim: sub(gg, sum_(mul(gg, exp(result)), dim=dim, keepdim=True)),
    lambda gg, out, g, result, dim: neg(mul(mul(gg, exp(result)),
                                            sum_(g, dim=dim, keepdim=True))),
)


def _probabilities(p, target):
    if not isinstance(target, Node) or target.shape != p.shape:
        raise ShapeError(f"target size {shape_of(target)} must be the same as input size "
                         f"{p.shape}")
    return p.shape, result_dtype(p, target)


@primitive("binary_cross_entropy", _probabilities, grad_name="BinaryCrossEntropyBackward0")
def binary_cross_entropy(p, target):
    """Elementwise ``-(t log p + (1 - t) log(1 - p))`` with each log clamped at -100, as
    PyTorch computes it: a saturated probability (``sigmoid(20) == 1`` in float32) gives a
    finite loss and, through its vjp, a finite gradient."""
    if np.any((p < 0) | (p > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    return ((target - 1) * np.maximum(np.log1p(-p), -100)
            - target * np.maximum(np.log(p), -100))


binary_cross_entropy.defvjp(
    # PyTorch's formula: g (p - t) / max(p (1 - p), 1e-12), finite at p = 0 and p = 1.
    lambda g, out, p, t: div(mul(g, sub(p, t)), maximum(mul(sub(1.0, p), p), 1e-12)),
    lambda g, out, p, t: mul(g, sub(log1p(neg(p)), log(p))),  # unclamped, as PyTorch's
)


def _nll_shape(x, target, *weight, reduction, ignore_index):
    return (x.shape[:-1] if reduction == "none" else ()), x.dtype


@primitive("nll_loss", _nll_shape, grad_name="NllLossBackward0")
def nll_loss(x, target, *weight, reduction, ignore_index):
    """``-x[i, target[i]]`` (times its class's weight), reduced: one node where indexing,
    negation, sum and division made four, and five for the backward. ``mean`` divides by the
    targets' total weight (their count without ``weight``), as PyTorch does."""
    classes, weights = _class_weights(target, weight, ignore_index, x.dtype, x.shape[-1])
    picked = x[classes] if x.ndim == 1 else x[np.arange(classes.shape[0]), classes]
    if weights is not None:
        picked = picked * weights
    if reduction == "none":
        return -picked
    total = -picked.sum()  # the sum of the negated values, exactly: negation rounds nothing
    if reduction == "sum":
        return total
    return total / (classes.size if weights is None else weights.sum())


nll_loss.defvjp(lambda g, out, x, target, *weight, reduction, ignore_index: nll_loss_backward(
    g, target, *weight, shape=x.shape, reduction=reduction, ignore_index=ignore_index), None)


@primitive("nll_loss_backward", lambda g, target, *weight, shape, reduction, ignore_index:
           (shape, g.dtype), grad_name="NllLossBackwardBackward0")
def nll_loss_backward(g, target, *weight, shape, reduction, ignore_index):
    """nll_loss's gradient: ``-g`` (scaled as the forward reduced) at each target's class."""
    return _picked_gradient(g, target, weight, shape, reduction, ignore_index)


nll_loss_backward.defvjp(  # linear in g: its vjp is the forward applied to gg
    lambda gg, out, g, target, *weight, shape, reduction, ignore_index: nll_loss(
        gg, target, *weight, reduction=reduction, ignore_index=ignore_index), None)


@primitive("nll_log_softmax_backward", lambda result, g, target, *weight, dim, reduction,
           ignore_index, rows=None: (result.shape, result.dtype))
def nll_log_softmax_backward(result, g, target, *weight, dim, reduction, ignore_index,
                             rows=None):
    """``log_softmax_backward(nll_loss_backward(g, ...), result)``, the same numpy operations
    in one node: what a cross-entropy's backward records (never differentiated: a backward
    that builds a differentiable gradient records the pair). With ``rows=(start, stop)``,
    ``result`` holds those rows of the log-probabilities, and the gradient is theirs."""
    picked = _picked_gradient(g, target, weight, result.shape, reduction, ignore_index, rows)
    return log_softmax_backward.forward(picked, result, dim=dim)


def softmax(x: Node, dim: int) -> Node:
    x = _floating(x)
    return softmax_of(x, dim=normalize_dims(dim, len(x.shape)))


@primitive("softmax", _same, grad_name="SoftmaxBackward0")
def softmax_of(x, *, dim):
    """``exp(x - max) / sum`` as one node (the composite made six, and a dozen for its
    backward), with the same numpy operations in the same order."""
    if x.dtype in HALVES:  # in float32, rounded once, as PyTorch does
        return softmax_of.forward(x.astype(np.float32), dim=dim).astype(x.dtype)
    if not x.size:
        return x.copy()
    fused = kernels.softmax(x, dim)
    if fused is not None:
        return fused
    shifted = np.exp(x - x.max(axis=dim, keepdims=True))
    return shifted / shifted.sum(axis=dim, keepdims=True)


softmax_of.defvjp(lambda g, out, x, dim: softmax_backward(g, out, dim=dim))


@primitive("softmax_backward", _gradient_shape, grad_name="SoftmaxBackwardDataBackward0")
def softmax_backward(g, result, *, dim):
    """``result * (g - sum(g * result))``: softmax's gradient from its result."""
    if g.dtype in HALVES:
        return softmax_backward.forward(g.astype(np.float32), result.astype(np.float32),
                                        dim=dim).astype(g.dtype)
    fused = kernels.softmax_backward(g, result, dim)
    if fused is not None:
        return fused
    return result * (g - (g * result).sum(axis=dim, keepdims=True))


softmax_backward.defvjp(
    lambda gg, out, g, result, dim: softmax_backward(gg, result, dim=dim),
    lambda gg, out, g, result, dim: sub(
        sub(mul(gg, g), mul(g, sum_(mul(gg, result), dim=dim, keepdim=True))),
        mul(gg, sum_(mul(g, result), dim=dim, keepdim=True))),
)


def _lstm_gates(gates, gates_x, b_hh):
    """``h W_hh^T + gates_x + b_hh`` from the first term ``gates``, in place where it can."""
    if gates.dtype == np.result_type(gates, gates_x):  # in place, unless it promotes
        gates += gates_x
    else:
        gates = gates + gates_x
    if b_hh is not None:
        gates = gates + b_hh
    return gates


def _lstm_cell_shape(gates_x, h, c, w_hh, b_hh=None):
    if gates_x.shape[-1] != 4 * c.shape[-1] or h.shape[:-1] != c.shape[:-1]:
        raise ShapeError(f"gates of shape {gates_x.shape} for a cell state of shape {c.shape}")
    return (6,) + c.shape, result_dtype(gates_x, h, c)


def _one_float(*arrays) -> bool:
    """Whether the arrays (None aside) share one dtype, float32 or float64: the cell's kernels
    then write their results in place; other dtypes take numpy's promotions."""
    dtypes = {a.dtype for a in arrays if a is not None}
    return len(dtypes) == 1 and dtypes <= {np.dtype(np.float32), np.dtype(np.float64)}


@primitive("lstm_cell", _lstm_cell_shape, grad_name="LstmCellBackward0", blas=True)
def lstm_cell(gates_x, h, c, w_hh, b_hh=None):
    """One LSTM step as one node: ``[h', c', i, f, o, g]`` stacked, from the input's part of
    the gates (``x W_ih^T + b_ih``), the last states and the hidden weights, with PyTorch's
    gate order (input, forget, cell, output) in the weights. The activated gates are kept for
    the gradient, one node too (:func:`lstm_cell_grads`), which then needs no matrix product
    again. A fused kernel (:mod:`pargraph.ops.kernels`) computes the gates in one pass where
    it takes the arrays; numpy's formula activates the three sigmoid gates, side by side, in
    one pass each."""
    return _lstm_step(gates_x, h, c, w_hh, b_hh)


def _lstm_step(gates_x, h, c, w_hh, b_hh, out=None):
    """:func:`lstm_cell`'s numbers, into ``out`` (6, ..., H) where it has their dtype (else
    into a fresh array)."""
    hidden = product(h, w_hh.T)
    if out is None or out.dtype != hidden.dtype:
        out = np.empty((6,) + c.shape, hidden.dtype)
    if kernels.lstm_forward(hidden, gates_x, b_hh, c, out):
        return out
    gates, n = _lstm_gates(hidden, gates_x, b_hh), c.shape[-1]
    if not _one_float(gates, c) or out.dtype != gates.dtype:
        i, f = logistic(gates[..., :n]), logistic(gates[..., n:2 * n])
        g, o = np.tanh(gates[..., 2 * n:3 * n]), logistic(gates[..., 3 * n:])
        c_new = f * c + i * g
        return np.stack([o * np.tanh(c_new), c_new, i, f, o, g])
    for row, start in ((2, 0), (3, n), (4, 3 * n)):
        np.negative(gates[..., start:start + n], out=out[row])
    sigmoids = out[2:5]
    with np.errstate(over="ignore"):  # exp(-x) overflowing to inf gives the limit, 0
        np.exp(sigmoids, out=sigmoids)
    sigmoids += 1
    np.reciprocal(sigmoids, out=sigmoids)
    i, f, o, g = out[2], out[3], out[4], np.tanh(gates[..., 2 * n:3 * n], out=out[5])
    c_new = np.multiply(f, c, out=out[1])
    c_new += i * g
    np.multiply(np.tanh(c_new, out=out[0]), o, out=out[0])
    return out


@primitive("lstm_cell_grads", shape=lambda grad, out, c: (c.shape[:-1] + (5 * c.shape[-1],),
                                                          c.dtype))
def lstm_cell_grads(grad, out, c):
    """The gradient of :func:`lstm_cell` with respect to its gates' pre-activations (its first
    ``4H`` columns, in the weights' order i, f, g, o) and to the last cell state (the last
    ``H``), from ``grad`` (of its six rows: the gates' are zeros unless something read them)
    and the cell's kept gates."""
    result = np.empty(c.shape[:-1] + (5 * c.shape[-1],), c.dtype)
    if kernels.lstm_backward(grad, out, c, result):
        return result
    c_new, i, f, o, g = out[1], out[2], out[3], out[4], out[5]
    if not _one_float(grad, out, c):
        tanh_c = np.tanh(c_new)
        d_c = grad[1] + grad[0] * o * (1 - tanh_c * tanh_c)
        d_gates = np.concatenate([(d_c * g + grad[2]) * i * (1 - i),
                                  (d_c * c + grad[3]) * f * (1 - f),
                                  (d_c * i + grad[5]) * (1 - g * g),
                                  (grad[0] * tanh_c + grad[4]) * o * (1 - o)], -1)
        return np.concatenate([d_gates, d_c * f], -1)
    # Each part computed whole and contiguous, then one concatenation: numpy's loops over
    # column blocks of the (batch, 5H) result would run row by row.
    tanh_c = np.tanh(c_new)
    d_c = np.multiply(tanh_c, tanh_c)  # 1 - tanh(c')^2, times o and the incoming gradient
    np.subtract(1, d_c, out=d_c)
    d_c *= o
    d_c *= grad[0]
    d_c += grad[1]  # plus the gradient of c' itself
    parts = np.empty((5,) + c.shape, c.dtype)  # of i, f, g, o and the last cell state
    np.multiply(d_c, g, out=parts[0])
    np.multiply(d_c, c, out=parts[1])
    parts[:2] += grad[2:4]
    np.multiply(grad[0], tanh_c, out=parts[3])
    parts[3] += grad[4]
    for k, s in ((0, i), (1, f), (3, o)):  # through the sigmoids
        parts[k] *= s * (1 - s)
    np.multiply(d_c, i, out=parts[2])
    parts[2] += grad[5]
    parts[2] *= 1 - g * g  # through the tanh
    np.multiply(d_c, f, out=parts[4])
    return np.concatenate(parts, -1, out=result)


def _lstm_cell_vjp_of_many(grad, out, positions, gates_x, h, c, w_hh, b_hh=None):
    grads = lstm_cell_grads(grad, out, c)
    n = c.shape[-1]
    lead = (slice(None),) * (len(c.shape) - 1)
    d_gates = index(grads, spec=lead + (slice(0, 4 * n),))
    wanted = {0: lambda: d_gates,
              1: lambda: matmul(d_gates, w_hh),
              2: lambda: index(grads, spec=lead + (slice(4 * n, 5 * n),)),
              3: lambda: linear_weight_grad(d_gates, h),
              4: lambda: sum_(reshaped(d_gates, (-1, 4 * n)), dim=(0,))}
    return [wanted[k]() for k in positions]


lstm_cell.defvjp_of_many(_lstm_cell_vjp_of_many)


def _lstm_sequence_shape(gates_x, h0, c0, w_hh, b_hh=None, *, reverse):
    n = c0.shape[-1] if c0.shape else 0
    if (len(gates_x.shape) < 2 or not gates_x.shape[0] or gates_x.shape[-1] != 4 * n
            or gates_x.shape[1:-1] != c0.shape[:-1] or h0.shape != c0.shape
            or w_hh.shape != (4 * n, n)):
        raise ShapeError(f"an LSTM sequence needs gates (steps >= 1, ..., 4H), states "
                         f"(..., H) and a hidden weight (4H, H); got gates {gates_x.shape}, "
                         f"states {h0.shape} and {c0.shape}, weight {w_hh.shape}")
    return (gates_x.shape[0], 6) + c0.shape, result_dtype(gates_x, h0, c0)


def _lstm_sequence_cost(node: Node) -> float:
    """Per step: the hidden product and a pass over the gates."""
    steps, c = node.inputs[0].shape[0], node.inputs[2].shape
    rows, n = math.prod(c[:-1]), c[-1]
    return steps * (10e-6 + 2 * rows * n * 4 * n / 15e9 + 20 * rows * n / 1e9)


def _steps(count: int, reverse: bool) -> range:
    return range(count - 1, -1, -1) if reverse else range(count)


def _state_before(out, row: int, first, t: int, reverse: bool):
    """The state step ``t`` of a recurrence read: ``first`` at its first step, else row
    ``row`` of the step run before it."""
    before = t + 1 if reverse else t - 1
    return first if before in (-1, out.shape[0]) else out[before, row]


@primitive("lstm_sequence", _lstm_sequence_shape, grad_name="LstmSequenceBackward0", blas=True,
           cost=_lstm_sequence_cost)
def lstm_sequence(gates_x, h0, c0, w_hh, b_hh=None, *, reverse):
    """A whole LSTM direction as one node: :func:`lstm_cell` at every step of the input's
    gates ``gates_x`` (steps, ..., 4H), last step first with ``reverse``, into one
    ``(steps, 6, ..., H)`` array of each step's ``[h', c', i, f, o, g]``. One node in place
    of a few per step: a recurrence has nothing to run side by side within a direction, and
    a node costs the same Python whatever its work (``nn.LSTM`` takes it). A step's gates are
    copied to contiguous rows first (a ``batch_first`` layer's are strided, and the fused cell
    vectorizes over contiguous rows only)."""
    out = np.empty((gates_x.shape[0], 6) + c0.shape, np.result_type(gates_x, h0, c0))
    if kernels.lstm_sequence(gates_x, h0, c0, w_hh, b_hh, out, reverse):
        return out
    h, c = h0, c0
    with blas.one_thread():
        for t in _steps(gates_x.shape[0], reverse):
            slot = out[t]
            step = _lstm_step(np.ascontiguousarray(gates_x[t]), h, c, w_hh, b_hh, slot)
            if step is not slot:
                slot[...] = step
            h, c = slot[0], slot[1]
    return out


@primitive("lstm_sequence_grads", blas=True, cost=_lstm_sequence_cost,
           shape=lambda grad, out, h0, c0, w_hh, *, reverse: (
               (out.shape[0] + 1,) + c0.shape[:-1] + (4 * c0.shape[-1],), c0.dtype))
def lstm_sequence_grads(grad, out, h0, c0, w_hh, *, reverse):
    """The gradient of :func:`lstm_sequence` with respect to each step's gate
    pre-activations (rows ``0..steps-1``) and, in row ``steps``, to the first states: ``h0``'s
    in its first ``H`` columns, ``c0``'s in the next ``H``. The steps run backward through
    :func:`lstm_cell_grads`' formula, each passing its states' gradients to the step before.
    ``grad`` is of every row ``(steps, 6, ..., H)``, or of the outputs ``h'`` alone
    ``(steps, ..., H)`` (:func:`hidden_gradient`)."""
    count, n = out.shape[0], c0.shape[-1]
    result = np.zeros((count + 1,) + c0.shape[:-1] + (4 * n,), c0.dtype)
    if kernels.lstm_sequence_backward(grad, out, c0, w_hh, result, reverse):
        return result
    hidden_only = grad.ndim == out.ndim - 1
    rows = np.zeros(out.shape[1:], np.result_type(grad, c0)) if hidden_only else None
    d_h = d_c = None
    with blas.one_thread():
        for t in reversed(_steps(count, reverse)):
            if hidden_only:  # the other rows' gradients are zeros, set once
                g = rows
                if d_h is None:
                    g[0] = grad[t]
                else:
                    np.add(grad[t], d_h, out=g[0])
                    g[1] = d_c
            else:
                g = grad[t]
                if d_h is not None:
                    g = g.copy()
                    g[0] += d_h
                    g[1] += d_c
            cell = lstm_cell_grads.forward(g, out[t], _state_before(out, 1, c0, t, reverse))
            result[t] = cell[..., :4 * n]
            d_c = cell[..., 4 * n:]
            d_h = product(result[t].reshape(-1, 4 * n), w_hh).reshape(c0.shape)
    result[count, ..., :n] = d_h
    result[count, ..., n:2 * n] = d_c
    return result


def _hidden_weight_grad(d_hidden, out, h0, reverse):
    """``sum_t d_hidden[t]^T h_before(t)`` of a recurrence: step ``t`` read the state of the
    step before it, ``h0`` at its first step, else an output (row 0 of ``out``); as two
    whole-sequence products."""
    count, width, n = d_hidden.shape[0], d_hidden.shape[-1], h0.shape[-1]
    first = count - 1 if reverse else 0
    total = linear_weight_grad(reshaped(index(d_hidden, spec=(first,)), (-1, width)),
                               reshaped(h0, (-1, n)))
    if count == 1:
        return total
    rest, read = (slice(0, count - 1), slice(1, count)) if reverse else \
        (slice(1, count), slice(0, count - 1))
    return add(total, linear_weight_grad(reshaped(index(d_hidden, spec=(rest,)), (-1, width)),
                                         reshaped(index(out, spec=(read, 0)), (-1, n))))


def hidden_gradient(grad: Node, out: Node) -> Node:
    """The gradient of a sequence op's result ``out`` ``(steps, rows, ..., H)`` as the sequence
    gradients take it: where only the outputs ``h'`` (row 0 of every step) were read, the
    gradient of those rows ``(steps, ..., H)``, not the mostly-zero array of every row."""
    if (type(grad) is Node and grad.op is index_add and len(grad.inputs) == 1
            and type(grad.inputs[0]) is Node and grad.attrs["shape"] == out.shape
            and grad.attrs["spec"] == (slice(None), 0)):
        return grad.inputs[0]
    return grad


def _lstm_sequence_vjp_of_many(grad, out, positions, gates_x, h0, c0, w_hh, b_hh=None, *,
                               reverse):
    grads = lstm_sequence_grads(hidden_gradient(grad, out), out, h0, c0, w_hh, reverse=reverse)
    count, n = gates_x.shape[0], c0.shape[-1]
    lead = (slice(None),) * (len(c0.shape) - 1)
    d_gates = index(grads, spec=(slice(0, count),))
    wanted = {0: lambda: d_gates,
              1: lambda: index(grads, spec=(count,) + lead + (slice(0, n),)),
              2: lambda: index(grads, spec=(count,) + lead + (slice(n, 2 * n),)),
              3: lambda: _hidden_weight_grad(d_gates, out, h0, reverse),
              4: lambda: sum_(reshaped(d_gates, (-1, 4 * n)), dim=(0,))}
    return [wanted[k]() for k in positions]


lstm_sequence.defvjp_of_many(_lstm_sequence_vjp_of_many)

#: The recurrences :func:`rnn_sequence` runs: gates per step, rows kept per step.
_RNN_GATES, _RNN_ROWS = {"RNN_TANH": 1, "RNN_RELU": 1, "GRU": 3}, \
    {"RNN_TANH": 1, "RNN_RELU": 1, "GRU": 5}


def _rnn_sequence_shape(gates_x, h0, w_hh, b_hh=None, *, mode, reverse):
    n = h0.shape[-1] if h0.shape else 0
    gates = _RNN_GATES.get(mode)
    if gates is None:
        raise ShapeError(f"rnn_sequence: mode {mode!r}; expected one of {sorted(_RNN_GATES)}")
    if (len(gates_x.shape) < 2 or not gates_x.shape[0] or gates_x.shape[-1] != gates * n
            or gates_x.shape[1:-1] != h0.shape[:-1] or w_hh.shape != (gates * n, n)):
        raise ShapeError(f"a {mode} sequence needs gates (steps >= 1, ..., {gates}H), a state "
                         f"(..., H) and a hidden weight ({gates}H, H); got gates "
                         f"{gates_x.shape}, state {h0.shape}, weight {w_hh.shape}")
    return (gates_x.shape[0], _RNN_ROWS[mode]) + h0.shape, result_dtype(gates_x, h0)


def _rnn_sequence_cost(node: Node) -> float:
    steps, h = node.inputs[0].shape[0], node.inputs[1].shape
    rows, n, gates = math.prod(h[:-1]), h[-1], _RNN_GATES[node.attrs["mode"]]
    return steps * (10e-6 + 2 * rows * n * gates * n / 15e9 + 10 * gates * rows * n / 1e9)


@primitive("rnn_sequence", _rnn_sequence_shape, grad_name="RnnSequenceBackward0", blas=True,
           cost=_rnn_sequence_cost)
def rnn_sequence(gates_x, h0, w_hh, b_hh=None, *, mode, reverse):
    """A whole Elman (``RNN_TANH``, ``RNN_RELU``) or GRU direction as one node, as
    :func:`lstm_sequence` is for an LSTM: each step's rows into one ``(steps, rows, ..., H)``
    array, ``[h']`` for an Elman step and ``[h', r, z, n, h W_hn^T + b_hn]`` for a GRU's
    (what its gradient needs), with PyTorch's gate order (r, z, n) and formulas."""
    out = np.empty((gates_x.shape[0], _RNN_ROWS[mode]) + h0.shape,
                   np.result_type(gates_x, h0, w_hh))
    n, h = h0.shape[-1], h0
    with blas.one_thread():
        for t in _steps(gates_x.shape[0], reverse):
            hidden = product(h.reshape(-1, n), w_hh.T).reshape(h.shape[:-1] + (-1,))
            if b_hh is not None:
                hidden += b_hh
            row = out[t]
            if mode == "GRU":
                x, r, z, g, hn = gates_x[t], row[1], row[2], row[3], row[4]
                np.add(x[..., :n], hidden[..., :n], out=r)
                np.add(x[..., n:2 * n], hidden[..., n:2 * n], out=z)
                for s in (r, z):
                    s[...] = logistic(s)
                hn[...] = hidden[..., 2 * n:]
                np.tanh(x[..., 2 * n:] + r * hn, out=g)
                np.add(g, z * (h - g), out=row[0])  # (1 - z) n + z h, as nn.GRU computes
            elif mode == "RNN_TANH":
                np.tanh(gates_x[t] + hidden, out=row[0])
            else:
                np.maximum(gates_x[t] + hidden, 0, out=row[0])
            h = row[0]
    return out


@primitive("rnn_sequence_grads", blas=True, cost=_rnn_sequence_cost,
           shape=lambda grad, out, h0, w_hh, *, mode, reverse: (
               (out.shape[0] + 1,) + h0.shape[:-1]
               + ((6 if mode == "GRU" else 1) * h0.shape[-1],), h0.dtype))
def rnn_sequence_grads(grad, out, h0, w_hh, *, mode, reverse):
    """The gradient of :func:`rnn_sequence`: per step, of the input's gates (the first
    ``gH`` columns) and of the hidden product ``h W_hh^T + b_hh`` (the last ``gH``; a GRU's
    differ in their third block, an Elman step's are one block), and in row ``steps`` of
    ``h0`` (its first ``H`` columns), each step passing its state's gradient to the one
    before. ``grad`` is of every row, or of the outputs ``h'`` alone ``(steps, ..., H)``
    (:func:`hidden_gradient`)."""
    count, n = out.shape[0], h0.shape[-1]
    width = 6 * n if mode == "GRU" else n
    result = np.zeros((count + 1,) + h0.shape[:-1] + (width,), h0.dtype)
    hidden_only = grad.ndim == out.ndim - 1
    d_h = None
    with blas.one_thread():
        for t in reversed(_steps(count, reverse)):
            h_before = _state_before(out, 0, h0, t, reverse)
            row = out[t]
            # the gradients of a GRU step's other rows: zeros where only h' was read
            g = (grad[t],) + (0,) * 4 if hidden_only else grad[t]
            d_out = g[0] if d_h is None else g[0] + d_h
            d = result[t]
            if mode == "GRU":
                r, z, new, hn = row[1], row[2], row[3], row[4]
                d_new = d_out * (1 - z) + g[3]
                d_z = d_out * (h_before - new) + g[2]
                d_npre = d_new * (1 - new * new)
                d[..., :n] = (d_npre * hn + g[1]) * r * (1 - r)
                d[..., n:2 * n] = d_z * z * (1 - z)
                d[..., 2 * n:3 * n] = d_npre
                d[..., 3 * n:5 * n] = d[..., :2 * n]
                d[..., 5 * n:] = d_npre * r + g[4]
                hidden = d[..., 3 * n:]
                direct = d_out * z
            else:
                d[...] = d_out * ((1 - row[0] * row[0]) if mode == "RNN_TANH" else row[0] > 0)
                hidden, direct = d, 0
            d_h = product(hidden.reshape(-1, hidden.shape[-1]), w_hh).reshape(h0.shape)
            d_h += direct
    result[count, ..., :n] = d_h
    return result


def _rnn_sequence_vjp_of_many(grad, out, positions, gates_x, h0, w_hh, b_hh=None, *, mode,
                              reverse):
    grads = rnn_sequence_grads(hidden_gradient(grad, out), out, h0, w_hh, mode=mode,
                               reverse=reverse)
    count, n, gates = gates_x.shape[0], h0.shape[-1], _RNN_GATES[mode]
    lead = (slice(None),) * (len(h0.shape) - 1)
    d_gates = index(grads, spec=(slice(0, count),) + lead + (slice(0, gates * n),))
    d_hidden = d_gates if mode != "GRU" else \
        index(grads, spec=(slice(0, count),) + lead + (slice(3 * n, 6 * n),))
    wanted = {0: lambda: d_gates,
              1: lambda: index(grads, spec=(count,) + lead + (slice(0, n),)),
              2: lambda: _hidden_weight_grad(d_hidden, out, h0, reverse),
              3: lambda: sum_(reshaped(d_hidden, (-1, gates * n)), dim=(0,))}
    return [wanted[k]() for k in positions]


rnn_sequence.defvjp_of_many(_rnn_sequence_vjp_of_many)


def _ctc_shape(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    return (log_probs.shape[1],), log_probs.dtype


def _ctc_paths(log_probs, targets, input_lengths, target_lengths, blank):
    """Per batch element: its extended labels (blanks between and around the targets), and
    the log-space forward (alpha) and backward (beta) variables of the CTC recursion over
    its first ``input_lengths`` steps; also the element's negative log likelihood."""
    offsets = np.concatenate([[0], np.cumsum(target_lengths)[:-1]])
    for n in range(log_probs.shape[1]):
        steps, length = int(input_lengths[n]), int(target_lengths[n])
        labels = targets[n, :length] if targets.ndim == 2 else \
            targets[offsets[n]:offsets[n] + length]
        extended = np.full(2 * length + 1, blank, dtype=np.int64)
        extended[1::2] = labels
        # Where a path may skip the blank before a label: between two different labels.
        skip = np.zeros(len(extended), bool)
        skip[2:] = (extended[2:] != blank) & (extended[2:] != extended[:-2])
        lp = log_probs[:steps, n, :].astype(np.float64)[:, extended]  # (T, S)
        alpha = np.full((steps, len(extended)), -np.inf)
        beta = np.full((steps, len(extended)), -np.inf)
        if steps:
            alpha[0, :2] = lp[0, :2]
            for t in range(1, steps):
                previous = alpha[t - 1]
                one = np.concatenate([[-np.inf], previous[:-1]])
                two = np.where(skip, np.concatenate([[-np.inf, -np.inf], previous[:-2]]),
                               -np.inf)
                alpha[t] = np.logaddexp(np.logaddexp(previous, one), two) + lp[t]
            beta[-1, -2:] = lp[-1, -2:]
            later_skip = np.concatenate([skip[2:], [False, False]])
            for t in range(steps - 2, -1, -1):
                following = beta[t + 1]
                one = np.concatenate([following[1:], [-np.inf]])
                two = np.where(later_skip, np.concatenate([following[2:], [-np.inf, -np.inf]]),
                               -np.inf)
                beta[t] = np.logaddexp(np.logaddexp(following, one), two) + lp[t]
            nll = -np.logaddexp(alpha[-1, -1], alpha[-1, -2] if len(extended) > 1
                                else -np.inf)
        else:
            nll = 0.0 if length == 0 else np.inf
        yield n, extended, alpha, beta, lp, nll


@primitive("ctc_loss", _ctc_shape, grad_name="CtcLossBackward0",
           cost=lambda node: 3e-6 + np.prod(node.inputs[0].shape) * 50e-9)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    """The negative log likelihood of each batch element's targets, summed over every
    alignment (Graves et al.'s CTC), from log probabilities (T, N, C)."""
    where = " (while checking arguments for ctc_loss_allocate_outputs)"
    if len(input_lengths) and input_lengths.max() > log_probs.shape[0]:
        raise RuntimeError(f"Expected input_lengths to have value at most {log_probs.shape[0]}, "
                           f"but got value {int(input_lengths.max())}{where}")
    if targets.ndim == 2 and len(target_lengths) and target_lengths.max() > targets.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {int(target_lengths.max())} "
                           f"at dimension 1, but got size {targets.shape[1]} for argument #2 "
                           f"'targets'{where}")
    out = np.zeros(log_probs.shape[1])
    for n, *_, nll in _ctc_paths(log_probs, targets, input_lengths, target_lengths, blank):
        out[n] = 0.0 if zero_infinity and np.isinf(nll) else nll
    return out.astype(log_probs.dtype)


@primitive("ctc_loss_backward",
           lambda g, log_probs, *rest, **attrs: (log_probs.shape, log_probs.dtype))
def ctc_loss_backward(g, log_probs, targets, input_lengths, target_lengths, blank,
                      zero_infinity):
    """``d nll / d log_probs[t, k] = -sum_{s: label s is k} exp(alpha + beta - lp + nll)``,
    per element, times its incoming gradient (nothing for an infinite loss with
    ``zero_infinity``). PyTorch's adds ``exp(log_probs)`` to it, which cancels in the
    log-softmax the log probabilities come from."""
    grad = np.zeros(log_probs.shape, dtype=np.float64)
    for n, extended, alpha, beta, lp, nll in _ctc_paths(log_probs, targets, input_lengths,
                                                        target_lengths, blank):
        if np.isinf(nll):
            if not zero_infinity:
                grad[:len(alpha), n, :] = np.nan
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            weights = np.exp(alpha + beta - lp + nll)  # (T, S): each label's posterior
        steps = np.zeros((len(alpha), log_probs.shape[2]))
        np.add.at(steps, (slice(None), extended), weights)
        grad[:len(alpha), n, :] = -steps * g[n]
    return grad.astype(log_probs.dtype)


def _no_second_ctc_derivative(*args, **attrs):
    raise NotImplementedError("the second derivative of ctc_loss is not supported")


ctc_loss.defvjp(lambda g, out, log_probs, *rest, **attrs: ctc_loss_backward(
    g, log_probs, *rest, **attrs))
ctc_loss_backward.defvjp(*[_no_second_ctc_derivative] * 6)
