"""Convolution, pooling and padding as functions (``nn.functional.conv2d`` & co.), on the
primitives of :mod:`pargraph.convolution`, with PyTorch's arguments, defaults and checks."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from pargraph import amp, ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor, rand
from pargraph.ops import convolution

_PAD_MODES = ("reflect", "replicate", "circular")


def _tuple(value: Any, spatial: int, name: str, op: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * spatial
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * spatial
    if len(value) != spatial:
        raise RuntimeError(f"{op}: expected {name} to be a single integer or a tuple of "
                           f"{spatial} integers, got {value}")
    return value


def _batched(input: Tensor, spatial: int, op: str) -> tuple[Tensor, bool]:
    """The input with a batch dimension (PyTorch accepts one unbatched sample too)."""
    if input.ndim == spatial + 1:
        return input.unsqueeze(0), True
    if input.ndim != spatial + 2:
        raise RuntimeError(f"{op}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D "
                           f"(batched) input, but got input of size {list(input.shape)}")
    return input, False


def _conv_padding(padding: Any, kernel: tuple, stride: tuple, dilation: tuple,
                  op: str) -> tuple[tuple[int, int], ...]:
    if padding == "valid":
        return ((0, 0),) * len(kernel)
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in total)
    if isinstance(padding, str):
        raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of "
                         "{'valid', 'same'}")
    return tuple((p, p) for p in _tuple(padding, len(kernel), "padding", op))


def _conv(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
          dilation: Any, groups: int, spatial: int, op: str) -> Tensor:
    input, weight = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(input, spatial, op)
    stride = _tuple(stride, spatial, "stride", op)
    dilation = _tuple(dilation, spatial, "dilation", op)
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation) or groups < 1:
        raise RuntimeError(f"{op}: stride, dilation and groups must be positive, got "
                           f"stride={stride}, dilation={dilation}, groups={groups}")
    if weight.ndim != spatial + 2:
        raise RuntimeError(f"{op}: expected a {spatial + 2}-D weight (out_channels, "
                           f"in_channels / groups, kernel), got size {list(weight.shape)}")
    pads = _conv_padding(padding, tuple(weight.shape[2:]), stride, dilation, op)
    inputs = (x, weight) + (() if bias is None else (as_tensor(bias),))
    out = apply(convolution.conv, *inputs, stride=stride, padding=pads, dilation=dilation,
                groups=groups)
    return out.squeeze(0) if unbatched else out


@amp.autocasts("lower")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-d convolution (cross-correlation) over ``(N, C, L)`` or ``(C, L)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv1d(pargraph.ones(1, 1, 5), pargraph.ones(1, 1, 3)).tolist()
    [[[3.0, 3.0, 3.0]]]
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@amp.autocasts("lower")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation) over ``(N, C, H, W)`` or ``(C, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv2d(pargraph.ones(1, 1, 4, 4), pargraph.ones(2, 1, 3, 3), padding=1).shape
    pargraph.Size([1, 2, 4, 4])
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@amp.autocasts("lower")
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-d convolution over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv3d(pargraph.ones(1, 1, 4, 4, 4), pargraph.ones(2, 1, 3, 3, 3), padding=1).shape
    pargraph.Size([1, 2, 4, 4, 4])
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _max_pool(input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
              ceil_mode: bool, return_indices: bool, spatial: int, op: str) -> Any:
    input = as_tensor(input)
    x, unbatched = _batched(input, spatial, op)
    kernel = _tuple(kernel_size, spatial, "kernel_size", op)
    stride = kernel if stride is None or stride == [] else _tuple(stride, spatial, "stride", op)
    dilation = _tuple(dilation, spatial, "dilation", op)
    pads = convolution.pool_padding(tuple(x.shape), kernel, stride,
                                    _tuple(padding, spatial, "padding", op), dilation, ceil_mode)
    indices = apply(convolution.pool_argmax, x, kernel=kernel, stride=stride, padding=pads,
                    dilation=dilation)
    planes = tuple(x.shape[:2]) + (-1,)  # each max is gathered from its flattened plane
    values = x.reshape(planes).gather(2, indices.reshape(planes)).reshape(indices.shape)
    values = apply(ops.shown_as, values, f"MaxPool{spatial}DWithIndicesBackward0")
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """The maximum of each window along the last dimension.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.max_pool1d(pargraph.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[3.0, 2.0]]]
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     1, "max_pool1d")


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """The maximum of each window over the last two dimensions; with ``return_indices`` also
    each maximum's flat position in its input plane, as PyTorch returns it.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.max_pool2d(x, 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     2, "max_pool2d")


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """The maximum of each window over the last three dimensions.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.max_pool3d(pargraph.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
    [[[[[7.0]]]]]
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     3, "max_pool3d")


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> Any:
    """:func:`max_pool1d` with its indices (PyTorch's name for that form).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.max_pool1d_with_indices(pargraph.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)[1].tolist()
    [[[1, 2]]]
    """
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> Any:
    """:func:`max_pool2d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.max_pool2d_with_indices(pargraph.ones(1, 1, 2, 2), 2)[1].tolist()
    [[[[0]]]]
    """
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> Any:
    """:func:`max_pool3d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.max_pool3d_with_indices(pargraph.ones(1, 1, 2, 2, 2), 2)[1].tolist()
    [[[[[0]]]]]
    """
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _max_unpool(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any, padding: Any,
                output_size: Any, spatial: int, op: str) -> Tensor:
    """Each value of ``input`` written at its ``indices`` (flat positions in its output plane,
    as max pooling returns them) of an output of zeros: the inverse of max pooling."""
    input, indices = as_tensor(input), as_tensor(indices)
    if indices.dtype != np.int64:
        raise RuntimeError(f"{op}: elements in indices should be type int64 but got: "
                           f"{indices.dtype}")
    if input.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{op}: Input to max_unpooling{spatial}d should be a "
                           f"{spatial + 1}d or {spatial + 2}d Tensor, but got a tensor with "
                           f"{input.ndim} dimensions.")
    if indices.shape != input.shape:
        raise RuntimeError(f"{op}: Expected shape of indices to be same as that of the input "
                           f"tensor ({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    x, unbatched = _batched(input, spatial, op)
    kernel = _tuple(kernel_size, spatial, "kernel_size", op)
    stride = kernel if stride is None else _tuple(stride, spatial, "stride", op)
    padding = _tuple(padding, spatial, "padding", op)
    default = [(x.shape[2 + d] - 1) * stride[d] - 2 * padding[d] + kernel[d]
               for d in range(spatial)]
    size = default
    if output_size is not None:
        size = [int(n) for n in output_size]
        if len(size) == spatial + 2:
            size = size[2:]
        if len(size) != spatial:
            raise ValueError(f"{op}: output_size should be a sequence containing {spatial} or "
                             f"{spatial + 2} elements, but it has a length of "
                             f"'{len(output_size)}'")
        for d, (n, low, step) in enumerate(zip(size, default, stride)):
            if not low - step < n < low + step:
                raise ValueError(f'{op}: invalid output_size "{tuple(output_size)}" (dim {d} '
                                 f"must be between {low - step} and {low + step})")
    batch, channels, volume = x.shape[0], x.shape[1], math.prod(size)
    checked = Tensor(ops.checked_index(
        indices._node, volume, "RuntimeError", f"Found an invalid max index: {{index}} (output "
        f"volumes are of size {'x'.join(str(n) for n in size)})", op))
    zeros = Tensor(ops.constant(np.zeros((batch, channels, volume), x.dtype)))
    out = zeros.scatter(2, checked.reshape(batch, channels, -1), x.reshape(batch, channels, -1))
    out = out.reshape(batch, channels, *size)
    return out.squeeze(0) if unbatched else out


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """The inverse of :func:`max_pool1d` with its indices: each value at its position, zeros
    elsewhere.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.max_unpool1d(pargraph.tensor([[[3.0, 5.0]]]), pargraph.tensor([[[1, 2]]]), 2).tolist()
    [[[0.0, 3.0, 5.0, 0.0]]]
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1,
                       "max_unpool1d")


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """The inverse of :func:`max_pool2d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> values, indices = F.max_pool2d(pargraph.arange(16.0).reshape(1, 1, 4, 4), 2,
    ...                                return_indices=True)
    >>> F.max_unpool2d(values, indices, 2)[0, 0, 1].tolist()
    [0.0, 5.0, 0.0, 7.0]
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2,
                       "max_unpool2d")


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """The inverse of :func:`max_pool3d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> values, indices = F.max_pool3d(pargraph.ones(1, 1, 2, 2, 2), 2, return_indices=True)
    >>> F.max_unpool3d(values, indices, 2).sum().item()
    1.0
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3,
                       "max_unpool3d")


