"""``pargraph.amp``: mixed precision as PyTorch programs ask for it, on a CPU library.

``autocast("cpu")`` casts as PyTorch's CPU autocast: inside it, the matrix products,
convolutions, ``linear``, ``prelu`` and attention (PyTorch's lower-precision list) take their
float32 tensors in bfloat16 (or the ``dtype`` asked for) and return that dtype, the losses and
``cdist`` (its float32 list) take bfloat16 and float16 tensors in float32, and ``cat`` and
``stack`` (its promote list) take their tensors in the widest of their dtypes. float64 tensors
are never cast; gradients flow back through the casts into float32 parameters. A half-precision
product sums in float32 and rounds once, as PyTorch's does, but numpy has no bfloat16 products:
here autocast gives PyTorch's dtypes and values, not speed. ``autocast("cuda")`` warns and
does nothing, as PyTorch does without CUDA. ``GradScaler`` scales the loss for a CPU device as
PyTorch's does; for the default ``"cuda"`` device it disables itself with a warning, as
PyTorch does without CUDA: ``scale`` returns the loss and ``step`` steps.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pargraph import dtypes
from pargraph.autograd.mode import no_grad
from pargraph.context import context
from pargraph.ops import BFLOAT16, HALF

#: The dtypes CPU autocast computes its lower-precision ops in.
LOWER = (BFLOAT16, HALF)
_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


class AutocastState(threading.local):
    """This thread's CPU autocast: the dtype its lower-precision ops run in, or None (off, or
    inside an op that cast already: the ops it calls do not cast again)."""

    def __init__(self) -> None:
        self.cpu: np.dtype | None = None
        #: The dtype ``autocast("cpu")`` uses without one (``set_autocast_dtype``).
        self.cpu_default: np.dtype = BFLOAT16


state = context.register("autocast", AutocastState())


class autocast(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """A context manager and decorator: inside, ops run in mixed precision as in PyTorch's CPU
    autocast (see the module).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.autocast("cpu"):
    ...     y = pargraph.ones(2, 3) @ pargraph.ones(3, 1)
    >>> y.dtype
    pargraph.bfloat16
    """

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(f"Invalid device string: '{device_type}'")
        self.device = device_type
        self.fast_dtype = np.dtype(get_autocast_dtype(device_type) if dtype is None else dtype)
        self._cache_enabled = True if cache_enabled is None else cache_enabled
        if enabled and device_type == "cuda":
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          stacklevel=2)
            enabled = False
        elif enabled and self.fast_dtype not in LOWER:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling "
                          "autocast.\nCPU Autocast only supports dtypes of torch.bfloat16, "
                          "torch.float16 currently.", stacklevel=2)
            enabled = False
        self._enabled = enabled
        self._saved: list = []

    def __enter__(self) -> autocast:
        self._saved.append(state.cpu)
        if self.device == "cpu":
            state.cpu = self.fast_dtype if self._enabled else None
        return self

    def __exit__(self, *exc: Any) -> None:
        state.cpu = self._saved.pop()
        return None


#: The devices ``autocast`` accepts: only ``cpu`` has tensors here (``cuda`` disables itself
#: with PyTorch's warning; the others change nothing on CPU tensors, as in PyTorch).
DEVICES = frozenset({"cpu", "cuda", "mps", "xpu", "hpu", "ipu", "xla"})


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` accepts ``device_type``."""
    return device_type in DEVICES


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread (``None``: CUDA's, never).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.autocast("cpu"):
    ...     pargraph.is_autocast_enabled("cpu")
    True
    """
    return device_type == "cpu" and state.cpu is not None


def get_autocast_dtype(device_type: str) -> np.dtype:
    """The dtype ``autocast(device_type)`` computes in without a ``dtype``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.get_autocast_dtype("cpu")
    pargraph.bfloat16
    """
    return dtypes.of(state.cpu_default if device_type == "cpu" else HALF)


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    """Set the dtype ``autocast(device_type)`` computes in without a ``dtype`` (CPU only)."""
    if device_type == "cpu":
        state.cpu_default = np.dtype(dtype)


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Switch CPU autocast on (in the default dtype) or off for this thread, outside any
    ``with`` block (``cuda``: nothing to switch)."""
    if device_type == "cpu":
        state.cpu = state.cpu_default if enabled else None


def is_autocast_cache_enabled() -> bool:
    """PyTorch caches a parameter's casts within an autocast block; here each op casts."""
    return True


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Accepted (see :func:`is_autocast_cache_enabled`)."""


def clear_autocast_cache() -> None:
    """Accepted (see :func:`is_autocast_cache_enabled`)."""


def is_autocast_cpu_enabled() -> bool:
    """PyTorch's older name: ``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype() -> np.dtype:
    """PyTorch's older name: ``get_autocast_dtype("cpu")``."""
    return get_autocast_dtype("cpu")


def _eligible(value: Any) -> bool:
    """A tensor autocast casts: floating point, not float64 (as PyTorch's ``is_eligible``)."""
    dtype = getattr(value, "_node", None)
    dtype = getattr(dtype, "dtype", None)
    return dtype is not None and dtype != _FLOAT64 and (dtype.kind == "f" or dtype == BFLOAT16)


def _cast(value: Any, dtype: np.dtype, only: tuple = ()) -> Any:
    """``value`` (a tensor, or a list or tuple of them) in ``dtype`` where eligible;
    ``only``: cast only tensors of these dtypes."""
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, only) for v in value)
    if _eligible(value) and value.dtype != dtype and (not only or value.dtype in only):
        return value.to(dtype)
    return value


