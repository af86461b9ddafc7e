"""``torch.nn.functional``'s image ops: padding, resampling (``interpolate``, ``grid_sample``,
``affine_grid``) and pixel and channel shuffles."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor
from pargraph.nn.functional.conv import _tuple
from pargraph.nn.functional.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave ``groups`` groups of channels of ``(N, C, ...)`` input (ShuffleNet): channel
    ``g * C/groups + k`` goes to ``k * groups + g``.

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> F.channel_shuffle(pargraph.arange(4.0).reshape(1, 4, 1), 2).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, "
                           f"but got input with sizes {list(input.shape)}")
    shape = tuple(input.shape)
    if groups <= 0 or shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got "
                           f"{shape[1]} channels and {groups} groups.")
    split = input.reshape(shape[:1] + (groups, shape[1] // groups) + shape[2:])
    return split.transpose(1, 2).reshape(shape)


_PAD_MODES = ("reflect", "replicate", "circular")


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