def _avg_pool(input: Tensor, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
              count_include_pad: bool, divisor_override: int | None, spatial: int,
              op: str) -> Tensor:
    input = as_tensor(input)
    x, unbatched = _batched(input, spatial, op)
    kernel = _tuple(kernel_size, spatial, "kernel_size", op)
    stride = kernel if stride is None or stride == [] else _tuple(stride, spatial, "stride", op)
    padding = _tuple(padding, spatial, "padding", op)
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise RuntimeError(f"{op}: pad should be at most half of kernel size, but got "
                           f"pad={padding} and kernel_size={kernel}")
    n, c = x.shape[:2]
    plane = tuple(x.shape[2:])
    size = int(np.prod(kernel))
    ones = ops.constant(np.full((1, 1) + kernel, 1.0 / size, dtype=x.dtype))
    # With ceil_mode the last window may reach past the padding: zeros on the right fill it
    # (max pooling's padding), and the divisor counts what PyTorch counts.
    pads = convolution.pool_padding(tuple(x.shape), kernel, stride, padding, (1,) * spatial,
                                    ceil_mode)
    ceiled = any(right != left for left, right in pads)
    geometry = dict(stride=stride, padding=pads, dilation=(1,) * spatial, groups=1)
    planes = x.reshape((n * c, 1) + plane)
    out = apply(convolution.conv, planes, ones, **geometry)
    out = out.reshape((n, c) + tuple(out.shape[2:]))
    if divisor_override:
        out = out * (size / divisor_override)
    elif ceiled or (not count_include_pad and any(padding)):
        out = out * _divisor_correction(plane, kernel, stride, padding, tuple(out.shape[2:]),
                                        count_include_pad, x.dtype)
    out = apply(ops.shown_as, out, f"AvgPool{spatial}DBackward0")
    return out.squeeze(0) if unbatched else out


