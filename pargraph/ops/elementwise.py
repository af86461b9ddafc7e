"""Leaves, and elementwise ops: arithmetic, math, comparisons and logic."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph.graph import Node, user_site
from pargraph.ops.core import (
    _BOOL,
    HALVES,
    REGISTRY,
    Primitive,
    ShapeError,
    _compare,
    _elementwise,
    _elementwise_float,
    _gradient_shape,
    _same,
    _same_float,
    broadcast_shapes,
    is_floating,
    primitive,
    result_dtype,
    shape_of,
    torch_name,
)
from pargraph.ops.shapes import unbroadcast

leaf = Primitive("leaf", None, _same)  # a value given, not computed: a tensor from data


REGISTRY["leaf"] = leaf


def constant(value: Any, requires_grad: bool = False, shape: tuple | None = None,
             dtype: np.dtype | None = None) -> Node:
    """A leaf node holding ``value`` (already realized: an array, or a cluster Future, which
    then needs ``shape`` and ``dtype``)."""
    shape = value.shape if shape is None else shape
    dtype = value.dtype if dtype is None else dtype
    node = Node(leaf, (), {}, shape, dtype, value=value, site=user_site())
    node.requires_grad = requires_grad
    return node


@primitive("stop_gradient", _same, view=True)
def stop_gradient(x):
    return x


@primitive("after", lambda x, trigger: (x.shape, x.dtype), view=True)
def after(x, trigger):
    """``x``, once ``trigger`` is computed: an order the graph keeps (a checkpointed
    function's recomputation waits for its output's gradient, see autograd.recompute)."""
    return x


after.defvjp(lambda g, out, x, trigger: g, None)


@primitive("cast", lambda x, dtype: (x.shape, dtype), grad_name="ToCopyBackward0")
def cast(x, dtype):
    return x.astype(dtype)


cast.defvjp(lambda g, out, x, dtype: cast(g, dtype=x.dtype))


def _viewed_dtype_shape(x, dtype):
    dtype = np.dtype(dtype)
    if dtype.itemsize == x.dtype.itemsize:
        return x.shape, dtype
    names = f"{torch_name(x.dtype)} as {torch_name(dtype)}"
    if not x.shape:
        raise ShapeError(f"self.dim() cannot be 0 to view {names} (different element sizes)")
    old, new = x.dtype.itemsize, dtype.itemsize
    if new > old and x.shape[-1] % (new // old):
        raise ShapeError(f"self.size(-1) must be divisible by {new // old} to view {names} "
                         f"(different element sizes), but got {x.shape[-1]}")
    return x.shape[:-1] + (x.shape[-1] * old // new,), dtype


@primitive("view_dtype", _viewed_dtype_shape)
def view_dtype(x, dtype):
    """The same bytes read as ``dtype`` (``x.view(torch.int32)``); not differentiable."""
    return np.ascontiguousarray(x).view(dtype)


@primitive("clone", _same)
def clone(x):
    return np.array(x, copy=True)


clone.defvjp(lambda g, out, x: g)


def _negated_shape(x):
    if x.dtype == _BOOL:
        raise ShapeError("Negation, the `-` operator, on a bool tensor is not supported. If you "
                         "are trying to invert a mask, use the `~` or `logical_not()` operator "
                         "instead.")
    return x.shape, x.dtype


@primitive("neg", _negated_shape, out=True)
def neg(x, out=None):
    return np.negative(x, out=out)


neg.defvjp(lambda g, out, x: neg(g))


@primitive("add", _elementwise, out=True)
def add(x, y, out=None):
    return np.add(x, y, out=out)


add.defvjp(
    lambda g, out, x, y: unbroadcast(g, x.shape),
    lambda g, out, x, y: unbroadcast(g, y.shape),
)


_BOOL_DTYPE = np.dtype(bool)


def _is_bool(v: Any) -> bool:
    if type(v) is Node:
        return v.dtype == _BOOL_DTYPE
    if type(v) in (float, int):
        return False
    return isinstance(v, (bool, np.bool_)) or getattr(v, "dtype", None) == _BOOL_DTYPE


def _subtraction(x: Any, y: Any) -> tuple[tuple, np.dtype]:
    """As ``_elementwise``, refusing bool operands (tensors or Python bools) as PyTorch does."""
    bools = _is_bool(x) + _is_bool(y)
    if bools == 2:
        raise ShapeError("Subtraction, the `-` operator, with two bool tensors is not "
                         "supported. Use the `^` or `logical_xor()` operator instead.")
    if bools:
        raise ShapeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                         "If you are trying to invert a mask, use the `~` or `logical_not()` "
                         "operator instead.")
    return _elementwise(x, y)


@primitive("sub", _subtraction, out=True)
def sub(x, y, out=None):
    return np.subtract(x, y, out=out)


sub.defvjp(
    lambda g, out, x, y: unbroadcast(g, x.shape),
    lambda g, out, x, y: unbroadcast(neg(g), y.shape),
)


@primitive("mul", _elementwise, out=True)
def mul(x, y, out=None):
    return np.multiply(x, y, out=out)


mul.defvjp(
    lambda g, out, x, y: unbroadcast(mul(g, y), x.shape),
    lambda g, out, x, y: unbroadcast(mul(g, x), y.shape),
)


@primitive("div", _elementwise_float, out=True)
def div(x, y, out=None):
    return np.true_divide(x, y, out=out)


div.defvjp(
    lambda g, out, x, y: unbroadcast(div(g, y), x.shape),
    lambda g, out, x, y: unbroadcast(neg(div(mul(g, out), y)), y.shape),
)


def _power_shape(x, y):
    if type(y) is int and y < 0 and isinstance(x, Node) and x.dtype.kind in "biu":
        raise ShapeError("Integers to negative integer powers are not allowed.")
    return _elementwise(x, y)


@primitive("pow", _power_shape, refuses="b")
def pow_(x, y):
    try:
        return np.power(x, y)
    except ValueError:  # an integer to a negative integer power: PyTorch's integer result
        x, y = np.asarray(x), np.asarray(y)
        odd = np.abs(y) % 2 == 1
        reciprocal = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0))
        return np.where(y < 0, reciprocal, np.power(x, np.maximum(y, 0))).astype(
            np.result_type(x, y))


def _integer_divisor(x, y) -> None:
    """PyTorch's error for an integer division by zero (numpy gives 0 and a warning)."""
    if np.asarray(x).dtype.kind in "iub" and np.asarray(y).dtype.kind in "iub" and \
            np.size(x) and not np.all(y):
        raise RuntimeError("ZeroDivisionError")


