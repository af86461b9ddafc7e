"""``pargraph.amp``: mixed precision as PyTorch programs ask for it, on a CPU library.

``autocast`` computes nothing differently: every op runs in its tensors' own dtypes (PyTorch's
CPU autocast would cast some ops to bfloat16, which pargraph does not compute in). It is
accepted so that programs written for it run unchanged. ``GradScaler`` scales the loss for a
CPU device as PyTorch's does; for the default ``"cuda"`` device it disables itself with a
warning, as PyTorch does without CUDA: ``scale`` returns the loss and ``step`` steps.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

from pargraph.autograd.mode import no_grad


class autocast(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """A context manager and decorator that leaves the computation as it is (see the module).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.autocast("cpu"):
    ...     y = pargraph.ones(2) * 2
    >>> y.dtype
    dtype('float32')
    """

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device_type, self.fast_dtype, self.enabled = device_type, dtype, enabled

    def __enter__(self) -> autocast:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` accepts ``device_type`` (it does, and changes nothing)."""
    return device_type in ("cpu", "cuda")


class GradScaler:
    """Loss scaling against float16 underflow: ``scale(loss)``, ``step(optimizer)`` (skipped
    when a gradient is inf or NaN), ``update()``, as ``torch.amp.GradScaler``.

    Examples
    --------
    >>> import pargraph
    >>> scaler = pargraph.amp.GradScaler("cpu", init_scale=8.0)
    >>> scaler.scale(pargraph.tensor(1.5)).item()
    12.0
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if enabled and device != "cpu":
            warnings.warn(f"pargraph.amp.GradScaler is enabled, but {device} is not "
                          "available here.  Disabling.", stacklevel=2)
            enabled = False
        self._enabled, self._scale = enabled, float(init_scale)
        self._growth_factor, self._backoff_factor = growth_factor, backoff_factor
        self._growth_interval, self._growth_tracker = growth_interval, 0
        self._found_inf: dict[int, bool] = {}  # optimizer id -> a gradient was inf or NaN

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs: Any) -> Any:
        """The loss (or tensors) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def unscale_(self, optimizer: Any) -> None:
        """Divide the optimizer's gradients by the scale, noting whether one is inf or NaN."""
        if not self._enabled or id(optimizer) in self._found_inf:
            return
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.mul_(1.0 / self._scale)
                        found = found or not bool(p.grad.isfinite().all())
        self._found_inf[id(optimizer)] = found

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()``, unless a gradient was inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        self.unscale_(optimizer)
        if self._found_inf[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | None = None) -> None:
        """Back off after an inf or NaN, grow after ``growth_interval`` clean steps."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(self._found_inf.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        if not math.isfinite(self._scale):
            raise RuntimeError("GradScaler: the scale is no longer finite")
        self._found_inf.clear()

    def state_dict(self) -> dict:
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker} if self._enabled else {}

    def load_state_dict(self, state: dict) -> None:
        if state:
            self._scale = float(state["scale"])
            self._growth_tracker = int(state["_growth_tracker"])


def custom_fwd(fwd: Callable | None = None, *, device_type: str = "cuda",
               cast_inputs: Any = None) -> Callable:
    """A decorator for ``autograd.Function.forward`` under autocast: the function as it is."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str = "cuda") -> Callable:
    """A decorator for ``autograd.Function.backward`` under autocast: the function as it is."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd

