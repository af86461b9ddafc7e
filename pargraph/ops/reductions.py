"""Reductions over dimensions: sums, norms, products, extremes and their positions."""

from __future__ import annotations

import numpy as np

from pargraph.ops.core import (
    _INT64,
    HALVES,
    ShapeError,
    _reduced_shape,
    _reduction,
    _reduction_same,
    category,
    float_dtype,
    is_floating,
    primitive,
)
from pargraph.ops.elementwise import (
    add,
    cast,
    constant,
    div,
    eq,
    gt,
    mul,
    where,
)
from pargraph.ops.shapes import (
    _along_grid,
    _keep,
    constant_pad,
    expand,
    gather,
    index,
    put_along_dim,
    sum_,
)


def _cumsum_shape(x, dim, reverse=False):
    return x.shape, x.dtype if category(x.dtype) == 2 else _INT64


def _draws_shape(weights, uniforms):
    if len(weights.shape) < 1 or tuple(uniforms.shape[:-1]) != tuple(weights.shape[:-1]):
        raise ShapeError(f"weights of shape {weights.shape} and uniform draws of shape "
                         f"{uniforms.shape} do not match (expected the same rows)")
    return tuple(uniforms.shape), np.dtype(np.int64)


def checked_weights(rows: np.ndarray) -> np.ndarray:
    """Each row's total of multinomial weights ``rows`` (float64), once PyTorch's checks
    passed: no negative, infinite or NaN weight, no row of zeros."""
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    totals = rows.sum(-1, keepdims=True)
    if (totals <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    return totals


@primitive("multinomial_draws", _draws_shape)
def multinomial_draws(weights, uniforms):
    """Category indices drawn with replacement per row of ``weights`` (unnormalized, the last
    dimension) from ``uniforms`` in [0, 1): the first index whose cumulative probability
    exceeds the draw, as numpy's ``choice`` finds it. Raises PyTorch's errors for weights it
    refuses."""
    rows = np.asarray(weights, dtype=np.float64).reshape(-1, weights.shape[-1])
    totals = checked_weights(rows)
    bounds = np.cumsum(rows / totals, axis=-1)
    bounds[:, -1] = 1.0  # the last bound is the whole mass, whatever the rounding
    draws = np.asarray(uniforms, dtype=np.float64).reshape(rows.shape[0], -1)
    found = np.empty(draws.shape, np.int64)
    for k in range(rows.shape[0]):
        found[k] = np.searchsorted(bounds[k], draws[k], side="right")
    return found.reshape(uniforms.shape)


@primitive("cumsum", _cumsum_shape)
def cumsum(x, dim, reverse=False):
    """Running sums along ``dim`` (``reverse``: from the end, what the vjp needs)."""
    if x.dtype in HALVES:  # accumulated in float32, as PyTorch does
        return cumsum.forward(x.astype(np.float32), dim, reverse).astype(x.dtype)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, dim), axis=dim), dim)
    return np.cumsum(x, axis=dim)


cumsum.defvjp(lambda g, out, x, dim, reverse=False: cumsum(g, dim=dim, reverse=not reverse))


@primitive("cumprod", lambda x, dim: _cumsum_shape(x, dim), grad_name="CumprodBackward0")
def cumprod(x, dim):
    """Running products along ``dim`` (integers and booleans as int64, as PyTorch's)."""
    if x.dtype in HALVES:
        return np.cumprod(x.astype(np.float32), axis=dim).astype(x.dtype)
    return np.cumprod(x, axis=dim, dtype=x.dtype if is_floating(x.dtype) else np.int64)


@primitive("cumprod_grad", lambda g, x, out, dim: (x.shape, g.dtype))
def cumprod_grad(g, x, out, dim):
    """The exact gradient of :func:`cumprod`, zeros included: ``sum_{j>=i} g_j prod_{k<=j,
    k!=i} x_k``. Without a zero, the reversed running sum of ``g * out`` over ``x``; after
    a row's first zero, nothing; at it, the products that skip it."""
    g, x, out = (np.moveaxis(a, dim, -1) for a in (g, x, out))
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.flip(np.cumsum(np.flip(g * out, -1), -1), -1)
        grad = tail / x
    zero = x == 0
    for row in map(tuple, np.argwhere(zero.any(-1))):
        xs, gs, outs = x[row], g[row], out[row]
        z = int(np.argmax(xs == 0))
        result = np.zeros_like(xs)
        result[:z] = np.flip(np.cumsum(np.flip((gs * outs)[:z]))) / xs[:z]
        before = outs[z - 1] if z else 1.0
        after = np.concatenate([[1.0], np.cumprod(xs[z + 1:])])
        result[z] = np.sum(gs[z:] * before * after)
        grad[row] = result
    return np.moveaxis(grad, -1, dim)


def _no_second_cumprod_derivative(*args, **attrs):
    raise RuntimeError("the derivative of cumprod's gradient is not implemented")


