"""Invertible maps between spaces and the distributions they make
(``torch.distributions.transforms``, ``.transformed_distribution``): a transform computes
``y = f(x)``, ``x = f⁻¹(y)`` and ``log |det df/dx|``; a ``TransformedDistribution`` samples its
base and maps the samples, and scores a value by mapping it back."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.distributions import constraints
from pargraph.distributions.distribution import Distribution
from pargraph.factories import as_tensor
from pargraph.nn import functional as F

__all__ = ["Transform", "ExpTransform", "SigmoidTransform", "TanhTransform",
           "AffineTransform", "SoftplusTransform", "AbsTransform", "PowerTransform",
           "ComposeTransform", "identity_transform", "TransformedDistribution"]


def _sum_rightmost(value: Tensor, dims: int) -> Tensor:
    return value.reshape(*value.shape[:value.ndim - dims], -1).sum(-1) if dims else value


class Transform:
    """``y = f(x)``: ``__call__``, ``inv`` (a transform too), ``log_abs_det_jacobian(x, y)``;
    ``event_dim`` counts the dimensions it acts on together.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import ExpTransform
    >>> ExpTransform().inv(pargraph.tensor([1.0])).tolist()
    [0.0]
    """

    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real
    bijective = True
    sign = 1
    event_dim = 0

    def __call__(self, x: Tensor) -> Tensor:
        return self._call(x)

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    @property
    def inv(self) -> Transform:
        return _Inverse(self)

    def forward_shape(self, shape: tuple) -> tuple:
        return shape

    def inverse_shape(self, shape: tuple) -> tuple:
        return shape

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _Inverse(Transform):
    """``f⁻¹`` of a transform."""

    def __init__(self, transform: Transform) -> None:
        self._inv = transform
        self.domain, self.codomain = transform.codomain, transform.domain
        self.sign, self.event_dim = transform.sign, transform.event_dim

    @property
    def inv(self) -> Transform:
        return self._inv

    def _call(self, x: Tensor) -> Tensor:
        return self._inv._inverse(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self._inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)


class _Identity(Transform):
    def _call(self, x: Tensor) -> Tensor:
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x.new_zeros(tuple(x.shape))


identity_transform = _Identity()


class ExpTransform(Transform):
    """``y = exp(x)``."""

    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""

    codomain = constraints.unit_interval

    def _call(self, x: Tensor) -> Tensor:
        return x.sigmoid()

    def _inverse(self, y: Tensor) -> Tensor:
        info = np.finfo(y.dtype)
        y = y.clamp(float(info.tiny), 1 - float(info.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(Transform):
    """``y = tanh(x)``, with PyTorch's stable ``log(1 - tanh(x)²) =
    2 (log 2 - x - softplus(-2x))``."""

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.atanh()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``."""

    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return F.softplus(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -F.softplus(-x)


class AbsTransform(Transform):
    """``y = |x|`` (not injective: the inverse is the positive branch)."""

    codomain = constraints.positive
    bijective = False

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


class PowerTransform(Transform):
    """``y = x ** exponent`` on positive numbers."""

    domain = codomain = constraints.positive

    def __init__(self, exponent: Any) -> None:
        self.exponent = exponent

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        exponent = as_tensor(self.exponent, dtype=x.dtype)
        return (exponent * y / x).abs().log()


class AffineTransform(Transform):
    """``y = loc + scale * x`` (``event_dim``: the dimensions summed in the Jacobian).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import AffineTransform
    >>> AffineTransform(1.0, 2.0)(pargraph.tensor([3.0])).tolist()
    [7.0]
    """

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0) -> None:
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    @property
    def sign(self) -> Any:  # type: ignore[override]
        return self.scale.sign() if isinstance(self.scale, Tensor) else (
            1 if self.scale > 0 else -1 if self.scale < 0 else 0)

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        scale = self.scale if isinstance(self.scale, Tensor) else as_tensor(self.scale,
                                                                            dtype=x.dtype)
        result = scale.abs().log().expand(tuple(x.shape))
        return _sum_rightmost(result, self.event_dim)


class ComposeTransform(Transform):
    """The transforms applied in turn.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import AffineTransform, ComposeTransform
    >>> f = ComposeTransform([AffineTransform(0.0, 2.0), AffineTransform(1.0, 1.0)])
    >>> f(pargraph.tensor([1.0])).tolist(), f.inv(pargraph.tensor([3.0])).tolist()
    ([3.0], [1.0])
    """

    def __init__(self, parts: list, cache_size: int = 0) -> None:
        self.parts = list(parts)
        self.event_dim = max([p.event_dim for p in self.parts], default=0)
        self.bijective = all(p.bijective for p in self.parts)
        if self.parts:
            self.domain, self.codomain = self.parts[0].domain, self.parts[-1].codomain

    def _call(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return x.new_zeros(tuple(x.shape))
        total = 0.0
        for part in self.parts:
            y_part = part(x)
            term = part.log_abs_det_jacobian(x, y_part)
            total = total + _sum_rightmost(term, self.event_dim - part.event_dim)
            x = y_part
        return total


class TransformedDistribution(Distribution):
    """``base_distribution``'s samples mapped through ``transforms``; ``log_prob`` maps a
    value back and subtracts each map's ``log |det J|``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Normal, TransformedDistribution
    >>> from pargraph.distributions.transforms import ExpTransform
    >>> d = TransformedDistribution(Normal(0.0, 1.0), [ExpTransform()])
    >>> round(d.log_prob(pargraph.tensor(1.0)).item(), 4)
    -0.9189
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, transforms: Any,
                 validate_args: bool | None = None) -> None:
        self.base_dist = base_distribution
        self.transforms = [transforms] if isinstance(transforms, Transform) else \
            list(transforms)
        event_dim = max([t.event_dim for t in self.transforms] +
                        [len(base_distribution.event_shape)])
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def sample(self, sample_shape: Any = ()) -> Tensor:
        x = self.base_dist.sample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value: Tensor) -> Tensor:
        value = as_tensor(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            log_prob = log_prob - _sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                 event_dim - transform.event_dim)
            y = x
        base = self.base_dist.log_prob(y)
        return log_prob + _sum_rightmost(base, event_dim - len(self.base_dist.event_shape))

    def cdf(self, value: Tensor) -> Tensor:
        for transform in reversed(self.transforms):
            value = transform.inv(value)
        value = self.base_dist.cdf(value)
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        return value if isinstance(sign, int) and sign == 1 else sign * (value - 0.5) + 0.5
