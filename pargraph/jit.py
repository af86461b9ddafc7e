"""``pargraph.jit``: PyTorch's TorchScript decorators, for programs that use them. pargraph
records every call into its own graph, so ``script`` and ``trace`` give back what they are
given, run as Python; TorchScript's file format (``save``, ``load``) is not provided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting",
           "is_tracing", "annotate", "Final", "save", "load"]

T = TypeVar("T")


def script(obj: Any = None, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """``obj`` (a function or module) itself: pargraph's graph is recorded from its Python.

    Examples
    --------
    >>> import pargraph
    >>> @pargraph.jit.script
    ... def double(x):
    ...     return x * 2
    >>> double(pargraph.ones(2)).tolist()
    [2.0, 2.0]
    """
    return obj


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``func`` itself, not specialised to ``example_inputs``: it runs as Python each call.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.Linear(2, 1)
    >>> pargraph.jit.trace(layer, pargraph.ones(1, 2)) is layer
    True
    """
    return func


def trace_module(mod: Any, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``mod`` itself (see :func:`trace`)."""
    return mod


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """A decorator that leaves the function as it is (it is Python either way)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    """``fn`` as it is."""
    return fn


def export(fn: Callable) -> Callable:
    """``fn`` as it is."""
    return fn


def is_scripting() -> bool:
    """False: nothing is compiled to TorchScript."""
    return False


def is_tracing() -> bool:
    """False: nothing is traced by TorchScript."""
    return False


def annotate(the_type: Any, the_value: T) -> T:
    """``the_value`` (the type is for TorchScript)."""
    return the_value


class Final(Generic[T]):
    """TorchScript's marker for constant attributes; a plain annotation here."""


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    """Not provided: TorchScript archives need PyTorch. Save a ``state_dict`` with
    :func:`pargraph.save` instead."""
    raise NotImplementedError("pargraph.jit.save: TorchScript archives are not provided; save "
                              "the model's state_dict with pargraph.save instead")


def load(f: Any, map_location: Any = None, _extra_files: Any = None) -> Any:
    """Not provided: TorchScript archives need PyTorch."""
    raise NotImplementedError("pargraph.jit.load: TorchScript archives are not provided; load "
                              "a state_dict saved with pargraph.save instead")
