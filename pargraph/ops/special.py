"""Less common elementwise math: inverse trigonometric and hyperbolic functions, the gamma
and error function families, ``exp2``, ``expm1``, ``sinc``, and binary ones (``hypot``,
``logaddexp``, ``fmod``, ``copysign``, ``xlogy``, ``heaviside``). Their gradients are written
with :mod:`~pargraph.ops.elementwise`'s ops."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pargraph.graph import Node
from pargraph.ops.core import (
    HALVES,
    Primitive,
    ShapeError,
    _elementwise,
    _elementwise_float,
    _same_float,
    broadcast_shapes,
    primitive,
    shape_of,
)
from pargraph.ops.elementwise import (
    _integer_divisor,
    add,
    constant,
    cos,
    div,
    eq,
    exp,
    log,
    mul,
    neg,
    sign,
    sqrt,
    sub,
    trunc,
    where,
)
from pargraph.ops.shapes import unbroadcast

# --- inverse trigonometric and hyperbolic functions, and other unary ones -----------------

@primitive("asin", _same_float, method=True)
def asin(x):
    return np.arcsin(x)


asin.defvjp(lambda g, out, x: div(g, sqrt(sub(1.0, mul(x, x)))))


@primitive("acos", _same_float, method=True)
def acos(x):
    return np.arccos(x)


acos.defvjp(lambda g, out, x: neg(div(g, sqrt(sub(1.0, mul(x, x))))))


@primitive("atan", _same_float, method=True)
def atan(x):
    return np.arctan(x)


atan.defvjp(lambda g, out, x: div(g, add(mul(x, x), 1.0)))


@primitive("asinh", _same_float, method=True)
def asinh(x):
    return np.arcsinh(x)


asinh.defvjp(lambda g, out, x: div(g, sqrt(add(mul(x, x), 1.0))))


@primitive("acosh", _same_float, method=True)
def acosh(x):
    return np.arccosh(x)


acosh.defvjp(lambda g, out, x: div(g, sqrt(sub(mul(x, x), 1.0))))


@primitive("atanh", _same_float, method=True)
def atanh(x):
    return np.arctanh(x)


atanh.defvjp(lambda g, out, x: div(g, sub(1.0, mul(x, x))))


@primitive("expm1", _same_float, method=True)
def expm1(x):
    return np.expm1(x)


expm1.defvjp(lambda g, out, x: mul(g, add(out, 1.0)))


@primitive("exp2", _same_float, method=True)
def exp2(x):
    return np.exp2(x)


exp2.defvjp(lambda g, out, x: mul(g, mul(out, math.log(2.0))))


@primitive("erfc", _same_float, method=True)
def erfc(x):
    from scipy import special

    return special.erfc(x)


erfc.defvjp(lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), -2 / math.sqrt(math.pi))))


@primitive("erfinv", _same_float, method=True)
def erfinv(x):
    from scipy import special

    return special.erfinv(x)


erfinv.defvjp(lambda g, out, x: mul(g, mul(exp(mul(out, out)), math.sqrt(math.pi) / 2)))


@primitive("lgamma", _same_float, method=True)
def lgamma(x):
    """``log |Γ(x)|`` (``inf`` at the poles), as ``torch.lgamma``."""
    from scipy import special

    return special.gammaln(x)


@primitive("digamma", _same_float, method=True)
def digamma(x):
    """``Γ'(x) / Γ(x)``, as ``torch.digamma`` (``-inf`` at 0, NaN at the negative poles)."""
    from scipy import special

    return special.psi(x)


@primitive("polygamma", lambda x, n: _same_float(x))
def polygamma(x, n):
    """The ``n``-th derivative of digamma, as ``torch.polygamma(n, x)``."""
    from scipy import special

    if n == 0:
        return digamma.forward(x)
    return special.polygamma(n, x)


lgamma.defvjp(lambda g, out, x: mul(g, digamma(x)))
digamma.defvjp(lambda g, out, x: mul(g, polygamma(x, n=1)))
polygamma.defvjp(lambda g, out, x, n: mul(g, polygamma(x, n=n + 1)))


