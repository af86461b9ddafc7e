"""Anomaly detection, as PyTorch's: while it is on, a backward that computes NaN raises,
naming the backward function, its op and the user's line that recorded the forward op.

The check runs in the tasks (``runtime.Checks``), on every backward node's result, in this
process; ``backward()`` runs its graph at once instead of with the next realization, so the
error comes from the ``backward()`` call, as in PyTorch.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.context import context
from pargraph.graph import BACKWARD
from pargraph.runtime import Checks


class AnomalyMode:
    """Whether anomaly detection is on, and whether it checks for NaN (this process)."""

    def __init__(self) -> None:
        self.enabled = False
        self.check_nan = True

    def set(self, enabled: bool, check_nan: bool = True) -> None:
        self.enabled, self.check_nan = bool(enabled), bool(check_nan)
        Checks.result = _nan_in_backward if self.enabled and self.check_nan else None


#: The process's anomaly mode (PyTorch's is global too).
anomaly_mode = context.register("anomaly_mode", AnomalyMode())


def _nan_in_backward(node: Any, value: np.ndarray) -> None:
    """Raise PyTorch's error if a backward node's result holds NaN."""
    if getattr(node, "phase", None) != BACKWARD or value.dtype.kind not in "fc" or \
            not np.isnan(value).any():
        return
    origin = node.key.rsplit("-", 2)[0].removesuffix("_backward")
    primitive = ops.REGISTRY.get(origin)
    name = primitive.grad_name if primitive is not None else \
        "".join(part.capitalize() for part in origin.split("_")) + "Backward0"
    raise RuntimeError(f"Function '{name}' returned nan values in its 0th output.")


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.is_anomaly_enabled()
    False
    """
    return anomaly_mode.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection, when on, checks backward results for NaN.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.is_anomaly_check_nan_enabled()
    True
    """
    return anomaly_mode.check_nan


class detect_anomaly:  # noqa: N801  (PyTorch's name)
    """Anomaly detection on inside the block (or the decorated function), with PyTorch's
    warning: a backward that computes NaN raises ``RuntimeError`` naming the function.

    Examples
    --------
    >>> import warnings, pargraph
    >>> x = pargraph.tensor([0.0], requires_grad=True)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with pargraph.autograd.detect_anomaly():
    ...         try:
    ...             (x.sqrt() * 0).sum().backward()
    ...         except RuntimeError as error:
    ...             print(str(error).splitlines()[0])
    div: Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._saved: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)
        self._saved.append((anomaly_mode.enabled, anomaly_mode.check_nan))
        anomaly_mode.set(True, self.check_nan)

    def __exit__(self, *exc: Any) -> None:
        anomaly_mode.set(*self._saved.pop())

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return wrapper


class set_detect_anomaly:  # noqa: N801  (PyTorch's name)
    """Turn anomaly detection on or off, at once (``set_detect_anomaly(True)``), or inside a
    ``with`` block, after which the previous setting comes back.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.autograd.set_detect_anomaly(True):
    ...     pargraph.is_anomaly_enabled()
    True
    >>> pargraph.is_anomaly_enabled()
    False
    """

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._previous = (anomaly_mode.enabled, anomaly_mode.check_nan)
        anomaly_mode.set(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        anomaly_mode.set(*self._previous)
