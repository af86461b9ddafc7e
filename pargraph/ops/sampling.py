"""Grid sampling: the values of images at the positions a grid gives (``F.grid_sample``),
with PyTorch's coordinate rules (``align_corners``, ``padding_mode``) and its gradients with
respect to the images and to the grid."""

from __future__ import annotations

import numpy as np

from pargraph.ops.core import primitive


def _grid_sample_shape(x, grid, mode, padding_mode, align_corners):
    if len(x.shape) != 4:
        raise NotImplementedError(f"grid_sample: {len(x.shape)}-D input (volumes) is not "
                                  "supported yet; 4-D (N, C, H, W) input is")
    if len(grid.shape) != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size 2 in last dimension, "
                           f"but got grid with sizes {list(grid.shape)}")
    if x.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(x.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if x.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but "
                           f"input has {x.dtype} and grid has {grid.dtype}")
    return (x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), x.dtype


def _reflect(coordinate: np.ndarray, twice_low: int, twice_high: int) -> tuple:
    """PyTorch's ``reflect_coordinates`` and its derivative (+1 or -1)."""
    if twice_low == twice_high:
        return np.zeros_like(coordinate), np.zeros_like(coordinate)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = coordinate - low
    sign = np.where(shifted < 0, -1.0, 1.0)
    shifted = np.abs(shifted)
    extra, flips = np.fmod(shifted, span), np.floor(shifted / span)
    even = flips % 2 == 0
    return (np.where(even, extra + low, span - extra + low),
            np.where(even, sign, -sign))


def _source_index(coordinate: np.ndarray, size: int, padding_mode: str,
                  align_corners: bool) -> tuple:
    """Pixel coordinates from the grid's [-1, 1] ones, after padding's rule, and their
    derivative with respect to the grid's (PyTorch's ``grid_sampler_compute_source_index``
    and its ``_set_grad`` twin)."""
    if align_corners:
        scale = (size - 1) / 2
        index = (coordinate + 1) * scale
    else:
        scale = size / 2
        index = ((coordinate + 1) * size - 1) / 2
    grad = np.full_like(index, scale)
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        index, sign = _reflect(index, *twice)
        grad = grad * sign
    if padding_mode in ("border", "reflection"):
        inside = (index > 0) & (index < size - 1)
        grad = np.where(inside, grad, 0.0)
        index = np.clip(index, 0, size - 1)
    return index, grad


def _corners(x, grid, padding_mode, align_corners):
    """Per output position: the four neighbouring pixels (row, column, in bounds) and the
    bilinear weights, with the coordinates' derivatives."""
    height, width = x.shape[2], x.shape[3]
    with np.errstate(invalid="ignore"):
        ix, gx = _source_index(grid[..., 0].astype(np.float64), width, padding_mode,
                               align_corners)
        iy, gy = _source_index(grid[..., 1].astype(np.float64), height, padding_mode,
                               align_corners)
    left, top = np.floor(ix), np.floor(iy)
    dx, dy = ix - left, iy - top
    corners = []
    for row, column, weight in ((top, left, (1 - dx) * (1 - dy)), (top, left + 1, dx * (1 - dy)),
                                (top + 1, left, (1 - dx) * dy), (top + 1, left + 1, dx * dy)):
        inside = (row >= 0) & (row < height) & (column >= 0) & (column < width)
        corners.append((np.where(inside, row, 0).astype(np.int64),
                        np.where(inside, column, 0).astype(np.int64), inside, weight))
    return corners, (dx, dy, gx, gy), (ix, iy)


def _gathered(x, row, column, inside):
    """``x[n, :, row, column]`` for each output position, zero outside: (N, C, Ho, Wo)."""
    batch = np.arange(x.shape[0])[:, None, None]
    values = x[batch, :, row, column]  # (N, Ho, Wo, C)
    return np.moveaxis(np.where(inside[..., None], values, 0), -1, 1)


