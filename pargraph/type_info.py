"""Facts about dtypes, as PyTorch's functions give them: ``finfo``, ``iinfo``, the default
float dtype, and the promotion rules (``promote_types``, ``result_type``, ``can_cast``)."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from pargraph import dtypes, ops
from pargraph._tensor import operand


def finfo(type: Any = None) -> Any:
    """The limits of a floating point dtype (default: the default dtype), bfloat16 included:
    ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (``smallest_normal``), ``resolution``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.finfo(pargraph.bfloat16).eps, pargraph.finfo().bits
    (0.0078125, 32)
    """
    dtype = ops.defaults.float if type is None else np.dtype(type)
    if not ops.is_floating(dtype):
        raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo "
                        f"to handle '{dtype}'")
    return FloatInfo(ml_dtypes.finfo(dtype), dtype)


class FloatInfo:
    """What :func:`finfo` returns: PyTorch's fields as Python numbers, ``dtype`` a name."""

    def __init__(self, limits: Any, dtype: np.dtype) -> None:
        self.bits = int(limits.bits)
        self.eps, self.max, self.min = float(limits.eps), float(limits.max), float(limits.min)
        self.tiny = self.smallest_normal = float(limits.smallest_normal)
        # PyTorch's: 10 ** -(the decimal digits eps resolves), an exact power of ten.
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


def iinfo(type: Any) -> np.iinfo:
    """The limits of an integer dtype: ``bits``, ``max``, ``min``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.iinfo(pargraph.int32).max
    2147483647
    """
    dtype = np.dtype(type)
    if dtype.kind not in "iu":
        raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to "
                        f"handle '{dtype}'")
    return np.iinfo(dtype)


def get_default_dtype() -> np.dtype:
    """The default floating point dtype (float32 unless set).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.get_default_dtype() == pargraph.float32
    True
    """
    return dtypes.of(ops.defaults.float)


def set_default_dtype(d: Any) -> None:
    """Make ``d`` (float16, float32 or float64) the dtype of new float tensors and of Python
    floats in promotion, as ``torch.set_default_dtype``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.set_default_dtype(pargraph.float64); pargraph.tensor(1.5).dtype == pargraph.float64
    True
    >>> pargraph.set_default_dtype(pargraph.float32)
    """
    dtype = np.dtype(d)
    if not ops.is_floating(dtype):
        raise TypeError(f"only floating-point types are supported as the default type, got "
                        f"{dtype}")
    ops.defaults.float = dtype


def promote_types(type1: Any, type2: Any) -> Any:
    """The dtype two dtypes promote to, by PyTorch's rules.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.promote_types(pargraph.int64, pargraph.float32)
    pargraph.float32
    """
    return dtypes.of(ops.promote_types(np.dtype(type1), np.dtype(type2)))


def result_type(tensor1: Any, tensor2: Any) -> Any:
    """The dtype an arithmetic op of the two gives, by PyTorch's rules (a Python number or a
    0-d tensor counts only when it is of a higher kind).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.result_type(pargraph.tensor([1, 2]), 1.0)
    pargraph.float32
    """
    return dtypes.of(ops.result_dtype(operand(tensor1), operand(tensor2)))


def can_cast(from_: Any, to: Any) -> bool:
    """Whether PyTorch's type promotion allows casting ``from_`` to ``to`` (not to a lower
    kind: float to int, int to bool).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.can_cast(pargraph.float32, pargraph.int32)
    False
    """
    return ops.category(np.dtype(from_)) <= ops.category(np.dtype(to))