cumprod.defvjp(lambda g, out, x, dim: cumprod_grad(g, x, out, dim=dim))
cumprod_grad.defvjp(*[_no_second_cumprod_derivative] * 3)


def _norm_shape(x, dim=None, keepdim=False):
    return _reduced_shape(x.shape, dim, keepdim), float_dtype(x.dtype)


@primitive("norm", _norm_shape, grad_name="NormBackward1")
def norm(x, dim=None, keepdim=False):
    """The 2-norm over ``dim``: one node, so that its gradient at 0 is 0 (PyTorch's
    subgradient), where ``sqrt(sum(x * x))`` would give nan. Half precision is accumulated
    in float32, as in PyTorch."""
    if x.dtype in HALVES:
        return norm.forward(x.astype(np.float32), dim, keepdim).astype(x.dtype)
    return np.sqrt(np.sum(np.square(x), axis=dim, keepdims=keepdim))


def _norm_vjp(g, out, x, dim=None, keepdim=False):
    scale = _keep(out, dim, keepdim)
    ratio = where(gt(scale, 0), div(x, scale), 0.0)
    return mul(_keep(g, dim, keepdim), ratio)


norm.defvjp(_norm_vjp)


@primitive("prod", _reduction)
def prod(x, dim=None, keepdim=False):
    return np.prod(x, axis=dim, keepdims=keepdim)


prod.defvjp(
    lambda g, out, x, dim=None, keepdim=False: mul(
        expand(_keep(g, dim, keepdim), x.shape), prod_others(x, dim=dim)
    )
)


