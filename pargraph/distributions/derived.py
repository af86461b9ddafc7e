"""Distributions made from others: a base distribution's samples mapped through transforms
(``Weibull``, ``Pareto``, ``HalfCauchy``, ``InverseGamma``, ``Kumaraswamy``,
``LogisticNormal``, and the relaxed,
differentiable stand-ins for Bernoulli and one-hot categorical draws), and
``MixtureSameFamily``, as ``torch.distributions`` defines them."""

from __future__ import annotations

import math
from typing import Any

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.distributions import constraints
from pargraph.distributions.continuous import Cauchy, Exponential, Normal, Uniform
from pargraph.distributions.discrete import Categorical, _BinaryParameter, _clamped
from pargraph.distributions.distribution import Distribution, broadcast_all, shown
from pargraph.distributions.gamma import Gamma
from pargraph.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    StickBreakingTransform,
    TransformedDistribution,
)
from pargraph.factories import as_tensor, full_like, ones_like, rand, zeros_like
from pargraph.nn import functional as F

_EULER_GAMMA = 0.57721566490153286060


class Weibull(TransformedDistribution):
    """The Weibull distribution of ``scale`` and ``concentration``: ``scale * E ** (1/k)``
    for ``E ~ Exponential(1)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Weibull
    >>> round(Weibull(1.0, 1.0).log_prob(pargraph.tensor(1.0)).item(), 4)
    -1.0
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale: Any, concentration: Any,
                 validate_args: bool | None = None) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        super().__init__(Exponential(ones_like(self.scale), validate_args=validate_args),
                         [PowerTransform(self.concentration_reciprocal),
                          AffineTransform(0.0, self.scale)], validate_args)

    mean = property(lambda self: self.scale * (1 + self.concentration_reciprocal).lgamma().exp())
    mode = property(lambda self: self.scale * ((self.concentration - 1) / self.concentration)
                    ** self.concentration.reciprocal())
    variance = property(lambda self: self.scale.pow(2) * (
        (1 + 2 * self.concentration_reciprocal).lgamma().exp()
        - (2 * (1 + self.concentration_reciprocal).lgamma()).exp()))

    def entropy(self) -> Tensor:
        return (_EULER_GAMMA * (1 - self.concentration_reciprocal)
                + (self.scale * self.concentration_reciprocal).log() + 1)


class Pareto(TransformedDistribution):
    """The Pareto (type 1) distribution of ``scale`` and ``alpha``: ``scale * exp(E)`` for
    ``E ~ Exponential(alpha)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Pareto
    >>> round(Pareto(1.0, 2.0).log_prob(pargraph.tensor(2.0)).item(), 4)
    -1.3863
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    support = None  # at least ``scale``: log_prob checks it

    def __init__(self, scale: Any, alpha: Any, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(Exponential(self.alpha, validate_args=validate_args),
                         [ExpTransform(), AffineTransform(0.0, self.scale)], validate_args)

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    mode = property(lambda self: self.scale)

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def log_prob(self, value: Tensor) -> Tensor:
        value = as_tensor(value)
        log_prob = super().log_prob(value)
        if not self._validate_args:
            return log_prob
        inside = self._holds(
            value >= self.scale,
            f"Expected value argument (Tensor of shape {tuple(value.shape)}) to be within the "
            f"support (GreaterThanEq(lower_bound={shown(self.scale)})) of the distribution "
            f"{self!r}, but found invalid values", (self.scale, value), value)
        return log_prob.where(inside, log_prob)  # the check runs where the result is used

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class HalfCauchy(TransformedDistribution):
    """``|X|`` for ``X ~ Cauchy(0, scale)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import HalfCauchy
    >>> round(HalfCauchy(1.0).cdf(pargraph.tensor(1.0)).item(), 4)
    0.5
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        (self.scale,) = broadcast_all(scale)
        super().__init__(Cauchy(0.0, self.scale, validate_args=False), AbsTransform(),
                         validate_args)

    mean = property(lambda self: full_like(self.scale, math.inf))
    mode = property(lambda self: zeros_like(self.scale))
    variance = property(lambda self: full_like(self.scale, math.inf))

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value).to(self.scale.dtype)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return log_prob.where(value >= 0, log_prob.new_full((), float("-inf")))

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value: Tensor) -> Tensor:
        return self.base_dist.icdf((as_tensor(value) + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class InverseGamma(TransformedDistribution):
    """``1 / X`` for ``X ~ Gamma(concentration, rate)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import InverseGamma
    >>> round(InverseGamma(3.0, 2.0).mean.item(), 4)
    1.0
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration: Any, rate: Any,
                 validate_args: bool | None = None) -> None:
        base = Gamma(concentration, rate, validate_args=validate_args)
        self.concentration, self.rate = base.concentration, base.rate
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args)

    @property
    def mean(self) -> Tensor:
        result = self.rate / (self.concentration - 1)
        return result.where(self.concentration > 1, result.new_full((), math.inf))

    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def variance(self) -> Tensor:
        result = self.rate.square() / ((self.concentration - 1).square()
                                       * (self.concentration - 2))
        return result.where(self.concentration > 2, result.new_full((), math.inf))

    def entropy(self) -> Tensor:
        c = self.concentration
        return c + self.rate.log() + c.lgamma() - (1 + c) * c.digamma()