@functools.lru_cache(maxsize=64)
def _divisor_correction(plane: tuple, kernel: tuple, stride: tuple, padding: tuple,
                        out: tuple, count_include_pad: bool, dtype: np.dtype) -> np.ndarray:
    """Per output position, kernel size / PyTorch's divisor: the window clipped to the padded
    input (``count_include_pad``) or to the input. Computed once per geometry, not at every
    forward pass of a training loop."""
    counts = np.ones(out)
    for d, (length, k, st, p, count) in enumerate(zip(plane, kernel, stride, padding, out)):
        start = np.arange(count) * st - p
        end = np.minimum(start + k, length + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, length)
        shape = [1] * len(out)
        shape[d] = count
        counts = counts * (end - start).reshape(shape)
    return (math.prod(kernel) / counts).astype(dtype)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """The mean of each window along the last dimension.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.avg_pool1d(pargraph.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[2.0, 1.0]]]
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1,
                     "avg_pool1d")


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window over the last two dimensions (a convolution with a constant
    kernel, so its gradient is the convolution's).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.avg_pool2d(pargraph.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 2, "avg_pool2d")


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window over the last three dimensions.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.avg_pool3d(pargraph.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
    [[[[[3.5]]]]]
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 3, "avg_pool3d")


def _lp_pool(input: Tensor, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool,
             spatial: int, op: str) -> Tensor:
    """PyTorch's power-average pooling: ``(sum over the window of x^p)^(1/p)``, through the
    average pool (a window's sum is its mean times its size)."""
    kernel = _tuple(kernel_size, spatial, "kernel_size", op)
    powered = as_tensor(input) ** norm_type
    mean = _avg_pool(powered, kernel, stride, 0, ceil_mode, True, None, spatial, op)
    return (mean.sign() * mean.abs().relu() * math.prod(kernel)) ** (1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling along the last dimension (``norm_type`` 1: sum pooling; large:
    max pooling).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.lp_pool1d(pargraph.tensor([[[3.0, 4.0]]]), 2, 2).tolist()
    [[[5.0]]]
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1, "lp_pool1d")


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over the last two dimensions.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.lp_pool2d(pargraph.ones(1, 1, 2, 2), 1, 2).tolist()
    [[[[4.0]]]]
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2, "lp_pool2d")


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over the last three dimensions.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.lp_pool3d(pargraph.ones(1, 1, 2, 2, 2), 1, 2).tolist()
    [[[[[8.0]]]]]
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3, "lp_pool3d")