def _pow_vjp_exponent(g, out, x, y):
    """d/dy x**y = x**y log x; PyTorch's convention: 0 where x == 0 and y >= 0 (instead of
    nan), so that 0**y for a negative y gives -inf."""
    if not isinstance(x, Node):
        if x != 0:
            return unbroadcast(mul(g, mul(out, math.log(x))), y.shape)
        return unbroadcast(where(ge(y, 0), 0.0, mul(g, mul(out, -math.inf))), y.shape)
    derivative = mul(g, mul(out, log(x)))
    if not isinstance(y, Node):
        return unbroadcast(derivative if y < 0 else where(eq(x, 0), 0.0, derivative), y.shape)
    return unbroadcast(where(logical_and(eq(x, 0), ge(y, 0)), 0.0, derivative), y.shape)


def _pow_vjp_base(g, out, x, y):
    """d/dx x**y = y x**(y-1); PyTorch's convention: 0 where y == 0 (instead of nan at 0)."""
    if not isinstance(y, Node):
        if y == 0:
            return unbroadcast(mul(g, 0.0), x.shape)
        return unbroadcast(mul(g, mul(y, pow_(x, y - 1))), x.shape)
    return unbroadcast(where(eq(y, 0), 0.0, mul(g, mul(y, pow_(x, sub(y, 1))))), x.shape)


pow_.defvjp(_pow_vjp_base, _pow_vjp_exponent)


