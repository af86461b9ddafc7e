"""Upsampling layers."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module


class Upsample(Module):
    """``F.interpolate`` as a layer: to ``size`` or by ``scale_factor``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Upsample(scale_factor=2, mode="bilinear")(pargraph.ones(1, 1, 3, 3)).shape
    pargraph.Size([1, 1, 6, 6])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else scale_factor
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        given = f"scale_factor={self.scale_factor}" if self.scale_factor is not None \
            else f"size={self.size}"
        return f"{given}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``(N, C, H, W)`` input.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.UpsamplingNearest2d(scale_factor=2)(pargraph.ones(1, 1, 2, 2)).shape
    pargraph.Size([1, 1, 4, 4])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of ``(N, C, H, W)`` input, corners aligned (as PyTorch's).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.UpsamplingBilinear2d(size=(3, 5))(pargraph.ones(1, 1, 2, 2)).shape
    pargraph.Size([1, 1, 3, 5])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
