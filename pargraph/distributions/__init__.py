"""``pargraph.distributions``: probability distributions with ``sample``, ``rsample``
(reparameterized, differentiable), ``log_prob``, ``entropy`` and ``kl_divergence``, and the
transforms that map them, as ``torch.distributions``: what policy-gradient, VAE and flow
programs use."""

from pargraph.distributions import constraints, transforms
from pargraph.distributions.continuous import (
    Cauchy,
    Exponential,
    Gumbel,
    HalfNormal,
    Laplace,
    LogNormal,
    MultivariateNormal,
    Normal,
    Uniform,
    VonMises,
)
from pargraph.distributions.derived import (
    ContinuousBernoulli,
    HalfCauchy,
    InverseGamma,
    Kumaraswamy,
    LogisticNormal,
    MixtureSameFamily,
    Pareto,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
    Weibull,
)
from pargraph.distributions.discrete import (
    Bernoulli,
    Binomial,
    Categorical,
    Geometric,
    Multinomial,
    NegativeBinomial,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
    Poisson,
)
from pargraph.distributions.distribution import Distribution, Independent
from pargraph.distributions.gamma import Beta, Chi2, Dirichlet, FisherSnedecor, Gamma, StudentT
from pargraph.distributions.kl import kl_divergence, register_kl
from pargraph.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PowerTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    TransformedDistribution,
    identity_transform,
)

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "MultivariateNormal",
           "Normal", "Uniform", "constraints", "kl_divergence", "register_kl", "Laplace",
           "Exponential", "Cauchy", "Gumbel", "HalfNormal", "LogNormal", "Geometric", "Poisson",
           "OneHotCategorical", "transforms", "Transform", "ExpTransform", "SigmoidTransform",
           "TanhTransform", "AffineTransform", "SoftplusTransform", "AbsTransform",
           "PowerTransform", "ComposeTransform", "identity_transform",
           "TransformedDistribution", "Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "Binomial",
           "Multinomial", "VonMises", "NegativeBinomial", "OneHotCategoricalStraightThrough",
           "HalfCauchy", "InverseGamma", "Kumaraswamy", "MixtureSameFamily", "Pareto",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "Weibull", "IndependentTransform",
           "LowerCholeskyTransform", "SoftmaxTransform", "StickBreakingTransform",
           "FisherSnedecor", "LogisticNormal", "ContinuousBernoulli"]
