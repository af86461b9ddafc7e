"""Optimizer updates: one node per tensor and formula, no gradient."""

from __future__ import annotations

import numpy as np

from pargraph.ops.core import primitive


def _like_first(x, *others, **attrs):
    return x.shape, x.dtype


def _decayed(grad, param, weight_decay):
    return grad + weight_decay * param if weight_decay else grad


def _copied(value, out):
    np.copyto(out, value)
    return out


@primitive("momentum_buffer", _like_first, writes_state=True)
def momentum_buffer(grad, param, buf=None, *, momentum, dampening, weight_decay, out=None):
    """SGD's new momentum buffer (the first step copies the direction)."""
    d_p = _decayed(grad, param, weight_decay)
    if buf is None:
        return d_p.copy() if out is None else _copied(d_p, out)
    kept = np.multiply(buf, momentum)
    return np.add(kept, np.multiply(d_p, 1 - dampening), out=out)


@primitive("sgd_step", _like_first, writes_state=True)
def sgd_step(param, grad, buf=None, *, lr, momentum, weight_decay, nesterov, out=None):
    """SGD's new parameter, from its gradient and (with momentum) its new buffer."""
    d_p = _decayed(grad, param, weight_decay)
    if buf is not None:
        d_p = d_p + momentum * buf if nesterov else buf
    # param - lr * d_p, bit for bit, in one new array instead of two (a - b is a + -b).
    # asarray: numpy gives a scalar, not an array, for a 0-d parameter, and out= needs one.
    step = np.asarray(np.multiply(d_p, -lr))
    return np.add(param, step, out=step if out is None else out)


@primitive("adam_moment", _like_first, writes_state=True)
def adam_moment(grad, param, moment=None, *, beta, weight_decay, square, out=None):
    """Adam's new first (``square=False``) or second moment estimate."""
    grad = _decayed(grad, param, weight_decay)
    moment = np.zeros_like(param) if moment is None else moment
    # moment * beta + (1 - beta) * grad [* grad], the same operations on two temporaries
    # instead of four: a step's peak memory is made of these. (asarray: a 0-d parameter.)
    scaled = np.asarray(np.multiply(grad, 1 - beta))
    if square:
        np.multiply(scaled, grad, out=scaled)
    kept = np.asarray(np.multiply(moment, beta, out=out))
    return np.add(kept, scaled, out=kept)


@primitive("adam_step", _like_first, writes_state=True)
def adam_step(param, exp_avg, exp_avg_sq, *, lr, bias1, bias2_sqrt, eps, decoupled_decay,
              out=None):
    """Adam's new parameter (``decoupled_decay``: AdamW's factor ``lr * weight_decay``)."""
    if decoupled_decay:
        param = param * (1 - decoupled_decay)
    # param - (lr / bias1) * (exp_avg / denom), the same operations in place on temporaries.
    denom = np.asarray(np.sqrt(exp_avg_sq))  # an array for a 0-d parameter too
    np.divide(denom, float(bias2_sqrt), out=denom)
    np.add(denom, float(eps), out=denom)
    step = np.divide(exp_avg, denom, out=denom)
    np.multiply(step, float(lr / bias1), out=step)
    return np.subtract(param, step, out=step if out is None else out)


@primitive("root_mean_square", _like_first)
def root_mean_square(square_avg, grad_avg=None, *, eps):
    """RMSprop's denominator: ``sqrt(square_avg) + eps``, centered
    ``sqrt(square_avg - grad_avg**2) + eps``."""
    if grad_avg is not None:
        square_avg = square_avg - grad_avg * grad_avg
    return np.sqrt(square_avg) + eps


@primitive("rmsprop_buffer", _like_first, writes_state=True)
def rmsprop_buffer(grad, param, avg, buf=None, *, momentum, weight_decay, out=None):
    """RMSprop's new momentum buffer: ``buf * momentum + grad / avg``."""
    buf = np.zeros_like(param) if buf is None else buf
    direction = np.divide(_decayed(grad, param, weight_decay), avg)
    return np.add(np.multiply(buf, momentum), direction, out=out)


@primitive("rmsprop_step", _like_first, writes_state=True)
def rmsprop_step(param, grad, avg, *, lr, weight_decay, out=None):
    """RMSprop's new parameter without momentum: ``param - lr * (grad / avg)``."""
    step = np.multiply(np.divide(_decayed(grad, param, weight_decay), avg), lr)
    return np.subtract(param, step, out=out)


@primitive("scaled_step", _like_first, writes_state=True)
def scaled_step(param, direction, *, lr, out=None):
    """``param - lr * direction``: the last formula of RMSprop with momentum and Adadelta."""
    return np.subtract(param, np.multiply(direction, lr), out=out)


@primitive("adagrad_sum", _like_first, writes_state=True)
def adagrad_sum(grad, param, total=None, *, weight_decay, initial, out=None):
    """Adagrad's new sum of squared gradients (starting at ``initial``)."""
    total = np.full_like(param, initial) if total is None else total
    grad = _decayed(grad, param, weight_decay)
    return np.add(total, np.multiply(grad, grad), out=out)


@primitive("adagrad_step", _like_first, writes_state=True)
def adagrad_step(param, grad, total, *, lr, eps, weight_decay, out=None):
    """Adagrad's new parameter: ``param - lr * (grad / (sqrt(total) + eps))``, ``lr`` already
    decayed for the step."""
    direction = np.divide(_decayed(grad, param, weight_decay), np.add(np.sqrt(total), eps))
    return np.subtract(param, np.multiply(direction, lr), out=out)


@primitive("adadelta_delta", _like_first)
def adadelta_delta(grad, param, square_avg, acc_delta=None, *, eps, weight_decay):
    """Adadelta's step direction: ``sqrt(acc_delta + eps) / sqrt(square_avg + eps) * grad``."""
    acc_delta = np.zeros_like(param) if acc_delta is None else acc_delta
    return np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * \
        _decayed(grad, param, weight_decay)