def _widest(values: Any) -> np.dtype | None:
    """The dtype PyTorch promotes the eligible tensors of ``values`` to, if they differ (they
    are float16, bfloat16 or float32: two of them promote to float32)."""
    dtypes = {v.dtype for v in values if _eligible(v)}
    return _FLOAT32 if len(dtypes) > 1 else None


def autocasts(kind: str) -> Callable[[Callable], Callable]:
    """Decorator for an op of PyTorch's CPU autocast lists: ``"lower"`` (its tensors in the
    autocast dtype), ``"fp32"`` (bfloat16 and float16 ones in float32) or ``"promote"`` (its
    sequence of tensors in the widest dtype among them). The op's own calls do not cast again.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph import amp
    >>> double = amp.autocasts("fp32")(lambda x: x * 2)
    >>> with pargraph.autocast("cpu"):
    ...     double(pargraph.ones(1, dtype=pargraph.bfloat16)).dtype
    pargraph.float32
    """
    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def cast_then_run(*args: Any, **kwargs: Any) -> Any:
            dtype = state.cpu
            if dtype is None:
                return fn(*args, **kwargs)
            if kind == "lower":
                args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
            elif kind == "fp32":
                args = _cast(args, _FLOAT32, LOWER)
                kwargs = {k: _cast(v, _FLOAT32, LOWER) for k, v in kwargs.items()}
            elif args and isinstance(args[0], (list, tuple)):
                widest = _widest(args[0])
                if widest is not None:
                    args = (_cast(args[0], widest), *args[1:])
            state.cpu = None
            try:
                return fn(*args, **kwargs)
            finally:
                state.cpu = dtype
        return cast_then_run
    return decorate


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
    """A decorator for ``autograd.Function.forward``: with ``cast_inputs`` and
    ``device_type="cpu"``, under autocast the forward gets its floating tensors in
    ``cast_inputs`` and runs with autocast off, as PyTorch's; the backward
    (:func:`custom_bwd`) runs with the autocast the forward ran with."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        dtype = state.cpu if device_type == "cpu" else None
        _remember(ctx, dtype)
        if dtype is None or cast_inputs is None:
            return fwd(ctx, *args, **kwargs)
        target = np.dtype(cast_inputs)
        args, kwargs = _cast(args, target), {k: _cast(v, target) for k, v in kwargs.items()}
        _remember(ctx, None)
        state.cpu = None
        try:
            return fwd(ctx, *args, **kwargs)
        finally:
            state.cpu = dtype
    return forward


def _remember(ctx: Any, dtype: np.dtype | None) -> None:
    """Note on ``ctx`` the autocast the forward ran with (a forward without ``ctx``, the
    ``setup_context`` form, has nothing to note it on: its backward keeps the caller's)."""
    try:
        ctx._autocast = dtype
    except AttributeError:
        pass


def custom_bwd(bwd: Callable | None = None, *, device_type: str = "cuda") -> Callable:
    """A decorator for ``autograd.Function.backward``: it runs with the autocast its
    :func:`custom_fwd` forward ran with."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(ctx: Any, *grads: Any) -> Any:
        saved, state.cpu = state.cpu, getattr(ctx, "_autocast", state.cpu)
        try:
            return bwd(ctx, *grads)
        finally:
            state.cpu = saved
    return backward
