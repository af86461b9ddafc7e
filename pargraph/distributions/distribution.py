"""The base of every distribution, and ``Independent`` (``torch.distributions.distribution``).

Arguments and values are validated as PyTorch does by default: a parameter outside its
constraint (a negative scale) or a value outside the support is a ``ValueError``. A value
already here is checked at once; one the graph computes is checked in the task that computes
it (the error still names the line that built the distribution). ``validate_args=False`` (or
``Distribution.set_default_validate_args(False)``) leaves the checks out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Size, Tensor, apply
from pargraph.autograd.mode import no_grad
from pargraph.context import context
from pargraph.distributions import constraints
from pargraph.factories import as_tensor
from pargraph.functions import broadcast_tensors


class ValidationDefault:
    """Whether distributions validate their arguments unless told (PyTorch: yes)."""

    def __init__(self) -> None:
        self.enabled = True


validation = context.register("validation", ValidationDefault())


class Distribution:
    """A probability distribution of tensors: ``batch_shape`` independent ones, each over
    values of ``event_shape``."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict[str, constraints.Constraint] = {}
    support: constraints.Constraint | None = None

    def __init__(self, batch_shape: tuple = (), event_shape: tuple = (),
                 validate_args: bool | None = None) -> None:
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        self._validate_args = validation.enabled if validate_args is None else validate_args
        self._given = [name for name in self.arg_constraints
                       if isinstance(self.__dict__.get(name), Tensor)]
        if self._validate_args:  # the parameters given (Categorical: probs or logits)
            for name, constraint in self.arg_constraints.items():
                value = self.__dict__.get(name)
                if isinstance(value, Tensor):
                    # A normalized parameter (Categorical's) is computed from the one given.
                    raw = self.__dict__.get("_raw", value)
                    self.__dict__[name] = self._checked(name, value, constraint, (raw,))

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Validate (the default) or not the arguments of distributions made from now on."""
        if value not in (True, False):
            raise ValueError
        validation.enabled = value

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _checked(self, name: str, value: Tensor, constraint: constraints.Constraint,
                 sources: tuple[Tensor, ...] = ()) -> Tensor:
        message = (f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of "
                   f"distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                   "invalid values")
        return _check(value, value, constraint, message, sources or (value,))

    def _holds(self, condition: Tensor, message: str, sources: tuple[Tensor, ...],
               shown_value: Tensor) -> Tensor:
        """``condition`` (booleans), checked to hold everywhere; ``shown_value`` is what the
        message shows."""
        return _check(condition, shown_value, constraints.true, message, sources)

    def _validate_sample(self, value: Tensor) -> Tensor:
        """``value`` checked against the support (when validating)."""
        value = as_tensor(value)
        if not self._validate_args or self.support is None:
            return value
        message = (f"Expected value argument (Tensor of shape {tuple(value.shape)}) to be "
                   f"within the support ({self.support!r}) of the distribution {self!r}, but "
                   "found invalid values")
        return _check(value, value, self.support, message, (value,))

    def _extended_shape(self, sample_shape: Any = ()) -> tuple:
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """A draw of ``sample_shape`` (not differentiable)."""
        with no_grad():
            return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """A reparameterized draw: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample")

    def sample_n(self, n: int) -> Tensor:
        return self.sample((n,))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def __repr__(self) -> str:
        parts = [f"{name}: {shown(self.__dict__[name])}"
                 for name in self.__dict__.get("_given", ())]
        return f"{type(self).__name__}({', '.join(parts)})"


def _check(value: Tensor, shown_value: Tensor, constraint: constraints.Constraint,
           message: str, sources: tuple[Tensor, ...]) -> Tensor:
    """``value`` checked by ``constraint``: at once (a ``ValueError`` at the user's line, as
    PyTorch's) when ``sources``, what it is computed from, are all here, else in the task
    that computes it."""
    if all(isinstance(t._node.value, np.ndarray) for t in sources):
        if not np.all(constraint(value.detach().numpy())):
            raise ValueError(f"{message}:\n{_values(shown_value)}")
        return value
    return apply(ops.checked_values, value._node, constraint, message)


def _values(value: Tensor) -> str:
    return str(value.item()) if value.dim() == 0 else repr(value.detach())


def shown(value: Tensor) -> Any:
    """A parameter in a message, as PyTorch's: a one-element value whose value is here as a
    number, else the shape (a value the graph has not computed is not computed for it)."""
    node = value._node
    if value.numel() == 1 and node.value is not None and not hasattr(node.value, "key"):
        return value.item()
    return value.shape


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """Numbers and tensors as tensors of one shape (numbers in the tensors' float dtype)."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    dtype = tensors[0].dtype if tensors else None
    made = [v if isinstance(v, Tensor) else as_tensor(float(v), dtype=dtype) for v in values]
    if len({tuple(t.shape) for t in made}) == 1:
        return tuple(made)
    return broadcast_tensors(*made)


class Independent(Distribution):
    """``base_distribution`` with its last ``reinterpreted_batch_ndims`` batch dimensions
    taken as event dimensions: ``log_prob`` sums over them.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.distributions import Independent, Normal
    >>> d = Independent(Normal(pargraph.zeros(3), pargraph.ones(3)), 1)
    >>> tuple(d.batch_shape), tuple(d.event_shape), tuple(d.log_prob(pargraph.zeros(3)).shape)
    ((), (3,), ())
    """

    arg_constraints: dict[str, constraints.Constraint] = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int,
                 validate_args: bool | None = None) -> None:
        batch = tuple(base_distribution.batch_shape)
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {reinterpreted_batch_ndims} vs {len(batch)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, \
            reinterpreted_batch_ndims
        cut = len(batch) - reinterpreted_batch_ndims
        super().__init__(batch[:cut], batch[cut:] + tuple(base_distribution.event_shape),
                         validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    def _sum_rightmost(self, value: Tensor) -> Tensor:
        n = self.reinterpreted_batch_ndims
        return value.sum(tuple(range(-n, 0))) if n else value

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        return self._sum_rightmost(self.base_dist.log_prob(value))

    def entropy(self) -> Tensor:
        return self._sum_rightmost(self.base_dist.entropy())

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"

