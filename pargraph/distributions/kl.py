"""``kl_divergence(p, q)`` by the pair of types, and ``register_kl`` to add pairs
(``torch.distributions.kl``)."""

from __future__ import annotations

from collections.abc import Callable

from pargraph._tensor import Tensor
from pargraph.context import context
from pargraph.distributions.continuous import (
    Cauchy,
    Exponential,
    Gumbel,
    HalfNormal,
    Laplace,
    MultivariateNormal,
    Normal,
    Uniform,
)
from pargraph.distributions.discrete import (
    Bernoulli,
    Binomial,
    Categorical,
    Geometric,
    OneHotCategorical,
    Poisson,
)
from pargraph.distributions.distribution import Distribution, Independent
from pargraph.distributions.gamma import Beta, Dirichlet, Gamma
from pargraph.functions import broadcast_shapes
from pargraph.linalg import solve_triangular
from pargraph.nn import functional as F


class KLRegistry:
    """The KL functions by (type of p, type of q); the most specific pair wins."""

    def __init__(self) -> None:
        self.functions: dict[tuple[type, type], Callable] = {}

    def find(self, p: type, q: type) -> Callable | None:
        matches = [(i + j, fn) for (a, b), fn in self.functions.items()
                   for i, j in [(_depth(p, a), _depth(q, b))] if i >= 0 and j >= 0]
        return min(matches, key=lambda m: m[0])[1] if matches else None


def _depth(cls: type, base: type) -> int:
    """How far ``base`` is up ``cls``'s method resolution order (-1: not at all)."""
    mro = cls.__mro__
    return mro.index(base) if base in mro else -1


registry = context.register("kl_registry", KLRegistry())


def register_kl(type_p: type, type_q: type) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(p, q)`` computes KL(p || q) for distributions of these types.

    Examples
    --------
    >>> from pargraph.distributions import Normal, kl_divergence, register_kl
    >>> class Shifted(Normal):  # a pair of your own types: Normal's stays as it was
    ...     pass
    >>> @register_kl(Shifted, Shifted)
    ... def _kl_shifted(p, q):
    ...     return (p.loc - q.loc).abs()
    >>> kl_divergence(Shifted(0.0, 1.0), Shifted(2.0, 1.0)).item()
    2.0
    """
    def decorate(fn: Callable) -> Callable:
        registry.functions[(type_p, type_q)] = fn
        return fn

    return decorate


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q), for each of the batch.

    Examples
    --------
    >>> from pargraph.distributions import Normal, kl_divergence
    >>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 4)
    0.5
    """
    fn = registry.find(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


def _infinite_where(value: Tensor, condition: Tensor) -> Tensor:
    return value.masked_fill(condition, float("inf"))


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _infinite_where(t1, q.probs == 0).masked_fill(p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _infinite_where(t2, q.probs == 1).masked_fill(p.probs == 1, 0.0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where(t, (q.probs == 0).expand_as(t)).masked_fill(
        (p.probs == 0).expand_as(t), 0.0)
    return t.sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event "
                         "shapes cannot be computed")
    pl, ql = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = ql.diagonal(dim1=-2, dim2=-1).log().sum(-1) - \
        pl.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    k = p.event_shape[0]
    shape = broadcast_shapes(tuple(pl.shape[:-2]), tuple(ql.shape[:-2]))
    pl, ql = pl.expand(*shape, k, k), ql.expand(*shape, k, k)
    term2 = solve_triangular(ql, pl, upper=False).pow(2).sum((-2, -1))
    diff = (q.loc - p.loc).unsqueeze(-1)
    shape = broadcast_shapes(tuple(ql.shape[:-2]), tuple(diff.shape[:-2]))
    term3 = solve_triangular(ql.expand(*shape, k, k), diff.expand(*shape, k, 1),
                             upper=False).pow(2).sum((-2, -1))
    return half_term1 + 0.5 * (term2 + term3 - k)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("No KL(p || q) is implemented for Independent "
                                  "distributions of different reinterpreted dimensions")
    return p._sum_rightmost(kl_divergence(p.base_dist, q.base_dist))


_EULER_GAMMA = 0.57721566490153286060


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sum_q - sum_p) * sum_p.digamma()
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return (-scale_ratio.log() + loc_abs_diff / q.scale
            + scale_ratio * (-loc_abs_diff / p.scale).exp() - 1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ct1, ct2, ct3 = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER_GAMMA
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + _EULER_GAMMA)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return _infinite_where(kl, p.total_count > q.total_count)
