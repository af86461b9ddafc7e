"""Convolution and pooling primitives, registered in the op registry like every other op.

A convolution is im2col and one matrix product: the padded input is viewed as windows
(``numpy.lib.stride_tricks.sliding_window_view``, no copy), the windows are gathered into a
``(groups, positions, channels x kernel)`` matrix, and a batched ``matmul`` per group does the
arithmetic in BLAS. Its two gradients are primitives of their own, closed under
differentiation: with ``T(x, w, g) = <conv(x, w), g>`` the input gradient is ``dT/dx`` (a
col2im: one strided add per kernel position) and the weight gradient ``dT/dw`` (one matmul),
and the vjps of each are again one of the three, so second derivatives come for free.

At stride 1 (float32 and float64, one group), no columns are built: on the channels-last
padded input flattened to rows, kernel position ``k`` reads the rows shifted by a fixed offset,
so each of the three ops is one BLAS product per kernel position on a contiguous slice, the
forward and input gradient accumulating in place (the output is computed on the whole padded
grid and cropped). This is the "shifted products" form of a convolution; it skips im2col's copy
of the input ``prod(kernel)`` times.

Max pooling is an ``argmax`` over the same windows (a primitive without gradient) and a gather
of the winners (``take_along_dim``, whose vjp scatters back); its indices are PyTorch's
(positions in the flattened, unpadded input plane). Average pooling is a convolution with a
constant kernel. All work for any number of spatial dimensions; ``nn.functional`` exposes the
1-d and 2-d forms.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from pargraph.graph import Node
from pargraph.ops.core import ShapeError, is_floating, primitive, result_dtype
from pargraph.ops.gemm import gemm
from pargraph.ops.intra_op import intra_op
from pargraph.ops.kernels import kernels
from pargraph.ops.shapes import index, sum_


def out_size(size: int, kernel: int, stride: int, pad: tuple[int, int], dilation: int) -> int:
    """Number of window positions along one dimension (PyTorch's floor formula)."""
    return (size + pad[0] + pad[1] - dilation * (kernel - 1) - 1) // stride + 1


def _geometry(shape: tuple, kernel: tuple, stride: tuple, padding: tuple,
              dilation: tuple) -> tuple[int, ...]:
    return tuple(out_size(n, k, s, p, d)
                 for n, k, s, p, d in zip(shape[2:], kernel, stride, padding, dilation))


def _channels_last(x: np.ndarray, padding: tuple) -> np.ndarray:
    """``(N, C, *S)`` as a padded, contiguous ``(N, *S_padded, C)``: every window position
    then reads whole channel rows."""
    moved = np.moveaxis(np.asarray(x), 1, -1)
    if any(p != (0, 0) for p in padding):
        return np.pad(moved, ((0, 0),) + tuple(padding) + ((0, 0),))
    return np.ascontiguousarray(moved)


def _placements(kernel: tuple, stride: tuple, dilation: tuple, out: tuple):
    """For each kernel position, the slices of a channels-last padded input it reads."""
    for at in itertools.product(*(range(k) for k in kernel)):
        yield (slice(None),) + tuple(slice(k * d, k * d + (o - 1) * s + 1, s)
                                     for k, d, o, s in zip(at, dilation, out, stride))


def _columns(padded: np.ndarray, channels: slice, kernel: tuple, stride: tuple,
             dilation: tuple, out: tuple) -> np.ndarray:
    """im2col of one channel group: ``(N * positions, kernel_size * channels)``: the windows
    as one strided view ``(N, *out, *kernel, channels)`` of the channels-last padded input,
    copied once, by the reshape."""
    group = padded[..., channels]
    n, spatial = group.shape[0], len(out)
    steps = group.strides
    windows = np.lib.stride_tricks.as_strided(
        group, (n, *out, *kernel, group.shape[-1]),
        (steps[0], *(steps[1 + i] * stride[i] for i in range(spatial)),
         *(steps[1 + i] * dilation[i] for i in range(spatial)), steps[-1]), writeable=False)
    return windows.reshape(n * math.prod(out), math.prod(kernel) * group.shape[-1])


def _kernel_rows(w: np.ndarray) -> np.ndarray:
    """``(O, C, *K)`` as ``(O, kernel_size * C)``, in the columns' order."""
    return np.moveaxis(w, 1, -1).reshape(w.shape[0], -1)


def _groups(groups: int, channels: int, outputs: int):
    """Each group's input channels and output channels, as slices."""
    c, o = channels // groups, outputs // groups
    return [(slice(k * c, (k + 1) * c), slice(k * o, (k + 1) * o)) for k in range(groups)]


# --- shifted products (stride 1) ---------------------------------------------------------------

#: How much larger than the output the padded grid may be for the forward and weight gradient
#: to take the shifted form (its products run over the whole grid); the input gradient takes
#: it at any size, as it replaces a col2im of ``prod(kernel)`` strided adds.
OVERCOMPUTE = 1.3


def _shifted(dtype: np.dtype, shape: tuple, kernel: tuple, stride: tuple, padding: tuple,
             dilation: tuple, groups: int, anywhere: bool = False) -> bool:
    """Whether a convolution of an input of ``shape`` takes the shifted-products form."""
    if groups != 1 or any(s != 1 for s in stride) or dtype not in (np.float32, np.float64):
        return False
    padded = math.prod(n + lo + hi for n, (lo, hi) in zip(shape[2:], padding))
    out = math.prod(_geometry(shape, kernel, stride, padding, dilation))
    return anywhere or padded <= OVERCOMPUTE * out


def _pointwise(kernel: tuple, stride: tuple, padding: tuple, groups: int) -> bool:
    """Whether a convolution is one matrix product per sample (a 1x1 kernel, stride 1, no
    padding): it then needs no layout change at all."""
    return groups == 1 and all(k == 1 for k in kernel) and all(s == 1 for s in stride) and \
        all(p == (0, 0) for p in padding)


def _flipped(out: tuple, shape: tuple, kernel: tuple, stride: tuple, padding: tuple,
             dilation: tuple, groups: int) -> bool:
    """Whether an input gradient runs as the forward convolution of the output gradient with
    the flipped kernel: where the shifted form would compute over a padded grid much larger
    than the input, and the columns it copies (outputs x positions) are fewer than twice the
    shifted form's accumulated rows (channels x padded positions; with few input channels the
    shifted products are cheap)."""
    if _full_padding(out, shape, kernel, stride, padding, dilation, groups) is None:
        return False
    padded = math.prod(n + lo + hi for n, (lo, hi) in zip(shape[2:], padding))
    return padded > OVERCOMPUTE * math.prod(out[2:]) and \
        out[1] * math.prod(out[2:]) <= 2 * shape[1] * padded


def _full_padding(out: tuple, shape: tuple, kernel: tuple, stride: tuple, padding: tuple,
                  dilation: tuple, groups: int) -> tuple | None:
    """The padding under which a stride-1 convolution of an output gradient of shape ``out``
    with the flipped kernel gives the input gradient of ``shape``: the kernel's reach less the
    forward's padding before, and after whatever makes the input's size (more than the reach
    less the padding where a transposed convolution's ``output_padding`` grew the input).
    None where that form does not apply (strides, groups, a padding beyond the reach)."""
    if groups != 1 or any(s != 1 for s in stride):
        return None
    full = tuple((d * (k - 1) - lo, n - o + lo)
                 for k, (lo, _), d, n, o in zip(kernel, padding, dilation, shape[2:], out[2:]))
    return None if any(lo < 0 or hi < 0 for lo, hi in full) else full


class _Grid:
    """The channels-last padded input of a stride-1 convolution flattened to rows
    ``(N * prod(padded), channels)``: output position ``r`` of the padded grid reads row
    ``r + offsets[k]`` at kernel position ``k``. ``reach`` zero rows after the grid let every
    shifted slice have the grid's length."""

    def __init__(self, shape: tuple, kernel: tuple, padding: tuple, dilation: tuple) -> None:
        self.n, self.spatial = shape[0], tuple(shape[2:])
        self.padded = tuple(s + lo + hi for s, (lo, hi) in zip(self.spatial, padding))
        self.rows = self.n * math.prod(self.padded)
        steps = [math.prod(self.padded[i + 1:]) for i in range(len(kernel))]
        self.kernel_positions = list(itertools.product(*(range(k) for k in kernel)))
        self.offsets = [sum(a * d * step for a, d, step in zip(at, dilation, steps))
                        for at in self.kernel_positions]
        self.reach = max(self.offsets)
        self.inside = tuple(slice(lo, lo + s) for s, (lo, _) in zip(self.spatial, padding))

    def spread(self, x: np.ndarray, region: tuple) -> np.ndarray:
        """``x`` (N, C, *S) channels-last into zero rows ``(rows + reach, C)`` at ``region``
        of the padded grid."""
        flat = np.zeros((self.rows + self.reach, x.shape[1]), x.dtype)
        grid = flat[:self.rows].reshape((self.n,) + self.padded + (x.shape[1],))
        grid[(slice(None),) + region] = np.moveaxis(x, 1, -1)
        return flat

    def spread_first(self, x: np.ndarray, region: tuple) -> np.ndarray:
        """``x`` (N, C, *S) channels-first into a zero ``(C, rows)`` at ``region`` of the
        padded grid."""
        flat = np.zeros((x.shape[1], self.rows), x.dtype)
        grid = flat.reshape((x.shape[1], self.n) + self.padded)
        grid[(slice(None), slice(None)) + region] = np.moveaxis(x, 1, 0)
        return flat

    def gather(self, flat: np.ndarray, region: tuple, into: np.ndarray) -> None:
        """Rows ``(rows, C)`` of the grid, ``region`` of it copied into ``into`` (N, C, *S)."""
        grid = flat[:self.rows].reshape((self.n,) + self.padded + (flat.shape[1],))
        np.copyto(into, np.moveaxis(grid[(slice(None),) + region], -1, 1))

    def outputs(self, out: tuple) -> tuple:
        return tuple(slice(0, o) for o in out)


def _kernel_blocks(w: np.ndarray) -> np.ndarray:
    """``(O, C, *K)`` as one contiguous ``(O, C)`` block per kernel position."""
    return np.ascontiguousarray(np.moveaxis(w.reshape(w.shape[:2] + (-1,)), -1, 0))


def _shifted_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, padding: tuple,
                  dilation: tuple, into: np.ndarray) -> None:
    """conv at stride 1 into ``into`` (N, O, *out): the shifted input rows times each kernel
    position's (C, O) block, summed in place into the output rows ``(rows, O)``."""
    grid = _Grid(x.shape, w.shape[2:], padding, dilation)
    flat = grid.spread(x, grid.inside)
    result = np.empty((grid.rows, w.shape[0]), x.dtype)
    for k, (block, offset) in enumerate(zip(_kernel_blocks(w), grid.offsets)):
        gemm(flat[offset:offset + grid.rows], block.T, result, accumulate=k > 0)
    if b is not None:
        result += b
    grid.gather(result, grid.outputs(into.shape[2:]), into)


