"""``torch.nn.functional``'s pooling: max (with indices and unpooling), average, power-average,
adaptive and fractional."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor, rand
from pargraph.nn.functional.conv import _batched, _tuple
from pargraph.ops import convolution


def _winners(x: Tensor, indices: Tensor) -> Tensor:
    """Each window's maximum, taken from its flattened input plane at the pooling's own
    indices (in range by construction, so unchecked; sizes spelled out: -1 is refused when a
    batch is empty)."""
    planes = tuple(x.shape[:2])
    return apply(ops.take_along_dim, x.reshape(planes + (math.prod(x.shape[2:]),)),
                 indices.reshape(planes + (math.prod(indices.shape[2:]),)), dim=2
                 ).reshape(indices.shape)


def _pad_error(padding: tuple, kernel: tuple) -> str:
    """PyTorch's message for a max pooling's padding over half its kernel, per dimension."""
    if len(kernel) == 1:
        return (f"max_pool1d() padding should be at most half of kernel size, but got "
                f"padding={padding[0]} and kernel_size={kernel[0]}")
    if len(kernel) == 2:
        return (f"pad should be smaller than or equal to half of kernel size, but got "
                f"padW = {padding[1]}, padH = {padding[0]}, kW = {kernel[1]}, kH = {kernel[0]}")
    return (f"pad should be smaller than or equal to half of kernel size, but got kT: "
            f"{kernel[0]} kW: {kernel[2]} kH: {kernel[1]} padT: {padding[0]} padW: "
            f"{padding[2]} padH: {padding[1]}")


def _max_pool(input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
              ceil_mode: bool, return_indices: bool, spatial: int, op: str) -> Any:
    input = as_tensor(input)
    x, unbatched = _batched(input, spatial, op)
    kernel = _tuple(kernel_size, spatial, "kernel_size", op)
    stride = kernel if stride is None or stride == [] else _tuple(stride, spatial, "stride", op)
    dilation = _tuple(dilation, spatial, "dilation", op)
    padding = _tuple(padding, spatial, "padding", op)
    if spatial > 1:  # PyTorch checks the dilated kernel first, then (as 1-d) the kernel
        for p, k, d in zip(padding, kernel, dilation):
            if 2 * p > (k - 1) * d + 1:
                raise RuntimeError(f"pad should be at most half of effective kernel size, "
                                   f"but got pad={p}, kernel_size={k} and dilation={d}")
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise RuntimeError(_pad_error(padding, kernel))
    pads = convolution.pool_padding(tuple(x.shape), kernel, stride, padding, dilation,
                                    ceil_mode)
    indices = apply(convolution.pool_argmax, x, kernel=kernel, stride=stride, padding=pads,
                    dilation=dilation)
    values = _winners(x, indices)
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
    checked = apply(
        ops.checked_index, indices._node, volume, "RuntimeError",
        f"Found an invalid max index: {{index}} (output volumes are of size "
        f"{'x'.join(str(n) for n in size)})", op)
    zeros = apply(ops.constant, np.zeros((batch, channels, volume), x.dtype))
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
    values = _winners(x, indices)
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
    values = _winners(x, indices)
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