def _adaptive_mean(x: Tensor, axis: int, size: int, out: int) -> Tensor:
    """The mean over each of PyTorch's adaptive windows along ``axis``
    ([floor(i*n/o), ceil((i+1)*n/o))): a reshape where they tile the axis, else each window
    gathered and padded to the longest, the padding masked out (selected, not multiplied by
    zero: an infinity outside a window must not make it NaN)."""
    if out == 0:
        return x[(slice(None),) * axis + (slice(0, 0),)]
    if size % out == 0:
        shape = tuple(x.shape[:axis]) + (out, size // out) + tuple(x.shape[axis + 1:])
        return x.reshape(shape).mean(axis + 1)
    windows = ops.adaptive_windows(size, out)
    longest = max(stop - start for start, stop in windows)
    take = np.array([[min(start + t, stop - 1) for t in range(longest)]
                     for start, stop in windows])
    inside = np.array([[start + t < stop for t in range(longest)] for start, stop in windows])
    gathered = x.movedim(axis, -1)[..., take].masked_fill(as_tensor(~inside), 0)
    counts = as_tensor(inside.sum(1)).to(x.dtype)
    return (gathered.sum(-1) / counts.to(x.dtype)).movedim(-1, axis)


def _output_sizes(x: Tensor, output_size: Any, spatial: int, op: str) -> tuple[int, ...]:
    """``output_size`` per spatial dimension (``None`` keeps the input's size)."""
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * spatial
    sizes = tuple(n if o is None else int(o) for n, o in zip(x.shape[2:], sizes))
    if len(sizes) != spatial or any(o < 0 for o in sizes):
        raise RuntimeError(f"{op}: expected output_size of {spatial} non-negative integers, "
                           f"got {output_size}")
    return sizes


def _adaptive_avg_pool(input: Tensor, output_size: Any, spatial: int, op: str) -> Tensor:
    input = as_tensor(input)
    x, unbatched = _batched(input, spatial, op)
    sizes = _output_sizes(x, output_size, spatial, op)
    # Averages over whole axes (global pooling) are one mean, other sizes a mean per axis.
    whole = tuple(2 + axis for axis, (n, o) in enumerate(zip(x.shape[2:], sizes))
                  if o == 1 and n > 1)
    out = x.mean(dim=whole, keepdim=True) if whole else x
    for axis, (n, o) in enumerate(zip(x.shape[2:], sizes)):
        if n != o and 2 + axis not in whole:
            out = _adaptive_mean(out, 2 + axis, n, o)
    out = apply(ops.shown_as, out, f"AdaptiveAvgPool{spatial}DBackward0", x)
    return out.squeeze(0) if unbatched else out


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a given output length (PyTorch's adaptive windows).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_avg_pool1d(pargraph.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 1).tolist()
    [[[1.5]]]
    """
    return _adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a given output size (``None`` keeps a dimension's size).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_avg_pool2d(pargraph.ones(2, 3, 5, 7), (1, 1)).shape
    pargraph.Size([2, 3, 1, 1])
    """
    return _adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of ``(N, C, D, H, W)`` input to a given output size.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_avg_pool3d(pargraph.ones(2, 3, 4, 5, 6), 1).shape
    pargraph.Size([2, 3, 1, 1, 1])
    """
    return _adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def _adaptive_max_pool(input: Tensor, output_size: Any, return_indices: bool, spatial: int,
                       op: str) -> Any:
    input = as_tensor(input)
    x, unbatched = _batched(input, spatial, op)
    if any(n == 0 for n in x.shape[2:]):
        raise RuntimeError(f"{op}: expected an input with non-zero spatial sizes, got "
                           f"{tuple(input.shape)}")
    sizes = _output_sizes(x, output_size, spatial, op)
    indices = apply(ops.adaptive_pool_argmax, x, sizes=sizes)
    planes = tuple(x.shape[:2]) + (-1,)  # each max is gathered from its flattened plane
    values = x.reshape(planes).gather(2, indices.reshape(planes)).reshape(indices.shape)
    values = apply(ops.shown_as, values, f"AdaptiveMaxPool{spatial}DBackward0")
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


_FRACTIONAL_DIMS = {2: ("height", "width"), 3: ("time", "height", "width")}


def _fractional_max_pool(input: Tensor, kernel_size: Any, output_size: Any, output_ratio: Any,
                         return_indices: bool, samples: Any, spatial: int) -> Any:
    """Max pooling over windows of ``kernel_size`` at pseudo-random places (Graham's
    fractional max pooling), ``samples`` (N, C, ``spatial``) in [0, 1) placing them, as
    PyTorch's (drawn with ``pargraph.rand`` when None)."""
    op = f"fractional_max_pool{spatial}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    input = as_tensor(input)
    x, unbatched = _batched(input, spatial, op)
    kernel = _tuple(kernel_size, spatial, "kernel_size", op)
    planes = tuple(x.shape[2:])
    if output_size is None:
        ratios = (output_ratio,) * spatial if isinstance(output_ratio, (int, float)) \
            else tuple(output_ratio)
        if len(ratios) != spatial:
            raise ValueError(f"{op} requires output_ratio to either be a single Int or tuple "
                             "of Ints.")
        sizes = tuple(int(n * r) for n, r in zip(planes, ratios))
    else:
        sizes = _tuple(output_size, spatial, "output_size", op)
    names = _FRACTIONAL_DIMS[spatial]
    checked = range(spatial) if spatial == 2 else (0, 2, 1)  # PyTorch's kernels' order
    for d in checked:
        fits = sizes[d] + kernel[d] - 1 <= planes[d] if spatial == 2 else \
            sizes[d] + kernel[d] - 1 < planes[d]
        if not fits:
            where = f"{op}()" if spatial == 2 else f"{op}_out()"
            raise RuntimeError(f"{where}: pool {names[d]} {kernel[d]} too large relative to "
                               f"input {names[d]} {planes[d]}")
    if samples is None:
        samples = rand(x.shape[0], x.shape[1], spatial, dtype=x.dtype)
    samples = as_tensor(samples)  # no detach: a drawn sample stays a draw in a compiled step
    indices = apply(ops.fractional_pool_argmax, x, samples, kernel=kernel, sizes=sizes)
    flat = tuple(x.shape[:2]) + (-1,)  # each max is gathered from its flattened plane
    values = x.reshape(flat).gather(2, indices.reshape(flat)).reshape(indices.shape)
    values = apply(ops.shown_as, values, f"FractionalMaxPool{spatial}DBackward0")
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def fractional_max_pool2d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None) -> Any:
    """Fractional max pooling of ``(N, C, H, W)`` input to ``output_size`` (or
    ``output_ratio`` of the input's size), windows of ``kernel_size`` placed pseudo-randomly
    (``_random_samples``, (N, C, 2) in [0, 1): PyTorch's placement exactly).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=pargraph.zeros(1, 1, 2))
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices,
                                _random_samples, 2)


def fractional_max_pool3d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None) -> Any:
    """Fractional max pooling of ``(N, C, D, H, W)`` input (see
    :func:`fractional_max_pool2d`; ``_random_samples`` (N, C, 3)).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.arange(27.0).reshape(1, 1, 3, 3, 3)
    >>> F.fractional_max_pool3d(x, 2, output_size=1).item()
    26.0
    """
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices,
                                _random_samples, 3)


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = True,
                                       _random_samples: Any = None) -> Any:
    """:func:`fractional_max_pool2d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.fractional_max_pool2d_with_indices(x, 2, output_size=1)[1].item()
    15
    """
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio,
                                 return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = True,
                                       _random_samples: Any = None) -> Any:
    """:func:`fractional_max_pool3d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x = pargraph.arange(27.0).reshape(1, 1, 3, 3, 3)
    >>> F.fractional_max_pool3d_with_indices(x, 2, output_size=1)[1].item()
    26
    """
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio,
                                 return_indices, _random_samples)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to a given output length (PyTorch's adaptive windows); with
    ``return_indices`` also each maximum's position in its input row.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_max_pool1d(pargraph.tensor([[[1.0, 3.0, 2.0, 0.0, 5.0]]]), 2).tolist()
    [[[3.0, 5.0]]]
    """
    return _adaptive_max_pool(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to a given output size (``None`` keeps a dimension's size); with
    ``return_indices`` also each maximum's flat position in its input plane.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_max_pool2d(pargraph.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
    [[[[15.0]]]]
    """
    return _adaptive_max_pool(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of ``(N, C, D, H, W)`` input to a given output size.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_max_pool3d(pargraph.arange(8.0).reshape(1, 1, 2, 2, 2), 1).tolist()
    [[[[[7.0]]]]]
    """
    return _adaptive_max_pool(input, output_size, return_indices, 3, "adaptive_max_pool3d")


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> Any:
    """:func:`adaptive_max_pool1d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_max_pool1d_with_indices(pargraph.tensor([[[1.0, 3.0, 2.0]]]), 1)[1].tolist()
    [[[1]]]
    """
    return adaptive_max_pool1d(input, output_size, return_indices)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> Any:
    """:func:`adaptive_max_pool2d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_max_pool2d_with_indices(pargraph.eye(2).reshape(1, 1, 2, 2), 1)[1].tolist()
    [[[[0]]]]
    """
    return adaptive_max_pool2d(input, output_size, return_indices)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> Any:
    """:func:`adaptive_max_pool3d` with its indices.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.adaptive_max_pool3d_with_indices(pargraph.ones(1, 1, 2, 2, 2), 1)[1].tolist()
    [[[[[0]]]]]
    """
    return adaptive_max_pool3d(input, output_size, return_indices)


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dimensions: ``pad`` lists (before, after) counts from the
    last dimension backwards, as in PyTorch. ``mode`` is ``"constant"`` (negative counts crop),
    ``"reflect"``, ``"replicate"`` or ``"circular"``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.pad(pargraph.tensor([[1.0, 2.0]]), (1, 2)).tolist()
    [[0.0, 1.0, 2.0, 0.0, 0.0]]
    >>> F.pad(pargraph.tensor([[[1.0, 2.0, 3.0]]]), (2, 1), mode="reflect").tolist()
    [[[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]]
    """
    input = as_tensor(input)
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise RuntimeError(f"pad: the padding length must be even and at most twice the "
                           f"number of dimensions ({input.ndim}), got {len(pad)}")
    pairs = [(0, 0)] * (input.ndim - len(pad) // 2) + [
        (pad[2 * k], pad[2 * k + 1]) for k in reversed(range(len(pad) // 2))]
    if mode == "constant":
        _check_crops(input, pairs)
        return apply(ops.constant_pad, input, pads=tuple(pairs),
                     value=0.0 if value is None else value)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: mode={mode!r} is not supported (expected 'constant', "
                                  "'reflect', 'replicate' or 'circular')")
    if value:
        raise RuntimeError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if input.ndim not in (len(pad) // 2 + 1, len(pad) // 2 + 2):
        raise NotImplementedError(
            f"pad: padding size {len(pad)} is not supported for {input.ndim}D input tensor "
            "(non-constant padding takes 2 values for a 2D or 3D input, 4 for 3D or 4D, 6 for "
            "4D or 5D)")
    if mode == "circular":
        _check_crops(input, pairs)
    out = input
    for dim, (lo, hi) in enumerate(pairs):
        if lo or hi:
            picks = _pad_picks(input.shape[dim], lo, hi, mode, dim)
            if mode != "circular" and len(pad) == 2 and len(picks) < 1:
                raise RuntimeError(f"pad: input (W: {input.shape[dim]}) is too small. "
                                   f"Calculated output W: {len(picks)}")
            out = out[(slice(None),) * dim + (picks,)]
    names = {"reflect": "ReflectionPad", "replicate": "ReplicationPad", "circular": "CircularPad"}
    spatial = len(pad) // 2
    return apply(ops.shown_as, out, f"{names[mode]}{spatial}DBackward0", input)


def _check_crops(input: Tensor, pairs: list) -> None:
    """Constant and circular padding crop the input first: no more than it has."""
    for dim, (lo, hi) in enumerate(pairs):
        if max(-lo, 0) + max(-hi, 0) > input.shape[dim]:
            raise RuntimeError(f"pad: padding ({lo}, {hi}) of dimension {dim} crops more than "
                               f"its size {input.shape[dim]}")


def _pad_picks(size: int, lo: int, hi: int, mode: str, dim: int) -> np.ndarray:
    """The input positions of a padded dimension's elements: position ``j - lo`` of the
    output's ``j``, brought inside ``[0, size)`` as ``mode`` does. A negative count crops."""
    if mode == "reflect" and max(lo, hi) >= size:
        raise RuntimeError(f"pad: padding ({lo}, {hi}) of dimension {dim} should be less than "
                           f"its size {size} for mode 'reflect'")
    if size + lo + hi < 0:
        raise RuntimeError(f"pad: padding ({lo}, {hi}) of dimension {dim} leaves a negative "
                           f"size ({size + lo + hi})")
    if mode == "circular":  # the cropped input wraps around, at most once
        first, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
        if max(lo, hi) > kept:
            raise RuntimeError(f"pad: padding ({lo}, {hi}) of dimension {dim} wraps around "
                               f"more than once (size {kept} after cropping)")
        return first + np.arange(-max(lo, 0), kept + max(hi, 0)) % max(kept, 1)
    if size == 0 and (lo > 0 or hi > 0):
        raise RuntimeError(f"pad: cannot pad dimension {dim} of size 0 in mode {mode!r}")
    at = np.arange(-lo, size + hi)
    if mode == "replicate":
        return np.clip(at, 0, size - 1)
    period = 2 * (size - 1)
    at = at % period if period else np.zeros_like(at)
    return np.where(at >= size, period - at, at)


# --- transposed convolution -----------------------------------------------------------------

def _conv_transpose(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
                    padding: Any, output_padding: Any, groups: int, dilation: Any,
                    spatial: int, op: str) -> Tensor:
    """The transpose of convolution (the gradient of ``conv`` with respect to its input):
    ``weight`` is ``(in_channels, out_channels / groups, kernel...)``."""
    input, weight = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(input, spatial, op)
    stride, dilation = (_tuple(v, spatial, name, op) for v, name in
                        ((stride, "stride"), (dilation, "dilation")))
    padding = _tuple(padding, spatial, "padding", op)
    output_padding = _tuple(output_padding, spatial, "output_padding", op)
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation) or groups < 1:
        raise RuntimeError(f"{op}: stride, dilation and groups must be positive, got "
                           f"stride={stride}, dilation={dilation}, groups={groups}")
    if weight.ndim != spatial + 2:
        raise RuntimeError(f"{op}: expected a {spatial + 2}-D weight (in_channels, "
                           f"out_channels / groups, kernel), got size {list(weight.shape)}")
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"{op}: Given transposed=1, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {weight.shape[0]} channels, "
                           f"but got {x.shape[1]} channels instead")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"{op}: output padding must be smaller than either stride or "
                           f"dilation, but got output_padding={output_padding}, "
                           f"stride={stride}, dilation={dilation}")
    kernel = weight.shape[2:]
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in
                 zip(x.shape[2:], stride, padding, dilation, kernel, output_padding))
    if any(n < 1 for n in size):
        raise RuntimeError(f"{op}: the output size {size} is too small for input of shape "
                           f"{tuple(x.shape)}")
    out = apply(convolution.conv_input_grad, x, weight,
                input_shape=(x.shape[0], weight.shape[1] * groups) + size, stride=stride,
                padding=tuple((p, p) for p in padding), dilation=dilation, groups=groups)
    if bias is not None:
        out = out + as_tensor(bias).reshape(-1, *([1] * spatial))
    return out.squeeze(0) if unbatched else out


