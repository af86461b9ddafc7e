"""Convolution and pooling layers: Conv1d, Conv2d, MaxPool, AvgPool, AdaptiveAvgPool."""

from __future__ import annotations

import math
from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn.module import Module
from pargraph.nn.spatial import _tuple

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    spatial = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        check_device(device, name)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, self.spatial, "kernel_size", name)
        self.stride = _tuple(stride, self.spatial, "stride", name)
        self.dilation = _tuple(dilation, self.spatial, "dilation", name)
        self.padding = padding if isinstance(padding, str) else _tuple(
            padding, self.spatial, "padding", name)
        self.padding_mode = padding_mode
        self._weight_and_bias((out_channels, in_channels // groups, *self.kernel_size),
                              out_channels, bias, dtype)

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (self.spatial + 1, self.spatial + 2) or \
                input.shape[-self.spatial - 1] != self.in_channels:
            raise RuntimeError(f"{self.describe()}: expected input of shape (N, "
                               f"{self.in_channels}, {', '.join(['...'] * self.spatial)}) with "
                               f"{self.in_channels} channels (in_channels), got input of shape "
                               f"{input.shape}")
        conv = getattr(F, f"conv{self.spatial}d")
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)
        if self.padding == "same":  # PyTorch's split: the odd element on the right
            spans = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pads = tuple(p for span in reversed(spans) for p in (span // 2, span - span // 2))
        elif self.padding == "valid":
            pads = (0,) * (2 * self.spatial)
        else:
            pads = tuple(p for size in reversed(self.padding) for p in (size, size))
        padded = F.pad(input, pads, mode=self.padding_mode)
        return conv(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * self.spatial:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self.spatial:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv1d(_ConvNd):
    """1-d convolution over ``(N, C, L)`` input, with PyTorch's arguments and initialization.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Conv1d(3, 8, 5, padding=2)(pargraph.ones(4, 3, 20)).shape
    pargraph.Size([4, 8, 20])
    """

    spatial = 1


class Conv2d(_ConvNd):
    """2-d convolution over ``(N, C, H, W)`` input, with PyTorch's arguments and
    initialization (``padding_mode``: zeros, reflect, replicate or circular).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Conv2d(1, 6, 3, padding=1)(pargraph.ones(2, 1, 8, 8)).shape
    pargraph.Size([2, 6, 8, 8])
    """

    spatial = 2


class _ConvTransposeNd(Module):
    spatial = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        check_device(device, name)
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, self.spatial, "kernel_size", name)
        self.stride = _tuple(stride, self.spatial, "stride", name)
        self.padding = _tuple(padding, self.spatial, "padding", name)
        self.output_padding = _tuple(output_padding, self.spatial, "output_padding", name)
        self.dilation = _tuple(dilation, self.spatial, "dilation", name)
        self.padding_mode = padding_mode
        self._weight_and_bias((in_channels, out_channels // groups, *self.kernel_size),
                              out_channels, bias, dtype)

    reset_parameters = _ConvNd.reset_parameters

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:
        """The output padding that gives ``output_size`` (PyTorch's ``_output_padding``)."""
        if output_size is None:
            return self.output_padding
        size = list(output_size)[-self.spatial:]
        smallest = [(n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in zip(
            input.shape[-self.spatial:], self.stride, self.padding, self.dilation,
            self.kernel_size)]
        largest = [n + s - 1 for n, s in zip(smallest, self.stride)]
        if any(not low <= want <= high for want, low, high in zip(size, smallest, largest)):
            raise ValueError(f"requested an output size of {size}, but valid sizes range from "
                             f"{smallest} to {largest} (for an input of "
                             f"{list(input.shape[2:])})")
        return tuple(want - low for want, low in zip(size, smallest))

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        conv = getattr(F, f"conv_transpose{self.spatial}d")
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        for name, default in (("padding", 0), ("dilation", 1), ("output_padding", 0)):
            if getattr(self, name) != (default,) * self.spatial:
                text += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over ``(N, C, L)`` input, with PyTorch's arguments and
    initialization (``forward(input, output_size=None)``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ConvTranspose1d(4, 2, 3, stride=2)(pargraph.ones(1, 4, 5)).shape
    pargraph.Size([1, 2, 11])
    """

    spatial = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution over ``(N, C, H, W)`` input (a DCGAN generator's layer).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)(pargraph.ones(1, 8, 4, 4)).shape
    pargraph.Size([1, 4, 8, 8])
    """

    spatial = 2


class _MaxPoolNd(Module):
    spatial = 0

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input: Tensor) -> Any:
        pool = getattr(F, f"max_pool{self.spatial}d")
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                    self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max pooling along the last dimension.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.MaxPool1d(2)(pargraph.ones(1, 3, 8)).shape
    pargraph.Size([1, 3, 4])
    """

    spatial = 1


class MaxPool2d(_MaxPoolNd):
    """Max pooling over the last two dimensions.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.MaxPool2d(2)(pargraph.ones(1, 3, 8, 8)).shape
    pargraph.Size([1, 3, 4, 4])
    """

    spatial = 2


class _AvgPoolNd(Module):
    spatial = 0

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        if self.spatial == 1:  # PyTorch's avg_pool1d takes no divisor_override
            return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding,
                                self.ceil_mode, self.count_include_pad)
        pool = getattr(F, f"avg_pool{self.spatial}d")
        return pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                    self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Average pooling along the last dimension.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AvgPool1d(4)(pargraph.ones(1, 3, 8)).shape
    pargraph.Size([1, 3, 2])
    """

    spatial = 1


class AvgPool2d(_AvgPoolNd):
    """Average pooling over the last two dimensions.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AvgPool2d(2)(pargraph.ones(1, 3, 8, 8)).shape
    pargraph.Size([1, 3, 4, 4])
    """

    spatial = 2


class AdaptiveAvgPool1d(Module):
    """Average pooling to a fixed output length.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AdaptiveAvgPool1d(1)(pargraph.ones(2, 3, 7)).shape
    pargraph.Size([2, 3, 1])
    """

    spatial = 1

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, f"adaptive_avg_pool{self.spatial}d")(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """Average pooling to a fixed output size (``(1, 1)``: global average pooling).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AdaptiveAvgPool2d((1, 1))(pargraph.ones(2, 3, 5, 5)).shape
    pargraph.Size([2, 3, 1, 1])
    """

    spatial = 2


class AdaptiveMaxPool1d(Module):
    """Max pooling to a fixed output length (``return_indices``: the maxima's positions too).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AdaptiveMaxPool1d(3)(pargraph.ones(2, 3, 7)).shape
    pargraph.Size([2, 3, 3])
    """

    spatial = 1

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        return getattr(F, f"adaptive_max_pool{self.spatial}d")(input, self.output_size,
                                                              self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    """Max pooling to a fixed output size (``(1, 1)``: global max pooling).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AdaptiveMaxPool2d((2, 2))(pargraph.ones(2, 3, 5, 5)).shape
    pargraph.Size([2, 3, 2, 2])
    """

    spatial = 2


class _FractionalMaxPoolNd(Module):
    spatial = 0

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             "ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        self.kernel_size, self.return_indices = kernel_size, return_indices
        self.output_size = None if output_size is None else \
            _tuple(output_size, self.spatial, "output_size", name)
        self.output_ratio = None
        if output_ratio is not None:
            ratios = (output_ratio,) * self.spatial if isinstance(output_ratio, (int, float)) \
                else tuple(output_ratio)
            if not all(0 < r < 1 for r in ratios):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
            self.output_ratio = ratios
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input: Tensor) -> Any:
        pool = getattr(F, f"fractional_max_pool{self.spatial}d")
        return pool(input, self.kernel_size, self.output_size, self.output_ratio,
                    self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling (windows at pseudo-random places, a new draw each call unless
    ``_random_samples`` fixes them) of ``(N, C, H, W)`` input, as PyTorch's.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.FractionalMaxPool2d(3, output_ratio=0.5)(pargraph.ones(2, 3, 8, 8)).shape
    pargraph.Size([2, 3, 4, 4])
    """

    spatial = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of ``(N, C, D, H, W)`` input (see :class:`FractionalMaxPool2d`).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.FractionalMaxPool3d(2, output_size=3)(pargraph.ones(1, 2, 6, 6, 6)).shape
    pargraph.Size([1, 2, 3, 3, 3])
    """

    spatial = 3


class Conv3d(_ConvNd):
    """3-d convolution over ``(N, C, D, H, W)`` input (volumes, video), with PyTorch's
    arguments and initialization.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Conv3d(2, 4, 3, padding=1)(pargraph.ones(1, 2, 4, 5, 6)).shape
    pargraph.Size([1, 4, 4, 5, 6])
    """

    spatial = 3


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution over ``(N, C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.ConvTranspose3d(2, 4, 2, stride=2)(pargraph.ones(1, 2, 2, 3, 3)).shape
    pargraph.Size([1, 4, 4, 6, 6])
    """

    spatial = 3


class MaxPool3d(_MaxPoolNd):
    """Max pooling over the last three dimensions.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.MaxPool3d(2)(pargraph.ones(1, 3, 4, 4, 4)).shape
    pargraph.Size([1, 3, 2, 2, 2])
    """

    spatial = 3


class _MaxUnpoolNd(Module):
    spatial = 0

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        op = type(self).__name__
        self.kernel_size = _tuple(kernel_size, self.spatial, "kernel_size", op)
        self.stride = self.kernel_size if stride is None else \
            _tuple(stride, self.spatial, "stride", op)
        self.padding = _tuple(padding, self.spatial, "padding", op)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        unpool = getattr(F, f"max_unpool{self.spatial}d")
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of :class:`MaxPool1d` (given its indices): zeros where no maximum was.

    Examples
    --------
    >>> import pargraph
    >>> pool = pargraph.nn.MaxPool1d(2, return_indices=True)
    >>> pargraph.nn.MaxUnpool1d(2)(*pool(pargraph.ones(1, 3, 8))).shape
    pargraph.Size([1, 3, 8])
    """

    spatial = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of :class:`MaxPool2d` (given its indices).

    Examples
    --------
    >>> import pargraph
    >>> pool = pargraph.nn.MaxPool2d(2, return_indices=True)
    >>> pargraph.nn.MaxUnpool2d(2)(*pool(pargraph.ones(1, 3, 4, 4))).shape
    pargraph.Size([1, 3, 4, 4])
    """

    spatial = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of :class:`MaxPool3d` (given its indices).

    Examples
    --------
    >>> import pargraph
    >>> pool = pargraph.nn.MaxPool3d(2, return_indices=True)
    >>> pargraph.nn.MaxUnpool3d(2)(*pool(pargraph.ones(1, 3, 4, 4, 4))).shape
    pargraph.Size([1, 3, 4, 4, 4])
    """

    spatial = 3


class AvgPool3d(_AvgPoolNd):
    """Average pooling over the last three dimensions.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AvgPool3d(2)(pargraph.ones(1, 3, 4, 4, 4)).shape
    pargraph.Size([1, 3, 2, 2, 2])
    """

    spatial = 3


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """Average pooling of ``(N, C, D, H, W)`` input to a fixed output size.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AdaptiveAvgPool3d(1)(pargraph.ones(2, 3, 4, 5, 6)).shape
    pargraph.Size([2, 3, 1, 1, 1])
    """

    spatial = 3


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    """Max pooling of ``(N, C, D, H, W)`` input to a fixed output size.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.AdaptiveMaxPool3d((1, 2, 2))(pargraph.ones(2, 3, 4, 5, 6)).shape
    pargraph.Size([2, 3, 1, 2, 2])
    """

    spatial = 3


class _LPPoolNd(Module):
    spatial = 1

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        pool = getattr(F, f"lp_pool{self.spatial}d")
        return pool(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling along the last dimension.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LPPool1d(2, 2)(pargraph.ones(1, 3, 8)).shape
    pargraph.Size([1, 3, 4])
    """


class LPPool2d(_LPPoolNd):
    """Power-average pooling over the last two dimensions.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LPPool2d(2, 2)(pargraph.ones(1, 3, 4, 4)).shape
    pargraph.Size([1, 3, 2, 2])
    """

    spatial = 2


class LPPool3d(_LPPoolNd):
    """Power-average pooling over the last three dimensions.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.LPPool3d(2, 2)(pargraph.ones(1, 3, 4, 4, 4)).shape
    pargraph.Size([1, 3, 2, 2, 2])
    """

    spatial = 3
