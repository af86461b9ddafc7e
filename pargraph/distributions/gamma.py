"""The gamma family: ``Gamma``, ``Chi2``, ``Beta``, ``Dirichlet``, ``StudentT`` and
``FisherSnedecor``, with PyTorch's formulas (``torch.distributions.gamma``, ``.chi2``,
``.beta``, ``.dirichlet``, ``.studentT``, ``.fishersnedecor``).

Their reparameterized samples start from standard gamma draws: the draw reads the
concentration's value (in a compiled step, a graph break, as PyTorch's ``_standard_gamma`` is
for ``torch.compile``), and its gradient with respect to the concentration is the implicit one,
``dx / dalpha`` at the draw's quantile (``ops.standard_gamma_grad``). A Beta or Dirichlet
sample is the draws normalized, differentiated through that normalization: a pathwise
gradient as unbiased as PyTorch's, though not the same number for the same point.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.distributions import constraints
from pargraph.distributions.distribution import Distribution, broadcast_all
from pargraph.factories import as_tensor
from pargraph.functions import stack, where


def _standard_gamma(concentration: Tensor) -> Tensor:
    """Standard gamma draws of ``concentration``'s shape, clamped to the dtype's smallest
    normal number, reparameterized (see the module's docstring)."""
    dtype = np.dtype(concentration.dtype)
    values = np.asarray(concentration.detach().numpy(), np.float64)
    drawn = ops.defaults.generator.standard_gamma(values)
    drawn = np.maximum(drawn, np.finfo(dtype).tiny).astype(dtype)
    return apply(ops.gamma_reparameterized, concentration, as_tensor(drawn))


class Gamma(Distribution):
    """The gamma distribution of shape ``concentration`` and ``rate``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Gamma
    >>> Gamma(3.0, 2.0).mean.item()
    1.5
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None
                 ) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate.pow(2))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        tiny = float(np.finfo(np.dtype(value.dtype)).tiny)
        return value.clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        value = as_tensor(value).to(self.rate.dtype)
        return (self.concentration.xlogy(self.rate) + (self.concentration - 1).xlogy(value)
                - self.rate * value - self.concentration.lgamma())

    def cdf(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        return self.concentration.igamma(self.rate * as_tensor(value).to(self.rate.dtype))

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1.0 - a) * a.digamma()


class Chi2(Gamma):
    """The chi-squared distribution of ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Chi2
    >>> Chi2(4.0).mean.item()
    4.0
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args)

    df = property(lambda self: self.concentration * 2)


class Dirichlet(Distribution):
    """The Dirichlet distribution of ``concentration`` (its last dimension the event).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Dirichlet
    >>> Dirichlet(pargraph.tensor([1.0, 3.0])).mean.tolist()
    [0.25, 0.75]
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Any, validate_args: bool | None = None) -> None:
        concentration = as_tensor(concentration)
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(tuple(concentration.shape[:-1]), tuple(concentration.shape[-1:]),
                         validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, keepdim=True)
        # Where every concentration is below 1, PyTorch's one-hot at the argmax of that row
        # of ``mode`` (0 / 0 everywhere: its first NaN).
        below = (self.concentration < 1).all(dim=-1, keepdim=True)
        positions = as_tensor(np.arange(self.concentration.shape[-1]))
        onehot = (positions == mode.argmax(-1, keepdim=True)).to(mode.dtype)
        return where(below, onehot, mode)

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        gammas = _standard_gamma(self.concentration.expand(shape))
        value = gammas / gammas.sum(-1, keepdim=True)
        tiny = float(np.finfo(np.dtype(value.dtype)).tiny)
        return value.clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        value = as_tensor(value).to(self.concentration.dtype)
        c = self.concentration
        return ((c - 1.0).xlogy(value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1))

    def entropy(self) -> Tensor:
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (c.lgamma().sum(-1) - total.lgamma() - (k - total) * total.digamma()
                - ((c - 1.0) * c.digamma()).sum(-1))


class Beta(Distribution):
    """The beta distribution of ``concentration1`` (alpha) and ``concentration0`` (beta),
    on (0, 1).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Beta
    >>> Beta(2.0, 6.0).mean.item()
    0.25
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any,
                 validate_args: bool | None = None) -> None:
        a, b = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([a, b], -1), validate_args=validate_args)
        super().__init__(tuple(a.shape), (), validate_args)

    concentration1 = property(lambda self: self._dirichlet.concentration[..., 0])
    concentration0 = property(lambda self: self._dirichlet.concentration[..., 1])

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        value = as_tensor(value).to(self.concentration1.dtype)
        return self._dirichlet.log_prob(stack([value, 1.0 - value], -1))

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()


class StudentT(Distribution):
    """Student's t distribution of ``df`` degrees of freedom, ``loc`` and ``scale``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import StudentT
    >>> StudentT(3.0).variance.item()
    3.0
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df: Any, loc: Any = 0.0, scale: Any = 1.0,
                 validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(tuple(self.df.shape), (), validate_args)

    @property
    def mean(self) -> Tensor:
        return where(self.df > 1, self.loc, math.nan)

    mode = property(lambda self: self.loc)

    @property
    def variance(self) -> Tensor:
        m = self.scale.pow(2) * self.df / (self.df - 2)
        m = where(self.df > 2, m, math.inf)
        return where(self.df > 1, m, math.nan)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        from pargraph.factories import randn

        shape = self._extended_shape(sample_shape)
        X = randn(*shape, dtype=self.df.dtype)
        Z = self._chi2.rsample(sample_shape)
        Y = X * (self.df / Z).sqrt()
        return self.loc + self.scale * Y

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        y = (as_tensor(value) - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + (0.5 * self.df).lgamma() - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - Z

    def entropy(self) -> Tensor:
        half = 0.5 * self.df
        half_up = 0.5 * (self.df + 1)
        lbeta = half.lgamma() + math.lgamma(0.5) - half_up.lgamma()
        return (self.scale.log() + half_up * (half_up.digamma() - half.digamma())
                + 0.5 * self.df.log() + lbeta)


class FisherSnedecor(Distribution):
    """The F distribution of ``df1`` and ``df2`` degrees of freedom: the ratio of two scaled
    chi-squared draws, on (0, inf).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import FisherSnedecor
    >>> FisherSnedecor(4.0, 6.0).mean.item()
    1.5
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Any, df2: Any, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(tuple(self.df1.shape), (), validate_args)

    @property
    def mean(self) -> Tensor:
        return where(self.df2 > 2, self.df2 / (self.df2 - 2), math.nan)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return where(self.df1 > 2, mode, math.nan)

    @property
    def variance(self) -> Tensor:
        df1, df2 = self.df1, self.df2
        spread = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return where(df2 > 4, spread, math.nan)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        tiny = float(np.finfo(self.df1.dtype).tiny)
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        value = as_tensor(value)
        half1, half2, ratio = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        t1 = (half1 + half2).lgamma() - half1.lgamma() - half2.lgamma()
        t2 = half1 * ratio.log() + (half1 - 1) * value.log()
        t3 = (half1 + half2) * (ratio * value).log1p()
        return t1 + t2 - t3
