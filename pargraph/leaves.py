"""Python and numpy data into leaf nodes, with PyTorch's dtypes and errors: ``tensor(data)``,
the legacy ``Tensor(data)`` and ``Tensor(2, 3)``, and the numbers ops take as attributes."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops
from pargraph.graph import Node
from pargraph.ops import defaults


def legacy_leaf(data: Any, more: tuple) -> Node:
    """``Tensor(data)``: float32 values; ``Tensor(2, 3)``: a float32 tensor of that size (zeros,
    where PyTorch leaves the memory uninitialized); ``Tensor()``: an empty one."""
    if data is None or isinstance(data, int) and not isinstance(data, bool):
        sizes = (0,) if data is None else (data, *more)
        return ops.constant(np.zeros(sizes, dtype=np.float32))
    if more:
        raise TypeError(f"Tensor(): expected sizes (ints) or one sequence of data, got "
                        f"{type(data).__name__} and {len(more)} more argument(s)")
    return leaf_of(data, np.float32)


def leaf_of(data: Any, dtype: Any = None) -> Node:
    """A new leaf node holding a copy of ``data``: Python floats become float32 and Python
    ints int64, as in PyTorch; numpy arrays keep their dtype."""
    if hasattr(data, "_node"):  # a tensor: its values
        data = data.detach().numpy()
    from_python = not isinstance(data, (np.ndarray, np.generic))
    try:
        array = np.array(data)
    except ValueError:
        if from_python:
            _check_rectangular(data)
        raise
    if from_python and array.size and (array.dtype in (object, np.uint64) or (
            array.dtype.kind == "f" and float(np.abs(array).max()) >= 2.0 ** 63)) \
            and _only_ints(data):
        # Python ints beyond int64, which numpy keeps as uint64, objects or (beside smaller
        # ints) float64: PyTorch refuses them.
        raise ValueError("Overflow when unpacking long long")
    if array.dtype == object or (array.dtype.kind not in "biuf"
                                 and array.dtype != ops.BFLOAT16):
        raise TypeError(f"tensor: could not infer a numeric dtype from {type(data).__name__}")
    if dtype is not None:
        target = np.dtype(dtype)
    elif from_python and array.dtype.kind == "f":
        target = defaults.float
    elif from_python and array.dtype.kind in "iu":
        target = np.dtype(np.int64)
    else:
        target = array.dtype
    if from_python:
        ops.check_fits(array, target)
    return ops.constant(array.astype(target, copy=False))


def _check_rectangular(data: Any) -> None:
    """Raise PyTorch's error for nested lists of uneven lengths."""
    level = [data]
    for dim in range(64):
        sequences = [x for x in level if isinstance(x, (list, tuple))]
        if not sequences:
            return
        length = len(sequences[0])
        for x in level:
            if not isinstance(x, (list, tuple)):
                raise TypeError(f"expected a sequence at dim {dim}, as its other elements "
                                f"are, but got {type(x).__name__}")
            if len(x) != length:
                raise ValueError(f"expected sequence of length {length} at dim {dim} "
                                 f"(got {len(x)})")
        level = [item for x in sequences for item in x]


def _only_ints(data: Any) -> bool:
    """Whether nested lists and tuples ``data`` hold Python ints only (bools are not)."""
    pending = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, (list, tuple)):
            pending.extend(item)
        elif type(item) is not int:
            return False
    return True


def scalar(value: Any) -> Any:
    """A number as it is, a numpy scalar or a one-element tensor as a Python number."""
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "_node"):  # a tensor
        return value.item()
    return value