@amp.autocasts("lower")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """1-d transposed convolution ("deconvolution") over ``(N, C, L)`` or ``(C, L)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv_transpose1d(pargraph.ones(1, 1, 3), pargraph.ones(1, 1, 2)).tolist()
    [[[1.0, 2.0, 2.0, 1.0]]]
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1, "conv_transpose1d")


@amp.autocasts("lower")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """2-d transposed convolution over ``(N, C, H, W)`` or ``(C, H, W)`` input (DCGAN's
    generator).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv_transpose2d(pargraph.ones(1, 4, 3, 3), pargraph.ones(4, 2, 4, 4), stride=2,
    ...                    padding=1).shape
    pargraph.Size([1, 2, 6, 6])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2, "conv_transpose2d")


@amp.autocasts("lower")
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """3-d transposed convolution over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.conv_transpose3d(pargraph.ones(1, 4, 2, 2, 2), pargraph.ones(4, 2, 2, 2, 2),
    ...                    stride=2).shape
    pargraph.Size([1, 2, 4, 4, 4])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 3, "conv_transpose3d")


# --- pixel shuffle and interpolation --------------------------------------------------------

def _images_and_factor(input: Tensor, factor: int, op: str, name: str) -> tuple[Tensor, int]:
    """``(*, C, H, W)`` input and a positive factor, checked as PyTorch's pixel shuffles
    check them."""
    input, r = as_tensor(input), int(factor)
    if input.ndim < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input "
                           f"with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"{op} expects a positive {name}, but got {r}")
    return input, r


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C r^2, H, W)`` to ``(*, C, H r, W r)``: sub-pixel convolution's rearrangement.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.pixel_shuffle(pargraph.ones(1, 8, 2, 3), 2).shape
    pargraph.Size([1, 2, 4, 6])
    """
    input, r = _images_and_factor(input, upscale_factor, "pixel_shuffle", "upscale_factor")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H r, W r)`` to ``(*, C r^2, H, W)``: the inverse of :func:`pixel_shuffle`.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.pixel_unshuffle(pargraph.ones(1, 2, 4, 6), 2).shape
    pargraph.Size([1, 8, 2, 3])
    """
    input, r = _images_and_factor(input, downscale_factor, "pixel_unshuffle",
                                  "downscale_factor")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        which, size = ("height", h) if h % r else ("width", w)
        raise RuntimeError(f"pixel_unshuffle expects {which} to be divisible by "
                           f"downscale_factor, but input.size({-2 if which == 'height' else -1})"
                           f"={size} is not divisible by {r}")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


_INTERPOLATE_MODES = {"nearest": 0, "nearest-exact": 0, "linear": 1, "bilinear": 2,
                      "trilinear": 3, "bicubic": 2, "area": 0}


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resample the spatial dimensions of ``(N, C, ...)`` input to ``size`` or by
    ``scale_factor``: ``nearest``, ``nearest-exact``, ``linear`` (1-d), ``bilinear`` (2-d),
    ``bicubic`` (2-d, PyTorch's cubic convolution, A = -0.75), ``trilinear`` (3-d), with
    PyTorch's source coordinates (``align_corners``), and ``area`` (adaptive average pooling).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.interpolate(pargraph.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    >>> F.interpolate(pargraph.tensor([[[1.0, 2.0]]]), size=4, mode="linear").tolist()
    [[[1.0, 1.25, 1.75, 2.0]]]
    """
    input = as_tensor(input)
    spatial = input.ndim - 2
    if mode not in _INTERPOLATE_MODES:
        raise ValueError(f"interpolate: unsupported mode {mode!r}")
    if antialias:
        raise NotImplementedError(f"interpolate: mode={mode!r} with antialias is not "
                                  "supported")
    linear = _INTERPOLATE_MODES[mode]
    if linear and spatial != linear:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{linear + 2}D input")
    if spatial < 1:
        raise ValueError(f"interpolate: expected at least 3-D input (N, C, ...), got "
                         f"{input.ndim}-D")
    if not linear and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    sizes = input.shape[2:]
    if size is not None:
        out = _tuple(size, spatial, "size", "interpolate")
        scales = [None] * spatial
    else:
        factors = (scale_factor,) * spatial if isinstance(scale_factor, (int, float)) \
            else tuple(scale_factor)
        if len(factors) != spatial:
            raise ValueError(f"Input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(sizes)} and scale_factor of shape {list(factors)}.")
        out = tuple(int(math.floor(n * f)) for n, f in zip(sizes, factors))
        scales = [None if recompute_scale_factor else 1.0 / f for f in factors]
    if mode == "area":
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[spatial - 1]
        return pool(input, out)
    if linear and input.dtype.kind in "iub":
        if input.dtype != np.uint8 or mode not in ("bilinear", "bicubic"):
            raise NotImplementedError(f'"upsample_{mode}" not implemented for '
                                      f"'{ops.torch_name(input.dtype)}'")
        return _resample_uint8(input, out, scales, mode, bool(align_corners))
    x = input
    for axis, (n, m, scale) in enumerate(zip(sizes, out, scales)):
        dim = axis + 2
        if mode == "bicubic":
            sources, weights = _cubic_sources(n, m, scale, bool(align_corners))
            shape = [1] * x.ndim
            shape[dim] = m
            parts = [x.index_select(dim, as_tensor(sources[:, k])) *
                     as_tensor(weights[:, k].astype(input.dtype)).reshape(*shape)
                     for k in range(4)]
            x = parts[0] + parts[1] + parts[2] + parts[3]
        elif linear:
            low, high, weight = _linear_sources(n, m, scale, bool(align_corners))
            a = x.index_select(dim, as_tensor(low))
            b = x.index_select(dim, as_tensor(high))
            shape = [1] * x.ndim
            shape[dim] = m
            w = as_tensor(weight.astype(input.dtype)).reshape(*shape)
            x = a + (b - a) * w
        else:
            x = x.index_select(dim, as_tensor(_nearest_sources(n, m, scale, mode)))
    return x


