"""PyTorch's index keys (``x[key]``, ``x[key] = value``) as an index op's spec and inputs: the
key read as PyTorch reads it, ints applied before index arrays, masks realized and checked.
The tensor class comes in as ``tensor_type``: this module stands below it."""

from __future__ import annotations

from typing import Any

import numpy as np

from pargraph import ops
from pargraph.graph import Node


def as_torch_key(key: Any, ndim: int, tensor_type: type) -> Any:
    """``key`` as PyTorch reads it: a list holding a sequence, slice, None, ``...`` or tensor
    is a tuple of indices (``x[[(0, 1), (1, 2)]]`` is ``x[(0, 1), (1, 2)]``), as in numpy
    before 1.23; and with index arrays, ``...`` stands for its slices (numpy counts it as a
    separator of index arrays even where it spans no dimension, PyTorch does not)."""
    if type(key) is list and len(key) < 32 and any(
            item is None or item is Ellipsis or isinstance(item, (list, tuple, range, slice,
                                                                  tensor_type, np.ndarray))
            for item in key):
        key = tuple(key)
    if type(key) is not tuple or not any(item is Ellipsis for item in key) or not any(
            isinstance(item, (tensor_type, list, tuple, range, np.ndarray)) for item in key):
        return key
    masks = [_as_mask(item, tensor_type) for item in key]
    spanned = ndim - sum(_dims_indexed(i, m) for i, m in zip(key, masks) if i is not Ellipsis)
    expanded: list = []
    for item in key:
        if item is Ellipsis and not any(e is Ellipsis for e in expanded):
            expanded.extend([slice(None)] * spanned)
            if spanned < 0:  # too many indices: the usual error follows
                expanded.append(Ellipsis)
        else:
            expanded.append(item)
    return tuple(expanded)


def ints_first(key: Any, tensor_type: type) -> tuple[tuple, tuple] | None:
    """For a key mixing ints with index arrays, the two keys PyTorch applies in turn: the ints
    (a view), then the rest. numpy counts an int among the advanced indices, which moves the
    indexed dimensions to the front when a slice separates them (``x[0, :, idx]``); PyTorch
    selects first. None when the key does not mix them."""
    items = key if type(key) is tuple else (key,)
    ints = [type(i) is int or isinstance(i, np.integer) for i in items]
    advanced = [isinstance(i, (tensor_type, list, tuple, range, np.ndarray)) for i in items]
    if not any(ints) or not any(advanced):
        return None
    first, rest = [], []
    for item, is_int in zip(items, ints):
        if is_int:
            first.append(item)
        elif item is None:
            first.append(None)
            rest.append(slice(None))
        elif item is Ellipsis:
            first.append(Ellipsis)
            rest.append(Ellipsis)
        else:  # a mask spans its dimensions
            mask = _as_mask(item, tensor_type)
            first.extend([slice(None)] * (1 if mask is None else mask.ndim))
            rest.append(item)
    return tuple(first), tuple(rest)


def index_spec(key: Any, shape: tuple, tensor_type: type) -> tuple[tuple, list[Node]]:
    """Split an index into a static spec and the index tensors that become node inputs."""
    items = key if isinstance(key, tuple) else (key,)
    masks = [_as_mask(item, tensor_type) for item in items]
    spec: list = []
    index_nodes: list[Node] = []
    position = 0  # the dimension of the indexed tensor that the next item indexes
    for k, (item, mask) in enumerate(zip(items, masks)):
        if mask is not None:
            _check_mask(mask, shape, position)
            spec.extend(np.nonzero(mask))
            position += mask.ndim
        elif isinstance(item, tensor_type):
            if item.dtype.kind not in "iu":
                raise IndexError(f"tensors used as indices must be long, int or bool tensors, "
                                 f"got {item.dtype}")
            spec.append(ops.IndexSlot(len(index_nodes)))
            index_nodes.append(item._node)
            position += 1
        elif isinstance(item, (list, tuple, range, np.ndarray)):
            spec.append(np.asarray(list(item) if type(item) is range else item)
                        .astype(np.int64))
            position += 1
        elif item is Ellipsis:
            spec.append(item)
            # (by position: ``items.index`` would compare index tensors with ``...``)
            position = len(shape) - sum(_dims_indexed(i, m)
                                        for i, m in zip(items[k + 1:], masks[k + 1:]))
        elif item is None or isinstance(item, (int, slice, np.integer)):
            spec.append(item)
            position += item is not None
        else:
            raise IndexError(f"index: unsupported index type {type(item).__name__} (expected "
                             "int, slice, None, ..., a list, or an integer or bool tensor)")
    return tuple(spec), index_nodes


def _as_mask(item: Any, tensor_type: type) -> np.ndarray | None:
    """A bool index as a numpy array (a mask tensor is realized now: its result shape depends
    on its values, as in PyTorch), or ``None`` for any other index."""
    if isinstance(item, tensor_type):
        return item._value() if item.dtype == np.dtype(bool) else None
    if isinstance(item, (list, tuple, np.ndarray)):
        array = np.asarray(item)
        return array if array.dtype == bool else None
    return None


def _dims_indexed(item: Any, mask: np.ndarray | None) -> int:
    if mask is not None:
        return mask.ndim
    return 0 if item is None or item is Ellipsis else 1


def _check_mask(mask: np.ndarray, shape: tuple, position: int) -> None:
    for k, size in enumerate(mask.shape):
        if position + k >= len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        if size != shape[position + k]:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {k} does not "
                             f"match the shape of the indexed tensor {list(shape)} at index "
                             f"{position + k}")