@primitive("prod_others", lambda x, dim: (x.shape, x.dtype))
def prod_others(x, dim):
    """For each element, the product of the other elements of its reduction group; exact
    where the group holds zeros (where ``out / x`` would divide by zero)."""
    moved = np.moveaxis(np.asarray(x), dim, tuple(range(-len(dim), 0)))
    flat = moved.reshape(moved.shape[: moved.ndim - len(dim)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return np.moveaxis((left * right).reshape(moved.shape), tuple(range(-len(dim), 0)), dim)


def _extreme_vjp(g, out, x, dim=None, keepdim=False):
    """amax/amin: the gradient is shared evenly among the elements equal to the extreme."""
    hits = eq(x, expand(_keep(out, dim, keepdim), x.shape))
    count = sum_(hits, dim=dim, keepdim=True)
    return div(mul(expand(_keep(g, dim, keepdim), x.shape), hits), count)


@primitive("amax", _reduction_same, grad_name="MaxBackward1")
def amax(x, dim=None, keepdim=False):
    return x.max(axis=dim, keepdims=keepdim)


amax.defvjp(_extreme_vjp)


@primitive("amin", _reduction_same, grad_name="MinBackward1")
def amin(x, dim=None, keepdim=False):
    return x.min(axis=dim, keepdims=keepdim)


amin.defvjp(_extreme_vjp)


def _arg_shape(x, dim=None, keepdim=False):
    if x.shape and 0 in (x.shape if dim is None else (x.shape[dim],)):
        raise IndexError(
            "Expected reduction dim to be specified for input.numel() == 0." if dim is None
            else f"Expected reduction dim {dim} to have non-zero size (input of shape "
                 f"{tuple(x.shape)})")
    if dim is None:
        return ((1,) * len(x.shape) if keepdim else ()), _INT64
    return _reduced_shape(x.shape, (dim,), keepdim), _INT64


@primitive("argmax", _arg_shape)
def argmax(x, dim=None, keepdim=False):
    return np.argmax(x, axis=dim, keepdims=keepdim)


@primitive("argmin", _arg_shape)
def argmin(x, dim=None, keepdim=False):
    return np.argmin(x, axis=dim, keepdims=keepdim)


@primitive("cumulative_argextreme", lambda x, dim, largest: (x.shape, _INT64))
def cumulative_argextreme(x, dim, largest):
    """Where the running maximum (``largest``) or minimum along ``dim`` was found: the
    latest of equal values, and a NaN once one came (the latest NaN), as PyTorch's
    ``cummax`` / ``cummin`` indices."""
    moved = np.moveaxis(x, dim, -1)
    index = np.zeros(moved.shape, dtype=np.int64)
    if moved.shape[-1]:
        best = moved[..., 0].copy()
        at = np.zeros(moved.shape[:-1], dtype=np.int64)
        with np.errstate(invalid="ignore"):
            for k in range(moved.shape[-1]):
                value = moved[..., k]
                better = value >= best if largest else value <= best
                take = np.isnan(value) | (better & ~np.isnan(best)) if is_floating(x.dtype) \
                    else better
                best = np.where(take, value, best)
                at = np.where(take, k, at)
                index[..., k] = at
    return np.moveaxis(index, -1, dim)


@primitive("logcumsumexp", lambda x, dim, reverse=False: (x.shape, x.dtype),
           grad_name="LogcumsumexpBackward0")
def logcumsumexp(x, dim, reverse=False):
    """``log(cumsum(exp(x)))`` along ``dim`` without overflow or underflow (``reverse``: from
    the end, what the vjp needs)."""
    if reverse:
        return np.flip(np.logaddexp.accumulate(np.flip(x, dim), axis=dim), dim)
    return np.logaddexp.accumulate(x, axis=dim)


@primitive("logcumsumexp_backward", lambda g, x, out, dim, reverse=False: (x.shape, x.dtype))
def logcumsumexp_backward(g, x, out, dim, reverse=False):
    """PyTorch's way: ``dx_i = sum_{j >= i} g_j exp(x_i - out_j)``, the positive and the
    negative parts of ``g`` each summed in log space, so nothing overflows."""
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = []
        for part in (np.where(g > 0, g, 0), np.where(g < 0, -g, 0)):
            shifted = np.log(part) - out
            total = logcumsumexp.forward(shifted, dim, not reverse)
            parts.append(np.exp(x + total))
    return np.nan_to_num(parts[0] - parts[1], nan=0.0, posinf=np.inf, neginf=-np.inf)


def _no_second_logcumsumexp_derivative(*args, **attrs):
    raise NotImplementedError("the second derivative of logcumsumexp is not supported")


logcumsumexp.defvjp(lambda g, out, x, dim, reverse=False: logcumsumexp_backward(
    g, x, out, dim=dim, reverse=reverse))
logcumsumexp_backward.defvjp(*[_no_second_logcumsumexp_derivative] * 3)



def _scatter_reduce_shape(x, index, src, dim, reduce, include_self):
    return x.shape, x.dtype


@primitive("scatter_reduce", _scatter_reduce_shape, grad_name="ScatterReduceBackward0")
def scatter_reduce(x, index, src, dim, reduce, include_self):
    """``x`` with ``src``'s elements (those ``index`` covers) reduced into it at ``index``
    along ``dim`` by ``reduce``: ``"amax"``, ``"amin"`` or ``"prod"`` (``include_self``: ``x``'s
    own values take part)."""
    out = np.array(x, copy=True)
    target = _along_grid(index, dim)
    part = src[tuple(slice(0, n) for n in index.shape)]
    if not include_self:
        identity = {"prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        if out.dtype.kind in "iub" and reduce != "prod":
            info = np.iinfo(out.dtype)
            identity = info.min if reduce == "amax" else info.max
        out[target] = identity
    {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[reduce].at(out, target, part)
    return out


def _scatter_extreme_parts(g, out, x, where_to, src, dim, include_self):
    """Where ``x`` and ``src`` equal their result, and the gradient's share of each: split
    evenly between the values equal to the result, ``x``'s counted even where it was left
    out, as PyTorch counts them (where it was left out, it then gets none)."""
    cut = src if src.shape == where_to.shape else index(
        src, spec=tuple(slice(0, n) for n in where_to.shape))
    src_hits = cast(eq(cut, gather(out, where_to, dim)), dtype=g.dtype)
    x_hits = cast(eq(x, out), dtype=g.dtype)
    ties = add(x_hits, put_along_dim(src_hits, where_to, shape=x.shape, dim=dim))
    share = div(g, where(eq(ties, constant(np.zeros((), g.dtype))),
                         constant(np.ones((), g.dtype)), ties))
    if not include_self:  # x gets none where something was scattered
        received = put_along_dim(expand(constant(np.ones((), g.dtype)), shape=where_to.shape),
                                 where_to, shape=x.shape, dim=dim)
        x_hits = mul(x_hits, cast(eq(received, constant(np.zeros((), g.dtype))), dtype=g.dtype))
    return x_hits, src_hits, share


def _scatter_reduce_x(g, out, x, index, src, dim, reduce, include_self):
    if reduce == "prod":
        raise NotImplementedError("scatter_reduce: the derivative of reduce='prod' is not "
                                  "supported")
    x_hits, _, share = _scatter_extreme_parts(g, out, x, index, src, dim, include_self)
    return mul(share, x_hits)


def _scatter_reduce_src(g, out, x, index, src, dim, reduce, include_self):
    if reduce == "prod":
        raise NotImplementedError("scatter_reduce: the derivative of reduce='prod' is not "
                                  "supported")
    _, src_hits, share = _scatter_extreme_parts(g, out, x, index, src, dim, include_self)
    grad = mul(gather(share, index, dim), src_hits)
    if src.shape != index.shape:  # the elements index does not cover get none
        grad = constant_pad(grad, pads=tuple((0, m - n) for n, m in zip(grad.shape, src.shape)),
                            value=0)
    return grad


scatter_reduce.defvjp(_scatter_reduce_x, None, _scatter_reduce_src)