def _shifted_input_grad(g: np.ndarray, w: np.ndarray, padding: tuple, dilation: tuple,
                        into: np.ndarray) -> None:
    """conv_input_grad at stride 1 into ``into`` (N, C, *S): the output gradient's rows times
    each kernel position's block, added in place into the input rows that position read."""
    grid = _Grid(into.shape, w.shape[2:], padding, dilation)
    rows = grid.spread(g, grid.outputs(g.shape[2:]))[:grid.rows]
    grad = np.zeros((grid.rows + grid.reach, w.shape[1]), g.dtype)
    for block, offset in zip(_kernel_blocks(w), grid.offsets):
        gemm(rows, block, grad[offset:offset + grid.rows], accumulate=True)
    grid.gather(grad, grid.inside, into)


def _shifted_weight_grad(x: np.ndarray, g: np.ndarray, kernel: tuple, padding: tuple,
                         dilation: tuple) -> np.ndarray:
    """conv_weight_grad at stride 1: per kernel position, the output gradient's rows times
    the shifted input rows."""
    grid = _Grid(x.shape, kernel, padding, dilation)
    flat, rows = grid.spread(x, grid.inside), grid.spread_first(g, grid.outputs(g.shape[2:]))
    grad = np.empty((len(grid.offsets), g.shape[1], x.shape[1]), g.dtype)
    for k, offset in enumerate(grid.offsets):
        gemm(rows, flat[offset:offset + grid.rows], grad[k], accumulate=False)
    return np.ascontiguousarray(np.moveaxis(grad, 0, -1)).reshape(
        (g.shape[1], x.shape[1]) + tuple(kernel))


