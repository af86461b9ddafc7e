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
           "ComposeTransform", "identity_transform", "TransformedDistribution",
           "IndependentTransform", "SoftmaxTransform", "StickBreakingTransform",
           "LowerCholeskyTransform"]


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
    #: +1 or -1 for a monotonic elementwise map (a tensor of them for one with tensor
    #: parameters); None for the others, through which a cdf is refused, as in PyTorch.
    sign: Any = None
    event_dim = 0

    def __init__(self, cache_size: int = 0) -> None:
        """``cache_size=1`` keeps the last ``(x, y)``: the inverse of the ``y`` it made is
        that ``x`` itself (``atanh(tanh(x))`` loses ``x`` near ±1), as in PyTorch."""
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y: tuple = (None, None)

    def __call__(self, x: Tensor) -> Tensor:
        return self._through_cache(x, 0, self._call)

    def _inv_call(self, y: Tensor) -> Tensor:
        """The inverse of ``y``: the cached ``x`` when ``y`` is the last result."""
        return self._through_cache(y, 1, self._inverse)

    def _through_cache(self, value: Tensor, side: int, compute: Any) -> Tensor:
        """``compute(value)``, or, with a cache, the other half of the cached ``(x, y)``
        pair when ``value`` is its half ``side`` (0: x, 1: y)."""
        if not getattr(self, "_cache_size", 0):
            return compute(value)
        cached = self._cached_x_y
        if value is cached[side]:
            return cached[1 - side]
        result = compute(value)
        self._cached_x_y = (value, result) if side == 0 else (result, value)
        return result

    def with_cache(self, cache_size: int = 1) -> Transform:
        """This transform with ``cache_size``."""
        if getattr(self, "_cache_size", 0) == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

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
        super().__init__()
        self._inv = transform
        self.domain, self.codomain = transform.codomain, transform.domain
        self.sign, self.event_dim = transform.sign, transform.event_dim

    @property
    def inv(self) -> Transform:
        return self._inv

    def _call(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self._inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)


class _Identity(Transform):
    sign = 1

    def _call(self, x: Tensor) -> Tensor:
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x.new_zeros(tuple(x.shape))


identity_transform = _Identity()


class ExpTransform(Transform):
    """``y = exp(x)``."""

    sign = 1

    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""

    sign = 1

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

    sign = 1

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.atanh()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``."""

    sign = 1

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

    def __init__(self, exponent: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        self.exponent = exponent

    @property
    def sign(self) -> Any:  # type: ignore[override]
        """-1 where the exponent is negative: the map decreases there."""
        return self.exponent.sign() if isinstance(self.exponent, Tensor) else (
            1 if self.exponent > 0 else -1 if self.exponent < 0 else 0)

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

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size)
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
        super().__init__(cache_size)
        self.parts = list(parts)
        self.event_dim = max([p.event_dim for p in self.parts], default=0)
        self.bijective = all(p.bijective for p in self.parts)
        signs = [p.sign for p in self.parts]
        self.sign = None if any(s is None for s in signs) else math.prod(signs, start=1)
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


class IndependentTransform(Transform):
    """``base_transform`` with its ``reinterpreted_batch_ndims`` rightmost batch dimensions
    taken as event dimensions: their ``log |det J|`` terms are summed.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import ExpTransform, IndependentTransform
    >>> t = IndependentTransform(ExpTransform(), 1)
    >>> t.log_abs_det_jacobian(pargraph.tensor([1.0, 2.0]), None).item()
    3.0
    """

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int,
                 cache_size: int = 0) -> None:
        super().__init__(cache_size)
        self.base_transform = base_transform
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base_transform.event_dim + reinterpreted_batch_ndims
        self.domain, self.codomain = base_transform.domain, base_transform.codomain
        self.bijective, self.sign = base_transform.bijective, base_transform.sign

    def _call(self, x: Tensor) -> Tensor:
        return self.base_transform(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                              self.reinterpreted_batch_ndims)

    def forward_shape(self, shape: tuple) -> tuple:
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape: tuple) -> tuple:
        return self.base_transform.inverse_shape(shape)


class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex by ``exp`` and normalizing (not bijective: no
    ``log |det J|``).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import SoftmaxTransform
    >>> SoftmaxTransform()(pargraph.zeros(2)).tolist()
    [0.5, 0.5]
    """

    domain, codomain = constraints.real_vector, constraints.simplex
    event_dim = 1
    bijective = False

    def _call(self, x: Tensor) -> Tensor:
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()


def _clipped_sigmoid(x: Tensor) -> Tensor:
    info = np.finfo(x.dtype)
    return x.sigmoid().clamp(float(info.tiny), 1.0 - float(info.eps))


class StickBreakingTransform(Transform):
    """Vectors of ``K - 1`` numbers to points of the ``K``-simplex by stick breaking:
    bijective, with a ``log |det J|`` (what a Dirichlet's unconstrained form uses).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import StickBreakingTransform
    >>> [round(p, 4) for p in StickBreakingTransform()(pargraph.zeros(2)).tolist()]
    [0.3333, 0.3333, 0.3333]
    """

    domain, codomain = constraints.real_vector, constraints.simplex
    event_dim = 1

    def _call(self, x: Tensor) -> Tensor:
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones(y_crop.shape[-1]).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=float(np.finfo(y.dtype).tiny))
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        x = x - offset.log()
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape: tuple) -> tuple:
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape: tuple) -> tuple:
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Square matrices to lower triangular ones with a positive diagonal: the strict lower
    part kept, the diagonal exponentiated (no ``log |det J|``, as in PyTorch).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.transforms import LowerCholeskyTransform
    >>> LowerCholeskyTransform()(pargraph.zeros(2, 2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """

    domain, codomain = constraints.real, constraints.lower_cholesky
    event_dim = 2

    def _call(self, x: Tensor) -> Tensor:
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


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
        for transform in self.transforms:  # a stick-breaking map adds an element
            shape = tuple(transform.forward_shape(shape))
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
        sign = 1
        for transform in self.transforms:
            if transform.sign is None:
                raise NotImplementedError(f"{type(transform).__name__} is not monotonic: "
                                          "the cdf through it is not defined")
            sign = sign * transform.sign
        for transform in reversed(self.transforms):
            value = transform.inv(value)
        value = self.base_dist.cdf(value)
        return value if isinstance(sign, int) and sign == 1 else sign * (value - 0.5) + 0.5
