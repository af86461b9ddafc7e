"""Grad mode: whether new operations record autograd history (per thread, as in PyTorch)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from pargraph.context import context
from pargraph.graph import grad_mode


def is_grad_enabled() -> bool:
    """Whether operations record autograd history in this thread.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.no_grad():
    ...     pargraph.is_grad_enabled()
    False
    """
    return grad_mode.enabled


class _GradModeContext:
    """Context manager and decorator that sets grad mode inside its block."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._saved: list[bool] = []

    def __enter__(self) -> None:
        self._saved.append(grad_mode.enabled)
        grad_mode.enabled = self._enabled

    def __exit__(self, *exc: Any) -> None:
        # Restored in one store before the list changes: a Ctrl-C between two calls here
        # must not leave the mode switched.
        grad_mode.enabled = self._saved[-1]
        del self._saved[-1]

    def __call__(self, func: Callable) -> Callable:
        enabled = self._enabled

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _GradModeContext(enabled):
                return func(*args, **kwargs)

        return wrapper


class _BareDecoratable(_GradModeContext):
    """Usable as ``@no_grad``, ``@no_grad()`` and ``with no_grad():``, like PyTorch."""

    _mode = False

    def __new__(cls, func: Callable | None = None):
        if func is None:
            return super().__new__(cls)
        return cls()(func)

    def __init__(self, func: Callable | None = None) -> None:
        super().__init__(self._mode)


class no_grad(_BareDecoratable):
    """Disable gradient recording inside the block or the decorated function.

    Examples
    --------
    >>> import pargraph
    >>> w = pargraph.ones(2, requires_grad=True)
    >>> with pargraph.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    _mode = False


class enable_grad(_BareDecoratable):
    """Enable gradient recording inside a ``no_grad`` block.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.no_grad(), pargraph.enable_grad():
    ...     pargraph.is_grad_enabled()
    True
    """

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``: as a function call, a context manager or a decorator.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.set_grad_enabled(False):
    ...     pargraph.is_grad_enabled()
    False
    """

    def __init__(self, mode: bool) -> None:
        super().__init__(bool(mode))
        self._saved.append(grad_mode.enabled)
        grad_mode.enabled = bool(mode)  # like PyTorch, calling it already switches the mode

    def __enter__(self) -> None:
        return None

    def __call__(self, func: Callable) -> Callable:
        grad_mode.enabled = self._saved.pop()  # decorating must not switch the mode
        return super().__call__(func)


class _InferenceState(threading.local):
    """How many ``inference_mode`` blocks this thread is in."""

    depth = 0


inference_state = context.register("inference_mode", _InferenceState())


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``inference_mode``.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.inference_mode():
    ...     pargraph.is_inference_mode_enabled()
    True
    """
    return inference_state.depth > 0


class inference_mode(_GradModeContext):
    """Like ``no_grad`` (pargraph has no separate inference-tensor kind to optimize), and
    ``is_inference_mode_enabled()`` inside.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.inference_mode():
    ...     pargraph.is_grad_enabled()
    False
    """

    def __new__(cls, mode: bool | Callable = True):
        if callable(mode):
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool | Callable = True) -> None:
        super().__init__(not mode if not callable(mode) else False)
        self._inference = bool(mode) if not callable(mode) else True
        self._depths: list[int] = []

    def __enter__(self) -> None:
        super().__enter__()
        self._depths.append(inference_state.depth)
        inference_state.depth = inference_state.depth + 1 if self._inference else 0

    def __exit__(self, *exc: Any) -> None:
        inference_state.depth = self._depths.pop()  # one store, as grad mode's restore
        super().__exit__(*exc)

    def __call__(self, func: Callable) -> Callable:
        inference = self._inference

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(inference):
                return func(*args, **kwargs)

        return wrapper