# --- convolution ----------------------------------------------------------------------------

def _conv_shape(x, w, b=None, *, stride, padding, dilation, groups):
    spatial = len(stride)
    if len(x.shape) != spatial + 2 or len(w.shape) != spatial + 2:
        raise ShapeError(f"expected a {spatial + 2}-D input (batch, channels, {spatial} spatial) "
                         f"and a {spatial + 2}-D weight, got input of shape {x.shape} and weight "
                         f"of shape {w.shape}")
    if x.shape[1] != w.shape[1] * groups:
        raise ShapeError(f"given groups={groups}, weight of size {list(w.shape)}, expected "
                         f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but got "
                         f"{x.shape[1]} channels instead")
    if w.shape[0] % groups:
        raise ShapeError(f"out_channels ({w.shape[0]}) must be divisible by groups ({groups})")
    if b is not None and b.shape != (w.shape[0],):
        raise ShapeError(f"bias of shape {b.shape} does not match {w.shape[0]} out_channels")
    mixed = {x.dtype, w.dtype} | ({b.dtype} if b is not None else set())
    if len(mixed) > 1:  # PyTorch does not promote in convolutions
        raise ShapeError(f"input and weight must have the same dtype, got "
                         f"{' and '.join(sorted(d.name for d in mixed))}")
    out = _geometry(x.shape, w.shape[2:], stride, padding, dilation)
    if any(o < 1 for o in out):
        raise ShapeError(f"calculated output size {out} is too small for input of shape "
                         f"{x.shape}, kernel {w.shape[2:]}, padding {padding}, dilation "
                         f"{dilation}")
    return (x.shape[0], w.shape[0]) + out, result_dtype(x, w)


