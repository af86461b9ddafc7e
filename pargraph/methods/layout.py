"""Tensor methods: layout queries (one contiguous CPU array per tensor, as far as a program can
tell), device flags, conversions to another dtype (``to``, ``float``, ``type``), and ``new_*``
tensors like this one."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops
from pargraph.devices import check_device

#: PyTorch's names of the tensor types of each dtype (``Tensor.type()``, ``pargraph.legacy``).
TYPE_NAMES = {dtype: f"torch.{name}Tensor" for dtype, name in ops.TORCH_NAMES.items()}


class LayoutMethods:
    """Tensor's layout queries, device flags, dtype conversions and ``new_*`` tensors: a mixin
    of ``Tensor`` (``pargraph.methods`` says what the class it joins has)."""

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """Convert to a dtype (``"cpu"`` as a device is accepted and ignored).

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).to(pargraph.float64).dtype
        pargraph.float64
        """
        dtype = dtype_of_to(args, kwargs, "to")
        if dtype is None or np.dtype(dtype) == self.dtype:
            return self
        return self._apply(ops.cast, self._node, dtype=np.dtype(dtype))

    def cpu(self) -> Any:
        return self

    def float(self) -> Any:
        return self.to(np.float32)

    def double(self) -> Any:
        return self.to(np.float64)

    def long(self) -> Any:
        return self.to(np.int64)

    def bool(self) -> Any:
        return self.to(np.bool_)

    def half(self) -> Any:
        return self.to(np.float16)

    def bfloat16(self) -> Any:
        return self.to(ops.BFLOAT16)

    def int(self) -> Any:
        return self.to(np.int32)

    def type(self, dtype: Any = None) -> Any:
        """Without ``dtype``, PyTorch's type name (``"torch.FloatTensor"``); else ``to(dtype)``,
        where ``dtype`` may also be a legacy type (``pargraph.LongTensor``) or its name.

        Examples
        --------
        >>> import pargraph
        >>> pargraph.ones(1).type(), pargraph.ones(1).type(pargraph.float64).dtype
        ('torch.FloatTensor', pargraph.float64)
        >>> pargraph.ones(1).type("torch.LongTensor").dtype
        pargraph.int64
        """
        if dtype is None:
            return TYPE_NAMES.get(self.dtype, f"torch.{self.dtype.name}Tensor")
        if isinstance(dtype, str):
            named = {name: d for d, name in TYPE_NAMES.items()}
            if dtype not in named:
                raise ValueError(f"invalid type: '{dtype}'")
            dtype = named[dtype]
        elif isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), np.dtype):
            dtype = dtype.dtype
        return self.to(dtype)

    def clone(self, *, memory_format: Any = None) -> Any:
        return self._apply(ops.clone, self._node)

    def type_as(self, other: Any) -> Any:
        return self.to(other.dtype)

    def _constant(self, array: Any, dtype: Any = None) -> Any:
        return self._apply(ops.constant, np.array(array, dtype=dtype))

    def _new(self, size: tuple, fill: Any, dtype: Any, requires_grad: bool) -> Any:
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        out = self._constant(np.full(tuple(int(n) for n in size), fill,
                                     dtype=np.dtype(dtype or self.dtype)))
        return out.requires_grad_(requires_grad) if requires_grad else out

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


#: The device and layout flags of PyTorch's tensors that are False for every pargraph tensor:
#: no accelerator, no sparse, quantized, nested or MKL-DNN layouts.
NOT_HERE = ("is_xpu", "is_mps", "is_meta", "is_sparse", "is_sparse_csr", "is_quantized",
            "is_mkldnn", "is_nested", "is_vulkan", "is_ipu", "is_mtia", "is_maia")
for _flag in NOT_HERE:
    setattr(LayoutMethods, _flag, property(lambda self: False,
                                             doc="Always False (see ``is_cuda``)."))
del _flag


def dtype_of_to(args: tuple, kwargs: dict, where: str) -> Any:
    """The dtype a ``.to(...)`` call asks for (a dtype, or another tensor's), or ``None``;
    devices other than the CPU are refused."""
    dtype = kwargs.get("dtype")
    check_device(kwargs.get("device"), where)
    for arg in args:
        if hasattr(arg, "_node"):  # a tensor
            dtype = arg.dtype
        elif isinstance(arg, str) or type(arg).__name__ == "device":
            check_device(arg, where)
        else:
            dtype = arg
    return dtype