def _resample_uint8(input: Tensor, out: tuple, scales: list, mode: str,
                    align_corners: bool) -> Tensor:
    """Bilinear or bicubic resampling of a uint8 image as PyTorch's uint8 kernel (Pillow's
    algorithm): the last dimension, then the one before, each a product with integer weights
    of ``precision`` bits, rounded, shifted back and clamped to [0, 255] between the passes."""
    x = input.to(np.int64)
    for dim in (3, 2):
        n, m = input.shape[dim], out[dim - 2]
        if n == m and scales[dim - 2] in (None, 1.0):
            continue
        weights, precision = _uint8_weights(n, m, scales[dim - 2], mode, align_corners)
        moved = x.transpose(dim, -1) @ as_tensor(weights)
        moved = ((moved + (1 << (precision - 1))) >> precision).clamp(0, 255)
        x = moved.transpose(dim, -1)
    return x.to(np.uint8)


def _uint8_weights(n: int, m: int, scale: float | None, mode: str,
                   align_corners: bool) -> tuple[np.ndarray, int]:
    """The ``(n, m)`` integer weights of a uint8 resampling pass and their precision, as
    PyTorch's kernel rounds them: bilinear taps over the input each output reaches
    (normalized), or bicubic taps at clamped positions as in float."""
    weights = np.zeros((n, m))
    if mode == "bicubic":
        sources, taps = _cubic_sources(n, m, scale, align_corners)
        np.add.at(weights, (sources, np.arange(m)[:, None]), taps)
    else:
        if align_corners:
            step = (n - 1) / (m - 1) if m > 1 else 0.0
        else:
            step = scale if scale is not None else n / m
        delta = 0.5 if align_corners else 0.0
        for i in range(m):
            center = step * (i + 0.5 - delta)
            low = max(int(center - 1.0 + 0.5 + delta), 0)
            high = min(int(center + 1.0 + 0.5 + delta), n)
            w = np.maximum(1.0 - np.abs(np.arange(low, high) - center - delta + 0.5), 0.0)
            total = w.sum()
            weights[low:high, i] = w / total if total else w
    biggest = weights.max()
    precision = next((p for p in range(22)
                      if int(0.5 + biggest * (1 << (p + 1))) >= 1 << 15), 22)
    scaled = weights * (1 << precision)
    return np.trunc(scaled + np.where(scaled < 0, -0.5, 0.5)).astype(np.int64), precision