def _seconds(out: tuple, weight: tuple) -> float:
    """One thread's time on a convolution op with output ``out`` and weight ``weight``: all
    three ops do 2 * outputs * (channels per group x kernel) flops."""
    return 5e-6 + 2 * math.prod(out) * math.prod(weight[1:]) / 15e9


def _conv_cost(node: Node) -> float:
    name = node.op.name
    out = node.shape if name == "conv" else (node.inputs[0] if name == "conv_input_grad"
                                             else node.inputs[1]).shape
    weight = node.shape if name == "conv_weight_grad" else node.inputs[1].shape
    return _seconds(out, weight)


@primitive("conv", _conv_shape, grad_name="ConvolutionBackward0", blas=True, cost=_conv_cost)
def conv(x, w, b=None, *, stride, padding, dilation, groups):
    """N-d cross-correlation (PyTorch's convolution): im2col and one matmul per group."""
    out = _geometry(x.shape, w.shape[2:], stride, padding, dilation)
    if not x.size or not w.size:  # no samples or no channels: sums over nothing (and bias)
        result = np.zeros((x.shape[0], w.shape[0]) + out, x.dtype)
        if b is not None:
            result += b.reshape((-1,) + (1,) * len(out))
        return result
    if _pointwise(w.shape[2:], stride, padding, groups):
        result = np.matmul(w.reshape(w.shape[:2]), x.reshape(x.shape[:2] + (-1,)))
        if b is not None:
            result += b.reshape((-1,) + (1,) * (result.ndim - 2))
        return result.reshape((x.shape[0], w.shape[0]) + out)
    if _shifted(x.dtype, x.shape, w.shape[2:], stride, padding, dilation, groups):
        result = np.empty((x.shape[0], w.shape[0]) + out, x.dtype)
        intra_op.run(lambda lo, hi: _shifted_conv(x[lo:hi], w, b, padding, dilation,
                                                  result[lo:hi]),
                     intra_op.parts(x.shape[0], _seconds(result.shape, w.shape)))
        return result
    if groups == 1:  # one product per part of the samples: columns times the kernel's rows
        result = np.empty((x.shape[0], w.shape[0]) + out, x.dtype)
        kernel_rows = _kernel_rows(w)

        def part(lo: int, hi: int) -> None:
            cols = _columns(_channels_last(x[lo:hi], padding), slice(0, x.shape[1]),
                            w.shape[2:], stride, dilation, out)
            rows = np.empty((cols.shape[0], w.shape[0]), x.dtype)
            gemm(cols, kernel_rows.T, rows, accumulate=False)
            if b is not None:
                rows += b
            np.copyto(result[lo:hi], np.moveaxis(rows.reshape((hi - lo,) + out + (-1,)), -1, 1))

        intra_op.run(part, intra_op.parts(x.shape[0], _seconds(result.shape, w.shape)))
        return result
    padded = _channels_last(x, padding)
    rows = np.empty((x.shape[0] * math.prod(out), w.shape[0]), dtype=x.dtype)
    for channels, outputs in _groups(groups, x.shape[1], w.shape[0]):
        cols = _columns(padded, channels, w.shape[2:], stride, dilation, out)
        rows[:, outputs] = cols @ _kernel_rows(w[outputs]).T
    if b is not None:
        rows += b
    return np.ascontiguousarray(np.moveaxis(rows.reshape((x.shape[0],) + out + (-1,)), -1, 1))


@primitive("conv_input_grad", blas=True, cost=_conv_cost,
           shape=lambda g, w, *, input_shape, **geometry: (input_shape, g.dtype))
