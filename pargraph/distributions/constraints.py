"""Constraints: the values a distribution's parameters and samples may take, each an
elementwise test on numpy arrays (``torch.distributions.constraints``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Constraint:
    """A set of values: ``check(array)`` says, per element (or per event), whether it is in."""

    event_dim = 0

    def check(self, value: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, value: np.ndarray) -> np.ndarray:
        return self.check(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__.lstrip('_')}()"


class _Real(Constraint):
    def check(self, value):
        return value == value  # not NaN


class _Boolean(Constraint):
    def check(self, value):
        return (value == 0) | (value == 1)


class _NonNegativeInteger(Constraint):
    def check(self, value):
        return (value % 1 == 0) & (value >= 0)


@dataclass(frozen=True, repr=False)
class _GreaterThan(Constraint):
    lower_bound: float

    def check(self, value):
        return value > self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


@dataclass(frozen=True, repr=False)
class _GreaterThanEq(Constraint):
    lower_bound: float

    def check(self, value):
        return value >= self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


@dataclass(frozen=True, repr=False)
class _Interval(Constraint):
    lower_bound: float
    upper_bound: float
    half_open: bool = False  # [lower, upper) rather than [lower, upper]

    def check(self, value):
        upper = value < self.upper_bound if self.half_open else value <= self.upper_bound
        return (value >= self.lower_bound) & upper

    def __repr__(self) -> str:
        name = "HalfOpenInterval" if self.half_open else "Interval"
        return f"{name}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


@dataclass(frozen=True, repr=False)
class _IntegerInterval(Constraint):
    lower_bound: int
    upper_bound: int

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _RealVector(Constraint):
    event_dim = 1

    def check(self, value):
        return np.all(value == value, axis=-1)

    def __repr__(self) -> str:
        return "IndependentConstraint(Real(), 1)"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return np.all(value >= 0, axis=-1) & (np.abs(value.sum(-1) - 1) < 1e-6)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = np.all(np.triu(value, 1) == 0, axis=(-2, -1))
        return lower & np.all(np.diagonal(value, axis1=-2, axis2=-1) > 0, axis=-1)


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        symmetric = np.all(np.isclose(value, np.swapaxes(value, -1, -2)), axis=(-2, -1))
        with np.errstate(invalid="ignore"):
            return symmetric & np.all(np.linalg.eigvalsh(value) > 0, axis=-1)


class _True(Constraint):
    """Booleans computed elsewhere (``low < high``): each must be true."""

    def check(self, value):
        return value


real = _Real()
true = _True()
boolean = _Boolean()
nonnegative_integer = _NonNegativeInteger()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
real_vector = _RealVector()
simplex = _Simplex()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()


def greater_than(lower_bound: float) -> Constraint:
    return _GreaterThan(float(lower_bound))


def greater_than_eq(lower_bound: float) -> Constraint:
    return _GreaterThanEq(float(lower_bound))


def interval(lower_bound: float, upper_bound: float) -> Constraint:
    return _Interval(float(lower_bound), float(upper_bound))


def half_open_interval(lower_bound: float, upper_bound: float) -> Constraint:
    return _Interval(float(lower_bound), float(upper_bound), half_open=True)


def integer_interval(lower_bound: int, upper_bound: int) -> Constraint:
    return _IntegerInterval(int(lower_bound), int(upper_bound))