@primitive("add_n", lambda *xs: _elementwise(*xs), grad_name="AddBackward0")
def add_n(*xs):
    total = np.add(xs[0], xs[1])  # a fresh array: later terms may be added in place
    for x in xs[2:]:
        in_place = (type(total) is np.ndarray and np.ndim(x) > 0
                    and np.shape(x) == total.shape[-np.ndim(x):]
                    and np.result_type(total, x) == total.dtype)
        total = np.add(total, x, out=total if in_place else None)
    return total


add_n.defvjp_of_many(lambda g, out, positions, *xs: [unbroadcast(g, xs[k].shape)
                                                     for k in positions])


def _share_ties(g, out, x, y, wins):
    """Gradient of maximum/minimum for x: all of g where x wins, half of it at ties."""
    share = add(wins(x, y), mul(eq(x, y), 0.5))
    return unbroadcast(mul(g, share), x.shape)


@primitive("maximum", _elementwise, out=True)
def maximum(x, y, out=None):
    return np.maximum(x, y, out=out)


maximum.defvjp(
    lambda g, out, x, y: _share_ties(g, out, x, y, gt),
    lambda g, out, x, y: _share_ties(g, out, y, x, gt),
)


@primitive("minimum", _elementwise, out=True)
def minimum(x, y, out=None):
    return np.minimum(x, y, out=out)


minimum.defvjp(
    lambda g, out, x, y: _share_ties(g, out, x, y, lt),
    lambda g, out, x, y: _share_ties(g, out, y, x, lt),
)


def _where_shape(cond, x, y):
    if isinstance(cond, Node) and cond.dtype != _BOOL:
        raise ShapeError(f"condition must be a bool tensor, got {cond.dtype}")
    return broadcast_shapes(shape_of(cond), shape_of(x), shape_of(y)), result_dtype(x, y)


@primitive("where", _where_shape)
def where(cond, x, y):
    return np.where(cond, x, y)


where.defvjp(
    None,
    lambda g, out, cond, x, y: unbroadcast(where(cond, g, 0.0), x.shape),
    lambda g, out, cond, x, y: unbroadcast(where(cond, 0.0, g), y.shape),
)


@primitive("exp", _same_float, method=True, out=True)
def exp(x, out=None):
    return np.exp(x, out=out)


exp.defvjp(lambda g, out, x: mul(g, out))


@primitive("log", _same_float, method=True, out=True)
def log(x, out=None):
    return np.log(x, out=out)


log.defvjp(lambda g, out, x: div(g, x))


@primitive("sqrt", _same_float, method=True, out=True)
def sqrt(x, out=None):
    return np.sqrt(x, out=out)


sqrt.defvjp(lambda g, out, x: div(mul(g, 0.5), out))


@primitive("log1p", _same_float, method=True)
def log1p(x):
    return np.log1p(x)


log1p.defvjp(lambda g, out, x: div(g, add(x, 1)))


@primitive("erf", _same_float, method=True)
def erf(x):
    from scipy import special  # on first use: importing scipy.special takes ~0.3 s

    return special.erf(x)


erf.defvjp(lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), 2 / math.sqrt(math.pi))))


@primitive("gelu", lambda x, approximate: _same_float(x))
def gelu(x, approximate):
    """x * Phi(x), Phi the normal distribution (``approximate="tanh"``: its tanh fit)."""
    if x.dtype in HALVES:  # in float32, rounded once, as PyTorch does (x ** 3 would overflow)
        return gelu.forward(x.astype(np.float32), approximate).astype(x.dtype)
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1 + np.tanh(inner))
    from scipy import special

    return 0.5 * x * (1 + special.erf(x / math.sqrt(2)))