def conv_input_grad(g, w, *, input_shape, stride, padding, dilation, groups):
    """d<conv(x, w), g>/dx: the output gradient's rows times the kernel, each kernel
    position's block added back where it was read (col2im)."""
    if not g.size or not w.size:
        return np.zeros(input_shape, g.dtype)
    if _pointwise(w.shape[2:], stride, padding, groups) and input_shape[2:] == g.shape[2:]:
        return np.matmul(w.reshape(w.shape[:2]).T, g.reshape(g.shape[:2] + (-1,))).reshape(
            input_shape)
    if _flipped(g.shape, input_shape, w.shape[2:], stride, padding, dilation, groups):
        return conv.forward(g, np.flip(w, tuple(range(2, w.ndim))).swapaxes(0, 1), None,
                            stride=stride, dilation=dilation, groups=1,
                            padding=_full_padding(g.shape, input_shape, w.shape[2:], stride,
                                                  padding, dilation, groups))
    if _shifted(g.dtype, input_shape, w.shape[2:], stride, padding, dilation, groups, True):
        result = np.empty(input_shape, g.dtype)
        intra_op.run(lambda lo, hi: _shifted_input_grad(g[lo:hi], w, padding, dilation,
                                                        result[lo:hi]),
                     intra_op.parts(g.shape[0], _seconds(g.shape, w.shape)))
        return result
    n, c = input_shape[:2]
    out, kernel = g.shape[2:], w.shape[2:]
    rows = np.moveaxis(g, 1, -1).reshape(-1, g.shape[1])
    padded = tuple(size + lo + hi for size, (lo, hi) in zip(input_shape[2:], padding))
    grad = np.zeros((n,) + padded + (c,), dtype=g.dtype)
    for channels, outputs in _groups(groups, c, w.shape[0]):
        cols = (rows[:, outputs] @ _kernel_rows(w[outputs])).reshape(
            (n,) + out + (math.prod(kernel), channels.stop - channels.start))
        for k, place in enumerate(_placements(kernel, stride, dilation, out)):
            grad[place + (channels,)] += cols[..., k, :]
    crop = tuple(slice(lo, lo + size) for size, (lo, _) in zip(input_shape[2:], padding))
    return np.ascontiguousarray(np.moveaxis(grad[(slice(None),) + crop], -1, 1))


@primitive("conv_weight_grad", blas=True, cost=_conv_cost,
           shape=lambda x, g, *, weight_shape, **geometry: (weight_shape, g.dtype))
def conv_weight_grad(x, g, *, weight_shape, stride, padding, dilation, groups):
    """d<conv(x, w), g>/dw: the output gradient's rows times the input's columns."""
    if not x.size or not g.size:
        return np.zeros(weight_shape, g.dtype)
    out, kernel = g.shape[2:], tuple(weight_shape[2:])
    if _pointwise(kernel, stride, padding, groups) and x.shape[2:] == g.shape[2:]:
        n, positions = x.shape[0], math.prod(out)
        return np.matmul(g.reshape(n, g.shape[1], positions),
                         x.reshape(n, x.shape[1], positions).transpose(0, 2, 1)).sum(0).reshape(
            weight_shape)
    if _shifted(g.dtype, x.shape, kernel, stride, padding, dilation, groups):
        parts = intra_op.run(lambda lo, hi: _shifted_weight_grad(x[lo:hi], g[lo:hi], kernel,
                                                                 padding, dilation),
                             intra_op.parts(x.shape[0], _seconds(g.shape, weight_shape)))
        return functools.reduce(np.add, parts)
    if groups == 1:  # one product per part of the samples: g's rows times the columns
        def part(lo: int, hi: int) -> np.ndarray:
            cols = _columns(_channels_last(x[lo:hi], padding), slice(0, x.shape[1]), kernel,
                            stride, dilation, out)
            rows = np.moveaxis(g[lo:hi], 1, -1).reshape(-1, g.shape[1])
            found = np.empty((g.shape[1], cols.shape[1]), g.dtype)
            gemm(rows.T, cols, found, accumulate=False)
            return found

        grad = functools.reduce(np.add, intra_op.run(part, intra_op.parts(
            x.shape[0], _seconds(g.shape, weight_shape))))
        return np.ascontiguousarray(np.moveaxis(
            grad.reshape((weight_shape[0],) + kernel + (weight_shape[1],)), -1, 1))
    padded = _channels_last(x, padding)
    grad = np.empty((weight_shape[0],) + kernel + (weight_shape[1],), dtype=g.dtype)
    rows = np.moveaxis(g, 1, -1).reshape(-1, g.shape[1])
    for channels, outputs in _groups(groups, x.shape[1], weight_shape[0]):
        cols = _columns(padded, channels, kernel, stride, dilation, out)
        grad[outputs] = (rows[:, outputs].T @ cols).reshape(grad[outputs].shape)
    return np.ascontiguousarray(np.moveaxis(grad, -1, 1))


conv.defvjp(
    lambda g, out, x, w, b=None, **a: conv_input_grad(g, w, input_shape=x.shape, **a),
    lambda g, out, x, w, b=None, **a: conv_weight_grad(x, g, weight_shape=w.shape, **a),
    lambda g, out, x, w, b=None, **a: sum_(g, dim=(0,) + tuple(range(2, len(g.shape)))),
)
def _cropped(y: Node, shape: tuple) -> Node:
    """``y`` cut to ``shape`` at its start: a transposed convolution's ``output_padding``
    makes its input larger than the forward convolution's geometry reaches."""
    if tuple(y.shape) == tuple(shape):
        return y
    return index(y, spec=tuple(slice(0, n) for n in shape))