def _nearest_sources(n: int, m: int, scale: float | None, mode: str) -> np.ndarray:
    ratio = scale if scale is not None else n / m
    offset = 0.5 if mode == "nearest-exact" else 0.0
    return np.minimum(np.floor((np.arange(m) + offset) * ratio).astype(np.int64), n - 1)


def _source_positions(n: int, m: int, scale: float | None,
                      align_corners: bool) -> np.ndarray:
    """Where each of ``m`` output positions samples ``n`` input positions, as PyTorch's
    ``area_pixel_compute_source_index`` (``scale``: the given 1 / scale_factor)."""
    positions = np.arange(m, dtype=np.float64)
    if align_corners:
        return positions * ((n - 1) / (m - 1) if m > 1 else 0.0)
    return (positions + 0.5) * (scale if scale is not None else n / m) - 0.5


def _cubic_sources(n: int, m: int, scale: float | None,
                   align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each output position's four source positions (clamped to the input) and their
    weights: PyTorch's cubic convolution (A = -0.75), at unclamped source positions."""
    source = _source_positions(n, m, scale, align_corners)
    floor = np.floor(source)
    t = source - floor
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)
    sources = np.clip(floor.astype(np.int64)[:, None] + np.arange(-1, 3), 0, n - 1)
    return sources, weights


