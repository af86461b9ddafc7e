"""``PixelShuffle`` and ``PixelUnshuffle``."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module


class PixelShuffle(Module):
    """``(*, C r^2, H, W)`` to ``(*, C, H r, W r)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.PixelShuffle(3)(pargraph.ones(1, 9, 4, 4)).shape
    pargraph.Size([1, 1, 12, 12])
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H r, W r)`` to ``(*, C r^2, H, W)``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.PixelUnshuffle(2)(pargraph.ones(1, 1, 4, 4)).shape
    pargraph.Size([1, 4, 2, 2])
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