def _kumaraswamy_moment(a: Tensor, b: Tensor, n: int) -> Tensor:
    arg = 1 + n / a
    return b * (arg.lgamma() + b.lgamma() - (arg + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on [0, 1] (a Beta look-alike with a closed-form
    inverse CDF, so its samples are reparameterized).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Kumaraswamy
    >>> round(Kumaraswamy(1.0, 1.0).mean.item(), 4)
    0.5
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        base = Uniform(full_like(self.concentration0, 0), full_like(self.concentration0, 1),
                       validate_args=validate_args)
        super().__init__(base, [PowerTransform(self.concentration0.reciprocal()),
                                AffineTransform(1.0, -1.0),
                                PowerTransform(self.concentration1.reciprocal())],
                         validate_args)

    mean = property(lambda self: _kumaraswamy_moment(self.concentration1, self.concentration0, 1))
    variance = property(lambda self: _kumaraswamy_moment(
        self.concentration1, self.concentration0, 2) - self.mean.pow(2))

    @property
    def mode(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return log_mode.where(~((b < 1) | (a < 1)), log_mode.new_full((), math.nan)).exp()

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = (self.concentration0 + 1).digamma() + _EULER_GAMMA
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()


class LogitRelaxedBernoulli(_BinaryParameter, Distribution):
    """The logit of a ``RelaxedBernoulli`` draw (Concrete distribution, Maddison et al.).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.derived import LogitRelaxedBernoulli
    >>> d = LogitRelaxedBernoulli(pargraph.tensor(0.5), logits=pargraph.tensor(0.0))
    >>> round(d.log_prob(pargraph.tensor(0.0)).item(), 4)
    -2.0794
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        self.temperature = as_tensor(temperature)
        super().__init__(self._set_parameter(probs, logits), (), validate_args)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        probs = _clamped(self.probs.expand(*shape))
        u = _clamped(rand(*shape, dtype=probs.dtype))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class ContinuousBernoulli(_BinaryParameter, Distribution):
    """The continuous Bernoulli distribution on [0, 1]: density proportional to
    ``probs ** x * (1 - probs) ** (1 - x)``, with PyTorch's Taylor expansions inside ``lims``
    around 1/2, where the closed forms lose their precision.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import ContinuousBernoulli
    >>> round(ContinuousBernoulli(probs=0.5).mean.item(), 4)
    0.5
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 lims: tuple[float, float] = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (probs,) = broadcast_all(probs)
            if validate_args is not None and not bool(constraints.unit_interval.check(
                    probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = _clamped(probs)  # checked first: the clamped ones always pass
            shape = tuple(probs.shape)
        else:
            (self.logits,) = broadcast_all(logits)
            shape = tuple(self.logits.shape)
        self._lims = lims
        super().__init__(shape, (), validate_args)

    @staticmethod
    def _probs_of(logits: Tensor) -> Tensor:
        return _clamped(logits.sigmoid())  # PyTorch clamps them here, as given ones

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        return self.probs.where(self._outside_unstable_region(),
                                self.probs.new_full((), self._lims[0]))

    def _cont_bern_log_norm(self) -> Tensor:
        cut = self._cut_probs()
        below = cut.where(cut <= 0.5, cut.new_zeros(()))
        above = cut.where(cut >= 0.5, cut.new_ones(()))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - (-2.0 * below).log1p().where(
            cut <= 0.5, (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return log_norm.where(self._outside_unstable_region(), taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return mus.where(self._outside_unstable_region(), taylor)

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        spread = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (
            (-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return spread.where(self._outside_unstable_region(), taylor)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.icdf(rand(*shape, dtype=self.probs.dtype))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (-F.binary_cross_entropy_with_logits(logits, value, reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value: Tensor) -> Tensor:
        value = as_tensor(self._validate_sample(value))
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = cdfs.where(self._outside_unstable_region(), value)
        return zeros_like(value).where(value <= 0.0, ones_like(value).where(value >= 1.0,
                                                                            unbounded))

    def icdf(self, value: Tensor) -> Tensor:
        value = as_tensor(value)
        cut = self._cut_probs()
        closed = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (
            cut.log() - (-cut).log1p())
        return closed.where(self._outside_unstable_region(), value)

    def entropy(self) -> Tensor:
        log0, log1 = (-self.probs).log1p(), self.probs.log()
        return self.mean * (log0 - log1) - self._cont_bern_log_norm() - log0


class LogisticNormal(TransformedDistribution):
    """A point of the simplex: a normal draw of ``loc`` and ``scale`` mapped by stick
    breaking (one more element than ``loc``'s last dimension).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import LogisticNormal
    >>> LogisticNormal(pargraph.zeros(2), pargraph.ones(2)).event_shape
    pargraph.Size([3])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        loc, scale = broadcast_all(loc, scale)
        if not loc.shape:  # PyTorch expands a scalar base to one element
            loc, scale = loc.reshape(1), scale.reshape(1)
        super().__init__(Normal(loc, scale, validate_args=validate_args),
                         StickBreakingTransform(), validate_args)

    loc = property(lambda self: self.base_dist.loc)
    scale = property(lambda self: self.base_dist.scale)


class RelaxedBernoulli(TransformedDistribution):
    """A differentiable stand-in for a Bernoulli draw: values in (0, 1) that approach 0 and 1
    as ``temperature`` falls.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import RelaxedBernoulli
    >>> d = RelaxedBernoulli(pargraph.tensor(0.5), probs=pargraph.tensor(0.5))
    >>> round(d.log_prob(pargraph.tensor(0.5)).item(), 4)
    -0.6931
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(),
                         validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class ExpRelaxedCategorical(Distribution):
    """The log of a ``RelaxedOneHotCategorical`` draw (a point of the simplex), Gumbel-softmax
    style.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions.derived import ExpRelaxedCategorical
    >>> d = ExpRelaxedCategorical(pargraph.tensor(1.0), logits=pargraph.zeros(2))
    >>> tuple(d.rsample((3,)).shape)
    (3, 2)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        self.temperature = as_tensor(temperature)
        super().__init__(tuple(self._categorical.batch_shape),
                         (self._categorical._num_events,), validate_args)

    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _clamped(rand(*shape, dtype=self.logits.dtype))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        k = self._categorical._num_events
        value = self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = full_like(self.temperature, float(k)).lgamma() - \
            self.temperature.log() * -(k - 1)
        score = logits - value * self.temperature
        return (score - score.logsumexp(-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A differentiable stand-in for a one-hot categorical draw: points of the simplex that
    approach its corners as ``temperature`` falls (Gumbel-softmax).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import RelaxedOneHotCategorical
    >>> d = RelaxedOneHotCategorical(pargraph.tensor(0.5), probs=pargraph.tensor([0.3, 0.7]))
    >>> round(d.rsample().sum().item(), 4)
    1.0
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits, validate_args),
                         ExpTransform(), validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class MixtureSameFamily(Distribution):
    """A mixture of ``component_distribution``'s last batch dimension, weighted by the
    ``Categorical`` ``mixture_distribution`` (a Gaussian mixture, a mixture density network).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Categorical, MixtureSameFamily, Normal
    >>> mix = MixtureSameFamily(Categorical(pargraph.tensor([0.5, 0.5])),
    ...                         Normal(pargraph.tensor([-1.0, 1.0]), pargraph.ones(2)))
    >>> round(mix.mean.item(), 4)
    0.0
    """

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical,
                 component_distribution: Distribution,
                 validate_args: bool | None = None) -> None:
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of "
                             "torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of "
                             "torch.distributions.Distribution")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not "
                                 f"compatible with `component_distribution.batch_shape`"
                                 f"({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, tuple(component_distribution.event_shape), validate_args)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return self._component_distribution.support

    def _pad(self, x: Tensor) -> Tensor:
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x: Tensor) -> Tensor:
        batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self._mixture_distribution.batch_shape)
        pad = 0 if cat_batch_ndims == 1 else batch_ndims - cat_batch_ndims
        shape = tuple(x.shape)
        return x.reshape(shape[:-1] + (1,) * pad + shape[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        dim = -1 - self._event_ndims
        mean_cond_var = (probs * self._component_distribution.variance).sum(dim)
        var_cond_mean = (probs * (self._component_distribution.mean
                                  - self._pad(self.mean)).pow(2.0)).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, x: Tensor) -> Tensor:
        cdf_x = self._component_distribution.cdf(self._pad(as_tensor(x)))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x: Tensor) -> Tensor:
        x = self._validate_sample(x) if self.support is not None else as_tensor(x)
        log_prob_x = self._component_distribution.log_prob(self._pad(x))
        log_mix_prob = self._mixture_distribution.logits.log_softmax(-1)
        return (log_prob_x + log_mix_prob).logsumexp(-1)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        with no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)
            event_shape = tuple(self.event_shape)
            mix = self._mixture_distribution.sample(sample_shape)
            components = self._component_distribution.sample(sample_shape)
            index = mix.reshape(tuple(mix.shape) + (1,) * (len(event_shape) + 1))
            index = index.repeat(*((1,) * len(mix.shape) + (1,) + event_shape))
            return components.gather(gather_dim, index).squeeze(gather_dim)

    def __repr__(self) -> str:
        return (f"MixtureSameFamily(\n  {self._mixture_distribution},\n  "
                f"{self._component_distribution})")