def _linear_sources(n: int, m: int, scale: float | None,
                    align_corners: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each output position's two source positions and the second one's weight."""
    source = np.maximum(_source_positions(n, m, scale, align_corners), 0.0)
    low = np.minimum(np.floor(source).astype(np.int64), n - 1)
    high = np.minimum(low + 1, n - 1)
    return low, high, source - low


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """``interpolate`` (PyTorch's older name)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """:func:`interpolate` in ``nearest`` mode (PyTorch's older name).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.upsample_nearest(pargraph.ones(1, 1, 2), scale_factor=2).shape
    pargraph.Size([1, 1, 4])
    """
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """:func:`interpolate` in ``bilinear`` mode with ``align_corners=True`` (PyTorch's older
    name, and its corners).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.upsample_bilinear(pargraph.ones(1, 1, 2, 2), scale_factor=2).shape
    pargraph.Size([1, 1, 4, 4])
    """
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _block_args(kernel_size: Any, dilation: Any, padding: Any, stride: Any,
                op: str) -> dict:
    return {"kernel": _tuple(kernel_size, 2, "kernel_size", op),
            "dilation": _tuple(dilation, 2, "dilation", op),
            "padding": tuple((p, p) for p in _tuple(padding, 2, "padding", op)),
            "stride": _tuple(stride, 2, "stride", op)}


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """Every sliding block of ``(N, C, H, W)`` (or ``(C, H, W)``) input as a column:
    ``(N, C * kh * kw, blocks)`` (im2col).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.unfold(pargraph.arange(16.0).reshape(1, 1, 4, 4), 2, stride=2)[0, :, 0].tolist()
    [0.0, 1.0, 4.0, 5.0]
    """
    input = as_tensor(input)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"unfold: Expected 3D or 4D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    out = apply(convolution.unfold, x, **_block_args(kernel_size, dilation, padding, stride,
                                                       "unfold"))
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1,
         padding: Any = 0, stride: Any = 1) -> Tensor:
    """Columns ``(N, C * kh * kw, blocks)`` (or unbatched) summed back into ``(N, C,
    *output_size)`` where their blocks overlap (col2im; :func:`unfold`'s adjoint).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.fold(pargraph.ones(1, 4, 4), (3, 3), 2)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    input = as_tensor(input)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"fold: Expected 2D or 3D (batch mode) input tensor with possibly "
                           f"0 batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.ndim == 3 else input.unsqueeze(0)
    out = apply(convolution.fold, x, output_size=_tuple(output_size, 2, "output_size", "fold"),
                **_block_args(kernel_size, dilation, padding, stride, "fold"))
    return out if input.ndim == 3 else out.squeeze(0)


_ALIGN_CORNERS_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details.")


def _align_corners(align_corners: bool | None) -> bool:
    """``None`` is False, with PyTorch's warning."""
    if align_corners is None:
        import warnings

        warnings.warn(_ALIGN_CORNERS_WARNING, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """The values of ``input`` (N, C, H, W) at the positions ``grid`` (N, Ho, Wo, 2) gives,
    as x and y in [-1, 1] (``align_corners``: -1 and 1 are the corner pixels' centres, else
    their outer edges), ``bilinear`` or ``nearest``; positions outside read zeros, the border
    or a reflection (``padding_mode``). Differentiable with respect to ``input`` and ``grid``
    (a spatial transformer's). Volumes (5-D input) and ``bicubic`` raise
    ``NotImplementedError``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> image = pargraph.arange(4.0).reshape(1, 1, 2, 2)
    >>> F.grid_sample(image, pargraph.zeros(1, 1, 1, 2), align_corners=True).item()
    1.5
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode='bicubic' is not supported yet "
                                  "(bilinear and nearest are)")
    return apply(ops.grid_sample, as_tensor(input), as_tensor(grid), mode=mode,
                 padding_mode=padding_mode, align_corners=_align_corners(align_corners))


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2), or (N, D, H, W, 3) for volumes, of the affine maps
    ``theta`` (N, 2, 3) or (N, 3, 4) over an output of ``size``, for :func:`grid_sample`;
    differentiable with respect to ``theta``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> identity = pargraph.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> F.affine_grid(identity, (1, 1, 2, 2), align_corners=True)[0, 0].tolist()
    [[-1.0, -1.0], [1.0, -1.0]]
    """
    theta = as_tensor(theta)
    size = [int(n) for n in size]
    align = _align_corners(align_corners)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {tuple(size)}.")
    spatial = size[2:]
    rows = len(spatial)
    if align and min(spatial) == 1:
        import warnings

        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids "
                      "when align_corners=True. This is not an intended use case of affine_grid. "
                      "See the documentation of affine_grid for details.", UserWarning,
                      stacklevel=2)
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (rows, rows + 1):
        raise ValueError(f"Expected a batch of {rows}D affine matrices of shape Nx{rows}x"
                         f"{rows + 1} for size {tuple(size)}. Got {theta.shape}.")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{size[0]}, {rows + 1}] but got: [{theta.shape[0]}, {rows + 1}].")
    axes = []
    for n in reversed(spatial):  # x (the last dimension) first
        line = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        axes.append(line if align else line * (n - 1) / n)
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # each of the spatial shape
    base = np.stack([*reversed(mesh), np.ones(tuple(spatial))], -1)
    base = as_tensor(base.reshape(-1, rows + 1).astype(theta.dtype))
    grid = base @ theta.transpose(1, 2)  # (N, points, rows)
    return grid.reshape(size[0], *spatial, rows)