conv_input_grad.defvjp(
    lambda h, out, g, w, input_shape, **a: _cropped(conv(h, w, **a), g.shape),
    lambda h, out, g, w, input_shape, **a: conv_weight_grad(h, g, weight_shape=w.shape, **a),
)
conv_weight_grad.defvjp(
    lambda h, out, x, g, weight_shape, **a: conv_input_grad(g, h, input_shape=x.shape, **a),
    lambda h, out, x, g, weight_shape, **a: _cropped(conv(x, h, **a), g.shape),
)


# --- pooling --------------------------------------------------------------------------------

def pool_padding(shape: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
                 ceil_mode: bool) -> tuple[tuple[int, int], ...]:
    """Padding per spatial dimension, with the extra right padding that ``ceil_mode`` adds
    (a last window must still start inside the input or its left padding, as in PyTorch)."""
    result = []
    for n, k, s, p, d in zip(shape[2:], kernel, stride, padding, dilation):
        out = out_size(n, k, s, (p, p), d)
        if ceil_mode:
            out = -(-(n + 2 * p - d * (k - 1) - 1) // s) + 1
            if (out - 1) * s >= n + p:
                out -= 1
        result.append((p, max((out - 1) * s + d * (k - 1) + 1 - n - p, p)))
    return tuple(result)


def _argmax_shape(x, *, kernel, stride, padding, dilation):
    spatial = len(kernel)
    if len(x.shape) != spatial + 2:
        raise ShapeError(f"expected a {spatial + 2}-D input, got shape {x.shape}")
    for k, (lo, _), d in zip(kernel, padding, dilation):
        if lo * 2 > (k - 1) * d + 1:
            raise ShapeError(f"pad should be at most half of effective kernel size, but got "
                             f"pad={lo}, kernel_size={k} and dilation={d}")
    out = _geometry(x.shape, kernel, stride, padding, dilation)
    if any(o < 1 for o in out):
        raise ShapeError(f"output size {out} is too small for input of shape {x.shape}")
    return x.shape[:2] + out, np.dtype(np.int64)


def _pytorchs_argmax(windows: np.ndarray, axis: int) -> np.ndarray:
    """The position of each window's maximum along ``axis`` as PyTorch's pooling kernels
    scan: the first of equal values, but the last NaN (a NaN replaces any maximum so far)."""
    first = np.argmax(windows, axis=axis)
    if not is_floating(windows.dtype):
        return first
    nan = np.isnan(windows)
    if not nan.any():
        return first
    last = windows.shape[axis] - 1 - np.argmax(np.flip(nan, axis), axis=axis)
    return np.where(nan.any(axis), last, first)


def _windows_argmax(windows: list[np.ndarray], valid: list, fill: Any) -> np.ndarray:
    """:func:`_pytorchs_argmax` over equally shaped arrays, one per kernel position, where
    ``valid[k]`` (broadcastable, or None) marks the positions that are not padding (which
    holds ``fill``). A running
    maximum, then each position's key (earlier equal positions rank higher, later NaN higher
    still) kept as a running maximum of small integers: whole-array passes, where an argmax
    over their stack reduces along a strided axis."""
    count = len(windows)
    best = np.array(windows[0], copy=True)
    for window in windows[1:]:
        np.maximum(best, window, out=best)
    nan = is_floating(best.dtype) and bool(np.isnan(best).any())
    if valid[0] is not None and not (best == fill).any():
        valid = [None] * count  # padding (``fill``) cannot equal a maximum
    kind = np.uint8 if 3 * count < 256 else np.uint32
    key = np.zeros(best.shape, kind)
    for k, (window, inside) in enumerate(zip(windows, valid)):
        found = window == best
        if nan:  # a NaN wins over any number, and a later NaN over an earlier one
            found = np.multiply(found, count - k, dtype=kind) + np.multiply(
                np.isnan(window), 2 * count + k, dtype=kind)
        else:
            found = np.multiply(found, count - k, dtype=kind)
        if inside is not None:
            found *= inside
        np.maximum(key, found, out=key)
    if not nan:
        return (count - key) % count  # no key: a window of padding, its first position
    rank = key.astype(np.intp)
    return np.where(rank > 2 * count, rank - 2 * count, (count - rank) % count)


@primitive("pool_argmax", _argmax_shape)
def pool_argmax(x, *, kernel, stride, padding, dilation):
    """Each window's maximum as a flat index into its unpadded input plane (PyTorch's max
    pooling ``indices``): the first of equal values, the last NaN, never padding. 2-d
    windows of floats take a fused kernel (:mod:`pargraph.ops.kernels`), one pass."""
    out = _geometry(x.shape, kernel, stride, padding, dilation)
    indices = np.empty(x.shape[:2] + out, np.int64)
    if kernels.pool_argmax(x, kernel, stride, padding, dilation, indices):
        return indices
    fill = -np.inf if is_floating(x.dtype) else np.iinfo(x.dtype).min
    padded = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=fill)
    positions = list(itertools.product(*(range(k) for k in kernel)))
    valid = [None] * len(positions)
    if any(p != (0, 0) for p in padding):
        def inside(i: int, a: int) -> np.ndarray:
            at = np.arange(out[i]) * stride[i] - padding[i][0] + a * dilation[i]
            return ((at >= 0) & (at < x.shape[2 + i])).reshape(
                (-1,) + (1,) * (len(out) - 1 - i))
        valid = [math.prod(inside(i, a) for i, a in enumerate(at)) != 0 for at in positions]
    winner = _windows_argmax([padded[(slice(None),) + place] for place in
                              _placements(kernel, stride, dilation, out)], valid, fill)
    # The flat input position of kernel position k in the window at (o_1, o_2, ...).
    strides = [math.prod(x.shape[3 + i:]) for i in range(len(out))]
    base = sum(np.reshape((np.arange(o) * s - lo) * step, (-1,) + (1,) * (len(out) - 1 - i))
               for i, (o, s, (lo, _), step) in enumerate(zip(out, stride, padding, strides)))
    offsets = np.array([sum(a * d * step for a, d, step in zip(at, dilation, strides))
                        for at in itertools.product(*(range(k) for k in kernel))])
    return base + offsets[winner]


