"""Continuous distributions: ``Normal``, ``Uniform`` and ``MultivariateNormal``, with
reparameterized samples (``torch.distributions.normal``, ``.uniform``,
``.multivariate_normal``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor
from pargraph.distributions import constraints
from pargraph.distributions.distribution import Distribution, broadcast_all, shown
from pargraph.factories import as_tensor, eye, rand, randn
from pargraph.functions import broadcast_shapes
from pargraph.linalg import cholesky, solve_triangular
from pargraph.special import i0e, i1e

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class Normal(Distribution):
    """The normal distribution of mean ``loc`` and standard deviation ``scale``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Normal
    >>> round(Normal(0.0, 1.0).log_prob(pargraph.tensor(0.0)).item(), 4)
    -0.9189
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.loc + randn(*shape, dtype=self.loc.dtype) * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() \
            - _LOG_SQRT_2PI

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * (2 * as_tensor(value) - 1).erfinv() * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """The uniform distribution on ``[low, high)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Uniform
    >>> Uniform(0.0, 4.0).log_prob(pargraph.tensor(1.0)).exp().item()
    0.25
    """

    arg_constraints = {"low": constraints.real, "high": constraints.real}
    support = constraints.real  # bounds per element: checked in log_prob
    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        super().__init__(tuple(self.low.shape), (), validate_args)
        if self._validate_args:  # low < high, checked before low is read
            low = self.low
            ordered = self._holds(low < self.high, (
                f"Expected parameter low (Tensor of shape {tuple(low.shape)}) of "
                f"distribution {self!r} to satisfy the constraint LessThan(upper_bound="
                f"{shown(self.high)}), but found invalid values"), (low, self.high), low)
            if ordered._node.value is None:
                self.low = low.where(ordered, low)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return self.high * float("nan")

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.low + rand(*shape, dtype=self.low.dtype) * (self.high - self.low)

    def log_prob(self, value: Tensor) -> Tensor:
        value = as_tensor(value)
        inside = (self.low <= value) & (value < self.high)
        if self._validate_args:
            inside = self._holds(inside, (
                f"Expected value argument (Tensor of shape {tuple(value.shape)}) to be within "
                f"the support (Interval(lower_bound={shown(self.low)}, upper_bound="
                f"{shown(self.high)})) of the distribution {self!r}, but found invalid values"),
                (self.low, self.high, value), value)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def cdf(self, value: Tensor) -> Tensor:
        return ((as_tensor(value) - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value: Tensor) -> Tensor:
        return as_tensor(value) * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()


class MultivariateNormal(Distribution):
    """The normal distribution of vectors: mean ``loc`` and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (its lower Cholesky factor).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import MultivariateNormal
    >>> d = MultivariateNormal(pargraph.zeros(2), covariance_matrix=pargraph.eye(2))
    >>> round(d.log_prob(pargraph.zeros(2)).item(), 4)
    -1.8379
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        loc = as_tensor(loc)
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        matrix = as_tensor(given[0])
        if matrix.dim() < 2:
            which = "scale_tril" if scale_tril is not None else \
                "covariance_matrix" if covariance_matrix is not None else "precision_matrix"
            raise ValueError(f"{which} matrix must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        batch = broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        k = loc.shape[-1]
        self.loc = loc.expand(*batch, k)
        if scale_tril is not None:
            self.scale_tril = matrix.expand(*batch, k, k)
        elif covariance_matrix is not None:
            self.covariance_matrix = matrix.expand(*batch, k, k)
        else:
            self.precision_matrix = matrix.expand(*batch, k, k)
        super().__init__(tuple(batch), (k,), validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = self.scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(self.covariance_matrix)
        else:  # L with P^{-1} = L L^T, from the Cholesky factor of P flipped (PyTorch's way)
            flipped = cholesky(self.precision_matrix.flip((-2, -1)))
            inverse = flipped.flip((-2, -1)).mT
            identity = eye(k, dtype=inverse.dtype).expand(*inverse.shape)
            self._unbroadcasted_scale_tril = solve_triangular(inverse, identity, upper=False)

    def __getattr__(self, name: str) -> Any:
        tril = self.__dict__.get("_unbroadcasted_scale_tril")
        if tril is None:
            raise AttributeError(name)
        if name == "scale_tril":
            return tril
        if name == "covariance_matrix":
            return tril @ tril.mT
        if name == "precision_matrix":
            k = tril.shape[-1]
            identity = eye(k, dtype=tril.dtype).expand(*tril.shape)
            inverse = solve_triangular(tril, identity, upper=False)
            return inverse.mT @ inverse
        raise AttributeError(name)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = randn(*shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        diff = (value - self.loc).unsqueeze(-1)
        tril = self._unbroadcasted_scale_tril
        shape = broadcast_shapes(tuple(tril.shape[:-2]), tuple(diff.shape[:-2]))
        solved = solve_triangular(tril.expand(*shape, *tril.shape[-2:]), diff, upper=False)
        mahalanobis = solved.squeeze(-1).pow(2).sum(-1)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + mahalanobis) - self._half_log_det()

    def entropy(self) -> Tensor:
        k = self._event_shape[0]
        return 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()


_EULER_GAMMA = 0.57721566490153286060


def _uniform_open(shape: tuple, dtype: Any) -> Tensor:
    """Uniform draws in (0, 1): the logarithms below stay finite."""
    import numpy as np

    info = np.finfo(np.dtype(dtype))
    return rand(*shape, dtype=dtype).clamp(float(info.tiny), 1 - float(info.eps))


class Laplace(Distribution):
    """The Laplace distribution: density ``exp(-|x - loc| / scale) / (2 scale)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Laplace
    >>> round(Laplace(0.0, 1.0).log_prob(pargraph.tensor(0.0)).exp().item(), 4)
    0.5
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    mean = mode = property(lambda self: self.loc)
    variance = property(lambda self: 2 * self.scale.pow(2))
    stddev = property(lambda self: math.sqrt(2) * self.scale)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        import numpy as np

        shape = self._extended_shape(sample_shape)
        eps = float(np.finfo(np.dtype(self.loc.dtype)).eps)
        u = rand(*shape, dtype=self.loc.dtype) * (2 - eps) - (1 - eps)  # in (eps - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (
            -(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        term = as_tensor(value) - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()


class Exponential(Distribution):
    """The exponential distribution of ``rate``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Exponential
    >>> Exponential(2.0).mean.item()
    0.5
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: self.rate.new_zeros(tuple(self.rate.shape)))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return -(-_uniform_open(shape, self.rate.dtype)).log1p() / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return -(-as_tensor(value)).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()


class Cauchy(Distribution):
    """The Cauchy distribution (no mean, infinite variance, as PyTorch reports them).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Cauchy
    >>> Cauchy(0.0, 1.0).cdf(pargraph.tensor(0.0)).item()
    0.5
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    mean = property(lambda self: self.loc.new_full(tuple(self.loc.shape), float("nan")))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: self.loc.new_full(tuple(self.loc.shape), float("inf")))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _uniform_open(shape, self.loc.dtype)
        return self.loc + self.scale * (math.pi * (u - 0.5)).tan()

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (
            ((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return (math.pi * (as_tensor(value) - 0.5)).tan() * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class Gumbel(Distribution):
    """The Gumbel distribution: the maximum of many draws.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Gumbel
    >>> round(Gumbel(0.0, 1.0).mean.item(), 4)
    0.5772
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    mean = property(lambda self: self.loc + self.scale * _EULER_GAMMA)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _uniform_open(shape, self.loc.dtype)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return (-((self.loc - value) / self.scale).exp()).exp()

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + _EULER_GAMMA)


class HalfNormal(Distribution):
    """``|X|`` for ``X ~ Normal(0, scale)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import HalfNormal
    >>> round(HalfNormal(1.0).mean.item(), 4)
    0.7979
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        (self.scale,) = broadcast_all(scale)
        self.base_dist = Normal(0.0, self.scale)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: self.scale.new_zeros(tuple(self.scale.shape)))
    variance = property(lambda self: self.scale.pow(2) * (1 - 2 / math.pi))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return log_prob.where(value >= 0, log_prob.new_full((), float("-inf")))

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class LogNormal(Distribution):
    """``exp(X)`` for ``X ~ Normal(loc, scale)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import LogNormal
    >>> round(LogNormal(0.0, 1.0).log_prob(pargraph.tensor(1.0)).item(), 4)
    -0.9189
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.base_dist = Normal(loc, scale)
        self.loc, self.scale = self.base_dist.loc, self.base_dist.scale
        super().__init__(tuple(self.loc.shape), (), validate_args)

    mean = property(lambda self: (self.loc + self.scale.pow(2) / 2).exp())
    mode = property(lambda self: (self.loc - self.scale.pow(2)).exp())
    variance = property(lambda self: self.scale.pow(2).expm1() * (
        2 * self.loc + self.scale.pow(2)).exp())

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return self.base_dist.log_prob(value.log()) - value.log()

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return self.base_dist.cdf(value.log())

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc


class VonMises(Distribution):
    """The von Mises distribution on the circle, of mean angle ``loc`` and ``concentration``;
    its samples (not differentiable) lie in [-pi, pi).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import VonMises
    >>> round(VonMises(0.0, 1.0).log_prob(pargraph.tensor(0.0)).item(), 4)
    -1.0738
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Any, concentration: Any, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self) -> Tensor:
        """The circular variance, ``1 - I1(k) / I0(k)``."""
        return 1 - i1e(self.concentration) / i0e(self.concentration)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        k = self.concentration
        return k * (value - self.loc).cos() - math.log(2 * math.pi) - (i0e(k).log() + k)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        loc = np.broadcast_to(self.loc.detach().numpy().astype(np.float64), shape)
        k = np.broadcast_to(self.concentration.detach().numpy().astype(np.float64), shape)
        drawn = ops.defaults.generator.vonmises(0.0, k)
        angles = np.mod(drawn + math.pi + loc, 2 * math.pi) - math.pi
        return as_tensor(angles.astype(np.dtype(self.loc.dtype)))
