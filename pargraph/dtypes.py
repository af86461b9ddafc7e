"""PyTorch's dtype objects: ``pargraph.float32`` and what ``tensor.dtype`` returns.

Each stands for the numpy dtype that holds the values (``np.dtype(pargraph.float32)`` is it,
through its ``dtype`` attribute) wherever numpy takes a dtype: equal to it, hashing as it,
its attributes (``kind``, ``name``, ``type``) read through. On top it has PyTorch's own:
``is_floating_point``, ``is_complex``, ``is_signed``, ``itemsize``, ``to_real()``,
``to_complex()``, and PyTorch's printed form with pargraph's name (``pargraph.float32``, where
PyTorch prints ``torch.float32``). There is one object per dtype: ``x.dtype is
pargraph.float32`` holds, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np


class dtype:  # noqa: N801  (PyTorch's name)
    """A tensor's element type; ``dtype(np.float32)`` is ``pargraph.float32``.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.ones(2)
    >>> x.dtype, x.dtype is pargraph.float32, x.dtype.is_floating_point, x.dtype.itemsize
    (pargraph.float32, True, True, 4)
    """

    __slots__ = ("dtype",)

    def __new__(cls, value: Any) -> dtype:
        if isinstance(value, dtype):
            return value
        found = KNOWN.get(np.dtype(value))
        if found is None:
            raise TypeError(f"pargraph has no dtype for {np.dtype(value)}")
        return found

    @classmethod
    def _made(cls, value: Any) -> dtype:
        made = object.__new__(cls)
        made.dtype = np.dtype(value)
        return made

    def __getattr__(self, name: str) -> Any:  # numpy's attributes: kind, name, type, char...
        return getattr(self.dtype, name)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, dtype):
            return self is other
        try:
            return self.dtype == np.dtype(other)
        except TypeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __reduce__(self) -> tuple:
        return dtype, (self.dtype,)

    def __repr__(self) -> str:
        return f"pargraph.{self.dtype.name}"

    __str__ = __repr__

    @property
    def is_floating_point(self) -> bool:
        return self.dtype.kind == "f" or self.dtype in LOW_FLOATS

    @property
    def is_complex(self) -> bool:
        return self.dtype.kind == "c"

    @property
    def is_signed(self) -> bool:
        return self.dtype.kind in "ifc" or self.dtype in LOW_FLOATS

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def to_real(self) -> dtype:
        """The real dtype of a complex one (the dtype itself if real)."""
        return dtype(self.dtype.type(0).real.dtype) if self.is_complex else self

    def to_complex(self) -> dtype:
        """The complex dtype of a floating one (the dtype itself if complex)."""
        if self.is_complex:
            return self
        if self.dtype in (np.dtype(np.float32), np.dtype(np.float64)):
            return dtype(np.result_type(self.dtype, np.complex64))
        raise RuntimeError(f"to_complex is not supported for {self}")


#: ml_dtypes' floats (numpy's kind "V"): floating point all the same.
LOW_FLOATS = frozenset(np.dtype(t) for t in (ml_dtypes.bfloat16,))
#: One object per dtype pargraph's tensors hold.
KNOWN: dict[np.dtype, dtype] = {
    np.dtype(t): dtype._made(t)
    for t in (bool, np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32,
              np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64,
              np.complex128)}


def of(value: np.dtype) -> Any:
    """The dtype object of a numpy dtype (the numpy dtype itself for one pargraph has no
    object for: strings, objects)."""
    return KNOWN.get(value, value)