def _adaptive_argmax_shape(x, *, sizes):
    if len(x.shape) != 2 + len(sizes):
        raise ShapeError(f"expected an input of {2 + len(sizes)} dimensions, got {x.shape}")
    return x.shape[:2] + tuple(sizes), np.dtype(np.int64)


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows along one dimension: [floor(i*n/o), ceil((i+1)*n/o))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


@primitive("adaptive_pool_argmax", _adaptive_argmax_shape)
def adaptive_pool_argmax(x, *, sizes):
    """Each adaptive window's maximum as a flat index into its input plane (PyTorch's adaptive
    max pooling ``indices``): the first of equal values, the last NaN."""
    x = np.asarray(x)
    planes = x.shape[2:]
    out = np.empty(x.shape[:2] + tuple(sizes), np.int64)
    strides = [math.prod(planes[i + 1:]) for i in range(len(planes))]
    for cell in itertools.product(*(enumerate(adaptive_windows(n, o))
                                    for n, o in zip(planes, sizes))):
        window = x[(Ellipsis,) + tuple(slice(lo, hi) for _, (lo, hi) in cell)]
        shape = window.shape[2:]
        local = _pytorchs_argmax(window.reshape(x.shape[:2] + (-1,)), 2)
        flat = sum((lo + at) * step for (_, (lo, _)), at, step
                   in zip(cell, np.unravel_index(local, shape), strides))
        out[(Ellipsis,) + tuple(i for i, _ in cell)] = flat
    return out


def _fractional_argmax_shape(x, samples, *, kernel, sizes):
    if samples.shape != x.shape[:2] + (len(kernel),):
        raise ShapeError(f"expected _random_samples of shape {x.shape[:2] + (len(kernel),)}, "
                         f"got {samples.shape}")
    return x.shape[:2] + tuple(sizes), np.dtype(np.int64)


def fractional_starts(sample: np.ndarray, size: int, out: int, pool: int) -> np.ndarray:
    """Where each of ``out`` windows of ``pool`` starts along a dimension of ``size``, from a
    sample in [0, 1) per plane (``sample``'s dtype, as PyTorch's kernel computes them):
    shape ``sample.shape + (out,)``."""
    starts = np.full(sample.shape + (out,), size - pool, np.int64)
    if out > 1:
        alpha = sample.dtype.type(size - pool) / sample.dtype.type(out - 1)
        steps = np.arange(out - 1).astype(sample.dtype)
        starts[..., :-1] = ((steps + sample[..., None]) * alpha).astype(np.int64) - \
            (sample * alpha).astype(np.int64)[..., None]
    return starts