def _bessel(name: str, method: bool = False) -> Primitive:
    """scipy's modified Bessel function ``name`` of the first kind as a primitive."""
    def forward(x):
        from scipy import special

        return getattr(special, name)(x)

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"The modified Bessel function ``{name}`` (``torch.special.{name}``)."
    return primitive(name, _same_float, method=method)(forward)


i0 = _bessel("i0", method=True)
i0e = _bessel("i0e")
i1 = _bessel("i1")
i1e = _bessel("i1e")


def _at_zero(x, value, formula):
    """``formula(x)`` where ``x`` is not 0, ``value`` where it is, ``formula`` fed 1 at 0
    (its 0 / 0 there would reach the second derivative as NaN)."""
    zero = eq(x, 0.0)
    return where(zero, constant(np.asarray(value, x.dtype)), formula(where(zero, 1.0, x)))


i0.defvjp(lambda g, out, x: mul(g, i1(x)))
i0e.defvjp(lambda g, out, x: mul(g, sub(i1e(x), mul(sign(x), out))))
i1.defvjp(lambda g, out, x: mul(g, _at_zero(x, 0.5, lambda s: sub(i0(s), div(i1(s), s)))))
i1e.defvjp(lambda g, out, x: mul(g, _at_zero(
    x, 0.5, lambda s: sub(i0e(s), mul(i1e(s), add(sign(s), div(1.0, s)))))))


def _not_implemented_for_self(name: str) -> Callable:
    def vjp(g, out, a, x):
        raise NotImplementedError(f"the derivative for '{name}' with respect to 'self' (its "
                                  "first argument) is not implemented, as in PyTorch")
    return vjp


@primitive("igamma", _elementwise_float, refuses="biu")
def igamma(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)``
    (``torch.special.gammainc``)."""
    from scipy import special

    return special.gammainc(a, x)


@primitive("igammac", _elementwise_float, refuses="biu")
def igammac(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
    (``torch.special.gammaincc``)."""
    from scipy import special

    return special.gammaincc(a, x)


def _gamma_density(a, x):
    """``x^(a - 1) e^(-x) / Gamma(a)``: the derivative of ``P(a, x)`` in ``x``."""
    return exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a)))


igamma.defvjp(_not_implemented_for_self("igamma"),
              lambda g, out, a, x: unbroadcast(mul(g, _gamma_density(a, x)), shape_of(x)))
igammac.defvjp(_not_implemented_for_self("igammac"),
               lambda g, out, a, x: unbroadcast(neg(mul(g, _gamma_density(a, x))),
                                                shape_of(x)))


@primitive("standard_gamma_grad",
           lambda alpha, x: (broadcast_shapes(alpha.shape, x.shape), x.dtype))
def standard_gamma_grad(alpha, x):
    """``dx / dalpha`` of a standard gamma sample ``x`` held at its quantile (implicit
    reparameterization): ``-(dP(alpha, x) / dalpha) / p(x; alpha)``, ``P`` the regularized
    incomplete gamma function (its derivative by central differences in float64)."""
    from scipy import special

    a, v = np.asarray(alpha, np.float64), np.asarray(x, np.float64)
    v = np.maximum(v, np.finfo(np.asarray(x).dtype).tiny)
    h = 1e-5 * a
    with np.errstate(all="ignore"):
        slope = (special.gammainc(a + h, v) - special.gammainc(a - h, v)) / (2 * h)
        density = np.exp((a - 1) * np.log(v) - v - special.gammaln(a))
        return -slope / density


@primitive("gamma_reparameterized", lambda alpha, x: (x.shape, x.dtype))
def gamma_reparameterized(alpha, x):
    """A standard gamma sample ``x`` drawn for ``alpha``: its value, and, as its gradient
    with respect to ``alpha``, :func:`standard_gamma_grad`'s."""
    return np.array(x, copy=True)


gamma_reparameterized.defvjp(
    lambda g, out, alpha, x: unbroadcast(mul(g, standard_gamma_grad(alpha, out)), alpha.shape),
    None)


@primitive("ndtri", _same_float)
def ndtri(x):
    """The inverse of the standard normal distribution function."""
    from scipy import special

    return special.ndtri(x)


ndtri.defvjp(lambda g, out, x: mul(g, mul(exp(mul(mul(out, out), 0.5)),
                                          math.sqrt(2 * math.pi))))


