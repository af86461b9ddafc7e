"""How a tensor prints: PyTorch's ``tensor([...], grad_fn=<...>)`` text."""

from __future__ import annotations

from typing import Any

import numpy as np

_PLAIN_DTYPES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(bool))


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
    """The values as PyTorch prints them: ``1.`` for whole floats, else four decimals."""
    if value.size == 0:
        return "[]" if value.ndim == 1 else f"[], size={value.shape}"
    if value.dtype.kind != "f":
        return np.array2string(value, separator=", ", prefix="tensor(", threshold=1000)
    finite = value[np.isfinite(value)]
    whole = finite.size == 0 or (np.all(finite == np.round(finite))
                                 and float(np.abs(finite).max()) < 1e8)

    def text(v: float) -> str:
        if not np.isfinite(v):
            return str(v)
        return f"{v:.0f}." if whole else f"{v:.4f}"

    # PyTorch pads every element to the width of the widest finite one.
    width = max((len(text(v)) for v in finite.flat), default=0)
    return np.array2string(value, separator=", ", prefix="tensor(", threshold=1000,
                           formatter={"float_kind": lambda v: text(v).rjust(width)})
