"""How a tensor prints: PyTorch's ``tensor([...], grad_fn=<...>)`` text, with its rules for
whole numbers and scientific notation and its ``set_printoptions``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph.context import context

_PLAIN_DTYPES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(bool))

#: PyTorch's profiles of ``set_printoptions``: precision, threshold, edgeitems, linewidth.
PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
            "full": (4, math.inf, 3, 80)}


class PrintOptions:
    """How tensors print (``set_printoptions``): digits after the point, how many elements
    before a summary with ``...`` of ``edgeitems`` each side, the line width, and scientific
    notation forced on or off (``None``: PyTorch's choice from the values)."""

    def __init__(self) -> None:
        self.precision, self.threshold, self.edgeitems, self.linewidth = PROFILES["default"]
        self.sci_mode: bool | None = None


options = context.register("print_options", PrintOptions())


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print, as ``torch.set_printoptions`` (a ``profile``, ``"default"``,
    ``"short"`` or ``"full"``, first; then the options given).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.set_printoptions(precision=2)
    >>> pargraph.tensor([1.23456, 2.0])
    tensor([1.23, 2.00])
    >>> pargraph.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in PROFILES:
            raise ValueError(f"profile should be one of {sorted(PROFILES)}, got {profile!r}")
        options.precision, options.threshold, options.edgeitems, options.linewidth = \
            PROFILES[profile]
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(options, name, value)
    options.sci_mode = sci_mode


def format_tensor(t: Any) -> str:
    """``repr(t)``: its values (realizing them), a non-default dtype, and its autograd state."""
    value = np.asarray(t.detach()._value())
    body = format_values(value)
    extras = []
    if value.dtype not in _PLAIN_DTYPES:
        extras.append(f"dtype=pargraph.{value.dtype.name}")
    if t._node.history:
        extras.append(f"grad_fn=<{t._node.backward_name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body, *extras]) + ")"


def format_values(value: np.ndarray) -> str:
    """The values as PyTorch prints them (its ``_Formatter``): whole floats as ``1.``, others
    with ``precision`` decimals, and scientific notation when the finite non-zero magnitudes
    span more than 1000x, pass 1e8 or (not whole) fall below 1e-4; every element padded to the
    widest."""
    if value.size == 0:
        return "[]" if value.ndim == 1 else f"[], size={value.shape}"
    if value.dtype.name == "bfloat16":  # ml_dtypes' type (kind "V"): its values are floats
        value = value.astype(np.float32)
    # A row with a summary in it prints ``...`` one space wider than numpy counts it
    # (``_marked``): such rows wrap a column earlier.
    inline = value.ndim > 0 and value.size > options.threshold and \
        value.shape[-1] > 2 * options.edgeitems
    summary = {"threshold": options.threshold if math.isfinite(options.threshold)
               else np.iinfo(np.int64).max, "edgeitems": options.edgeitems,
               "max_line_width": options.linewidth - inline}
    if value.dtype.kind != "f":
        return _marked(np.array2string(value, separator=", ", prefix="tensor(", **summary))
    precision = options.precision
    shown = _summarized(value, options.edgeitems) if value.size > options.threshold else value
    finite = np.abs(shown[np.isfinite(shown) & (shown != 0)]).astype(np.float64)
    whole = bool(np.all(finite == np.ceil(finite))) if finite.size else True
    sci = False
    if finite.size:
        low, high = float(finite.min()), float(finite.max())
        sci = high / low > 1000.0 or high > 1.0e8 or (not whole and low < 1.0e-4)
    if options.sci_mode is not None:
        sci = options.sci_mode

    def text(v: float) -> str:
        if sci:
            return f"{v:.{precision}e}"
        if whole:
            return f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        return f"{v:.{precision}f}"

    # Padded to the widest non-zero finite value, as PyTorch's (inf and nan are not counted).
    width = max((len(text(float(v))) for v in shown[np.isfinite(shown) & (shown != 0)].flat),
                default=0)
    return _marked(np.array2string(
        value, separator=", ", prefix="tensor(",
        formatter={"float_kind": lambda v: text(float(v)).rjust(width)}, **summary))


def _marked(text: str) -> str:
    """A summary inside a row as PyTorch prints it: its ``...`` takes a column of its own
    width, one space wider than numpy's."""
    return text.replace(", ...,", ",  ...,")


def _summarized(value: np.ndarray, edge: int) -> np.ndarray:
    """The elements a summary shows: ``edge`` at each end of every dimension (PyTorch decides
    the format from these only)."""
    for axis in range(value.ndim):
        if value.shape[axis] > 2 * edge:
            value = np.concatenate([np.take(value, range(edge), axis),
                                    np.take(value, range(-edge, 0), axis)], axis)
    return value
