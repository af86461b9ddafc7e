"""Resampling layers: ``PixelShuffle``/``PixelUnshuffle`` (sub-pixel convolution) and
``Upsample`` (``torch.nn.modules.pixelshuffle``, ``.upsampling``)."""

from __future__ import annotations

from typing import Any

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


class ChannelShuffle(Module):
    """Interleave ``groups`` groups of channels of ``(N, C, ...)`` input (ShuffleNet): channel
    ``g * C/groups + k`` goes to ``k * groups + g``.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.arange(6.0).reshape(1, 6, 1)
    >>> pargraph.nn.ChannelShuffle(2)(x).flatten().tolist()
    [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


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