@primitive("fractional_pool_argmax", _fractional_argmax_shape)
def fractional_pool_argmax(x, samples, *, kernel, sizes):
    """Each pseudo-random window's maximum as a flat index into its input plane (PyTorch's
    fractional max pooling ``indices``): windows of ``kernel`` placed by ``samples`` (N, C,
    one per dimension: in 2-D width's then height's, in 3-D depth's, height's, width's, as
    PyTorch's kernels read them), the first of equal values, the last NaN."""
    x, samples = np.asarray(x), np.asarray(samples).astype(x.dtype, copy=False)
    planes = x.shape[2:]
    spatial = len(planes)
    order = (1, 0) if spatial == 2 else tuple(range(spatial))
    starts = [fractional_starts(samples[:, :, order[d]], planes[d], sizes[d], kernel[d])
              for d in range(spatial)]
    # Every window's elements as positions into the flattened plane: (N, C, *sizes, *kernel).
    index = np.zeros(x.shape[:2] + tuple(sizes) + tuple(kernel), np.int64)
    for d in range(spatial):
        step = math.prod(planes[d + 1:])
        at = starts[d].reshape(x.shape[:2] + tuple(sizes[d] if e == d else 1
                                                    for e in range(spatial)) + (1,) * spatial)
        offset = np.arange(kernel[d]).reshape(tuple(kernel[d] if e == d else 1
                                                    for e in range(spatial)))
        index = index + (at + offset) * step
    flat = index.reshape(x.shape[:2] + (-1,))
    windows = np.take_along_axis(x.reshape(x.shape[:2] + (-1,)), flat, axis=2)
    windows = windows.reshape(x.shape[:2] + (math.prod(sizes), math.prod(kernel)))
    local = _pytorchs_argmax(windows, 3)
    chosen = np.take_along_axis(flat.reshape(windows.shape), local[..., None], axis=3)
    return chosen.reshape(x.shape[:2] + tuple(sizes))


# --- sliding blocks (im2col and its adjoint) --------------------------------------------------

def _unfold_shape(x, *, kernel, dilation, padding, stride):
    if len(x.shape) != 2 + len(kernel):
        raise ShapeError(f"expected a {2 + len(kernel)}-D input, got {x.shape}")
    out = _geometry(x.shape, kernel, stride, padding, dilation)
    if any(o < 1 for o in out):
        raise ShapeError(f"the blocks of size {kernel} do not fit the input of shape "
                         f"{x.shape} (padding {padding}, dilation {dilation})")
    return (x.shape[0], x.shape[1] * math.prod(kernel), math.prod(out)), x.dtype


@primitive("unfold", _unfold_shape, grad_name="Im2ColBackward0")
def unfold(x, *, kernel, dilation, padding, stride):
    """Every sliding block of ``x`` (N, C, *S) as a column: (N, C * prod(kernel), blocks),
    channel-major, as PyTorch's ``F.unfold``."""
    x = np.asarray(x)
    out = _geometry(x.shape, kernel, stride, padding, dilation)
    padded = np.pad(x, ((0, 0), (0, 0)) + tuple(padding))
    blocks = np.stack([padded[(slice(None),) + place]
                       for place in _placements(kernel, stride, dilation, out)], axis=2)
    return blocks.reshape(x.shape[0], -1, math.prod(out))


def _fold_shape(x, *, output_size, kernel, dilation, padding, stride):
    blocks = math.prod(kernel)
    if len(x.shape) != 3 or x.shape[1] % blocks:
        raise ShapeError(f"Expected size of input's dimension 1 to be divisible by the product "
                         f"of kernel_size, but got input.size(1)={x.shape[1] if x.shape else 0}"
                         f" and kernel_size={kernel}.")
    out = _geometry((0, 0) + tuple(output_size), kernel, stride, padding, dilation)
    if math.prod(out) != x.shape[2]:
        raise ShapeError(f"Given output_size={output_size}, kernel_size={kernel}, "
                         f"dilation={dilation}, padding={tuple(lo for lo, _ in padding)}, "
                         f"stride={stride}, expected size of input's dimension 2 to match the "
                         f"calculated number of sliding blocks {' * '.join(map(str, out))} = "
                         f"{math.prod(out)}, but got input.size(2)={x.shape[2]}.")
    return (x.shape[0], x.shape[1] // blocks) + tuple(output_size), x.dtype


@primitive("fold", _fold_shape, grad_name="Col2ImBackward0")
def fold(x, *, output_size, kernel, dilation, padding, stride):
    """The adjoint of :func:`unfold`: columns summed back into an (N, C, *output_size) image
    where their blocks overlap."""
    x = np.asarray(x)
    out = _geometry((0, 0) + tuple(output_size), kernel, stride, padding, dilation)
    columns = x.reshape((x.shape[0], -1, math.prod(kernel)) + out)
    padded = np.zeros(columns.shape[:2] + tuple(n + lo + hi for n, (lo, hi)
                                                 in zip(output_size, padding)), x.dtype)
    for k, place in enumerate(_placements(kernel, stride, dilation, out)):
        padded[(slice(None),) + place] += columns[:, :, k]
    return padded[(slice(None), slice(None)) + tuple(slice(lo, lo + n) for n, (lo, _)
                                                      in zip(output_size, padding))]


unfold.defvjp(lambda g, out, x, *, kernel, dilation, padding, stride: fold(
    g, output_size=tuple(x.shape[2:]), kernel=kernel, dilation=dilation, padding=padding,
    stride=stride))
fold.defvjp(lambda g, out, x, *, output_size, kernel, dilation, padding, stride: unfold(
    g, kernel=kernel, dilation=dilation, padding=padding, stride=stride))