@primitive("log_ndtr", _same_float)
def log_ndtr(x):
    """``log`` of the standard normal distribution function, accurate far in its tail."""
    from scipy import special

    return special.log_ndtr(x)


log_ndtr.defvjp(lambda g, out, x: mul(g, div(exp(sub(mul(mul(x, x), -0.5), out)),
                                             math.sqrt(2 * math.pi))))


@primitive("sinc", _same_float, method=True)
def sinc(x):
    if x.dtype in HALVES:  # in float32, rounded once, as PyTorch does
        return np.sinc(x.astype(np.float32)).astype(x.dtype)
    return np.sinc(x)  # the normalized sinc, sin(pi x) / (pi x), as PyTorch's


def _sinc_vjp(g, out, x):
    """(cos(pi x) - sinc(x)) / x, and 0 at x = 0."""
    pix = mul(x, math.pi)
    zero = eq(x, 0.0)
    slope = div(sub(cos(pix), out), where(zero, 1.0, x))
    return mul(g, where(zero, 0.0, slope))


sinc.defvjp(_sinc_vjp)


# --- binary ones ------------------------------------------------------------------------

@primitive("hypot", _elementwise_float, refuses="biu")
def hypot(x, y):
    return np.hypot(x, y)


hypot.defvjp(lambda g, out, x, y: unbroadcast(mul(g, div(x, out)), shape_of(x)),
             lambda g, out, x, y: unbroadcast(mul(g, div(y, out)), shape_of(y)))


@primitive("logaddexp", _elementwise_float, refuses="biu")
def logaddexp(x, y):
    return np.logaddexp(x, y)


logaddexp.defvjp(lambda g, out, x, y: unbroadcast(mul(g, exp(sub(x, out))), shape_of(x)),
                 lambda g, out, x, y: unbroadcast(mul(g, exp(sub(y, out))), shape_of(y)))


@primitive("fmod", _elementwise, refuses="b")
def fmod(x, y):
    """The C remainder (the sign of the dividend), as ``torch.fmod``."""
    _integer_divisor(x, y)
    return np.fmod(x, y)


fmod.defvjp(lambda g, out, x, y: unbroadcast(g, shape_of(x)),
            lambda g, out, x, y: unbroadcast(mul(neg(g), trunc(div(x, y))), shape_of(y)))


@primitive("copysign", _elementwise_float)
def copysign(x, y):
    return np.copysign(x, y)


def _copysign_vjp(g, out, x, y):
    """out / x: the sign the result took (0 where x is 0, as PyTorch's)."""
    zero = eq(x, 0.0)
    return unbroadcast(mul(g, where(zero, 0.0, div(out, where(zero, 1.0, x)))), shape_of(x))


copysign.defvjp(_copysign_vjp, lambda g, out, x, y: unbroadcast(mul(g, 0.0), shape_of(y)))


@primitive("xlogy", _elementwise_float)
def xlogy(x, y):
    """x log y, and 0 where x is 0 (unless y is NaN), as ``torch.xlogy``."""
    from scipy import special

    return special.xlogy(x, y)


xlogy.defvjp(
    lambda g, out, x, y: unbroadcast(mul(g, where(eq(x, 0.0), 0.0, log(y))), shape_of(x)),
    lambda g, out, x, y: unbroadcast(mul(g, div(x, y)), shape_of(y)),
)


def _heaviside_shape(x, values):
    if type(values) is Node and type(x) is Node and x.dtype != values.dtype:
        raise ShapeError("heaviside is not yet implemented for tensors with different dtypes.")
    return _elementwise(x, values)


@primitive("heaviside", _heaviside_shape)
def heaviside(x, values):
    """``values`` where ``x`` is 0, else whether ``x > 0`` (NaN gives 0, as PyTorch's)."""
    return np.where(x == 0, values, x > 0).astype(np.result_type(x, values), copy=False)


def _no_heaviside_derivative(*args, **attrs):
    raise RuntimeError("the derivative for 'heaviside' is not implemented.")  # as PyTorch


heaviside.defvjp(_no_heaviside_derivative, _no_heaviside_derivative)
