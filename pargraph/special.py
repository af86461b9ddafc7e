"""``pargraph.special``: PyTorch's ``torch.special`` functions (the ones pargraph has), each
differentiable where PyTorch's is."""

from __future__ import annotations

import math
from typing import Any

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor
from pargraph.functions import method_functions, polygamma, where

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "xlogy", "xlog1py", "log1p", "expm1",
           "exp2", "sinc", "logsumexp", "softmax", "log_softmax", "round", "gammaln", "digamma",
           "psi", "polygamma", "multigammaln", "entr", "ndtr", "ndtri", "log_ndtr", "gammainc",
           "gammaincc", "i0", "i0e", "i1", "i1e"]

erf, erfc, erfinv = method_functions["erf"], method_functions["erfc"], method_functions["erfinv"]
expit, logit, xlogy = method_functions["sigmoid"], method_functions["logit"], \
    method_functions["xlogy"]
log1p, expm1, exp2 = method_functions["log1p"], method_functions["expm1"], \
    method_functions["exp2"]
sinc, logsumexp, round = method_functions["sinc"], method_functions["logsumexp"], \
    method_functions["round"]  # noqa: A001  (PyTorch's name)
gammaln = method_functions["lgamma"]
digamma = psi = method_functions["digamma"]
gammainc, gammaincc = method_functions["igamma"], method_functions["igammac"]
i0 = method_functions["i0"]


def i0e(input: Tensor) -> Tensor:
    """The exponentially scaled modified Bessel function of order 0: ``exp(-|x|) i0(x)``.

    Examples
    --------
    >>> import pargraph
    >>> f"{pargraph.special.i0e(pargraph.tensor([0.5])).item():.4f}"
    '0.6450'
    """
    return apply(ops.i0e, as_tensor(input))


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1.

    Examples
    --------
    >>> import pargraph
    >>> f"{pargraph.special.i1(pargraph.tensor([0.5])).item():.4f}"
    '0.2579'
    """
    return apply(ops.i1, as_tensor(input))


def i1e(input: Tensor) -> Tensor:
    """The exponentially scaled modified Bessel function of order 1: ``exp(-|x|) i1(x)``.

    Examples
    --------
    >>> import pargraph
    >>> f"{pargraph.special.i1e(pargraph.tensor([0.5])).item():.4f}"
    '0.1564'
    """
    return apply(ops.i1e, as_tensor(input))


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``softmax`` along ``dim`` (computed in ``dtype`` if given)."""
    x = as_tensor(input)
    return (x if dtype is None else x.to(dtype)).softmax(dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``log_softmax`` along ``dim`` (computed in ``dtype`` if given)."""
    x = as_tensor(input)
    return (x if dtype is None else x.to(dtype)).log_softmax(dim)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``input * log1p(other)``, 0 where ``input`` is 0 (NaN where ``other`` is).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.special.xlog1py(pargraph.tensor([0.0, 2.0]), pargraph.tensor([-1.0, 0.0]))
    tensor([0., 0.])
    """
    x, y = as_tensor(input), as_tensor(other)
    zero = (x == 0) & ~y.isnan()
    return where(zero, 0.0, x * where(zero, 0.0, y).log1p())  # no 0 * inf where x is 0


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``: ``p (p - 1) / 4 log(pi)
    + sum_j lgamma(x + (1 - j) / 2)``; PyTorch's error where an element is ``<= (p - 1) / 2``.

    Examples
    --------
    >>> import pargraph
    >>> f"{pargraph.special.multigammaln(pargraph.tensor([2.5]), 2).item():.4f}"
    '0.8570'
    """
    return as_tensor(input).mvlgamma(p)


def entr(input: Tensor) -> Tensor:
    """Elementwise ``-x log x``: 0 at 0, ``-inf`` below 0.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.special.entr(pargraph.tensor([0.0, 1.0, -1.0])).tolist()
    [0.0, -0.0, -inf]
    """
    x = as_tensor(input)
    safe = where(x > 0, x, 1.0)
    return where(x > 0, -(safe * safe.log()), where(x == 0, x * 0.0, x * 0.0 - math.inf))


def ndtr(input: Tensor) -> Tensor:
    """The standard normal distribution function, ``erfc(-x / sqrt(2)) / 2`` (accurate in
    the lower tail).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.special.ndtr(pargraph.tensor([0.0])).tolist()
    [0.5]
    """
    x = as_tensor(input)
    return (x * (-1 / math.sqrt(2))).erfc() * 0.5


def ndtri(input: Tensor) -> Tensor:
    """The inverse of :func:`ndtr`.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.special.ndtri(pargraph.tensor([0.5])).tolist()
    [0.0]
    """
    x = as_tensor(input)
    return x._apply(ops.ndtri, x._node)


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``, accurate far in the lower tail.

    Examples
    --------
    >>> import pargraph
    >>> f"{pargraph.special.log_ndtr(pargraph.tensor([0.0])).item():.4f}"
    '-0.6931'
    """
    x = as_tensor(input)
    return x._apply(ops.log_ndtr, x._node)

