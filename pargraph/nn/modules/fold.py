"""``Fold`` and ``Unfold``: sliding blocks as layers."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module


class Unfold(Module):
    """:func:`~pargraph.nn.functional.unfold` as a layer: sliding blocks as columns.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Unfold(3, padding=1)(pargraph.ones(2, 4, 5, 5)).shape
    pargraph.Size([2, 36, 25])
    """

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Unfold):
    """:func:`~pargraph.nn.functional.fold` as a layer: columns summed back into an image.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Fold((4, 5), 2)(pargraph.ones(1, 12, 12)).shape
    pargraph.Size([1, 3, 4, 5])
    """

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1,
                 padding: Any = 0, stride: Any = 1) -> None:
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, " + super().extra_repr()
