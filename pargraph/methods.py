"""Tensor methods beyond the core class (a mixin of ``Tensor``): layout queries, ``new_*``
constructors, shape helpers (``narrow``, ``roll``, ``tile``, ``unbind``, ``diag``...),
products (``dot``, ``outer``, ``addmm``...), and the in-place forms programs use. Each is
written with the class's own methods; every one is a ``pargraph.<name>`` function too
(``functions.METHOD_FUNCTIONS``), but the in-place ones."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import ml_dtypes
import numpy as np

from pargraph import amp, ops
from pargraph.graph import toposort

#: What ``slogdet``, ``svd`` and ``qr`` return, as ``torch.return_types``: tuples with names.
SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
SvdResult = namedtuple("svd", ["U", "S", "V"])
QrResult = namedtuple("qr", ["Q", "R"])
GeqrfResult = namedtuple("geqrf", ["a", "tau"])
FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


class EverydayMethods:
    """The methods; the class they join has ``_node``, ``shape``, ``dtype``, ``_apply`` (the
    one way to apply an op), ``_wrap`` (a tensor around a node), ``_operand`` (a value as an
    op's input), ``_rebind``, ``_replace``, ``_check_in_place`` and the core arithmetic,
    shape and reduction methods."""

    def _constant(self, array: Any, dtype: Any = None) -> Any:
        return self._apply(ops.constant, np.array(array, dtype=dtype))

    def _new(self, size: tuple, fill: Any, dtype: Any, requires_grad: bool) -> Any:
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        out = self._constant(np.full(tuple(int(n) for n in size), fill,
                                     dtype=np.dtype(dtype or self.dtype)))
        return out.requires_grad_(requires_grad) if requires_grad else out

    # --- layout: one contiguous CPU array per tensor, as far as a program can tell ---------

    def contiguous(self, memory_format: Any = None) -> Any:
        """This tensor (values are always contiguous here).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(2); x.contiguous() is x
        True
        """
        return self

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """Always True.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).t().is_contiguous()
        True
        """
        return True

    def stride(self, dim: int | None = None) -> Any:
        """The strides of a contiguous array of this shape, in elements.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).stride()
        (3, 1)
        """
        strides, step = [], 1
        for n in reversed(tuple(self.shape)):
            strides.append(step)
            step *= max(n, 1)
        strides = tuple(reversed(strides))
        return strides if dim is None else strides[ops.normalize_dim(dim, max(len(strides), 1))]

    def element_size(self) -> int:
        """Bytes per element.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).element_size()
        4
        """
        return int(np.dtype(self.dtype).itemsize)

    def nelement(self) -> int:
        """The number of elements (``numel``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).nelement()
        6
        """
        return self.numel()

    def ndimension(self) -> int:
        """The number of dimensions (``dim``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).ndimension()
        2
        """
        return self.dim()

    def is_complex(self) -> bool:
        """Whether the dtype is a complex one (pargraph's tensors are real: False).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).is_complex()
        False
        """
        return np.dtype(self.dtype).kind == "c"

    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating point one.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).is_floating_point(), pargraph.arange(2).is_floating_point()
        (True, False)
        """
        return ops.is_floating(np.dtype(self.dtype))

    @property
    def is_cuda(self) -> bool:
        """Always False: pargraph computes on the CPU (so are ``is_xpu``, ``is_mps``,
        ``is_meta``, ``is_sparse``, ``is_quantized``... : see :data:`NOT_HERE`)."""
        return False

    @property
    def is_cpu(self) -> bool:
        """Always True: every value is a numpy array in the CPU's memory."""
        return True

    def data_ptr(self) -> int:
        """The address of the first element of the current value (realized now).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).data_ptr() > 0
        True
        """
        return int(self._value().ctypes.data)

    # --- new tensors like this one ---------------------------------------------------------

    def new_zeros(self, *size: Any, dtype: Any = None, requires_grad: bool = False,
                  device: Any = None, **given: Any) -> Any:
        """Zeros of ``size`` with this tensor's dtype (unless ``dtype`` is given).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1, dtype=pargraph.float64).new_zeros(2).dtype == pargraph.float64
        True
        """
        if given:
            size = ops.keyword_sizes(given, "size", size, "new_zeros")
        return self._new(size, 0, dtype, requires_grad)

    def new_ones(self, *size: Any, dtype: Any = None, requires_grad: bool = False,
                 device: Any = None, **given: Any) -> Any:
        """Ones of ``size`` with this tensor's dtype.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1).new_ones(2).tolist()
        [1.0, 1.0]
        """
        if given:
            size = ops.keyword_sizes(given, "size", size, "new_ones")
        return self._new(size, 1, dtype, requires_grad)

    def new_full(self, size: Any, fill_value: Any, dtype: Any = None,
                 requires_grad: bool = False, device: Any = None) -> Any:
        """``fill_value`` everywhere in ``size``, with this tensor's dtype.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1).new_full((2,), 7).tolist()
        [7.0, 7.0]
        """
        return self._new((size,), fill_value, dtype, requires_grad)

    def new_empty(self, *size: Any, dtype: Any = None, requires_grad: bool = False,
                  device: Any = None, **given: Any) -> Any:
        """An uninitialized tensor of ``size`` (zeros here), with this tensor's dtype.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.zeros(1).new_empty(2, 3).shape)
        (2, 3)
        """
        if given:
            size = ops.keyword_sizes(given, "size", size, "new_empty")
        return self.new_zeros(*size, dtype=dtype, requires_grad=requires_grad)

    def new_tensor(self, data: Any, dtype: Any = None, requires_grad: bool = False,
                   device: Any = None) -> Any:
        """``data`` as a new tensor with this tensor's dtype (unless ``dtype`` is given).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, dtype=pargraph.float64).new_tensor([1, 2]).dtype == pargraph.float64
        True
        """
        out = self._constant(data, np.dtype(dtype or self.dtype))
        return out.requires_grad_(requires_grad) if requires_grad else out

    # --- shapes --------------------------------------------------------------------------

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

    # --- products and interpolation ------------------------------------------------------

    def dot(self, other: Any) -> Any:
        """The inner product of two 1-D tensors.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0]).dot(pargraph.tensor([3.0, 4.0])).item()
        11.0
        """
        if self.dim() != 1 or other.dim() != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and "
                               f"{other.dim()}D tensors")
        return self @ other

    def mv(self, vec: Any) -> Any:
        """The product of this matrix and the vector ``vec`` (``torch.mv``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).mv(pargraph.tensor([1.0, 2.0, 3.0])).tolist()
        [6.0, 6.0]
        """
        if self.dim() != 2 or vec.dim() != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got 1, {self.dim()}, "
                               f"{vec.dim()}")
        if self.shape[1] != vec.shape[0]:
            raise RuntimeError(f"size mismatch, got input ({self.shape[0]}), mat "
                               f"({self.shape[0]}x{self.shape[1]}), vec ({vec.shape[0]})")
        return self @ vec

    def inner(self, other: Any) -> Any:
        """The products of the last dimension's entries summed, for every pair of the two
        tensors' other indices (shape ``self.shape[:-1] + other.shape[:-1]``), as
        ``torch.inner``; a 0-d tensor multiplies.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.inner(pargraph.tensor([1.0, 2.0]), pargraph.tensor([[3.0, 4.0]])).tolist()
        [11.0]
        """
        if self.dim() == 0 or other.dim() == 0:
            return self * other
        if self.shape[-1] != other.shape[-1]:
            raise RuntimeError(f"inner() the last dimension must match on both input tensors "
                               f"but got shapes {list(self.shape)} and {list(other.shape)}")
        size = self.shape[-1]
        product = self.reshape((-1, size)) @ other.reshape((-1, size)).T
        return product.reshape(tuple(self.shape[:-1]) + tuple(other.shape[:-1]))

    def polygamma(self, n: int) -> Any:
        """The ``n``-th derivative of ``digamma`` (``torch.polygamma(n, x)``).

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).polygamma(1).item(), 4)
        1.6449
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise RuntimeError(f"polygamma(n, x) does not support negative n. (n = {n})")
        return self._apply(ops.polygamma, self._node, n=n)

    def vdot(self, other: Any) -> Any:
        """``dot`` of two 1-D tensors (the first conjugated: the same for real tensors).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0]).vdot(pargraph.tensor([3.0, 4.0])).item()
        11.0
        """
        return self.dot(other)

    def ger(self, vec2: Any) -> Any:
        """``outer`` (PyTorch's older name)."""
        return self.outer(vec2)

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

    def mode(self, dim: int = -1, keepdim: bool = False) -> Any:
        """The most frequent value along ``dim`` (the smallest of several) and its index (its
        last occurrence), as ``torch.mode``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 1.0, 1.0]]).mode(1).values.tolist()
        [2.0, 1.0]
        """
        from pargraph.selection import ModeResult

        if not self.dim():
            return ModeResult(self.clone(), self._constant(np.zeros((), np.int64)))
        d = ops.normalize_dim(dim, self.dim())
        index = self._apply(ops.mode_index, self._node, dim=d)
        values = self.gather(d, index)
        if not keepdim:
            values, index = values.squeeze(d), index.squeeze(d)
        return ModeResult(values, index)

    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Any:
        """Counts in ``bins`` equal bins over ``[min, max]`` (the data's range when both are
        equal), as ``torch.histc``; not differentiable.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0, 1.0, 2.5, 4.0]).histc(bins=4, min=0, max=3).tolist()
        [0.0, 2.0, 1.0, 1.0]
        """
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                               "dimension 0")
        if min > max:
            raise RuntimeError("torch.histc: max must be larger than min")
        return self._apply(ops.histc, self.detach()._node, bins=int(bins), low=float(min),
                                    high=float(max))

    def outer(self, vec2: Any) -> Any:
        """The outer product of two 1-D tensors.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).outer(pargraph.tensor([3, 4])).tolist()
        [[3, 4], [6, 8]]
        """
        for name, vector in (("self", self), ("vec2", vec2)):
            if vector.ndim != 1:
                raise RuntimeError(f"outer: Expected 1-D argument {name}, but got "
                                   f"{vector.ndim}-D")
        return self.reshape((-1, 1)) * vec2.reshape((1, -1))

    @amp.autocasts("lower")
    def addmm(self, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * (mat1 @ mat2)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, 1).addmm(pargraph.ones(1, 2), pargraph.ones(2, 1)).tolist()
        [[2.0]]
        """
        return self._added(lambda wide: wide(mat1) @ wide(mat2), beta, alpha)

    def _added(self, product: Any, beta: float, alpha: float, once: bool = True) -> Any:
        """``beta * self + alpha * product(wide)``; with ``beta`` 0, ``self`` is ignored (its
        NaN and inf do not propagate), as PyTorch documents. ``product`` makes the product of
        its operands passed through ``wide``: for float16 and bfloat16 (``once``), as
        PyTorch's matrix kernels, the whole sum is computed in float32 and rounded once."""
        half = once and np.dtype(self.dtype) in ops.HALVES

        def wide(t: Any) -> Any:
            if not hasattr(t, "_node"):  # a number or an array
                t = self._wrap(self._operand(t))
            return t.float() if half else t

        start = self.float() if half else self
        made = product(wide)
        made = made if alpha == 1 else made * alpha
        if beta == 0:
            made = made + self._constant(np.zeros(tuple(start.shape), np.dtype(start.dtype)))
        else:
            made = (start if beta == 1 else start * beta) + made
        return made.to(self.dtype) if half else made

    def addmv(self, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * (mat @ vec)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).addmv(pargraph.ones(2, 3), pargraph.ones(3), alpha=2).tolist()
        [7.0, 7.0]
        """
        return self._added(lambda wide: wide(mat) @ wide(vec), beta, alpha)

    def addr(self, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * outer(vec1, vec2)``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 2).addr(pargraph.ones(2), pargraph.tensor([1.0, 2.0])).tolist()
        [[1.0, 2.0], [1.0, 2.0]]
        """
        return self._added(lambda wide: wide(vec1).outer(wide(vec2)), beta, alpha, once=False)

    @amp.autocasts("lower")
    def addbmm(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * sum_b (batch1[b] @ batch2[b])``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, 1).addbmm(pargraph.ones(3, 1, 2), pargraph.ones(3, 2, 1)).tolist()
        [[6.0]]
        """
        return self._added(lambda wide: (wide(batch1) @ wide(batch2)).sum(0), beta, alpha)

    def addmm_(self, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addmm` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(1, 1)
        >>> x.addmm_(pargraph.ones(1, 2), pargraph.ones(2, 1)) is x
        True
        """
        return self._in_place(self.addmm(mat1, mat2, beta=beta, alpha=alpha).to(self.dtype))

    def baddbmm_(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`baddbmm` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2, 1, 1)
        >>> x.baddbmm_(pargraph.ones(2, 1, 3), pargraph.ones(2, 3, 1)) is x
        True
        """
        return self._in_place(self.baddbmm(batch1, batch2, beta=beta, alpha=alpha)
                              .to(self.dtype))

    def addmv_(self, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addmv` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2)
        >>> x.addmv_(pargraph.ones(2, 3), pargraph.ones(3)) is x
        True
        """
        return self._in_place(self.addmv(mat, vec, beta=beta, alpha=alpha).to(self.dtype))

    def addr_(self, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addr` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2, 2)
        >>> x.addr_(pargraph.ones(2), pargraph.ones(2)) is x
        True
        """
        return self._in_place(self.addr(vec1, vec2, beta=beta, alpha=alpha).to(self.dtype))

    def addbmm_(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """:meth:`addbmm` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(1, 1)
        >>> x.addbmm_(pargraph.ones(3, 1, 2), pargraph.ones(3, 2, 1)) is x
        True
        """
        return self._in_place(self.addbmm(batch1, batch2, beta=beta, alpha=alpha)
                              .to(self.dtype))

    def bitwise_not_(self) -> Any:
        """:meth:`bitwise_not` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([0, 5])
        >>> x.bitwise_not_().tolist()
        [-1, -6]
        """
        return self._in_place(self.bitwise_not())

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

    def cholesky(self, upper: bool = False) -> Any:
        """The Cholesky factor (``torch.cholesky``; :func:`pargraph.linalg.cholesky`).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[4.0, 2.0], [2.0, 2.0]]).cholesky().tolist()
        [[2.0, 0.0], [1.0, 1.0]]
        """
        return self._apply(ops.cholesky, self._node, upper=upper)

    def cholesky_inverse(self, upper: bool = False) -> Any:
        """The inverse of ``A`` from its Cholesky factor (this tensor, lower or ``upper``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 0.0], [1.0, 1.0]]).cholesky_inverse().tolist()
        [[0.5, -0.5], [-0.5, 1.0]]
        """
        eye = self._constant(np.eye(self.shape[-1], dtype=np.dtype(self.dtype)))
        return eye.cholesky_solve(self, upper)

    def cholesky_solve(self, input2: Any, upper: bool = False) -> Any:
        """``X`` with ``A X = self``, ``A``'s Cholesky factor ``input2`` (lower or ``upper``).

        Examples
        --------
        >>> import pargraph
        >>> L = pargraph.tensor([[2.0, 0.0], [1.0, 1.0]])
        >>> pargraph.tensor([[2.0], [2.0]]).cholesky_solve(L).tolist()
        [[0.0], [1.0]]
        """
        factor = self._wrap(self._operand(input2))
        lower = factor.mT if upper else factor
        inner = self._apply(ops.solve_triangular, lower._node, self._node, upper=False)
        return self._apply(ops.solve_triangular, lower.mT._node, inner._node, upper=True)

    def nextafter(self, other: Any) -> Any:
        """The next floating point value after each element, toward ``other``.

        Examples
        --------
        >>> import pargraph
        >>> (pargraph.tensor([1.0]).nextafter(pargraph.tensor([2.0])) - 1).item() > 0
        True
        """
        return self._apply(ops.nextafter, self._node, self._operand(other))

    def mvlgamma(self, p: int) -> Any:
        """The log of the multivariate gamma function of dimension ``p``
        (``special.multigammaln``).

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([2.5]).mvlgamma(2).item(), 4)
        0.857
        """
        from pargraph.special import multigammaln

        return multigammaln(self, p)

    @amp.autocasts("lower")
    def baddbmm(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        """``beta * self + alpha * (batch1 @ batch2)``, batch by batch.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.zeros(2, 1, 1).baddbmm(pargraph.ones(2, 1, 3),
        ...                                       pargraph.ones(2, 3, 1)).shape)
        (2, 1, 1)
        """
        return self.addmm(batch1, batch2, beta=beta, alpha=alpha)

    def lerp(self, end: Any, weight: Any) -> Any:
        """``self + weight * (end - self)``, as PyTorch computes it: that formula where
        ``|weight| < 0.5``, else ``end - (end - self) * (1 - weight)``, each product added
        with one rounding (a fused multiply-add), float32 and narrower through float64.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).lerp(pargraph.ones(2), 0.25).tolist()
        [0.25, 0.25]
        """
        dtype = np.result_type(self.dtype, end.dtype) if hasattr(end, "_node") else self.dtype
        # The float32 the kernel works in (half precision too), its fused additions in float64
        # (the product of two float32 is exact there); float64 as it is.
        work = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
        start = self.to(work)
        end = end.to(work) if hasattr(end, "_node") else self._constant(end, work)
        difference = end - start
        if not isinstance(weight, (int, float)) and not hasattr(weight, "_node"):
            # A number a compiled step binds at each call (an Adafactor weight that follows
            # the step count): a 0-d tensor in the work dtype, as the kernel rounds it.
            weight = self._constant(0.0, work) + weight
        small = abs(weight) < 0.5 if isinstance(weight, (int, float)) else weight.abs() < 0.5
        if work == np.float32:
            start, end, difference = start.double(), end.double(), difference.double()
        if isinstance(weight, (int, float)):
            weight = float(np.asarray(weight, work))  # the kernel's weight is its own type
            near = start + difference * weight if small else \
                end - difference * float(np.asarray(1 - weight, work))
        else:
            weight = weight.to(work).to(difference.dtype)
            complement = (1 - weight.to(work)).to(difference.dtype)
            near = (start + difference * weight).where(small, end - difference * complement)
        return near.to(work).to(dtype)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``self + value * tensor1 * tensor2``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).addcmul(pargraph.ones(2), pargraph.ones(2) * 3, value=0.5).tolist()
        [2.5, 2.5]
        """
        return self + (tensor1 if value == 1 else tensor1 * value) * tensor2

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``self + value * tensor1 / tensor2``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).addcdiv(pargraph.ones(2), pargraph.ones(2) * 4).tolist()
        [1.25, 1.25]
        """
        return self + (tensor1 if value == 1 else tensor1 * value) / tensor2

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
        """The ``n``-th forward difference along ``dim`` (``x[i + 1] - x[i]``; for booleans,
        whether they differ), after ``prepend`` and ``append`` join the ends.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 4.0, 9.0]).diff().tolist()
        [3.0, 5.0]
        """
        if self.ndim == 0:
            raise RuntimeError("diff expects input to be at least one-dimensional")
        if n < 0:
            raise RuntimeError(f"order must be non-negative but got {n}")
        dim = ops.normalize_dim(dim, self.ndim)
        parts = [t if t.ndim else t.expand(*self.shape[:dim], 1, *self.shape[dim + 1:])
                 for t in (prepend, self, append) if t is not None]
        x = self._apply(ops.cat, *[t._node for t in parts], dim=dim) if len(parts) > 1 else self
        for _ in range(min(n, x.shape[dim])):
            later, earlier = x.narrow(dim, 1, x.shape[dim] - 1), \
                x.narrow(dim, 0, x.shape[dim] - 1)
            x = later != earlier if x.dtype == np.bool_ else later - earlier
        return x

    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        """``sum`` with NaN counted as zero.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, float("nan"), 2.0]).nansum().item()
        3.0
        """
        x = self.masked_fill(self.isnan(), 0) if self.dtype.kind == "f" else self
        return x.sum(dim, keepdim, dtype=dtype)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        """``mean`` of the values that are not NaN.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, float("nan"), 2.0]).nanmean().item()
        1.5
        """
        if self.dtype.kind != "f" and not ops.is_floating(self.dtype):
            raise RuntimeError("nanmean(): expected input to have floating point or complex "
                               f"dtype but got {ops.torch_name(self.dtype)}")
        kept = (~self.isnan()).sum(dim, keepdim)
        return self.nansum(dim, keepdim, dtype=dtype) / kept

    def count_nonzero(self, dim: Any = None) -> Any:
        """How many values are not zero (over ``dim``, an int or a tuple, or all).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 2.0, 3.0]).count_nonzero().item()
        2
        """
        return (self != 0).sum(dim) if dim is not None else (self != 0).sum()

    def std_mean(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
                 *, correction: Any = None) -> tuple:
        """``(std, mean)`` over ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> [t.item() for t in pargraph.tensor([1.0, 3.0]).std_mean()]
        [1.4142135381698608, 2.0]
        """
        return (self.std(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    def var_mean(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
                 *, correction: Any = None) -> tuple:
        """``(var, mean)`` over ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> [t.item() for t in pargraph.tensor([1.0, 3.0]).var_mean()]
        [2.0, 2.0]
        """
        return (self.var(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

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

    def dist(self, other: Any, p: float = 2) -> Any:
        """The ``p``-norm of ``self - other``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 0.0]).dist(pargraph.tensor([3.0, 4.0])).item()
        5.0
        """
        return (self - other).norm(p)

    def renorm(self, p: float, dim: int, maxnorm: float) -> Any:
        """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0, 4.0], [0.3, 0.4]]).renorm(2, 0, 1.0).tolist()[1]
        [0.30000001192092896, 0.4000000059604645]
        """
        dim = ops.normalize_dim(dim, self.ndim)
        others = tuple(d for d in range(self.ndim) if d != dim)
        norms = self.norm(p, others, keepdim=True) if others else self.abs()
        scale = (maxnorm / (norms + 1e-7)).masked_fill(norms <= maxnorm, 1.0)
        return self * scale

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

    def cov(self, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Any:
        """The covariance matrix of the variables in the rows (observations in the columns),
        with frequency and observation weights, as ``torch.cov``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 5.0], [4.0, 2.0]]).cov().tolist()
        [[8.0, -4.0], [-4.0, 2.0]]
        """
        if self.dtype == bool:
            raise RuntimeError("cov(): bool dtype is not supported for input")
        if self.ndim > 2:
            raise RuntimeError("cov(): expected input to have two or fewer dimensions but got "
                               f"an input with {self.ndim} dimensions")
        x = self.reshape(1, -1) if self.ndim < 2 else self
        if x.dtype.kind != "f":
            x = x.to(np.float32)
        weights = None
        for name, w in (("fweights", fweights), ("aweights", aweights)):
            if w is not None:
                if w.ndim > 1 or w.shape[0] != x.shape[1]:
                    raise RuntimeError(f"cov(): expected {name} to have one dimension and the "
                                       "same number of elements as the number of observations")
                weights = w if weights is None else weights * w
        total = weights.sum() if weights is not None else x.shape[1]
        mean = (x * weights).sum(1) / total if weights is not None else x.mean(1)
        if weights is None:
            factor = x.shape[1] - correction
        elif correction == 0:
            factor = total
        elif aweights is None:
            factor = total - correction
        else:
            factor = total - correction * (weights * aweights).sum() / total
        centered = x - mean.unsqueeze(1)
        weighted = centered * weights if weights is not None else centered
        product = weighted @ centered.transpose(0, 1)
        if isinstance(factor, (int, float)):
            return (product / max(factor, 0)).squeeze()
        return (product / factor.clamp(min=0)).squeeze()

    def corrcoef(self) -> Any:
        """The correlation coefficients of the variables in the rows (``cov`` over the
        products of the standard deviations, clipped to [-1, 1]).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 5.0], [4.0, 2.0]]).corrcoef().tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
        """
        c = self.cov()
        if c.ndim == 0:
            return c / c
        d = c.diagonal()
        stddev = d.sqrt()
        c = c / stddev.unsqueeze(1) / stddev.unsqueeze(0)
        return c.clamp(-1, 1)

    def logcumsumexp(self, dim: int) -> Any:
        """``log(cumsum(exp(x)))`` along ``dim``, without overflow or underflow.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-1000.0, 0.0]).logcumsumexp(0).tolist()
        [-1000.0, 0.0]
        """
        if self.ndim == 0:
            return self * 1
        return self._apply(ops.logcumsumexp, self._node, dim=ops.normalize_dim(dim, self.ndim))

    def inverse(self) -> Any:
        """The inverse of each square matrix (the last two dimensions), as
        ``torch.linalg.inv``; a singular one raises ``linalg.LinAlgError`` naming it.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 0.0], [0.0, 4.0]]).inverse().tolist()
        [[0.5, 0.0], [0.0, 0.25]]
        """
        return self._apply(ops.inv, self._node)

    def svd(self, some: bool = True, compute_uv: bool = True) -> Any:
        """``(U, S, V)`` with ``self = U diag(S) V^T`` (``torch.svd``: ``V``, not ``V^T``;
        ``some=False``: square ``U`` and ``V``; ``compute_uv=False``: square zeros for them).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0, 0.0], [0.0, -4.0]]).svd().S
        tensor([4., 3.])
        """
        from pargraph import linalg

        if not compute_uv:  # zeros of the square shapes, whatever ``some`` says
            m, n = self.shape[-2:]
            return SvdResult(self.new_zeros(self.shape[:-2] + (m, m)), linalg.svdvals(self),
                             self.new_zeros(self.shape[:-2] + (n, n)))
        u, s, vh = linalg.svd(self, full_matrices=not some)
        return SvdResult(u, s, vh.mT)

    def qr(self, some: bool = True) -> Any:
        """``(Q, R)`` with ``self = Q R`` (``some=False``: square ``Q``), as ``torch.qr``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[3.0], [4.0]]).qr().R.abs()
        tensor([[5.]])
        """
        from pargraph import linalg

        return QrResult(*linalg.qr(self, "reduced" if some else "complete"))

    def geqrf(self) -> Any:
        """LAPACK's QR factorization in its compact form ``(a, tau)``: ``R`` in the upper
        triangle of ``a``, the Householder vectors below it (not differentiable, as in
        PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> a, tau = pargraph.tensor([[3.0], [4.0]]).geqrf()
        >>> a[0].abs().item(), tau.shape
        (5.0, pargraph.Size([1]))
        """
        values = self._value()
        if values.ndim < 2:
            raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
        flat = values.reshape(-1, *values.shape[-2:])
        pairs = [np.linalg.qr(m, mode="raw") for m in flat]
        a = np.stack([h.T for h, _ in pairs]).reshape(values.shape).astype(values.dtype)
        tau = np.stack([t for _, t in pairs]).reshape(values.shape[:-2] + (-1,))
        return GeqrfResult(self._constant(a), self._constant(tau.astype(values.dtype)))

    def pinverse(self, rcond: float = 1e-15) -> Any:
        """The pseudoinverse, singular values below ``rcond`` times the largest dropped.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 0.0], [0.0, 0.0]]).pinverse()
        tensor([[0.5000, 0.0000],
                [0.0000, 0.0000]])
        """
        from pargraph import linalg

        return linalg.pinv(self, rtol=rcond)

    def matrix_exp(self) -> Any:
        """The exponential of each square matrix (``linalg.matrix_exp``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1, 1).matrix_exp().tolist()
        [[1.0]]
        """
        return self._apply(ops.matrix_exp, self._node)

    def det(self) -> Any:
        """The determinant of each square matrix.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2.0, 1.0], [1.0, 3.0]]).det().item()
        5.0
        """
        return self._apply(ops.det, self._node)

    def slogdet(self) -> Any:
        """``(sign, logabsdet)`` of each square matrix's determinant.

        Examples
        --------
        >>> import pargraph
        >>> [round(t.item(), 4) for t in pargraph.tensor([[1.0, 2.0], [3.0, 4.0]]).slogdet()]
        [-1.0, 0.6931]
        """
        return SlogdetResult(self._apply(ops.slogdet_sign, self._node),
                             self._apply(ops.logabsdet, self._node))

    def logdet(self) -> Any:
        """The logarithm of each square matrix's determinant: NaN where it is negative.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([[2.0, 1.0], [1.0, 3.0]]).logdet().item(), 4)
        1.6094
        """
        sign, logabsdet = self.slogdet()
        return logabsdet.masked_fill(sign < 0, float("nan"))

    def matrix_power(self, n: int) -> Any:
        """Each square matrix to the integer power ``n`` (the inverse's for negative ``n``;
        identity matrices for 0), by repeated squaring.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1.0, 1.0], [0.0, 1.0]]).matrix_power(3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
        """
        if self.ndim < 2 or self.shape[-1] != self.shape[-2]:
            raise RuntimeError(
                "linalg.matrix_power: A must be batches of square matrices, but they are "
                + (f"{self.shape[-2]} by {self.shape[-1]} matrices" if self.ndim >= 2 else
                   "not matrices"))
        if n == 0:
            eye = np.broadcast_to(np.eye(self.shape[-1], dtype=self.dtype), self.shape)
            return self._constant(eye)
        base, result = (self.inverse() if n < 0 else self), None
        n = abs(n)
        while n:
            if n & 1:
                result = base if result is None else result @ base
            n >>= 1
            if n:
                base = base @ base
        return result

    def cross(self, other: Any, dim: int | None = None) -> Any:
        """The cross product of 3-vectors along ``dim`` (the first of size 3 if None).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 0, 0]).cross(pargraph.tensor([0.0, 1, 0])).tolist()
        [0.0, 0.0, 1.0]
        """
        if dim is None:
            dim = next(d for d, n in enumerate(self.shape) if n == 3)
        d = ops.normalize_dim(dim, self.dim())
        if self.shape[d] != 3:
            raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                               f"{self.shape[d]} and {other.shape[d]}")
        a = [self.narrow(d, k, 1) for k in range(3)]
        b = [other.narrow(d, k, 1) for k in range(3)]
        parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
        return self._apply(ops.cat, *[p._node for p in parts], dim=d)

    def kron(self, other: Any) -> Any:
        """The Kronecker product.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 2]).kron(pargraph.tensor([1, 10])).tolist()
        [1, 10, 2, 20]
        """
        n = max(self.dim(), other.dim())
        a = self.reshape((1,) * (n - self.dim()) + tuple(self.shape))
        b = other.reshape((1,) * (n - other.dim()) + tuple(other.shape))
        spread_a = a.reshape(tuple(x for s in a.shape for x in (s, 1)))
        spread_b = b.reshape(tuple(x for s in b.shape for x in (1, s)))
        return (spread_a * spread_b).reshape(tuple(p * q for p, q in zip(a.shape, b.shape)))

    def atan2(self, other: Any) -> Any:
        """The angle of (other, self): ``atan(self / other)`` in the right quadrant.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).atan2(pargraph.tensor([1.0])).item(), 4)
        0.7854
        """
        return self._apply(ops.atan2, self._node, self._operand(other))

    def remainder(self, other: Any) -> Any:
        """Python's modulo, with the sign of the divisor (``%``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-3, 5]).remainder(4).tolist()
        [1, 1]
        """
        return self._apply(ops.remainder, self._node, self._operand(other))

    def round(self, decimals: int = 0) -> Any:
        """Round half to even (to ``decimals`` places).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.5, 1.5, 2.567]).round(decimals=1).tolist()
        [0.5, 1.5, 2.5999999046325684]
        """
        return self._apply(ops.round_, self._node, decimals=decimals)

    def __floordiv__(self, other: Any) -> Any:
        return self._apply(ops.floor_divide, self._node, self._operand(other))

    def __rfloordiv__(self, other: Any) -> Any:
        return self._apply(ops.floor_divide, self._operand(other), self._node)

    def __mod__(self, other: Any) -> Any:
        return self.remainder(other)

    def __rmod__(self, other: Any) -> Any:
        return self._apply(ops.remainder, self._operand(other), self._node)

    def floor_divide(self, other: Any) -> Any:
        """``self // other``, rounded toward minus infinity.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-7, 7]).floor_divide(2).tolist()
        [-4, 3]
        """
        return self // other

    def logical_and(self, other: Any) -> Any:
        """Elementwise ``and`` of truth values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 0]).logical_and(pargraph.tensor([1, 1])).tolist()
        [True, False]
        """
        return self._apply(ops.logical_and, self._node, self._operand(other))

    def logical_or(self, other: Any) -> Any:
        """Elementwise ``or`` of truth values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 0]).logical_or(pargraph.tensor([0, 0])).tolist()
        [True, False]
        """
        return self._apply(ops.logical_or, self._node, self._operand(other))

    def logical_xor(self, other: Any) -> Any:
        """Elementwise ``xor`` of truth values.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 0]).logical_xor(pargraph.tensor([1, 1])).tolist()
        [False, True]
        """
        return self._apply(ops.logical_xor, self._node, self._operand(other))

    def bitwise_and(self, other: Any) -> Any:
        """Elementwise ``&`` (``and`` for booleans); integers and booleans only.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, 10]).bitwise_and(pargraph.tensor([10, 3])).tolist()
        [8, 2]
        """
        return self._apply(ops.bitwise_and, self._node, self._operand(other))

    def bitwise_or(self, other: Any) -> Any:
        """Elementwise ``|`` (``or`` for booleans); integers and booleans only.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, 10]).bitwise_or(pargraph.tensor([10, 3])).tolist()
        [14, 11]
        """
        return self._apply(ops.bitwise_or, self._node, self._operand(other))

    def bitwise_xor(self, other: Any) -> Any:
        """Elementwise ``^`` (``xor`` for booleans); integers and booleans only.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, 10]).bitwise_xor(pargraph.tensor([10, 3])).tolist()
        [6, 9]
        """
        return self._apply(ops.bitwise_xor, self._node, self._operand(other))

    def bitwise_left_shift(self, other: Any) -> Any:
        """``self << other``, elementwise on integers; a shift by a negative amount or by the
        width or more gives 0, as in PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, -3]).bitwise_left_shift(2).tolist()
        [4, -12]
        """
        return self._apply(ops.bitwise_left_shift, self._node, self._operand(other))

    def bitwise_right_shift(self, other: Any) -> Any:
        """``self >> other``, elementwise on integers (arithmetic: the sign is kept); a shift
        by a negative amount or by the width or more gives 0 or -1, as in PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([16, -16]).bitwise_right_shift(2).tolist()
        [4, -4]
        """
        return self._apply(ops.bitwise_right_shift, self._node, self._operand(other))

    def gcd(self, other: Any) -> Any:
        """The greatest common divisor, elementwise, of integers (``gcd(0, 0)`` is 0).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([12, -18]).gcd(pargraph.tensor([8, 12])).tolist()
        [4, 6]
        """
        return self._apply(ops.gcd, self._node, self._operand(other))

    def lcm(self, other: Any) -> Any:
        """The least common multiple, elementwise, of integers (non-negative, as PyTorch's).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([4, -6]).lcm(pargraph.tensor([6, 4])).tolist()
        [12, 12]
        """
        return self._apply(ops.lcm, self._node, self._operand(other))

    def igamma(self, other: Any) -> Any:
        """The regularized lower incomplete gamma function ``P(self, other)``; differentiable
        in ``other`` (as PyTorch's, not in ``self``).

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).igamma(pargraph.tensor([1.0])).item(), 4)
        0.6321
        """
        return self._apply(ops.igamma, self._node, self._operand(other))

    def igammac(self, other: Any) -> Any:
        """The regularized upper incomplete gamma function ``1 - P(self, other)``.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([1.0]).igammac(pargraph.tensor([1.0])).item(), 4)
        0.3679
        """
        return self._apply(ops.igammac, self._node, self._operand(other))

    def frexp(self) -> Any:
        """``(mantissa, exponent)`` with ``self == mantissa * 2 ** exponent``, the mantissa's
        magnitude in [0.5, 1) (0, inf and nan stay), the exponent int32; the mantissa's
        gradient is ``grad / 2 ** exponent``, as PyTorch's.

        Examples
        --------
        >>> import pargraph
        >>> m, e = pargraph.tensor([3.0, -0.5]).frexp()
        >>> m.tolist(), e.tolist()
        ([0.75, -0.5], [2, 0])
        """
        if not ops.is_floating(np.dtype(self.dtype)):
            raise RuntimeError("torch.frexp() only supports floating-point dtypes")
        return FrexpResult(self._apply(ops.frexp_mantissa, self._node),
                           self._apply(ops.frexp_exponent, self._node))

    def ldexp(self, other: Any) -> Any:
        """``self * 2 ** other``, computed as PyTorch does (integers give floats).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 3.0]).ldexp(pargraph.tensor([3, -1])).tolist()
        [8.0, 1.5]
        """
        return self * (2.0 ** self._wrap(self._operand(other)))

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Any:
        """Elementwise ``|self - other| <= atol + rtol * |other|`` (infinities equal
        themselves; NaN equal to NaN with ``equal_nan``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0]).isclose(pargraph.tensor([1.0, 2.1])).tolist()
        [True, False]
        """
        other = other if hasattr(other, "_node") else self._constant(other)
        if self.dtype != other.dtype:
            raise RuntimeError(f"isclose(): Expected self and other to have the same dtype, "
                               f"but got {ops.torch_name(self.dtype)} and "
                               f"{ops.torch_name(other.dtype)}")
        if rtol < 0 or atol < 0:
            raise RuntimeError(f"isclose(): {'rtol' if rtol < 0 else 'atol'} must be greater "
                               f"than or equal to zero, but got {min(rtol, atol)}")
        if self.dtype == bool:
            return self == other
        # Infinities are close to themselves only: |inf - x| is never within a tolerance.
        within = (self - other).abs() <= (other.abs() * rtol + atol)
        if ops.is_floating(self.dtype):
            within = within & self.isfinite() & other.isfinite()
        close = within | (self == other)
        if equal_nan:
            close = close | (self.isnan() & other.isnan())
        return close

    def equal(self, other: Any) -> bool:
        """Whether both have the same shape and elements.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).equal(pargraph.ones(2))
        True
        """
        return tuple(self.shape) == tuple(other.shape) and bool((self == other).all())

    # --- what depends on the values (computed now, as PyTorch synchronizes for them) -------

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """The indices of the nonzero elements: a (count, dims) tensor, or one tensor per
        dimension with ``as_tuple``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[0, 3], [4, 0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        """
        found = np.nonzero(np.atleast_1d(self._value()))
        if as_tuple:  # a 0-d tensor counts as one dimension here, as in PyTorch
            return tuple(self._constant(axis.astype(np.int64)) for axis in found)
        return self._constant(np.stack(found, -1).astype(np.int64)[:, :self.ndim])

    def unique(self, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False, dim: int | None = None) -> Any:
        """The distinct elements, sorted (and where each element went, and how many of each).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3, 1, 3, 2]).unique().tolist()
        [1, 2, 3]
        """
        # Each NaN is its own value, as in PyTorch (numpy would gather them into one).
        values, inverse, counts = np.unique(self._value(), return_inverse=True,
                                            return_counts=True, axis=dim, equal_nan=False)
        out = [self._constant(values)]
        if return_inverse:
            shape = tuple(self.shape) if dim is None else (self.shape[dim],)
            out.append(self._constant(inverse.reshape(shape).astype(np.int64)))
        if return_counts:
            out.append(self._constant(counts.astype(np.int64)))
        return out[0] if len(out) == 1 else tuple(out)

    def nanmedian(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median of the elements that are not NaN (NaN where all are), of all
        elements or along ``dim`` with its index, as PyTorch.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([4.0, float("nan"), 1.0, 3.0]).nanmedian().item()
        3.0
        """
        from pargraph.selection import SortResult

        if self.dtype == bool:
            raise NotImplementedError('"nanmedian_cpu" not implemented for \'Bool\'')
        flat = dim is None
        x = self.reshape(-1) if flat else self
        d = 0 if flat else ops.normalize_dim(dim, max(self.dim(), 1))
        if x.ndim == 0:
            return x.clone() if flat else SortResult(x.clone(), self._constant(0, np.int64))
        ordered = x.sort(d)  # NaN sorts last
        count = (~x.isnan()).sum(d, keepdim=True)
        # All NaN: the middle one, as PyTorch picks it
        k = ((count - 1) // 2).where(count > 0, count.new_full((), (x.shape[d] - 1) // 2))
        values = ordered.values.gather(d, k)
        indices = ordered.indices.gather(d, k)
        if flat:
            return values.reshape(())
        if not keepdim:
            values, indices = values.squeeze(d), indices.squeeze(d)
        return SortResult(values, indices)

    def msort(self) -> Any:
        """The values sorted along the first dimension.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[2, 1], [0, 3]]).msort().tolist()
        [[0, 1], [2, 3]]
        """
        return self.sort(0).values

    def diagflat(self, offset: int = 0) -> Any:
        """A square matrix with the flattened elements on its ``offset`` diagonal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2]]).diagflat().tolist()
        [[1, 0], [0, 2]]
        """
        return self.reshape(-1).diag(offset)

    def is_nonzero(self) -> bool:
        """Whether the single element is not zero.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.5]).is_nonzero()
        True
        """
        if self.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if self.numel() > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.reshape(()).item() != 0)

    def sgn(self) -> Any:
        """The sign of each element (``sign``: the tensors are real).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.0, 0.0, 3.0]).sgn().tolist()
        [-1.0, 0.0, 1.0]
        """
        return self.sign()

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> Any:
        """Views along ``dim``: ``n`` parts as equal as can be (the first ones one longer),
        or the parts between the given indices.

        Examples
        --------
        >>> import pargraph
        >>> [t.tolist() for t in pargraph.arange(5).tensor_split(2)]
        [[0, 1, 2], [3, 4]]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        size = self.shape[d]
        if hasattr(indices_or_sections, "_node"):
            if indices_or_sections.ndim > 1 or indices_or_sections.dtype.kind not in "iu":
                raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                                   "zero-dimensional or one-dimensional tensor, but got a "
                                   f"tensor with {indices_or_sections.ndim} dims")
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, int):
            sections = indices_or_sections
            if sections <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
            lengths = [size // sections + (k < size % sections) for k in range(sections)]
            bounds = list(np.cumsum([0] + lengths))
        else:
            bounds = [0, *indices_or_sections, size]
        pieces = []
        for start, stop in zip(bounds[:-1], bounds[1:]):
            start, stop = min(max(start, 0), size), min(max(stop, 0), size)
            pieces.append(self.narrow(d, start, max(stop - start, 0)))
        return tuple(pieces)

    def _split_at(self, sections: Any, dim: int, name: str, least: int) -> Any:
        if self.dim() < least:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {least} "
                               f"dimension{'s' if least > 1 else ''}, but got a tensor with "
                               f"{self.dim()} dimension{'s' if self.dim() != 1 else ''}!")
        if isinstance(sections, int) and (sections == 0 or self.shape[dim] % sections):
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but "
                               f"the size of the dimension {self.shape[dim]} is not divisible "
                               f"by the split_size {sections}!")
        return self.tensor_split(sections, dim)

    def hsplit(self, sections: Any) -> Any:
        """``tensor_split`` along the columns (dimension 1, or 0 for a vector); an int must
        divide it.

        Examples
        --------
        >>> import pargraph
        >>> [t.shape[1] for t in pargraph.ones(2, 4).hsplit(2)]
        [2, 2]
        """
        return self._split_at(sections, 1 if self.dim() > 1 else 0, "hsplit", 1)

    def vsplit(self, sections: Any) -> Any:
        """``tensor_split`` along the rows (dimension 0) of a tensor of 2 or more dimensions.

        Examples
        --------
        >>> import pargraph
        >>> [t.shape[0] for t in pargraph.ones(4, 2).vsplit([1])]
        [1, 3]
        """
        return self._split_at(sections, 0, "vsplit", 2)

    def dsplit(self, sections: Any) -> Any:
        """``tensor_split`` along the depth (dimension 2) of a tensor of 3 or more dimensions.

        Examples
        --------
        >>> import pargraph
        >>> [t.shape[2] for t in pargraph.ones(1, 1, 4).dsplit(4)]
        [1, 1, 1, 1]
        """
        return self._split_at(sections, 2, "dsplit", 3)

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None) -> Any:
        """The elements with each run of equal consecutive ones made one (and where each
        element went, and each run's length).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 1, 2, 2, 3, 1, 1]).unique_consecutive().tolist()
        [1, 2, 3, 1]
        """
        values = self._value()
        if dim is None:
            flat = values.reshape(-1)
            starts = np.ones(flat.shape[0], bool)
            starts[1:] = flat[1:] != flat[:-1]
            out = [self._constant(flat[starts])]
            shape = tuple(self.shape)
        else:
            d = ops.normalize_dim(dim, max(self.dim(), 1))
            moved = np.moveaxis(values, d, 0).reshape(values.shape[d], -1)
            starts = np.ones(moved.shape[0], bool)
            starts[1:] = (moved[1:] != moved[:-1]).any(1)
            out = [self._constant(np.take(values, np.flatnonzero(starts), axis=d))]
            shape = (self.shape[d],)
        if return_inverse:
            out.append(self._constant((np.cumsum(starts) - 1).reshape(shape).astype(np.int64)))
        if return_counts:
            edges = np.append(np.flatnonzero(starts), starts.shape[0])
            out.append(self._constant(np.diff(edges).astype(np.int64)))
        return out[0] if len(out) == 1 else tuple(out)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median (of all elements, or along ``dim`` with its index, as PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([4.0, 1.0, 3.0, 2.0]).median().item()
        2.0
        """
        from pargraph.selection import SortResult

        if self.dtype == bool:
            raise NotImplementedError('"median_cpu" not implemented for \'Bool\'')
        if dim is None:
            flat = self.reshape(-1)
            return flat.sort(0).values[(flat.shape[0] - 1) // 2]
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        ordered = self.sort(d)
        k = (self.shape[d] - 1) // 2
        pick = (slice(None),) * d + (slice(k, k + 1) if keepdim else k,)
        return SortResult(ordered.values[pick], ordered.indices[pick])

    def multinomial(self, num_samples: int, replacement: bool = False,
                    generator: Any = None) -> Any:
        """``num_samples`` category indices drawn per row with these (unnormalized) weights.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 1.0, 0.0]).multinomial(2, replacement=True).tolist()
        [1, 1]
        """
        weights = np.asarray(self._value(), dtype=np.float64)
        rows = weights.reshape(-1, weights.shape[-1])
        if (rows < 0).any() or not np.isfinite(rows).all():
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if not replacement and num_samples > rows.shape[-1]:
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                               "replacement")
        if not replacement and ((rows > 0).sum(-1) < num_samples).any():
            raise RuntimeError("invalid multinomial distribution (with replacement=False, not "
                               "enough non-negative category to sample)")
        source = ops.defaults.generator if generator is None else generator.numpy_generator
        drawn = [source.choice(rows.shape[-1], num_samples, replace=replacement,
                               p=row / row.sum()) for row in rows]
        shape = weights.shape[:-1] + (num_samples,)
        return self._constant(np.asarray(drawn, dtype=np.int64).reshape(shape))

    # --- in place ------------------------------------------------------------------------

    def _in_place(self, result: Any) -> Any:
        """This tensor made ``result``, which the in-place op computed from it: the nodes
        that computation recorded after this tensor's value (a composite's several) are the
        op's own, whose use of the old value PyTorch allows."""
        self._check_in_place()
        old, new = self._node, result._node
        own = [n.uid for n in toposort([new], stop=lambda n: n.uid <= old.uid)
               if n.uid > old.uid]
        return self._rebind(new, min(own, default=new.uid))

    def lerp_(self, end: Any, weight: Any) -> Any:
        """``lerp`` in place (what an exponential moving average writes).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1).lerp_(pargraph.ones(1) * 4, 0.25).tolist()
        [1.0]
        """
        return self._in_place(self.lerp(end, weight).to(self.dtype))

    def addcmul_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``addcmul`` in place (what optimizers write).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).addcmul_(pargraph.ones(1), pargraph.ones(1), value=2).tolist()
        [3.0]
        """
        return self._in_place(self.addcmul(tensor1, tensor2, value=value))

    def addcdiv_(self, tensor1: Any, tensor2: Any, *, value: float = 1) -> Any:
        """``addcdiv`` in place (what optimizers write).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).addcdiv_(pargraph.ones(1), pargraph.ones(1) * 2).tolist()
        [1.5]
        """
        return self._in_place(self.addcdiv(tensor1, tensor2, value=value))

    def exp_(self) -> Any:
        """``exp`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(1).exp_().tolist()
        [1.0]
        """
        return self._in_place(self.exp())

    def relu_(self) -> Any:
        """``relu`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-1.0, 2.0]).relu_().tolist()
        [0.0, 2.0]
        """
        return self._in_place(self.relu())

    def t_(self) -> Any:
        """``t`` in place (the tensor takes the transposed shape, as in PyTorch).

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(2, 3).t_().shape)
        (3, 2)
        """
        self._check_in_place()
        self._replace(self.t()._node)
        return self

    def squeeze_(self, dim: Any = None) -> Any:
        """``squeeze`` in place.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(1, 2).squeeze_().shape)
        (2,)
        """
        self._check_in_place()
        self._replace((self.squeeze() if dim is None else self.squeeze(dim))._node)
        return self

    def unsqueeze_(self, dim: int) -> Any:
        """``unsqueeze`` in place.

        Examples
        --------
        >>> import pargraph
        >>> tuple(pargraph.ones(2).unsqueeze_(0).shape)
        (1, 2)
        """
        self._check_in_place()
        self._replace(self.unsqueeze(dim)._node)
        return self

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        """``masked_fill`` in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(2); x.masked_fill_(pargraph.tensor([True, False]), 5.0).tolist()
        [5.0, 0.0]
        """
        return self._in_place(self.masked_fill(mask, value))

    def index_fill_(self, dim: int, index: Any, value: Any) -> Any:
        """Set the slices at ``index`` along ``dim`` to ``value``, in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_fill_(0, pargraph.tensor([0, 2]), 1.0).tolist()
        [1.0, 0.0, 1.0]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        self[(slice(None),) * d + (index,)] = value
        return self

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
        """A copy with ``alpha * source``'s slices added at ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_add(0, pargraph.tensor([2, 2]), pargraph.ones(2)).tolist()
        [0.0, 0.0, 2.0]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        source = source if hasattr(source, "_node") else self._constant(source, self.dtype)
        source = source.to(self.dtype) * alpha if alpha != 1 else source.to(self.dtype)
        index = index if hasattr(index, "_node") else self._constant(index)
        spec = (slice(None),) * d + (ops.IndexSlot(0),)
        added = ops.index_add(source._node, index._node, shape=tuple(self.shape), spec=spec)
        return self + self._wrap(added)

    def index_copy(self, dim: int, index: Any, source: Any) -> Any:
        """A copy with ``source``'s slices written at ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_copy(0, pargraph.tensor([2, 0]), pargraph.ones(2)).tolist()
        [1.0, 0.0, 1.0]
        """
        out = self.clone()
        return out.index_copy_(dim, index, source)

    def index_copy_(self, dim: int, index: Any, source: Any) -> Any:
        """``index_copy`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).index_copy_(0, pargraph.tensor([1]), pargraph.ones(1)).tolist()
        [0.0, 1.0]
        """
        d = ops.normalize_dim(dim, max(self.dim(), 1))
        self[(slice(None),) * d + (index,)] = source
        return self

    def index_fill(self, dim: int, index: Any, value: Any) -> Any:
        """A copy with ``value`` at ``index`` along ``dim``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).index_fill(0, pargraph.tensor([1]), 2.0).tolist()
        [0.0, 2.0, 0.0]
        """
        return self.clone().index_fill_(dim, index, value)

    def masked_scatter(self, mask: Any, source: Any) -> Any:
        """A copy with ``source``'s first elements, in order, where ``mask`` is True.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(4).masked_scatter(pargraph.tensor([True, False, True, False]),
        ...                                  pargraph.tensor([5.0, 6.0, 7.0])).tolist()
        [5.0, 0.0, 6.0, 0.0]
        """
        return self.clone().masked_scatter_(mask, source)

    def masked_scatter_(self, mask: Any, source: Any) -> Any:
        """``masked_scatter`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).masked_scatter_(pargraph.tensor([False, True]),
        ...                                   pargraph.ones(1)).tolist()
        [0.0, 1.0]
        """
        mask = mask if hasattr(mask, "_node") else self._constant(mask)
        if mask.dtype != np.bool_:
            raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                               f"dtype {ops.torch_name(mask.dtype)}")
        mask = mask.expand_as(self)
        count = int(mask.sum().item())
        if count > source.numel():
            raise RuntimeError("masked_scatter: expected source to have at least as many "
                               f"elements as ones in mask ({count}), got {source.numel()}")
        self[mask] = source.reshape(-1)[:count]
        return self

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
        """Add ``alpha * source``'s slices at ``index`` along ``dim`` (repeats accumulate),
        in place.

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(3)
        >>> x.index_add_(0, pargraph.tensor([0, 0]), pargraph.tensor([1.0, 2.0])).tolist()
        [3.0, 0.0, 0.0]
        """
        return self._in_place(self.index_add(dim, index, source, alpha=alpha))

    def uniform_(self, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Any:
        """Fill with samples of U(a, b).

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(10).uniform_(2.0, 3.0) >= 2.0).all())
        True
        """
        return self._fill_drawn(lambda g, shape: g.uniform(a, b, shape), generator)

    def normal_(self, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
        """Fill with samples of N(mean, std²).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).normal_(5.0, 0.0).tolist()
        [5.0, 5.0]
        """
        return self._fill_drawn(lambda g, shape: g.normal(mean, std, shape), generator)

    def logical_not(self) -> Any:
        """Whether each element is zero (booleans).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 2.0]).logical_not().tolist()
        [True, False]
        """
        return self._apply(ops.logical_not, self._node)

    def short(self) -> Any:
        """A copy as int16.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2.7]).short().tolist()
        [2]
        """
        return self.to(np.dtype(np.int16))

    def char(self) -> Any:
        """A copy as int8.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.7]).char().tolist()
        [-2]
        """
        return self.to(np.dtype(np.int8))

    def clip(self, min: Any = None, max: Any = None) -> Any:
        """``clamp``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-2.0, 2.0]).clip(-1, 1).tolist()
        [-1.0, 1.0]
        """
        return self.clamp(min, max)

    def clip_(self, min: Any = None, max: Any = None) -> Any:
        """``clamp_``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0]).clip_(max=1.0).tolist()
        [1.0]
        """
        return self.clamp_(min, max)

    def trace(self) -> Any:
        """The sum of a matrix's diagonal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.eye(3).trace().item()
        3.0
        """
        if self.dtype == bool:
            raise NotImplementedError("\"trace\" not implemented for 'Bool'")
        if self.dim() != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim "
                               f"{self.dim()}")
        return self.diagonal().sum()

    def take(self, index: Any) -> Any:
        """The elements at the flat positions ``index`` (as if one-dimensional).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([[1, 2], [3, 4]]).take(pargraph.tensor([3, 0])).tolist()
        [4, 1]
        """
        from pargraph import functions

        return functions.take(self, index)

    def bincount(self, weights: Any = None, minlength: int = 0) -> Any:
        """How many times each non-negative integer occurs (``weights``: summed instead).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1, 1, 3]).bincount().tolist()
        [0, 2, 0, 1]
        """
        from pargraph import functions

        return functions.bincount(self, weights, minlength)

    def histogram(self, bins: Any = 100, *, range: Any = None, weight: Any = None,
                  density: bool = False) -> Any:
        """``pargraph.histogram`` of this tensor's elements.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 1.0, 1.0]).histogram(2).hist.tolist()
        [1.0, 2.0]
        """
        from pargraph import functions

        return functions.histogram(self, bins, range=range, weight=weight, density=density)

    def fmax(self, other: Any) -> Any:
        """The larger of each pair of elements, a NaN giving way to a number.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("nan"), 1.0]).fmax(pargraph.tensor([2.0, 0.0])).tolist()
        [2.0, 1.0]
        """
        return self._past_nan(other, "maximum")

    def fmin(self, other: Any) -> Any:
        """The smaller of each pair of elements, a NaN giving way to a number.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("nan"), 1.0]).fmin(pargraph.tensor([2.0, 0.0])).tolist()
        [2.0, 0.0]
        """
        return self._past_nan(other, "minimum")

    def _past_nan(self, other: Any, extreme: str) -> Any:
        """``maximum`` or ``minimum`` (``extreme``) where a NaN gives way to the other value,
        in the two operands' common dtype (bfloat16 with float16: float32)."""
        other = other if hasattr(other, "_node") else self._constant(other, self.dtype)
        common = ops.result_dtype(self._node, other._node)
        x, other = self.to(common), other.to(common)
        return getattr(x, extreme)(other).where(~(x.isnan() | other.isnan()),
                                                x.where(other.isnan(), other))

    def isposinf(self) -> Any:
        """Whether each element is +inf.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("inf"), float("-inf")]).isposinf().tolist()
        [True, False]
        """
        return self.isinf() & (self > 0)

    def isneginf(self) -> Any:
        """Whether each element is -inf.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("inf"), float("-inf")]).isneginf().tolist()
        [False, True]
        """
        return self.isinf() & (self < 0)

    def isreal(self) -> Any:
        """Whether each element is real: all are (tensors are real).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0]).isreal().tolist()
        [True]
        """
        return self._constant(np.ones(tuple(self.shape), bool))

    def is_signed(self) -> bool:
        """Whether the dtype has a sign (not bool or uint8).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1], dtype=pargraph.uint8).is_signed()
        False
        """
        return np.dtype(self.dtype) not in (np.dtype(np.bool_), np.dtype(np.uint8))

    def is_same_size(self, other: Any) -> bool:
        """Whether the two shapes are equal.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2).is_same_size(pargraph.zeros(2))
        True
        """
        return tuple(self.shape) == tuple(other.shape)

    @property
    def real(self) -> Any:
        """This tensor (it is real).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.5]).real.tolist()
        [1.5]
        """
        return self

    @property
    def imag(self) -> Any:
        """Raises, as PyTorch does for a real tensor."""
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")

    def conj(self) -> Any:
        """This tensor (its conjugate: it is real).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(1); x.conj() is x
        True
        """
        return self

    def tril_(self, diagonal: int = 0) -> Any:
        """``tril`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 2).tril_().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._in_place(self.tril(diagonal))

    def triu_(self, diagonal: int = 0) -> Any:
        """``triu`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 2).triu_().tolist()
        [[1.0, 1.0], [0.0, 1.0]]
        """
        return self._in_place(self.triu(diagonal))

    def cumsum_(self, dim: int, dtype: Any = None) -> Any:
        """``cumsum`` in place.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(3).cumsum_(0).tolist()
        [1.0, 2.0, 3.0]
        """
        return self._in_place(self.cumsum(dim, dtype=dtype).to(self.dtype))

    def fill_diagonal_(self, fill_value: Any, wrap: bool = False) -> Any:
        """Write ``fill_value`` on the main diagonal (all dimensions of equal length, or a
        matrix; ``wrap``: a tall matrix's diagonal starts again every ``columns + 1`` rows).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 3).fill_diagonal_(5.0).tolist()
        [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
        """
        if self.dim() < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.dim() > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        mask = np.zeros(tuple(self.shape), bool)
        if self.dim() == 2:
            rows, columns = self.shape
            positions = np.arange(0, rows * columns, columns + 1)
            if not wrap:
                positions = positions[positions < min(rows, columns) * columns]
            mask.reshape(-1)[positions] = True
        else:
            mask[(np.arange(self.shape[0]),) * self.dim()] = True
        return self._in_place(self.masked_fill(self._constant(mask), fill_value))

    def _fill_drawn(self, draw: Any, generator: Any) -> Any:
        """Fill with ``draw(numpy generator, shape)``: a random leaf, which a compiled step
        draws again at every replay (``factories.drawn``)."""
        from pargraph import factories

        source = ops.defaults.generator if generator is None else generator.numpy_generator
        shape, dtype = tuple(self.shape), self.dtype
        return self.copy_(factories.drawn(
            lambda: np.asarray(draw(source, shape)).astype(dtype)))

    def bernoulli_(self, p: float = 0.5, *, generator: Any = None) -> Any:
        """Fill with draws of Bernoulli(``p``): ones with probability ``p`` (a number or a
        tensor of probabilities), zeros otherwise.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).bernoulli_(1.0).tolist()
        [1.0, 1.0, 1.0]
        """
        if hasattr(p, "_node"):  # a tensor of probabilities: compared in the graph
            uniform = self.new_zeros(tuple(self.shape))
            uniform._fill_drawn(lambda g, shape: g.random(shape), generator)
            return self.copy_((uniform < p).to(self.dtype))
        return self._fill_drawn(lambda g, shape: g.random(shape) < p, generator)

    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> Any:
        """Fill with draws of the exponential distribution of rate ``lambd``.

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(100).exponential_(2.0) >= 0).all())
        True
        """
        return self._fill_drawn(lambda g, shape: g.exponential(1.0 / lambd, shape), generator)

    def geometric_(self, p: float, *, generator: Any = None) -> Any:
        """Fill with draws of the geometric distribution: the number of Bernoulli(``p``)
        trials up to the first success (1, 2, ...).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).geometric_(1.0).tolist()
        [1.0, 1.0]
        """
        return self._fill_drawn(lambda g, shape: g.geometric(p, shape), generator)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Any:
        """Fill with draws whose logarithm is N(``mean``, ``std``²).

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(10).log_normal_() > 0).all())
        True
        """
        return self._fill_drawn(lambda g, shape: g.lognormal(mean, std, shape), generator)

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Any:
        """Fill with draws of the Cauchy distribution.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).cauchy_(3.0, 0.0).tolist()
        [3.0, 3.0]
        """
        return self._fill_drawn(
            lambda g, shape: median + sigma * g.standard_cauchy(shape), generator)

    def random_(self, from_: int = 0, to: int | None = None, *, generator: Any = None) -> Any:
        """Fill with integers drawn uniformly from ``[from_, to - 1]`` (``random_(to)``: from
        0; without ``to``, up to what the dtype holds exactly: 2**24 for float32).

        Examples
        --------
        >>> import pargraph
        >>> bool((pargraph.zeros(20).random_(3, 5) >= 3).all())
        True
        """
        if to is None and from_ != 0:  # random_(to)
            from_, to = 0, from_
        if to is None:  # the largest integer the dtype holds exactly
            kind = np.dtype(self.dtype)
            if kind == ops.BFLOAT16:
                to = 2 ** 8 + 1
            elif ops.is_floating(kind):
                to = {2: 2 ** 11, 4: 2 ** 24, 8: 2 ** 53}[kind.itemsize] + 1
            else:
                to = 2 if kind == np.bool_ else int(np.iinfo(kind).max)
        if from_ >= to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} "
                               f">= to={to}")
        return self._fill_drawn(lambda g, shape: g.integers(from_, to, shape), generator)

    def unfold(self, dimension: int, size: int, step: int) -> Any:
        """The slices of ``size`` elements along ``dimension``, every ``step``: that
        dimension becomes the slices' count, and a new last one holds each slice.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]
        """
        d = ops.normalize_dim(dimension, max(self.dim(), 1))
        length = self.shape[d] if self.dim() else 1
        if size > length:
            raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size "
                               f"is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        count = (length - size) // step + 1
        picked = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
        x = self if self.dim() else self.reshape(1)
        taken = x.index_select(d, self._constant(picked))
        shape = tuple(x.shape[:d]) + (count, size) + tuple(x.shape[d + 1:])
        return taken.reshape(shape).movedim(d + 1, -1)

    @property
    def itemsize(self) -> int:
        """The bytes one element takes."""
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """The bytes the elements take."""
        return self.numel() * self.itemsize

    def index_put_(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        """``self[indices] = values`` (``accumulate``: ``+=``, repeated indices adding up).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.zeros(3)
        >>> x.index_put_((pargraph.tensor([0, 0]),), pargraph.tensor(1.0), accumulate=True)
        tensor([2., 0., 0.])
        """
        key = tuple(indices)
        if not accumulate:
            self[key] = values
            return self
        from pargraph._tensor import _index_spec

        values = values if hasattr(values, "_node") else self._constant(values, self.dtype)
        target = self[key]
        spec, index_nodes = _index_spec(key, tuple(self.shape))
        spread = values.to(self.dtype).expand(target.shape)
        added = ops.index_add(spread._node, *index_nodes, shape=tuple(self.shape), spec=spec)
        return self._in_place(self + self._wrap(added))

    def index_put(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        """A copy with ``index_put_`` applied.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2).index_put((pargraph.tensor([1]),), pargraph.tensor(5.0)).tolist()
        [0.0, 5.0]
        """
        return self.clone().index_put_(indices, values, accumulate)

    def put_(self, index: Any, source: Any, accumulate: bool = False) -> Any:
        """Write (``accumulate``: add) ``source`` at the flat positions ``index``, as if this
        tensor were one-dimensional.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 2).put_(pargraph.tensor([3]), pargraph.tensor([7.0])).tolist()
        [[0.0, 0.0], [0.0, 7.0]]
        """
        index = index if hasattr(index, "_node") else self._constant(index)
        flat = self.reshape(-1).index_put((index.reshape(-1),), source.reshape(-1), accumulate)
        return self._in_place(flat.reshape(tuple(self.shape)))

    def put(self, index: Any, source: Any, accumulate: bool = False) -> Any:
        """A copy with ``put_`` applied.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(3).put(pargraph.tensor([0]), pargraph.tensor([1.0])).tolist()
        [1.0, 0.0, 0.0]
        """
        return self.clone().put_(index, source, accumulate)

    def bitwise_not(self) -> Any:
        """Each bit flipped (``logical_not`` for booleans).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0, 5]).bitwise_not().tolist()
        [-1, -6]
        """
        if ops.is_floating(np.dtype(self.dtype)):
            raise RuntimeError("\"bitwise_not_cpu\" not implemented for 'Float'")
        return ~self

    def detach_(self) -> Any:
        """Detach this tensor from its graph, in place (it becomes a leaf).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.ones(1, requires_grad=True) * 2
        >>> x.detach_().requires_grad
        False
        """
        self._replace(self.detach()._node)
        self.requires_grad_(False)
        return self

    def byte(self) -> Any:
        """This tensor as ``uint8``.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.7, 300.0]).byte().tolist()
        [1, 44]
        """
        return self.to(np.dtype(np.uint8))

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Any:
        """No CUDA here: raises, as PyTorch built without CUDA does."""
        raise AssertionError("Torch not compiled with CUDA enabled (pargraph computes on the "
                             "CPU; drop .cuda() or use .to(device) with a CPU device)")


    # --- more elementwise functions (each also pargraph.<name>) ----------------------------

    def hypot(self, other: Any) -> Any:
        """sqrt(self^2 + other^2), without overflow.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([3.0]).hypot(pargraph.tensor([4.0])).tolist()
        [5.0]
        """
        return self._apply(ops.hypot, self._node, self._operand(other))

    def logaddexp(self, other: Any) -> Any:
        """log(exp(self) + exp(other)), without overflow.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([0.0]).logaddexp(pargraph.tensor([0.0])).item(), 4)
        0.6931
        """
        return self._apply(ops.logaddexp, self._node, self._operand(other))

    def logaddexp2(self, other: Any) -> Any:
        """log2(2^self + 2^other).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0]).logaddexp2(pargraph.tensor([1.0])).tolist()
        [2.0]
        """
        dtype = ops.result_dtype(self._node, other._node)
        if dtype.kind in "biu":  # before the scaling makes them floats: PyTorch's kernel
            raise NotImplementedError(f'"logaddexp2_cpu" not implemented for '
                                      f"'{ops.torch_name(dtype)}'")
        ln2 = math.log(2.0)  # in the common dtype: a float16 scaled alone loses digits
        return (self.to(dtype) * ln2).logaddexp(other.to(dtype) * ln2) / ln2

    def fmod(self, other: Any) -> Any:
        """The remainder with the sign of the dividend (C's ``fmod``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-3.0, 3.0]).fmod(2).tolist()
        [-1.0, 1.0]
        """
        return self._apply(ops.fmod, self._node, self._operand(other))

    def copysign(self, other: Any) -> Any:
        """|self| with the sign of ``other`` (a float result).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2.0, -3.0]).copysign(-1.0).tolist()
        [-2.0, -3.0]
        """
        return self._apply(ops.copysign, self._node, self._operand(other))

    def xlogy(self, other: Any) -> Any:
        """self * log(other), and 0 where self is 0.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.0, 2.0]).xlogy(pargraph.tensor([0.0, 1.0])).tolist()
        [0.0, 0.0]
        """
        return self._apply(ops.xlogy, self._node, self._operand(other))

    def deg2rad(self) -> Any:
        """Degrees to radians.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([180.0]).deg2rad().item(), 4)
        3.1416
        """
        return self * (math.pi / 180.0)

    def rad2deg(self) -> Any:
        """Radians to degrees.

        Examples
        --------
        >>> import pargraph
        >>> round(pargraph.tensor([3.14159265]).rad2deg().item(), 3)
        180.0
        """
        return self * (180.0 / math.pi)

    def frac(self) -> Any:
        """The fractional part, with the sign of the input (``self - trunc(self)``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.5, -2.25]).frac().tolist()
        [0.5, -0.25]
        """
        if self.dtype.kind in "biu":
            raise NotImplementedError(f'"frac_cpu" not implemented for '
                                      f"'{ops.torch_name(self.dtype)}'")
        return self - self.trunc()

    def logit(self, eps: float | None = None) -> Any:
        """log(p / (1 - p)); with ``eps``, p clamped to [eps, 1 - eps] first.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([0.5]).logit().tolist()
        [0.0]
        """
        p = self if ops.is_floating(self.dtype) else self.float()  # integers as PyTorch's
        p = p if eps is None else p.clamp(eps, 1 - eps)
        return (p / (1 - p)).log()

    def float_power(self, exponent: Any) -> Any:
        """The power in float64 (as PyTorch computes it).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([2]).float_power(3)
        tensor([8.], dtype=pargraph.float64)
        """
        base = self.double()
        if hasattr(exponent, "_node"):
            exponent = exponent.double()
        return base ** exponent

    def float_power_(self, exponent: Any) -> Any:
        """``float_power`` in place, into a float64 tensor only (its result is float64, which
        PyTorch casts into no other dtype).

        Examples
        --------
        >>> import pargraph
        >>> x = pargraph.tensor([0.5], dtype=pargraph.float64)
        >>> x.float_power_(2).tolist()
        [0.25]
        """
        if self.dtype != np.float64:
            raise RuntimeError(f"the base given to float_power_ has dtype "
                               f"{ops.torch_name(self.dtype)} but the operation's result "
                               "requires dtype Double")
        return self._in_place(self.float_power(exponent))

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> Any:
        """NaN, +inf and -inf replaced (by 0, the dtype's largest and its smallest finite).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([float("nan"), 1.0]).nan_to_num().tolist()
        [0.0, 1.0]
        """
        if not ops.is_floating(self.dtype):
            return self.clone()
        info = ml_dtypes.finfo(self.dtype)  # numpy's has no bfloat16
        high = float(info.max) if posinf is None else posinf
        low = float(info.min) if neginf is None else neginf
        out = self.masked_fill(self.isnan(), nan)
        out = out.masked_fill(self == float("inf"), high)
        return out.masked_fill(self == float("-inf"), low)

    def signbit(self) -> Any:
        """Whether the sign bit is set (-0.0 included).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-0.0, 0.0, -2.0]).signbit().tolist()
        [True, False, True]
        """
        if not ops.is_floating(self.dtype):
            return self < 0
        x = self.detach()
        return x.new_ones(x.shape).copysign(x) < 0  # infinities and NaN keep their sign

    def heaviside(self, values: Any) -> Any:
        """0 where negative, 1 where positive, ``values`` where zero (no derivative: a
        backward pass through it raises, as PyTorch's).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([-1.0, 0.0, 2.0]).heaviside(pargraph.tensor(0.5)).tolist()
        [0.0, 0.5, 1.0]
        """
        return self._apply(ops.heaviside, self._node, self._operand(values))

    def cumprod(self, dim: int, dtype: Any = None) -> Any:
        """Cumulative products along ``dim`` (exact gradients with zeros in the input).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.tensor([1.0, 2.0, 3.0]).cumprod(0).tolist()
        [1.0, 2.0, 6.0]
        """
        x = self if dtype is None else self.to(dtype)
        return self._apply(ops.cumprod, x._node, dim=ops.normalize_dim(dim, max(x.ndim, 1)))

    # --- PyTorch's other names for the same functions --------------------------------------

    def absolute(self) -> Any:
        """``abs``."""
        return self.abs()

    def clamp_min(self, min: Any) -> Any:
        """``clamp(min=min)``."""
        return self.clamp(min=min)

    def clamp_max(self, max: Any) -> Any:
        """``clamp(max=max)``."""
        return self.clamp(max=max)

    def clamp_min_(self, min: Any) -> Any:
        """``clamp_(min=min)``."""
        return self.clamp_(min=min)

    def clamp_max_(self, max: Any) -> Any:
        """``clamp_(max=max)``."""
        return self.clamp_(max=max)

    def arcsin(self) -> Any:
        """``asin``."""
        return self.asin()

    def arccos(self) -> Any:
        """``acos``."""
        return self.acos()

    def arctan(self) -> Any:
        """``atan``."""
        return self.atan()

    def arcsinh(self) -> Any:
        """``asinh``."""
        return self.asinh()

    def arccosh(self) -> Any:
        """``acosh``."""
        return self.acosh()

    def arctanh(self) -> Any:
        """``atanh``."""
        return self.atanh()

    def arctan2(self, other: Any) -> Any:
        """``atan2``."""
        return self.atan2(other)

    def multiply(self, other: Any) -> Any:
        """``mul``."""
        return self.mul(other)

    def divide(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """``div``."""
        return self.div(other, rounding_mode=rounding_mode)

    def true_divide(self, other: Any) -> Any:
        """``div`` without rounding."""
        return self.div(other)

    def subtract(self, other: Any, *, alpha: Any = 1) -> Any:
        """``sub``."""
        return self.sub(other, alpha=alpha)

    def negative(self) -> Any:
        """``neg``."""
        return self.neg()

    def positive(self) -> Any:
        """The tensor itself (``+x``)."""
        if self.dtype == bool:
            raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
        return self

    def greater(self, other: Any) -> Any:
        """``gt``."""
        return self.gt(other)

    def greater_equal(self, other: Any) -> Any:
        """``ge``."""
        return self.ge(other)

    def less(self, other: Any) -> Any:
        """``lt``."""
        return self.lt(other)

    def less_equal(self, other: Any) -> Any:
        """``le``."""
        return self.le(other)

    def not_equal(self, other: Any) -> Any:
        """``ne``."""
        return self.ne(other)

    def fix(self) -> Any:
        """``trunc``."""
        return self.trunc()

    def swapaxes(self, axis0: int, axis1: int) -> Any:
        """``transpose``."""
        return self.transpose(axis0, axis1)

    def swapdims(self, dim0: int, dim1: int) -> Any:
        """``transpose``."""
        return self.transpose(dim0, dim1)

    def movedim(self, source: Any, destination: Any) -> Any:
        """The dimensions at ``source`` (an int or a sequence) moved to ``destination``, the
        others in their order around them (a ``permute``).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.zeros(2, 3, 4).movedim(1, -1).shape
        pargraph.Size([2, 4, 3])
        """
        sources = [source] if isinstance(source, int) else list(source)
        destinations = [destination] if isinstance(destination, int) else list(destination)
        if len(sources) != len(destinations):
            raise RuntimeError(f"movedim: Invalid source or destination dims: source "
                               f"({sources} dims) should contain the same number of dims as "
                               f"destination ({destinations} dims)")
        sources = [ops.normalize_dim(d, self.ndim) for d in sources]
        destinations = [ops.normalize_dim(d, self.ndim) for d in destinations]
        for name, dims in (("source", sources), ("destination", destinations)):
            if len(set(dims)) != len(dims):
                raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
        order: list = [None] * self.ndim
        for s, d in zip(sources, destinations):
            order[d] = s
        rest = iter(d for d in range(self.ndim) if d not in sources)
        return self.permute(*[d if d is not None else next(rest) for d in order])

    def moveaxis(self, source: Any, destination: Any) -> Any:
        """``movedim``."""
        return self.movedim(source, destination)

    def ravel(self) -> Any:
        """The elements as one dimension (``reshape(-1)``)."""
        return self.reshape(-1)

    def split_with_sizes(self, split_sizes: Any, dim: int = 0) -> Any:
        """``split`` into pieces of ``split_sizes``."""
        return self.split(list(split_sizes), dim)

    def sum_to_size(self, *size: Any) -> Any:
        """The sum over the dimensions that ``size`` (which must broadcast to this tensor's
        shape) has as 1 or lacks, in ``size``'s shape.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(2, 3).sum_to_size(1, 3).tolist()
        [[2.0, 2.0, 2.0]]
        """
        size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        shape = tuple(self.shape)
        lead = len(shape) - len(size)
        if lead < 0 or any(s not in (1, n) for s, n in zip(size, shape[lead:])):
            raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                               f"{{{list(shape)}}}.")
        result = self.sum(tuple(range(lead))) if lead else self
        ones = tuple(d for d, (s, n) in enumerate(zip(size, shape[lead:])) if s == 1 and n != 1)
        return result.sum(ones, keepdim=True) if ones else result

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """``pargraph.allclose(self, other, ...)``."""
        from pargraph.functions import allclose

        return allclose(self, other, rtol, atol, equal_nan)

    def bernoulli(self, p: float | None = None, *, generator: Any = None) -> Any:
        """``pargraph.bernoulli(self, p)``: ones with this tensor's probabilities (or ``p``)."""
        from pargraph.functions import bernoulli

        return bernoulli(self, p, generator=generator)

    def hardshrink(self, lambd: float = 0.5) -> Any:
        """``nn.functional.hardshrink``."""
        from pargraph.nn.functional.activation import hardshrink

        return hardshrink(self, lambd)

    def prelu(self, weight: Any) -> Any:
        """``nn.functional.prelu``."""
        from pargraph.nn.functional.activation import prelu

        return prelu(self, weight)

    def cumprod_(self, dim: int, dtype: Any = None) -> Any:
        """``cumprod`` in place."""
        return self._in_place(self.cumprod(dim, dtype=dtype).to(self.dtype))

    def renorm_(self, p: float, dim: int, maxnorm: float) -> Any:
        """``renorm`` in place."""
        return self._in_place(self.renorm(p, dim, maxnorm))

    def polygamma_(self, n: int) -> Any:
        """``polygamma(n)`` in place."""
        return self._in_place(self.polygamma(n))

    def mvlgamma_(self, p: int) -> Any:
        """``mvlgamma(p)`` in place."""
        return self._in_place(self.mvlgamma(p))

    def get_device(self) -> int:
        """-1, PyTorch's number for the CPU."""
        return -1

    def is_pinned(self, device: Any = None) -> bool:
        """False: pinned memory is for copies to an accelerator, which pargraph lacks."""
        return False

    def pin_memory(self, device: Any = None) -> Any:
        """Raises, as PyTorch does on a machine without an accelerator."""
        raise RuntimeError("Cannot access accelerator device when none is available.")

    def is_conj(self) -> bool:
        """False: no tensor is a lazily conjugated view (so ``resolve_conj`` is itself)."""
        return False

    def is_neg(self) -> bool:
        """False: no tensor is a lazily negated view (so ``resolve_neg`` is itself)."""
        return False

    def resolve_conj(self) -> Any:
        """This tensor (see ``is_conj``)."""
        return self

    def resolve_neg(self) -> Any:
        """This tensor (see ``is_neg``)."""
        return self


#: The device and layout flags of PyTorch's tensors that are False for every pargraph tensor:
#: no accelerator, no sparse, quantized, nested or MKL-DNN layouts.
NOT_HERE = ("is_xpu", "is_mps", "is_meta", "is_sparse", "is_sparse_csr", "is_quantized",
            "is_mkldnn", "is_nested", "is_vulkan", "is_ipu", "is_mtia", "is_maia")
for _flag in NOT_HERE:
    setattr(EverydayMethods, _flag, property(lambda self: False,
                                             doc="Always False (see ``is_cuda``)."))
del _flag

#: Elementwise methods whose in-place forms (``sigmoid_``, ``eq_``) are generated below: the
#: out-of-place result, cast to the tensor's dtype (a comparison's booleans become 1 and 0), put
#: in the tensor's place.
IN_PLACE_UNARY = (
    "abs absolute acos acosh arccos arccosh arcsin arcsinh arctan arctanh asin asinh atan atanh "
    "ceil cos cosh deg2rad digamma erf erfc erfinv exp2 expm1 fix floor frac i0 lgamma log log10 "
    "log1p log2 logit logical_not nan_to_num neg negative rad2deg reciprocal round rsqrt sgn "
    "sigmoid sign sin sinc sinh sqrt square tan tanh trunc").split()
IN_PLACE_BINARY = (
    "atan2 arctan2 copysign divide eq floor_divide fmod ge greater greater_equal gt "
    "heaviside hypot le less less_equal lt multiply ne not_equal remainder subtract true_divide "
    "xlogy logical_and logical_or logical_xor ldexp igamma igammac nextafter").split()
#: Binary in-place forms of ops PyTorch has for integers and booleans only.
IN_PLACE_INTEGER = (
    "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift gcd lcm").split()


def _in_place_form(name: str, binary: bool, integer: bool = False) -> Any:
    def form(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self, name)(*args, **kwargs)
        ops.check_cast(result.dtype, self.dtype)  # sigmoid_ of integers raises
        result = result.to(self.dtype)
        if self.requires_grad and not result.requires_grad:  # a comparison: as PyTorch, the
            nowhere = self._constant(np.zeros(tuple(self.shape), bool))  # tensor keeps a
            result = self.where(nowhere, result)  # history, its gradient zero
        return self._in_place(result)

    argument = ("pargraph.tensor([2])" if integer else "pargraph.tensor([2.0])") if binary \
        else ""
    start = "pargraph.tensor([6])" if integer else "pargraph.tensor([0.5])"
    form.__name__ = form.__qualname__ = f"{name}_"
    form.__doc__ = (f"``{name}`` in place.\n\n        Examples\n        --------\n"
                    f"        >>> import pargraph\n        >>> x = {start}\n"
                    f"        >>> x.{name}_({argument}) is x\n        True\n        ")
    return form


for _name in IN_PLACE_UNARY:
    setattr(EverydayMethods, f"{_name}_", _in_place_form(_name, False))
for _name in IN_PLACE_BINARY:
    setattr(EverydayMethods, f"{_name}_", _in_place_form(_name, True))
for _name in IN_PLACE_INTEGER:
    setattr(EverydayMethods, f"{_name}_", _in_place_form(_name, True, integer=True))
del _name
