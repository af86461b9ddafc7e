"""Pooling layers: max, average, power-average, adaptive, fractional, unpooling."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.functional.conv import _tuple
from pargraph.nn.module import Module


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
