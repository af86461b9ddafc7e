"""``pargraph.save`` / ``pargraph.load``: checkpoints that never unpickle code.

A checkpoint is a numpy ``.npz`` archive. Arrays (tensors) are stored as members; everything
else (nesting, dict keys, numbers, strings) is JSON in one ``__structure__`` member. Loading
uses ``allow_pickle=False``, so a file holding a pickle is refused. Saving writes a temporary
file in the same folder and renames it over the target, so a crash while saving never destroys
the previous checkpoint.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy as np

from pargraph.tensor import Tensor, from_numpy

_STRUCTURE = "__structure__"


def _encode(obj: Any, arrays: dict) -> Any:
    if isinstance(obj, Tensor):
        return {"tensor": _store(obj.detach()._value(), arrays)}
    if isinstance(obj, np.ndarray):
        return {"ndarray": _store(obj, arrays)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {"dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, arrays) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"pargraph.save: cannot store a {type(obj).__name__} (checkpoints hold "
                    "tensors, numpy arrays, numbers, strings, and dicts, lists and tuples of "
                    "them)")


def _store(array: np.ndarray, arrays: dict) -> str:
    if array.dtype == object:
        raise TypeError("pargraph.save: object arrays cannot be stored (they need pickle)")
    name = f"a{len(arrays)}"
    arrays[name] = array
    return name


def _decode(obj: Any, archive: Any) -> Any:
    if isinstance(obj, list):
        return [_decode(v, archive) for v in obj]
    if not isinstance(obj, dict):
        return obj
    (kind, value), = obj.items()
    if kind == "tensor":
        return from_numpy(archive[value])
    if kind == "ndarray":
        return archive[value]
    if kind == "tuple":
        return tuple(_decode(v, archive) for v in value)
    return {_decode(k, archive): _decode(v, archive) for k, v in value}


def save(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` (a state dict, or nested dicts/lists of tensors and numbers) atomically.

    Examples
    --------
    >>> import os, tempfile, pargraph
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> pargraph.save({"w": pargraph.ones(2), "epoch": 3}, path)
    >>> pargraph.load(path)["epoch"]
    3
    """
    arrays: dict[str, np.ndarray] = {}
    structure = json.dumps(_encode(obj, arrays))
    arrays[_STRUCTURE] = np.frombuffer(structure.encode(), dtype=np.uint8)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                                         dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load(path: str | os.PathLike) -> Any:
    """Read a checkpoint written by :func:`save`; tensors come back as tensors.

    Examples
    --------
    >>> import os, tempfile, pargraph
    >>> path = os.path.join(tempfile.mkdtemp(), "state.npz")
    >>> pargraph.save({"bias": pargraph.zeros(3)}, path)
    >>> pargraph.load(path)["bias"].shape
    (3,)
    """
    try:
        with np.load(os.fspath(path), allow_pickle=False) as archive:
            if _STRUCTURE not in archive.files:
                raise ValueError("it has no __structure__ member")
            members = {name: archive[name] for name in archive.files}
    except ValueError as error:
        raise ValueError(f"pargraph.load: {os.fspath(path)!r} is not a pargraph checkpoint "
                         f"({error}); pargraph never loads pickled data") from None
    structure = json.loads(members.pop(_STRUCTURE).tobytes().decode())
    return _decode(structure, members)
