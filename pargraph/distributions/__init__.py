"""``pargraph.distributions``: probability distributions with ``sample``, ``rsample``
(reparameterized, differentiable), ``log_prob``, ``entropy`` and ``kl_divergence``, as
``torch.distributions``: what policy-gradient and VAE programs use."""

from pargraph.distributions import constraints
from pargraph.distributions.continuous import MultivariateNormal, Normal, Uniform
from pargraph.distributions.discrete import Bernoulli, Categorical
from pargraph.distributions.distribution import Distribution, Independent
from pargraph.distributions.kl import kl_divergence, register_kl

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "MultivariateNormal",
           "Normal", "Uniform", "constraints", "kl_divergence", "register_kl"]
