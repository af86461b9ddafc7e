"""Padding layers: zero, constant, reflection, replication and circular, 1-3 d."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module


class _Pad(Module):
    """``F.pad`` with a fixed padding and mode."""

    mode = "constant"
    dims = 1

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) \
            else tuple(padding)
        if len(self.padding) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: padding must be an int or "
                             f"{2 * self.dims} ints, got {padding!r}")
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        if self.mode == "constant" and self.value:  # PyTorch's ConstantPad names both
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name: str, mode: str, dims: int) -> type:
    """A padding module class with PyTorch's signature: ``(padding, value)`` for the
    constant pads, ``(padding)`` for the others."""
    if name.startswith("Constant"):
        def __init__(self, padding: Any, value: float) -> None:
            _Pad.__init__(self, padding, value)
        arguments = "1, 0.5"
    else:
        def __init__(self, padding: Any) -> None:
            _Pad.__init__(self, padding)
        arguments = "1"
    sizes = ", ".join(["1", "1"] + ["2"] * dims)  # (N, C, spatial...)
    doc = (f"``F.pad`` in mode {mode!r} over the last {dims} dimension(s).\n\n    Examples\n"
           f"    --------\n    >>> import pargraph\n    >>> tuple(pargraph.nn.{name}({arguments})"
           f"(pargraph.ones({sizes})).shape)[-1]\n    4\n    ")
    return type(name, (_Pad,), {"mode": mode, "dims": dims, "__doc__": doc,
                                "__init__": __init__, "__module__": __name__})


ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1)


ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2)


ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)


ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)


ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)


ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)


ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)


ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)


CircularPad1d = _pad_class("CircularPad1d", "circular", 1)


CircularPad2d = _pad_class("CircularPad2d", "circular", 2)


ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3)


ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)


ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)


ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)


CircularPad3d = _pad_class("CircularPad3d", "circular", 3)