def _nearest(x, grid, padding_mode, align_corners):
    height, width = x.shape[2], x.shape[3]
    with np.errstate(invalid="ignore"):
        ix = _source_index(grid[..., 0].astype(np.float64), width, padding_mode,
                           align_corners)[0]
        iy = _source_index(grid[..., 1].astype(np.float64), height, padding_mode,
                           align_corners)[0]
    column, row = np.rint(ix), np.rint(iy)  # half to even, as PyTorch's nearbyint
    inside = (row >= 0) & (row < height) & (column >= 0) & (column < width)
    return (np.where(inside, row, 0).astype(np.int64),
            np.where(inside, column, 0).astype(np.int64), inside)


@primitive("grid_sample", _grid_sample_shape, grad_name="GridSampler2DBackward0",
           cost=lambda node: 3e-6 + np.prod(node.shape) * 20e-9)
def grid_sample(x, grid, mode, padding_mode, align_corners):
    if mode == "nearest":
        return _gathered(x, *_nearest(x, grid, padding_mode, align_corners))
    corners = _corners(x, grid, padding_mode, align_corners)[0]
    out = np.zeros((x.shape[0], x.shape[1]) + grid.shape[1:3], dtype=np.float64)
    for row, column, inside, weight in corners:
        out += _gathered(x, row, column, inside) * weight[:, None]
    return out.astype(x.dtype)


@primitive("grid_sample_input_grad",
           lambda g, x, grid, mode, padding_mode, align_corners: (x.shape, x.dtype))
def grid_sample_input_grad(g, x, grid, mode, padding_mode, align_corners):
    """Each output's gradient added to the pixels it read, by their weights."""
    grad = np.zeros(x.shape, dtype=np.float64)
    batch = np.broadcast_to(np.arange(x.shape[0])[:, None, None], grid.shape[:3])
    incoming = np.moveaxis(g, 1, -1).astype(np.float64)  # (N, Ho, Wo, C)
    if mode == "nearest":
        sources = [(*_nearest(x, grid, padding_mode, align_corners), 1.0)]
    else:
        sources = _corners(x, grid, padding_mode, align_corners)[0]
    for row, column, inside, weight in sources:
        contribution = incoming * (np.asarray(weight) * inside)[..., None]
        scattered = np.zeros((x.shape[0], x.shape[2], x.shape[3], x.shape[1]))
        np.add.at(scattered, (batch, row, column), contribution)
        grad += np.moveaxis(scattered, -1, 1)
    return grad.astype(x.dtype)


@primitive("grid_sample_grid_grad",
           lambda g, x, grid, mode, padding_mode, align_corners: (grid.shape, grid.dtype))
def grid_sample_grid_grad(g, x, grid, mode, padding_mode, align_corners):
    """The bilinear weights' derivatives by the corners' values, through the coordinates'
    rules; nothing for nearest sampling, as PyTorch's."""
    if mode == "nearest":
        return np.zeros(grid.shape, dtype=grid.dtype)
    corners, (dx, dy, gx, gy), _ = _corners(x, grid, padding_mode, align_corners)
    values = [(_gathered(x, row, column, inside) * g).sum(1)
              for row, column, inside, _ in corners]  # (N, Ho, Wo) each
    top_left, top_right, bottom_left, bottom_right = values
    by_x = (top_right - top_left) * (1 - dy) + (bottom_right - bottom_left) * dy
    by_y = (bottom_left - top_left) * (1 - dx) + (bottom_right - top_right) * dx
    return np.stack([by_x * gx, by_y * gy], -1).astype(grid.dtype)


def _no_second_derivative(*_, **__):
    raise NotImplementedError("the second derivative of grid_sample is not supported")


grid_sample.defvjp(
    lambda g, out, x, grid, **attrs: grid_sample_input_grad(g, x, grid, **attrs),
    lambda g, out, x, grid, **attrs: grid_sample_grid_grad(g, x, grid, **attrs))
grid_sample_input_grad.defvjp(*[_no_second_derivative] * 3)
grid_sample_grid_grad.defvjp(*[_no_second_derivative] * 3)
