"""Convolution layers (1-3 d, transposed, lazy)."""

from __future__ import annotations

import inspect
import math
from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn.functional.conv import _tuple
from pargraph.nn.module import Module
from pargraph.nn.modules.lazy import LazyModuleMixin, UninitializedParameter, _check_loaded

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


class _LazyConvMixin(LazyModuleMixin):
    """In-channels from the first input's channel dimension (the first, unbatched)."""

    transposed = False

    def _lazy_init(self, out_channels: int, bias: bool, dtype: Any) -> None:
        self.out_channels = out_channels
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_hooks()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *_: Any) -> None:
        channels = input.shape[1 if input.ndim == self.spatial + 2 else 0]
        if not self.has_uninitialized_params():
            if self.in_channels == 0:  # loaded from a state dict
                loaded = self.weight.shape[0] if self.transposed else \
                    self.weight.shape[1] * self.groups
                _check_loaded("in_channels", channels, loaded)
                self.in_channels = channels
            return
        self.in_channels = channels
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight.materialize(shape)
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


def _lazy_conv(base: type, transposed: bool) -> type:
    """``Lazy<base>``: the convolution's arguments without ``in_channels``."""

    class LazyConv(_LazyConvMixin, base):
        cls_to_become = base

        def __init__(self, out_channels: int, kernel_size: Any, *args: Any,
                     **kwargs: Any) -> None:
            bound = signature.bind(None, 1, out_channels, kernel_size, *args, **kwargs)
            bound.apply_defaults()
            given = dict(bound.arguments)
            bias, dtype = given.pop("bias"), given.pop("dtype")
            del given["self"]
            # in_channels = groups (divisible), no bias: the least that is replaced next
            given["in_channels"] = given["groups"]
            super().__init__(**given, bias=False)
            self.in_channels = 0
            self._lazy_init(out_channels, bias, dtype)

    signature = inspect.signature(base.__init__)
    LazyConv.transposed = transposed
    LazyConv.__name__ = LazyConv.__qualname__ = f"Lazy{base.__name__}"
    LazyConv.__doc__ = (f"A ``{base.__name__}`` whose ``in_channels`` is the channel "
                        "dimension of its first input.")
    return LazyConv


LazyConv1d = _lazy_conv(Conv1d, False)


LazyConv2d = _lazy_conv(Conv2d, False)


LazyConv3d = _lazy_conv(Conv3d, False)


LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)


LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)


LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)
