"""Tensor methods that reshape, select, split, flip and scatter."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import dtypes, ops


class ShapeMethods:
    """Tensor's reshaping, selecting, splitting, flipping and scattering: a mixin of ``Tensor``
    (``pargraph.methods`` says what the class it joins has)."""

    def reshape(self, *shape, **given) -> Any:
        if given:
            shape = ops.keyword_sizes(given, "shape", shape, "reshape")
        return self._shaped(ops.reshape(self._node, shape=shape_arg(shape)), None)

    def view(self, *shape, **given) -> Any:
        """The same elements in another shape, or (``view(dtype)``) the same bytes read as
        another dtype; in-place changes of either reach this tensor.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0]).view(pargraph.int32).tolist()
        [1065353216]
        """
        if given:
            if "dtype" in given and not shape:
                return self._bits_as(given["dtype"])
            shape = ops.keyword_sizes(given, "size", shape, "view")
        if len(shape) == 1 and _is_dtype(shape[0]):
            return self._bits_as(shape[0])
        return self.reshape(*shape)

    def _bits_as(self, dtype: Any) -> Any:
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self._viewed_by(self._apply(ops.view_dtype, self._node, dtype=dtype),
                                   lambda base, value: value)
        return self._viewed_by(self._apply(ops.view_dtype, self._node, dtype=dtype),
                               lambda base, value: value._bits_as(base.dtype))

    def view_as(self, other: Any) -> Any:
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        if self.ndim and ops.normalize_dim(start_dim, self.ndim) > ops.normalize_dim(
                end_dim, self.ndim):
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after "
                               "end_dim")
        return self._shaped(ops.flatten(self._node, start_dim, end_dim), None)

    def transpose(self, dim0: int, dim1: int) -> Any:
        dims = list(range(self.ndim))
        if self.ndim:
            a, b = ops.normalize_dim(dim0, self.ndim), ops.normalize_dim(dim1, self.ndim)
            dims[a], dims[b] = dims[b], dims[a]
        return self._shaped(ops.transpose(self._node, dim0, dim1), tuple(dims))

    def t(self) -> Any:
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        out = self.T
        return self._shaped(ops.shown_as(out._node, "TBackward0", self._node),
                            tuple(reversed(range(self.ndim))))

    def permute(self, *dims, **given) -> Any:
        if given:
            dims = ops.keyword_sizes(given, "dims", dims, "permute")
        dims = tuple(ops.normalize_dim(d, self.ndim) for d in shape_arg(dims))
        return self._shaped(ops.permute(self._node, dims=dims), dims)

    def squeeze(self, dim=None) -> Any:
        return self._shaped(ops.squeeze(self._node, dim), None)

    def unsqueeze(self, dim: int) -> Any:
        return self._shaped(ops.unsqueeze(self._node, dim), None)

    def reshape_as(self, other: Any) -> Any:
        """This tensor in ``other``'s shape.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.arange(6).reshape_as(pargraph.ones(2, 3)).shape)
        (2, 3)
        """
        return self.reshape(tuple(other.shape))

    def select(self, dim: int, index: int) -> Any:
        """The slice at ``index`` of dimension ``dim``, without that dimension
        (``x.select(1, k)`` is ``x[:, k]``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2], [3, 4]]).select(1, -1).tolist()
        [2, 4]
        """
        if self.ndim == 0:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        dim = ops.normalize_dim(dim, self.ndim)
        size = self.shape[dim]
        if not -size <= index < size:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self.shape)} at dimension {dim}")
        return self[(slice(None),) * dim + (index,)]

    def narrow_copy(self, dim: int, start: int, length: int) -> Any:
        """A copy of ``narrow(dim, start, length)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(5).narrow_copy(0, 1, 2).tolist()
        [1, 2]
        """
        return self.narrow(dim, start, length).clone()

    def angle(self) -> Any:
        """The argument of each element: pi for a negative number, 0 otherwise (NaN stays
        NaN); integers give the default float dtype.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.0, 0.0, 3.0]).angle()
        tensor([3.1416, 0.0000, 0.0000])
        """
        x = self if ops.is_floating(self.dtype) else self.to(ops.defaults.float)
        signs = self._constant(np.zeros((), x.dtype)).expand(*x.shape)
        signs = (signs + math.pi).where(x < 0, signs)
        return x.where(x.isnan(), signs)  # a gradient only where the input is NaN

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """The ``length`` elements from ``start`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(5).narrow(0, 1, 2).tolist()
        [1, 2]
        """
        d = ops.normalize_dim(dim, self.dim())
        size = self.shape[d]
        start = start + size if start < 0 else start
        if not 0 <= start <= size or length < 0 or start + length > size:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                               f"({size}).")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def unbind(self, dim: int = 0) -> tuple:
        """The slices along ``dim``, each without it.

        Examples
        --------
        >>> import pargraph
        >>> [t.tolist() for t in pargraph.tensor([[1, 2], [3, 4]]).unbind(1)]
        [[1, 3], [2, 4]]
        """
        d = ops.normalize_dim(dim, self.dim())
        return tuple(self[(slice(None),) * d + (k,)] for k in range(self.shape[d]))

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        """Elements shifted cyclically by ``shifts`` along ``dims`` (flattened if None).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(4).roll(1).tolist()
        [3, 0, 1, 2]
        """
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(tuple(self.shape))
        shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if len(shifts) != len(dims):
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               f"dims:{len(dims)}")
        out = self
        for shift, dim in zip(shifts, dims):
            d = ops.normalize_dim(dim, self.dim())
            n = self.shape[d]
            if n == 0 or shift % n == 0:
                continue
            picks = np.roll(np.arange(n), shift)
            out = out[(slice(None),) * d + (picks,)]
        return out

    def tile(self, *dims: Any, **keywords: Any) -> Any:
        """This tensor repeated ``dims`` times along each dimension (missing ones: 1).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).tile(2).tolist()
        [1, 2, 1, 2]
        """
        dims = keywords.pop("dims", dims)
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) \
            else tuple(dims)
        dims = (1,) * (self.dim() - len(dims)) + dims
        x = self.reshape((1,) * (len(dims) - self.dim()) + tuple(self.shape))
        return x.repeat(*dims)

    def repeat_interleave(self, repeats: Any = None, dim: int | None = None,
                          output_size: int | None = None) -> Any:
        """Each element repeated ``repeats`` times (an int, or one count per element);
        ``pargraph.repeat_interleave(counts)``: each index repeated its count's times.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).repeat_interleave(2).tolist()
        [1, 1, 2, 2]
        >>> pargraph.repeat_interleave(pargraph.tensor([2, 0, 1])).tolist()
        [0, 0, 2]
        """
        if repeats is None:  # the counts themselves: the indices they repeat
            if self.dim() > 1 or self.dtype.kind not in "iu":
                raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
            counts = self.flatten()
            return self._constant(np.arange(counts.shape[0])).repeat_interleave(counts)
        x = self.flatten() if dim is None else self
        d = 0 if dim is None else ops.normalize_dim(dim, self.dim())
        counts = np.asarray(repeats.tolist() if hasattr(repeats, "tolist") else repeats)
        picks = np.repeat(np.arange(x.shape[d]), counts)
        return x[(slice(None),) * d + (picks,)]

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        """The diagonal of the (``dim1``, ``dim2``) planes, as a last dimension.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2], [3, 4]]).diagonal().tolist()
        [1, 4]
        """
        a, b = ops.normalize_dim(dim1, self.dim()), ops.normalize_dim(dim2, self.dim())
        rows, cols = self.shape[a], self.shape[b]
        start_row, start_col = max(-offset, 0), max(offset, 0)
        length = max(min(rows - start_row, cols - start_col), 0)
        rest = [d for d in range(self.dim()) if d not in (a, b)]
        moved = self.permute(*rest, a, b)
        lead = (slice(None),) * len(rest)
        row_index = np.arange(start_row, start_row + length)
        col_index = np.arange(start_col, start_col + length)
        # A view: an in-place change of the diagonal reaches this tensor, as in PyTorch.
        return self._viewed_by(moved[lead + (row_index, col_index)],
                               lambda base, value: base.diagonal_scatter(value, offset, dim1,
                                                                         dim2))

    def as_strided(self, size: Any, stride: Any, storage_offset: int = 0) -> Any:
        """The elements at ``storage_offset + sum(i_k * stride[k])`` of this tensor's elements
        in row-major order (a contiguous PyTorch tensor's storage), in the shape ``size``: a
        copy (differentiable), not a view.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(6.0).as_strided((2, 2), (1, 2)).tolist()
        [[0.0, 2.0], [1.0, 3.0]]
        """
        size, stride = tuple(int(n) for n in size), tuple(int(n) for n in stride)
        if len(size) != len(stride):
            raise RuntimeError(f"mismatch in length of strides and shape ({len(stride)} "
                               f"against {len(size)})")
        index = np.full(size, int(storage_offset), dtype=np.int64)
        for k, (n, step) in enumerate(zip(size, stride)):
            index += (np.arange(n) * step).reshape((n,) + (1,) * (len(size) - k - 1))
        count = self.numel()
        if index.size and (index.min() < 0 or index.max() >= count):
            item = self.dtype.itemsize
            raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                               f"offset {storage_offset}, and itemsize {item} requiring a "
                               f"storage size of {(int(index.max()) + 1) * item} are out of "
                               f"bounds for storage of size {count * item}")
        return self.reshape(-1)[index]

    def diag(self, diagonal: int = 0) -> Any:
        """A 1-D tensor's square matrix with it on a diagonal; a matrix's diagonal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).diag().tolist()
        [[1, 0], [0, 2]]
        """
        if self.dim() == 2:
            return self.diagonal(diagonal)
        if self.dim() != 1:
            raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " f"{self.dim()}D")
        n = self.shape[0] + abs(diagonal)
        out = self.new_zeros(n, n)
        rows = np.arange(self.shape[0]) + max(-diagonal, 0)
        cols = np.arange(self.shape[0]) + max(diagonal, 0)
        out[rows, cols] = self
        return out

    def broadcast_to(self, size: Any) -> Any:
        """This tensor broadcast to ``size`` (``expand``).

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(3).broadcast_to((2, 3)).shape)
        (2, 3)
        """
        return self.expand(*size)

    def take_along_dim(self, indices: Any, dim: int | None = None) -> Any:
        """The values at ``indices`` along ``dim`` (indices broadcast against the tensor;
        without ``dim``, into the flattened tensor), as ``torch.take_along_dim``.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([[10.0, 30.0, 20.0]])
        >>> x.take_along_dim(x.argsort(dim=1), dim=1).tolist()
        [[10.0, 20.0, 30.0]]
        """
        if dim is None:
            return self.reshape(-1).take_along_dim(indices.reshape(-1), 0)
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        shape = list(np.broadcast_shapes(tuple(self.shape[:d]) + (1,) + tuple(self.shape[d + 1:]),
                                         tuple(indices.shape[:d]) + (1,)
                                         + tuple(indices.shape[d + 1:])))
        source = self.expand(shape[:d] + [self.shape[d]] + shape[d + 1:])
        return source.gather(d, indices.expand(shape[:d] + [indices.shape[d]] + shape[d + 1:]))

    def _scattered(self, src: Any, key: tuple, what: str) -> Any:
        """A copy of this tensor with ``src`` written at ``key`` (its shape checked as
        PyTorch's ``*_scatter`` ops check it)."""
        out = self.clone()
        src = self._wrap(self._operand(src))
        wanted = tuple(out[key].shape)
        if tuple(src.shape) != wanted:
            raise RuntimeError(f"{what}: expected src to have a size equal to the slice of "
                               f"self. src size = {list(src.shape)}, slice size = "
                               f"{list(wanted)}")
        out[key] = src
        return out

    def select_scatter(self, src: Any, dim: int, index: int) -> Any:
        """A copy of this tensor with ``src`` at ``index`` along ``dim`` (``select``'s
        place).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 2).select_scatter(pargraph.ones(2), 0, 1).tolist()
        [[0.0, 0.0], [1.0, 1.0]]
        """
        d = ops.normalize_dim(dim, self.ndim)
        return self._scattered(src, (slice(None),) * d + (index,), "select_scatter")

    def slice_scatter(self, src: Any, dim: int = 0, start: int | None = None,
                      end: int | None = None, step: int = 1) -> Any:
        """A copy of this tensor with ``src`` in the slice ``start:end:step`` of ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(4).slice_scatter(pargraph.ones(2), 0, 0, 4, 2).tolist()
        [1.0, 0.0, 1.0, 0.0]
        """
        d = ops.normalize_dim(dim, self.ndim)
        return self._scattered(src, (slice(None),) * d + (slice(start, end, step),),
                               "slice_scatter")

    def diagonal_scatter(self, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        """A copy of this tensor with ``src`` on the diagonal ``offset`` of ``dim1`` and
        ``dim2`` (``diagonal``'s place).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 2).diagonal_scatter(pargraph.ones(2)).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        src = self._wrap(self._operand(src))
        wanted = tuple(self.diagonal(offset, dim1, dim2).shape)
        if tuple(src.shape) != wanted:
            raise RuntimeError(f"diagonal_scatter: expected src to have a size equal to the "
                               f"slice of self. src size = {list(src.shape)}, slice size = "
                               f"{list(wanted)}")
        first, second = (ops.normalize_dim(d, self.ndim) for d in (dim1, dim2))
        # The two dimensions moved last: the diagonal's positions are then two index lists
        # side by side, and ``src``'s last dimension is theirs.
        order = [d for d in range(self.ndim) if d not in (first, second)] + [first, second]
        moved = self.permute(*order).clone()
        index = np.arange(wanted[-1])
        moved[..., index + max(-offset, 0), index + max(offset, 0)] = src
        return moved.permute(*np.argsort(order).tolist())

    def argwhere(self) -> Any:
        """The indices of the nonzero elements, one row each (``nonzero()``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[0, 1], [1, 0]]).argwhere().tolist()
        [[0, 1], [1, 0]]
        """
        return self.nonzero()

    def rot90(self, k: int = 1, dims: Any = (0, 1)) -> Any:
        """Rotated by 90 degrees ``k`` times, from the first of ``dims`` towards the second.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2], [3, 4]]).rot90().tolist()
        [[2, 4], [1, 3]]
        """
        dims = list(dims)
        if len(dims) != 2:
            raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
        if self.ndim < 2:
            raise RuntimeError(f"expected total dims >= 2, but got total dims = {self.ndim}")
        first, second = (ops.normalize_dim(d, self.ndim) for d in dims)
        if first == second:
            raise RuntimeError(f"expected rotation dims to be different, but got dim0 = "
                               f"{first} and dim1 = {second}")
        k %= 4
        if k == 1:
            return self.flip(second).transpose(first, second)
        if k == 2:
            return self.flip(first, second)
        if k == 3:
            return self.flip(first).transpose(first, second)
        return self

    def fliplr(self) -> Any:
        """The columns in reverse order (dimension 1).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2]]).fliplr().tolist()
        [[2, 1]]
        """
        if self.ndim < 2:
            raise RuntimeError("Input must be >= 2-d.")
        return self.flip(1)

    def flipud(self) -> Any:
        """The rows in reverse order (dimension 0).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1], [2]]).flipud().tolist()
        [[2], [1]]
        """
        if self.ndim < 1:
            raise RuntimeError("Input must be >= 1-d.")
        return self.flip(0)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
        """Matrices whose diagonal (``offset`` above it, below if negative) holds the last
        dimension's values, in the new dimensions ``dim1`` and ``dim2``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).diag_embed().tolist()
        [[1, 0], [0, 2]]
        """
        if not self.ndim:  # its new dimensions are counted from the result's 2
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                             f"got {min(dim1, dim2)})")
        n = self.shape[-1]
        size = n + abs(offset)
        column = self
        if offset:  # the values' rows: zeros after them above the diagonal, before below
            zeros = self._constant(np.zeros((*column.shape[:-1], abs(offset)), self.dtype))
            ends = (column, zeros) if offset > 0 else (zeros, column)
            column = self._apply(ops.cat, *[t._node for t in ends], dim=column.ndim - 1)
        on_diagonal = self._constant(np.eye(size, k=offset, dtype=bool))
        matrices = column.unsqueeze(-1).where(on_diagonal, False if self.dtype == bool else 0)
        ndim = self.ndim + 1
        first, second = (ops.normalize_dim(d, ndim) for d in (dim1, dim2))
        if first == second:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        return matrices.movedim((-2, -1), (first, second))

    def unflatten(self, dim: int, sizes: Any) -> Any:
        """Dimension ``dim`` split into ``sizes`` (one of them may be -1).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 6).unflatten(1, (2, 3)).shape
        pargraph.Size([2, 2, 3])
        """
        dim = ops.normalize_dim(dim, self.ndim)
        sizes = [int(n) for n in sizes]
        known = math.prod(n for n in sizes if n != -1)
        length = self.shape[dim]
        if (-1 not in sizes and known != length) or (
                -1 in sizes and (known == 0 or length % known)):
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                               f"of dim {dim} ({length}) in the input tensor")
        return self.reshape(*self.shape[:dim], *sizes, *self.shape[dim + 1:])

    def flip(self, *dims, **given) -> Any:
        """The elements in reverse order along ``dims``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2], [3, 4]]).flip(1).tolist()
        [[2, 1], [4, 3]]
        """
        if given:
            dims = ops.keyword_sizes(given, "dims", dims, "flip")
        dims = ops.normalize_dims(shape_arg(dims), self.ndim)
        return self._apply(ops.flip, self._node, dims=dims)

    def repeat(self, *sizes, **given) -> Any:
        """Tile the tensor ``sizes[i]`` times along each dimension (new leading ones too).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).repeat(2, 2).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
        """
        if given:
            sizes = ops.keyword_sizes(given, "repeats", sizes, "repeat")
        sizes = shape_arg(sizes)
        if len(sizes) < self.ndim:
            raise RuntimeError("Number of dimensions of repeat dims can not be smaller than "
                               "number of dimensions of tensor")
        shape = (1,) * (len(sizes) - self.ndim) + tuple(self.shape)
        interleaved = tuple(n for pair in zip((1,) * len(shape), shape) for n in pair)
        wide = tuple(n for pair in zip(sizes, shape) for n in pair)
        tiled = self.reshape(interleaved).expand(*wide)
        return tiled.reshape(tuple(r * n for r, n in zip(sizes, shape)))

    def tril(self, diagonal: int = 0) -> Any:
        """The lower triangle of the last two dimensions (others zero).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 2).tril().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._triangle(np.tril, diagonal)

    def triu(self, diagonal: int = 0) -> Any:
        """The upper triangle of the last two dimensions (others zero).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 2).triu(1).tolist()
        [[0.0, 1.0], [0.0, 0.0]]
        """
        return self._triangle(np.triu, diagonal)

    def _triangle(self, which: Any, diagonal: int) -> Any:
        if self.ndim < 2:
            raise RuntimeError(f"{which.__name__}: input tensor must have at least 2 "
                               f"dimensions, got {self.ndim}")
        keep = which(np.ones(self.shape[-2:], dtype=bool), diagonal)
        zero = False if self.dtype == bool else 0  # keeps the dtype: bool stays bool
        return self._apply(ops.where, ops.constant(keep), self._node, zero)

    def expand(self, *sizes, **given) -> Any:
        if given:
            sizes = ops.keyword_sizes(given, "size", sizes, "expand")
        sizes = shape_arg(sizes)
        lead = len(sizes) - self.ndim
        shape = tuple(
            self.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(sizes)
        )
        return self._apply(ops.expand, self._node, shape=shape)

    def expand_as(self, other: Any) -> Any:
        return self.expand(*other.shape)

    def split(self, split_size, dim: int = 0) -> tuple:
        return self._parts(ops.split(self._node, split_size, dim), dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        return self._parts(ops.chunk(self._node, chunks, dim), dim)


def shape_arg(shape: tuple) -> tuple:
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, as ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(n) for n in shape)


def _is_dtype(value: Any) -> bool:
    """Whether ``value`` names a dtype (``pargraph.int32``, ``np.float16``)."""
    return isinstance(value, (np.dtype, dtypes.dtype)) or (isinstance(value, type) and
                                                           issubclass(value, np.generic))
