"""Discrete distributions: ``Bernoulli`` and ``Categorical``, given ``probs`` or ``logits``
(``torch.distributions.bernoulli``, ``.categorical``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.autograd.mode import no_grad
from pargraph.distributions import constraints
from pargraph.distributions.distribution import Distribution, broadcast_all
from pargraph.distributions.gamma import Gamma
from pargraph.factories import arange, as_tensor
from pargraph.functions import bernoulli, binomial, broadcast_tensors, poisson
from pargraph.nn import functional as F


def _one_of(probs: Any, logits: Any) -> None:
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _clamped(probs: Tensor) -> Tensor:
    """``probs`` kept a machine epsilon away from 0 and 1 (PyTorch's ``clamp_probs``)."""
    eps = float(np.finfo(probs.dtype).eps)
    return probs.clamp(eps, 1 - eps)


class _BinaryParameter:
    """``probs`` and ``logits`` of one binary event, the one not given computed from the other
    when first asked for."""

    def __getattr__(self, name: str) -> Any:
        if name == "logits" and "probs" in self.__dict__:
            p = _clamped(self.__dict__["probs"])
            self.__dict__["logits"] = p.log() - (-p).log1p()
            return self.__dict__["logits"]
        if name == "probs" and "logits" in self.__dict__:
            self.__dict__["probs"] = self._probs_of(self.__dict__["logits"])
            return self.__dict__["probs"]
        raise AttributeError(name)

    @staticmethod
    def _probs_of(logits: Tensor) -> Tensor:
        """``probs`` from the ``logits`` given."""
        return logits.sigmoid()

    def _set_parameter(self, probs: Any, logits: Any) -> tuple:
        """Keep ``probs`` or ``logits`` (exactly one given) as a tensor; its shape."""
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            return tuple(self.probs.shape)
        (self.logits,) = broadcast_all(logits)
        return tuple(self.logits.shape)


class Bernoulli(_BinaryParameter, Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Bernoulli
    >>> round(Bernoulli(probs=0.25).log_prob(pargraph.tensor(1.0)).exp().item(), 4)
    0.25
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        super().__init__(self._set_parameter(probs, logits), (), validate_args)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.where(self.probs != 0.5, mode * float("nan"))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return bernoulli(self.probs.detach().expand(*shape))

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(2, dtype=self.probs.dtype).reshape(2, *([1] * len(self._batch_shape)))
        return values.expand(2, *self._batch_shape) if expand else values


class Categorical(Distribution):
    """One of ``K`` categories (the last dimension of ``probs`` or ``logits``, which need not
    be normalized), for each of the batch.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Categorical
    >>> d = Categorical(probs=pargraph.tensor([1.0, 3.0]))
    >>> round(d.log_prob(pargraph.tensor(1)).exp().item(), 4), d.sample((5,)).shape
    (0.75, pargraph.Size([5]))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_of(probs, logits)
        if probs is not None:
            probs = as_tensor(probs)
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._raw = probs
            shape = probs.shape
        else:
            logits = as_tensor(logits)
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self._raw = logits
            shape = logits.shape
        self._num_events = shape[-1]
        super().__init__(tuple(shape[:-1]), (), validate_args)

    def __getattr__(self, name: str) -> Any:
        if name == "logits" and "probs" in self.__dict__:
            self.__dict__["logits"] = _clamped(self.__dict__["probs"]).log()
            return self.__dict__["logits"]
        if name == "probs" and "logits" in self.__dict__:
            self.__dict__["probs"] = self.__dict__["logits"].softmax(-1)
            return self.__dict__["probs"]
        raise AttributeError(name)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> tuple:
        return (*self._batch_shape, self._num_events)

    @property
    def mean(self) -> Tensor:
        return self.probs[..., 0] * float("nan")

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return self.probs[..., 0] * float("nan")

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        n = int(np.prod(shape)) if shape else 1
        rows = self.probs.detach().reshape(-1, self._num_events)
        draws = rows.multinomial(n, replacement=True)  # (batch, n)
        return draws.mT.reshape(*shape, *self._batch_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value).long().unsqueeze(-1)
        value, logits = broadcast_tensors(value, self.logits)
        return logits.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        # p log p is 0 where p is: the logits there are clamped to the least float.
        logits = self.logits.clamp(min=float(np.finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events).reshape(-1, *([1] * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli(``probs``) trials (0,
    1, 2, ...), given ``probs`` or ``logits``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Geometric
    >>> Geometric(probs=0.25).mean.item()
    3.0
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (logits,) = broadcast_all(logits)
            self.probs = logits.sigmoid()
        self.logits = self.probs.log() - (-self.probs).log1p() if logits is None else logits
        super().__init__(tuple(self.probs.shape), (), validate_args)

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: self.probs.new_zeros(tuple(self.probs.shape)))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        from pargraph.factories import rand

        shape = self._extended_shape(sample_shape)
        tiny = float(np.finfo(np.dtype(self.probs.dtype)).tiny)
        with no_grad():
            u = rand(*shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        probs = self.probs
        # p = 1 with value 0: 0 * log(0) is 0, as PyTorch takes it
        failures = (value * (-probs).log1p()).where((probs < 1) | (value != 0),
                                                    value.new_zeros(()).to(probs.dtype))
        return failures + probs.log()

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                  reduction="none") / self.probs


class Poisson(Distribution):
    """The Poisson distribution of ``rate`` (its samples are not differentiable).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Poisson
    >>> round(Poisson(2.0).log_prob(pargraph.tensor(0.0)).exp().item(), 4)
    0.1353
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    mean = variance = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return poisson(self.rate.expand(*self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()


class OneHotCategorical(Distribution):
    """``Categorical``'s draws as one-hot vectors.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import OneHotCategorical
    >>> OneHotCategorical(probs=pargraph.tensor([0.0, 1.0])).sample().tolist()
    [0.0, 1.0]
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        shape = tuple(self._categorical.batch_shape)
        super().__init__(shape, (self._categorical._num_events,), validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.boolean

    @property
    def mode(self) -> Tensor:
        return F.one_hot(self.probs.argmax(-1), self._categorical._num_events).to(
            self.probs.dtype)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        drawn = self._categorical.sample(sample_shape)
        return F.one_hot(drawn, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        return self._categorical.log_prob(as_tensor(value).argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()


def _clamp_by_zero(x: Tensor) -> Tensor:
    """``max(x, 0)`` with PyTorch's gradient at 0 (half)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_BinaryParameter, Distribution):
    """The number of successes in ``total_count`` trials of probability ``probs`` (or
    ``sigmoid(logits)``); its samples are not differentiable.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Binomial
    >>> round(Binomial(4, probs=0.5).log_prob(pargraph.tensor(2.0)).exp().item(), 4)
    0.375
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer
    has_enumerate_support = True

    def __init__(self, total_count: Any = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_of(probs, logits)
        if probs is not None:
            total_count, self.probs = broadcast_all(total_count, probs)
            param = self.probs
        else:
            total_count, self.logits = broadcast_all(total_count, logits)
            param = self.logits
        self.total_count = total_count.to(param.dtype)
        super().__init__(tuple(param.shape), (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        count = self.total_count
        return ((count + 1) * self.probs).floor().minimum(
            count if hasattr(count, "_node") else self.probs.new_tensor(count))

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return binomial(self.total_count.expand(*shape), self.probs.expand(*shape))

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        value = as_tensor(value).to(self.logits.dtype)
        n, logits = self.total_count, self.logits
        log_factorial_n = (n + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (n - value + 1).lgamma()
        normalize = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() \
            - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalize

    def _homogeneous_count(self, what: str) -> int:
        counts = self.total_count.detach().numpy()
        total = int(counts.max())
        if counts.min() != total:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def entropy(self) -> Tensor:
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total = self._homogeneous_count("enumerate_support")
        values = arange(1 + total, dtype=self.probs.dtype).reshape(
            -1, *([1] * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values


class Multinomial(Distribution):
    """Counts of ``total_count`` draws from a categorical distribution of ``probs`` (or
    ``logits``) over the last dimension; its samples are not differentiable.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Multinomial
    >>> d = Multinomial(2, probs=pargraph.tensor([0.5, 0.5]))
    >>> round(d.log_prob(pargraph.tensor([1.0, 1.0])).exp().item(), 4)
    0.5
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        param = self._categorical.probs
        super().__init__(tuple(param.shape[:-1]), tuple(param.shape[-1:]), validate_args)

    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        from pargraph.ops import defaults

        shape = self._extended_shape(sample_shape)
        probs = np.broadcast_to(self.probs.detach().numpy().astype(np.float64), shape)
        flat = probs.reshape(-1, shape[-1])
        drawn = defaults.generator.multinomial(self.total_count, flat / flat.sum(-1,
                                                                                keepdims=True))
        return as_tensor(drawn.reshape(shape).astype(np.dtype(self.probs.dtype)))

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, as_tensor(value).to(self.logits.dtype))
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        logits = logits.masked_fill((value == 0) & (logits == float("-inf")), 0.0)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self) -> Tensor:
        n = float(self.total_count)
        # PyTorch takes lgamma of an integer tensor, which it computes in float32.
        term1 = n * self._categorical.entropy() - float(np.float32(math.lgamma(n + 1)))
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = (support + 1).lgamma()
        return term1 + (binomial_probs * weights).sum((0, -1))


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` whose ``rsample`` passes gradients straight through to the
    probabilities: the one-hot draw forward, ``probs``' gradient backward (Bengio et al.).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import OneHotCategoricalStraightThrough
    >>> d = OneHotCategoricalStraightThrough(probs=pargraph.tensor([0.0, 1.0]))
    >>> d.rsample().tolist()
    [0.0, 1.0]
    """

    has_rsample = True

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class NegativeBinomial(_BinaryParameter, Distribution):
    """The number of successes, each of probability ``probs`` (or ``sigmoid(logits)``), before
    ``total_count`` failures (its samples are not differentiable).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import NegativeBinomial
    >>> round(NegativeBinomial(2.0, probs=pargraph.tensor(0.5)).mean.item(), 4)
    2.0
    """

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            shape = self.probs.shape
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            shape = self.logits.shape
        super().__init__(tuple(shape), (), validate_args)

    mean = property(lambda self: self.total_count * self.logits.exp())
    mode = property(lambda self: ((self.total_count - 1) * self.logits.exp()).floor().clamp(
        min=0.0))
    variance = property(lambda self: self.mean / (-self.logits).sigmoid())

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            rate = Gamma(self.total_count, (-self.logits).exp(),
                         validate_args=False).sample(sample_shape)
            return poisson(rate)

    def log_prob(self, value: Tensor) -> Tensor:
        value = self._validate_sample(value)
        log_unnormalized = self.total_count * F.logsigmoid(-self.logits) + \
            value * F.logsigmoid(self.logits)
        log_normalization = (-(self.total_count + value).lgamma() + (1.0 + value).lgamma()
                             + self.total_count.lgamma())
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized - log_normalization
