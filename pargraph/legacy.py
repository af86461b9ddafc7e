"""PyTorch's legacy tensor types (``FloatTensor``, ``LongTensor``, ...): constructors of a
dtype, ``isinstance`` checks of a tensor's dtype, and ``Tensor.type``'s names."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import tensor, zeros
from pargraph.methods.layout import TYPE_NAMES


class TensorType(type):
    """The class of the legacy types: calling one makes a tensor of its dtype, and
    ``isinstance(t, FloatTensor)`` asks whether ``t`` is a float32 tensor."""

    dtype: np.dtype

    def __instancecheck__(cls, value: Any) -> bool:
        return isinstance(value, Tensor) and value.dtype == cls.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        if not args:
            return zeros(0, dtype=cls.dtype, device=device)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            # A size: PyTorch leaves the memory uninitialized; pargraph's is zeros.
            return zeros(*args, dtype=cls.dtype, device=device)
        if len(args) > 1:
            raise TypeError(f"new(): expected sizes (ints) or one sequence of data, got "
                            f"{', '.join(type(a).__name__ for a in args)}")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype != cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {data.dtype}): "
                                f"{cls.__name__}(tensor) keeps the tensor's values, use "
                                f".to({cls.dtype}) to convert")
            return data
        if isinstance(data, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        return tensor(data, dtype=cls.dtype, device=device)

    def __repr__(cls) -> str:
        return f"<class 'torch.{cls.__name__}'>"


def _legacy(name: str, dtype: np.dtype) -> TensorType:
    return TensorType(name, (), {"dtype": dtype, "__doc__": f"{dtype} tensors (legacy)."})


#: Each legacy type, by PyTorch's name ("FloatTensor"), from the names ``Tensor.type()`` gives.
TYPES = {name.removeprefix("torch."): _legacy(name.removeprefix("torch."), np.dtype(dtype))
         for dtype, name in TYPE_NAMES.items()}
FloatTensor, DoubleTensor, HalfTensor = (TYPES[n] for n in ("FloatTensor", "DoubleTensor",
                                                           "HalfTensor"))
ByteTensor, CharTensor, ShortTensor = (TYPES[n] for n in ("ByteTensor", "CharTensor",
                                                         "ShortTensor"))
IntTensor, LongTensor, BoolTensor = (TYPES[n] for n in ("IntTensor", "LongTensor", "BoolTensor"))
BFloat16Tensor = TYPES["BFloat16Tensor"]