def _gelu_vjp(g, out, x, approximate):
    if approximate == "tanh":
        inner = mul(add(x, mul(pow_(x, 3), 0.044715)), math.sqrt(2 / math.pi))
        t = tanh(inner)
        d_inner = mul(add(mul(mul(x, x), 3 * 0.044715), 1.0), math.sqrt(2 / math.pi))
        slope = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), d_inner))
        return mul(g, slope)
    cdf = mul(add(erf(mul(x, 1 / math.sqrt(2))), 1.0), 0.5)
    pdf = mul(exp(mul(mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return mul(g, add(cdf, mul(x, pdf)))


gelu.defvjp(_gelu_vjp)


@primitive("isnan", lambda x: (x.shape, _BOOL), method=True)
def isnan(x):
    return np.isnan(x)


@primitive("isinf", lambda x: (x.shape, _BOOL), method=True)
def isinf(x):
    return np.isinf(x)


@primitive("abs", _same, method=True, out=True, refuses="b")
def abs_(x, out=None):
    return np.abs(x, out=out)


abs_.defvjp(lambda g, out, x: mul(g, sign(x)))


@primitive("sign", _same, method=True, out=True)
def sign(x, out=None):
    if x.dtype == _BOOL:  # numpy has no sign of booleans; PyTorch's is the booleans
        return np.copyto(out, x) or out if out is not None else x.copy()
    signs = np.sign(x, out=out)
    if signs.dtype.kind == "f":  # PyTorch's sign of NaN is 0
        nan = np.isnan(signs)
        if nan.any():
            if out is None:
                return np.where(nan, 0, signs).astype(signs.dtype)
            np.copyto(out, 0, where=nan)
    return signs


sign.defvjp(lambda g, out, x: mul(g, 0.0))


@primitive("sin", _same_float, method=True)
def sin(x):
    return np.sin(x)


sin.defvjp(lambda g, out, x: mul(g, cos(x)))


@primitive("cos", _same_float, method=True)
def cos(x):
    return np.cos(x)


cos.defvjp(lambda g, out, x: neg(mul(g, sin(x))))


@primitive("tanh", _same_float, method=True, out=True)
def tanh(x, out=None):
    return np.tanh(x, out=out)


tanh.defvjp(lambda g, out, x: mul(g, sub(1.0, mul(out, out))))


def logistic(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` in three passes over one new array; ``exp`` overflowing to inf
    gives the right limit, 0. Half precision is computed in float32 and rounded once, as
    PyTorch does."""
    x = np.asarray(x)
    if x.dtype in HALVES:
        return logistic(x.astype(np.float32)).astype(x.dtype)
    if not x.ndim:
        with np.errstate(over="ignore"):
            return np.asarray(1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)
    out = np.negative(x)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


@primitive("sigmoid", _same_float, method=True)
def sigmoid(x):
    return logistic(x)


sigmoid.defvjp(lambda g, out, x: mul(g, mul(out, sub(1.0, out))))


@primitive("relu", _same, method=True, out=True, refuses="b")
def relu(x, out=None):
    return np.maximum(x, 0, out=out)


# From the output, as PyTorch's ReluBackward: out > 0 exactly where x > 0, and the output is
# kept for the next layer's weight gradient anyway, so the input need not be kept at all.
relu.defvjp(lambda g, out, x: threshold_backward(g, out))


@primitive("threshold_backward", _gradient_shape, out=True)
def threshold_backward(g, result, out=None):
    """ReLU's backward (PyTorch's name): ``g`` where ``result > 0``, else 0. One node, where
    ``mul(g, gt(result, 0))`` made two and a mask."""
    return np.multiply(g, result > 0, out=out)


threshold_backward.defvjp(lambda gg, out, g, result: threshold_backward(gg, result), None)


def _clamp_shape(x, min=None, max=None):
    if min is None and max is None:
        raise ShapeError("at least one of 'min' or 'max' must not be None")
    return x.shape, result_dtype(x, *(v for v in (min, max) if v is not None))


@primitive("clamp", _clamp_shape)
def clamp(x, min=None, max=None):
    return np.clip(x, min, max)


clamp.defvjp(lambda g, out, x, min=None, max=None: mul(g, _inside(x, min, max)))


def _inside(x, low, high):
    """Bool mask of low <= x <= high, either bound optional."""
    masks = [m for m in (low is not None and ge(x, low), high is not None and le(x, high)) if m]
    return masks[0] if len(masks) == 1 else bitwise_and(*masks)


def _comparison(name: str, fn: Callable) -> Primitive:
    return primitive(name, _compare)(fn)


eq = _comparison("eq", np.equal)


ne = _comparison("ne", np.not_equal)


lt = _comparison("lt", np.less)


le = _comparison("le", np.less_equal)


gt = _comparison("gt", np.greater)


ge = _comparison("ge", np.greater_equal)


logical_not = primitive("logical_not", lambda x: (x.shape, _BOOL))(np.logical_not)


def _bitwise_shape(name: str) -> Callable:
    def shape(*inputs):
        dtype = result_dtype(*inputs)
        if dtype.kind not in "biu":  # PyTorch: bitwise ops exist for integers and bools only
            raise NotImplementedError(
                f"not implemented for '{torch_name(dtype)}' (expected integer or bool tensors; "
                f"{name} is logical on bool and bitwise on integers)")
        return broadcast_shapes(*(shape_of(i) for i in inputs)), dtype
    return shape


bitwise_and = primitive("bitwise_and", _bitwise_shape("&"))(np.bitwise_and)


bitwise_or = primitive("bitwise_or", _bitwise_shape("|"))(np.bitwise_or)


bitwise_xor = primitive("bitwise_xor", _bitwise_shape("^"))(np.bitwise_xor)


bitwise_not = primitive("bitwise_not", _bitwise_shape("~"))(np.invert)


def _integer_shape(kernel: str) -> Callable:
    """The rule of an op PyTorch has for integers only (bool too, once promoted with an
    int): its error names the kernel as PyTorch's does."""
    def shape(*inputs):
        dtype = result_dtype(*inputs)
        if dtype.kind not in "iu":
            raise NotImplementedError(f'"{kernel}_cpu" not implemented for '
                                      f"'{torch_name(dtype)}'")
        return broadcast_shapes(*(shape_of(i) for i in inputs)), dtype
    return shape


def _shifted(a, b, shift):
    """``shift(a, b)`` with PyTorch's CPU results where C leaves it undefined: a shift by a
    negative amount or by the width or more gives 0 to the left and the sign to the right."""
    b = np.asarray(b)
    bits = np.result_type(a, b).itemsize * 8  # the width the shift computes in
    outside = (b < 0) | (b >= bits)
    if not outside.any():
        return shift(a, b)
    done = shift(a, np.where(outside, 0, b))
    return np.where(outside, 0 if shift is np.left_shift else np.right_shift(a, bits - 1), done)


@primitive("bitwise_left_shift", _integer_shape("lshift"))
def bitwise_left_shift(a, b):
    return _shifted(a, b, np.left_shift)


@primitive("bitwise_right_shift", _integer_shape("rshift"))
def bitwise_right_shift(a, b):
    return _shifted(a, b, np.right_shift)


@primitive("nextafter", _elementwise_float, refuses="biu")
def nextafter(x, y):
    """The next floating point value after ``x`` toward ``y``; as PyTorch's, gradient 1 to
    ``x`` and 0 to ``y``."""
    return np.nextafter(x, y)


nextafter.defvjp(lambda g, out, x, y: unbroadcast(g, shape_of(x)),
                 lambda g, out, x, y: unbroadcast(mul(g, 0.0), shape_of(y)))


gcd = primitive("gcd", _integer_shape("gcd"))(np.gcd)


lcm = primitive("lcm", _integer_shape("lcm"))(np.lcm)


@primitive("frexp_exponent", lambda x: (x.shape, np.dtype(np.int32)))
def frexp_exponent(x):
    """The exponent ``frexp`` gives: ``x == mantissa * 2 ** exponent``, int32 as PyTorch's."""
    return np.frexp(x)[1].astype(np.int32)


@primitive("frexp_mantissa", _same_float)
def frexp_mantissa(x):
    """The mantissa ``frexp`` gives, in [0.5, 1) in magnitude (0, inf and nan as they are)."""
    return np.frexp(x)[0]


frexp_mantissa.defvjp(
    lambda g, out, x: div(g, pow_(2.0, cast(frexp_exponent(x), dtype=g.dtype))))


@primitive("floor", _same, method=True, refuses="b")
def floor(x):
    return np.floor(x) if is_floating(x.dtype) else x.copy()


floor.defvjp(lambda g, out, x: mul(g, 0.0))  # piecewise constant: PyTorch's zero gradient


@primitive("ceil", _same, method=True, refuses="b")
def ceil(x):
    return np.ceil(x) if is_floating(x.dtype) else x.copy()


ceil.defvjp(lambda g, out, x: mul(g, 0.0))


@primitive("trunc", _same, method=True, refuses="b")
def trunc(x):
    return np.trunc(x) if is_floating(x.dtype) else x.copy()


trunc.defvjp(lambda g, out, x: mul(g, 0.0))


@primitive("round", _same, refuses="b")
def round_(x, *, decimals=0):
    """Half to even, as PyTorch and numpy round."""
    return np.round(x, decimals) if is_floating(x.dtype) else x.copy()


round_.defvjp(lambda g, out, x, decimals=0: mul(g, 0.0))


@primitive("tan", _same_float, method=True)
def tan(x):
    return np.tan(x)


tan.defvjp(lambda g, out, x: mul(g, add(mul(out, out), 1.0)))


@primitive("sinh", _same_float, method=True)
def sinh(x):
    return np.sinh(x)


sinh.defvjp(lambda g, out, x: mul(g, cosh(x)))


@primitive("cosh", _same_float, method=True)
def cosh(x):
    return np.cosh(x)


cosh.defvjp(lambda g, out, x: mul(g, sinh(x)))


@primitive("log2", _same_float, method=True)
def log2(x):
    return np.log2(x)


log2.defvjp(lambda g, out, x: div(g, mul(x, math.log(2.0))))


@primitive("log10", _same_float, method=True)
def log10(x):
    return np.log10(x)


log10.defvjp(lambda g, out, x: div(g, mul(x, math.log(10.0))))


@primitive("atan2", _elementwise_float)
def atan2(y, x):
    return np.arctan2(y, x)


def _atan2_reciprocal(y, x):
    """1 / (y^2 + x^2), 0 at the origin: PyTorch's gradients there are 0, not NaN."""
    squares = add(mul(y, y), mul(x, x))
    return where(eq(squares, 0), 0.0, reciprocal(squares))


atan2.defvjp(
    lambda g, out, y, x: unbroadcast(mul(mul(g, x), _atan2_reciprocal(y, x)), shape_of(y)),
    lambda g, out, y, x: unbroadcast(mul(mul(g, neg(y)), _atan2_reciprocal(y, x)),
                                     shape_of(x)),
)


@primitive("remainder", _elementwise, refuses="b")
def remainder(x, y):
    """Python's modulo (the sign of the divisor), as ``torch.remainder``."""
    _integer_divisor(x, y)
    return np.remainder(x, y)


remainder.defvjp(
    lambda g, out, x, y: unbroadcast(g, shape_of(x)),
    lambda g, out, x, y: unbroadcast(mul(neg(g), floor(div(x, y))), shape_of(y)),
)


@primitive("floor_divide", _elementwise, refuses="b")
def floor_divide(x, y):
    """``x // y`` rounded toward minus infinity, as PyTorch's ``//``."""
    _integer_divisor(x, y)
    return np.floor_divide(x, y)


def _no_floor_divide_derivative(*args, **attrs):
    raise RuntimeError("derivative for floor_divide is not implemented")  # as in PyTorch


floor_divide.defvjp(_no_floor_divide_derivative, _no_floor_divide_derivative)


@primitive("isfinite", lambda x: (x.shape, _BOOL), method=True)
def isfinite(x):
    return np.isfinite(x)


def _logical_shape(*inputs):
    return broadcast_shapes(*(shape_of(i) for i in inputs)), _BOOL


logical_and = primitive("logical_and", _logical_shape)(np.logical_and)
logical_or = primitive("logical_or", _logical_shape)(np.logical_or)
logical_xor = primitive("logical_xor", _logical_shape)(np.logical_xor)


@primitive("reciprocal", _same_float, method=True)
def reciprocal(x):
    with np.errstate(divide="ignore"):
        return np.reciprocal(x.astype(np.result_type(x, np.float32), copy=False))


reciprocal.defvjp(lambda g, out, x: neg(mul(g, mul(out, out))))
