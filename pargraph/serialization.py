"""``pargraph.save`` / ``pargraph.load``: checkpoints that unpickle code only when asked.

A checkpoint is a zip archive of ``.npy`` members, as ``numpy.savez`` writes it. Arrays
(tensors) are members ``a0.npy``, ``a1.npy``, ...; everything else (nesting, dict keys, numbers,
strings) is JSON in one ``__structure__`` member, which also records each array's shape and
dtype. An object JSON cannot hold (a whole module, as ``torch.save(model, path)`` saves it) is
pickled into a ``pickle`` member, its tensors still stored as ``.npy`` members. Loading follows
PyTorch's rule since 2.6: ``weights_only`` is True unless the program says False, and a weights
only load unpickles nothing but containers and the classes the program allowed
(``add_safe_globals``); any other class raises ``pickle.UnpicklingError``, naming it and the two
ways to load it.

Loading trusts nothing in the file: it reads the structure first (bounded in size), then only
the members the structure names, and checks each member's header and byte size against what
the structure says *before* reading its data, so a small file cannot make ``load`` allocate
gigabytes. A bare pickle file is not a checkpoint. Whatever is wrong with a file (truncated,
empty, flipped bits, not a zip, a crafted structure), ``load`` raises one error type,
:class:`CheckpointError`, naming the path and the problem.

Saving writes a temporary file ``<name>.<pid>-<random>.tmp`` in the target's folder and
renames it over the target, so a crash while saving never destroys the previous checkpoint.
A save also removes temporary files that dead processes left behind for the same target.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import pickle
import pickletools
import re
import secrets
import threading
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.context import context
from pargraph.devices import check_device
from pargraph.factories import from_numpy
from pargraph.interrupts import interrupts
from pargraph.nn.module import Buffer, Parameter
from pargraph.ops import BFLOAT16
from pargraph.remote.state import clusters
from pargraph.sparse import SparseTensor

_STRUCTURE = "__structure__"
_FORMAT = "pargraph-checkpoint"
_MAX_STRUCTURE_BYTES = 64 * 2**20
_MEMBER = re.compile(r"a\d+")
#: What ``load`` inflates at most unless told otherwise (``max_bytes=``).
DEFAULT_MAX_BYTES = 16 * 2**30
#: Deflate gives at most ~1032 bytes per compressed byte: a member declaring more lies.
_MAX_RATIO = 1100
_LOCAL_HEADER = 30  # bytes of a zip local file header before its name


class CheckpointError(ValueError):
    """A file that is not a readable pargraph checkpoint; the message names path and cause."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"pargraph.load: {path!r} is not a valid pargraph checkpoint: {problem}")
        self.path, self.problem = path, problem


# --- saving ------------------------------------------------------------------------------------

def _encode(obj: Any, arrays: dict) -> Any:
    if isinstance(obj, SparseTensor):
        return {"sparse_coo": {"indices": _store(obj._indices().detach()._value(), arrays),
                               "values": _store(obj._values().detach()._value(), arrays),
                               "size": list(obj.shape), "coalesced": obj.is_coalesced()}}
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
    raise _NeedsPickle(type(obj).__name__)


class _NeedsPickle(Exception):
    """An object the JSON structure cannot hold: the checkpoint is pickled instead."""


#: The member holding a pickled object.
_PICKLE = "pickle"


class _TensorPickler(pickle.Pickler):
    """A pickler that stores tensors and numeric arrays as ``.npy`` members (what
    :func:`_encode` makes of them) and pickles only the rest."""

    def __init__(self, file: IO[bytes], arrays: dict) -> None:
        super().__init__(file, protocol=4)
        self.arrays = arrays
        #: id -> (object, its persistent id): one object held twice (a parameter in a model
        #: and as an optimizer's state key) is one member, and one object again when loaded.
        self.seen: dict[int, tuple[Any, tuple]] = {}

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, SparseTensor):
            return None  # pickled as its parts (SparseTensor.__reduce_ex__), each a member
        if isinstance(obj, Tensor):
            kind = "parameter" if isinstance(obj, Parameter) else \
                "buffer" if isinstance(obj, Buffer) else "tensor"
        elif type(obj) is np.ndarray and obj.dtype.kind in "biufc":
            kind = "ndarray"
        else:
            return None
        if id(obj) not in self.seen:
            value = obj if kind == "ndarray" else obj.detach()._value()
            grad = kind != "ndarray" and bool(obj.requires_grad)
            self.seen[id(obj)] = (obj, ("pargraph", kind, _store(value, self.arrays), grad))
        return self.seen[id(obj)][1]


def _pickled(obj: Any, arrays: dict) -> dict:
    buffer = io.BytesIO()
    _TensorPickler(buffer, arrays).dump(obj)
    arrays[_PICKLE] = np.frombuffer(buffer.getvalue(), dtype=np.uint8)
    return {"pickled": _PICKLE}


def _store(array: np.ndarray, arrays: dict) -> dict:
    array = np.asarray(array)
    if array.dtype == BFLOAT16:  # numpy's format has no bfloat16: its bits, and a tag
        name = f"a{len(arrays)}"
        arrays[name] = array.view(np.uint16)
        return {"member": name, "shape": list(array.shape), "dtype": "<u2", "as": "bfloat16"}
    if array.dtype.kind not in "biufc":
        raise TypeError(f"pargraph.save: arrays of dtype {array.dtype} cannot be stored "
                        "(checkpoints hold numeric and bool arrays)")
    name = f"a{len(arrays)}"
    arrays[name] = array
    return {"member": name, "shape": list(array.shape), "dtype": array.dtype.str}


def save(obj: Any, path: str | os.PathLike | IO[bytes]) -> None:
    """Write ``obj`` (a state dict, or nested dicts/lists of tensors and numbers, or any
    object pickle can write, such as a whole module) atomically to ``path``, or into a binary
    file object (``io.BytesIO``, an open file) where it stands, as ``torch.save`` does (the
    object is the caller's: no temporary file, no rename).

    Examples
    --------
    >>> import os, tempfile, pargraph
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "model.npz")
    ...     pargraph.save({"w": pargraph.ones(2), "epoch": 3}, path)
    ...     pargraph.load(path)["epoch"]
    3
    """
    arrays: dict[str, np.ndarray] = {}
    try:
        root = _encode(obj, arrays)
    except _NeedsPickle:  # a module, an optimizer, a class of the program's: pickled
        arrays = {}
        root = _pickled(obj, arrays)
    structure = json.dumps({"format": _FORMAT, "version": 1, "root": root})
    arrays[_STRUCTURE] = np.frombuffer(structure.encode(), dtype=np.uint8)
    if hasattr(path, "write"):
        np.savez(path, **arrays)
        return
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(path)
    temporary = f"{os.path.abspath(path)}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    with interrupts.failsafe():  # a second Ctrl-C waits for the temporary file's removal
        try:
            with open(temporary, "xb") as file:
                np.savez(file, **arrays)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
            clusters.last_checkpoint = os.path.abspath(path)
        except BaseException as error:
            if os.path.exists(temporary):
                os.remove(temporary)
            interrupt = _interrupt_in(error)
            if interrupt is not None and interrupt is not error:
                raise interrupt from None
            raise
    _sync_folder(folder)


def _interrupt_in(error: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C behind ``error``, if one started it: cut short inside ``np.savez``, zipfile's
    own cleanup raises ``ValueError("Can't close the ZIP file ...")`` over the interrupt."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__context__
    return None


def _remove_stale_temporaries(path: str) -> None:
    """Delete ``<path>.<pid>-<random>.tmp`` files whose writing process no longer exists."""
    folder, base = os.path.split(os.path.abspath(path))
    pattern = re.compile(re.escape(base) + r"\.(\d+)-[0-9a-f]+\.tmp")
    for name in os.listdir(folder):
        match = pattern.fullmatch(name)
        if match and not _process_exists(int(match.group(1))):
            try:
                os.remove(os.path.join(folder, name))
            except FileNotFoundError:
                pass  # another save removed it first


def _process_exists(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


def _sync_folder(folder: str) -> None:
    """Make the rename durable (on platforms where folders can be opened)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


# --- loading -----------------------------------------------------------------------------------

def load(path: str | os.PathLike | IO[bytes], map_location: Any = None,
         weights_only: bool | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Read a checkpoint written by :func:`save` (from a path, or a binary file object with
    ``read`` and ``seek``, from where it stands); tensors come back as tensors.

    Raises :class:`CheckpointError` (a ``ValueError``) for any file that is not a valid
    checkpoint, and ``FileNotFoundError`` for a missing one. Before anything is inflated,
    every member's declared size is checked against the file (no member may overlap
    another, repeat a name, or claim more than deflate can give) and the total against
    ``max_bytes``; no member is read twice. ``map_location`` may name the CPU only (or be
    a function or mapping, as in PyTorch: every tensor loads on the CPU);
    ``weights_only`` (True unless False is given, as in PyTorch since 2.6) decides what a
    checkpoint holding a pickled object may unpickle: containers and the allowed classes
    only (:func:`add_safe_globals`), else :class:`pickle.UnpicklingError`; with False,
    anything (code runs: only for files from a trusted source). A checkpoint of tensors,
    numbers and containers holds no pickle and loads the same either way.

    Examples
    --------
    >>> import os, tempfile, pargraph
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "state.npz")
    ...     pargraph.save({"bias": pargraph.zeros(3)}, path)
    ...     pargraph.load(path)["bias"].shape
    pargraph.Size([3])
    """
    if not callable(map_location) and not isinstance(map_location, dict):
        check_device(map_location, "load")  # a function or a mapping has only the CPU to map

    def read(root: Any, reader: _MemberReader) -> Any:
        if isinstance(root, dict) and list(root) == ["pickled"]:
            return _unpickle(root["pickled"], reader, weights_only is not False)
        return _decode(root, reader)

    return _read(path, max_bytes, read)


def _read(path: Any, max_bytes: int, action: Any) -> Any:
    """``action(root, reader)`` on the checkpoint at ``path`` (a path or a binary file object),
    its members checked first; every problem of the file a :class:`CheckpointError`."""
    if hasattr(path, "read"):
        source, path = path, str(getattr(path, "name", None) or type(path).__name__)
        start = source.tell()
        size = source.seek(0, os.SEEK_END) - start
        source.seek(start)
    else:
        source = path = os.fspath(path)
        size = None
    try:
        with zipfile.ZipFile(source) as archive:
            _check_members(path, archive, os.path.getsize(path) if size is None else size,
                           max_bytes)
            reader = _MemberReader(path, archive, max_bytes)
            return action(_read_structure(reader), reader)
    except (FileNotFoundError, IsADirectoryError, PermissionError, CheckpointError,
            pickle.UnpicklingError):
        raise
    except RecursionError:
        raise CheckpointError(path, "its structure is nested too deeply") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError,
            KeyError, TypeError, NotImplementedError) as error:
        problem = str(error) or type(error).__name__
        raise CheckpointError(path, f"{problem} ({type(error).__name__}); the file is damaged "
                                    "or was not written by pargraph.save") from None


def _pickle_bytes(name: Any, reader: _MemberReader) -> bytes:
    if name != _PICKLE:
        raise reader.fail(f"its structure names pickle member {name!r}")
    return reader.array(_PICKLE, {"shape": None, "dtype": "|u1"}).tobytes()


def _unpickle(name: Any, reader: _MemberReader, weights_only: bool) -> Any:
    data = _pickle_bytes(name, reader)
    unpickler = (_WeightsUnpickler if weights_only else _Unpickler)(io.BytesIO(data), reader)
    return unpickler.load()


class _Unpickler(pickle.Unpickler):
    """Unpickles anything (``weights_only=False``); tensors come from their members."""

    def __init__(self, file: IO[bytes], reader: _MemberReader) -> None:
        super().__init__(file)
        self.reader = reader
        self.loaded: dict[str, Any] = {}  # by member: one object for all its references

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 4 and pid[0] == "pargraph"
                and isinstance(pid[2], dict)):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r:.80}")
        member = pid[2].get("member")
        if member not in self.loaded:
            self.loaded[member] = self._load(*pid[1:])
        return self.loaded[member]

    def _load(self, kind: str, declared: dict, requires_grad: bool) -> Any:
        if kind == "ndarray":
            return _decode({"ndarray": declared}, self.reader)
        tensor = _decode({"tensor": declared}, self.reader)
        if kind == "parameter":
            return Parameter(tensor, requires_grad=bool(requires_grad))
        if kind == "buffer":
            return Buffer(tensor)
        return tensor.requires_grad_(True) if requires_grad else tensor


#: What a weights-only load unpickles without being told: containers, as PyTorch's.
_ALWAYS_SAFE = {("collections", "OrderedDict"), ("builtins", "set"),
                ("builtins", "frozenset"), ("builtins", "slice"), ("builtins", "complex")}


def _global_name(value: Any) -> tuple[str, str]:
    return getattr(value, "__module__", ""), getattr(value, "__qualname__", repr(value))


class _WeightsUnpickler(_Unpickler):
    """Unpickles containers and the allowed classes only (``weights_only=True``)."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = {_global_name(g): g for g in allowed_globals.get()}
        if (module, name) in allowed:
            return allowed[module, name]
        if (module, name) in _ALWAYS_SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(_weights_only_message(f"{module}.{name}", name))


def _weights_only_message(full: str, name: str) -> str:
    return (f"Weights only load failed. This file can still be loaded, to do so you have two "
            f"options, do those steps only if you trust the source of the checkpoint.\n\t(1) "
            f"Re-running `pargraph.load` with `weights_only` set to `False` will likely "
            f"succeed, but it can result in arbitrary code execution. Do it only if you got "
            f"the file from a trusted source.\n\t(2) Alternatively, to load with "
            f"`weights_only=True` allow the class.\n\tWeightsUnpickler error: Unsupported "
            f"global: GLOBAL {full} was not an allowed global by default. Please use "
            f"`pargraph.serialization.add_safe_globals([{name}])` or the "
            f"`pargraph.serialization.safe_globals([{name}])` context manager to allowlist "
            f"this global if you trust this class/function.")


def _globals_in(data: bytes) -> list[str]:
    """``module.name`` of every global a pickle refers to, read without unpickling it."""
    found, strings, memo = [], [], {}
    for opcode, arg, _ in pickletools.genops(data):
        if opcode.name == "GLOBAL":
            found.append(arg.replace(" ", "."))
        elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.append(f"{strings[-2]}.{strings[-1]}")
        elif isinstance(arg, str) and "UNICODE" in opcode.name:
            strings.append(arg)
        elif opcode.name == "MEMOIZE" and strings:
            memo[len(memo)] = strings[-1]
        elif opcode.name in ("BINGET", "LONG_BINGET", "GET") and arg in memo:
            strings.append(memo[arg])
    return list(dict.fromkeys(found))


class SafeGlobals:
    """The classes and functions a program allows in checkpoints (PyTorch's
    ``torch.serialization`` allow-list for ``weights_only`` loading): a weights-only load of a
    pickled checkpoint unpickles these, containers, and nothing else.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.serialization.safe_globals([dict]):
    ...     dict in pargraph.serialization.get_safe_globals()
    True
    """

    def __init__(self) -> None:
        self._allowed: list[Any] = []
        self._lock = threading.Lock()

    def add(self, globals_: list) -> None:
        with self._lock:
            self._allowed += [g for g in globals_ if g not in self._allowed]

    def remove(self, globals_: list) -> None:
        with self._lock:
            self._allowed = [g for g in self._allowed if g not in globals_]

    def get(self) -> list:
        with self._lock:
            return list(self._allowed)

    def clear(self) -> None:
        with self._lock:
            self._allowed = []


#: The process's allow-list (PyTorch's is per process too).
allowed_globals = context.register("safe_globals", SafeGlobals())


def add_safe_globals(safe_globals: list) -> None:
    """Allow ``safe_globals`` in weights-only loads of pickled checkpoints.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.serialization.add_safe_globals([set])
    >>> set in pargraph.serialization.get_safe_globals()
    True
    >>> pargraph.serialization.clear_safe_globals()
    """
    allowed_globals.add(list(safe_globals))


def get_safe_globals() -> list:
    """The allowed classes and functions (see :class:`SafeGlobals`).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.serialization.get_safe_globals()
    []
    """
    return allowed_globals.get()


def clear_safe_globals() -> None:
    """Empty the allow-list.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.serialization.clear_safe_globals()
    """
    allowed_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list) -> Iterator[None]:
    """Allow ``safe_globals`` in weights-only loads inside the block.

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.serialization.safe_globals([frozenset]):
    ...     pass
    """
    added = [g for g in safe_globals if g not in allowed_globals.get()]
    allowed_globals.add(added)
    try:
        yield
    finally:
        allowed_globals.remove(added)


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike) -> list[str]:
    """The classes and functions (``module.name``) a weights-only load of ``f`` would need
    allowed, read without unpickling anything: none for a checkpoint of tensors, numbers and
    containers; a file that is not a checkpoint raises :class:`CheckpointError` as
    :func:`load` does.

    Examples
    --------
    >>> import os, tempfile, pargraph
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "state.npz")
    ...     pargraph.save({"step": 3}, path)
    ...     pargraph.serialization.get_unsafe_globals_in_checkpoint(path)
    []
    """
    def unsafe(root: Any, reader: _MemberReader) -> list[str]:
        if not (isinstance(root, dict) and list(root) == ["pickled"]):
            _decode(root, reader)  # checks the file as a load does
            return []
        allowed = {_global_name(g) for g in allowed_globals.get()} | _ALWAYS_SAFE
        return [name for name in _globals_in(_pickle_bytes(root["pickled"], reader))
                if tuple(name.rsplit(".", 1)) not in allowed]

    return _read(f, DEFAULT_MAX_BYTES, unsafe)


def _read_structure(reader: _MemberReader) -> Any:
    raw = reader.array(_STRUCTURE, {"shape": None, "dtype": "|u1"}, _MAX_STRUCTURE_BYTES)
    if raw.ndim != 1:
        raise CheckpointError(reader.path, "its __structure__ member is not a byte string")
    try:
        structure = json.loads(raw.tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(reader.path, f"its __structure__ is not valid JSON ({error})"
                              ) from None
    if isinstance(structure, dict) and structure.get("format") == _FORMAT:
        if structure.get("version") != 1:
            raise CheckpointError(reader.path, f"format version {structure.get('version')!r} "
                                               "is newer than this pargraph reads (1)")
        return structure.get("root")
    return structure  # pargraph 0.1's checkpoints: the bare structure


def _check_members(path: str, archive: zipfile.ZipFile, size: int, max_bytes: int) -> None:
    """Refuse an archive whose members could make ``load`` inflate more than the file
    holds: repeated names, members outside the file or overlapping another (one deflated
    block read as many members), sizes deflate cannot give, or more than ``max_bytes``."""
    members = archive.infolist()
    names: set[str] = set()
    total = 0
    for info in members:
        if info.filename in names:
            raise CheckpointError(path, f"member {info.filename!r} appears twice")
        names.add(info.filename)
        end = info.header_offset + _LOCAL_HEADER + len(info.filename.encode()) + \
            info.compress_size
        if end > size:
            raise CheckpointError(path, f"member {info.filename!r} reaches past the end of "
                                        f"the file ({end} of {size} bytes)")
        stored = info.compress_type == zipfile.ZIP_STORED
        if (stored and info.file_size != info.compress_size) or \
                info.file_size > max(info.compress_size, 1) * _MAX_RATIO:
            raise CheckpointError(path, f"member {info.filename!r} declares {info.file_size} "
                                        f"bytes from {info.compress_size} compressed")
        total += info.file_size
    if total > max_bytes:
        raise CheckpointError(path, f"its members declare {total} bytes in all, more than "
                                    f"max_bytes={max_bytes} (pass a larger max_bytes to load "
                                    "it)")
    ordered = sorted(members, key=lambda info: info.header_offset)
    for first, second in zip(ordered, ordered[1:]):
        if second.header_offset < first.header_offset + _LOCAL_HEADER + \
                len(first.filename.encode()) + first.compress_size:
            raise CheckpointError(path, f"members {first.filename!r} and {second.filename!r} "
                                        "overlap")


class _MemberReader:
    """Reads named ``.npy`` members of the archive, checking each against the structure,
    each at most once and no more than ``max_bytes`` in all."""

    def __init__(self, path: str, archive: zipfile.ZipFile,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path, self.archive = path, archive
        self.read: set[str] = set()
        self.left = max_bytes

    def fail(self, problem: str) -> CheckpointError:
        return CheckpointError(self.path, problem)

    def array(self, name: str, declared: dict, limit: int | None = None) -> np.ndarray:
        try:
            info = self.archive.getinfo(name + ".npy")
        except KeyError:
            raise self.fail(f"member {name!r} is missing") from None
        if limit is not None and info.file_size > limit:
            raise self.fail(f"member {name!r} is {info.file_size} bytes (at most {limit})")
        if name in self.read:
            raise self.fail(f"its structure names member {name!r} twice")
        self.read.add(name)
        self.left -= info.file_size
        if self.left < 0:
            raise self.fail("its members hold more than max_bytes in all")
        with self.archive.open(info) as file:
            version = np.lib.format.read_magic(file)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(file)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(file)
            else:
                raise self.fail(f"member {name!r} has .npy format {version}")
            self._check_header(name, declared, shape, dtype)
            size = math.prod(shape) * dtype.itemsize
            if file.tell() + size != info.file_size:
                raise self.fail(f"member {name!r} holds {info.file_size - file.tell()} bytes of "
                                f"data, but {shape} {dtype} needs {size}")
            data = file.read(size)
            if len(data) != size or file.read(1):  # reading to the end checks the CRC
                raise self.fail(f"member {name!r} is truncated")
        array = np.frombuffer(data, dtype=dtype)
        order = "F" if fortran else "C"
        return array.reshape(shape[::-1]).T.copy() if order == "F" else array.reshape(shape)

    def _check_header(self, name: str, declared: dict, shape: tuple, dtype: np.dtype) -> None:
        if dtype.kind not in "biufc" or dtype.hasobject or dtype.fields:
            raise self.fail(f"member {name!r} has dtype {dtype} (pargraph stores numeric "
                            "arrays only and never loads pickles)")
        wanted_dtype = declared.get("dtype")
        if wanted_dtype is not None and np.dtype(wanted_dtype) != dtype:
            raise self.fail(f"member {name!r} has dtype {dtype}, the structure says "
                            f"{np.dtype(wanted_dtype)}")
        wanted_shape = declared.get("shape")
        if wanted_shape is not None and tuple(wanted_shape) != tuple(shape):
            raise self.fail(f"member {name!r} has shape {tuple(shape)}, the structure says "
                            f"{tuple(wanted_shape)}")


def _decode(obj: Any, reader: _MemberReader) -> Any:
    if isinstance(obj, list):
        return [_decode(v, reader) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) != 1:
        raise reader.fail(f"unexpected entry {sorted(obj)[:4]} in its structure")
    (kind, value), = obj.items()
    if kind in ("tensor", "ndarray"):
        name, declared = _member_of(value, reader)
        array = reader.array(name, declared)
        if declared.get("as") == "bfloat16":
            if array.dtype != np.uint16:
                raise reader.fail(f"member {name!r} holds bfloat16 values as {array.dtype}, "
                                  "not uint16 bits")
            array = array.view(BFLOAT16)
        return from_numpy(array) if kind == "tensor" else array
    if kind == "sparse_coo" and isinstance(value, dict) and \
            {"indices", "values", "size", "coalesced"} <= set(value):
        parts = [_decode({"tensor": value[name]}, reader) for name in ("indices", "values")]
        return SparseTensor(*parts, tuple(value["size"]), bool(value["coalesced"]))
    if kind == "tuple" and isinstance(value, list):
        return tuple(_decode(v, reader) for v in value)
    if kind == "dict" and isinstance(value, list):
        if not all(isinstance(item, list) and len(item) == 2 for item in value):
            raise reader.fail("a dict in its structure is not a list of key-value pairs")
        decoded = {}
        for k, v in value:
            key, item = _decode(k, reader), _decode(v, reader)
            try:
                decoded[key] = item
            except TypeError:
                raise reader.fail(f"a dict key of type {type(key).__name__} in its "
                                  "structure") from None
        return decoded
    raise reader.fail(f"unknown entry {kind!r} in its structure")


def _member_of(value: Any, reader: _MemberReader) -> tuple[str, dict]:
    """The member name an array entry points to, and what it declares about it."""
    declared = value if isinstance(value, dict) else {"member": value}  # 0.1: a bare name
    name = declared.get("member")
    if not isinstance(name, str) or not _MEMBER.fullmatch(name):
        raise reader.fail(f"an array entry names member {name!r}")
    shape = declared.get("shape")
    if shape is not None and not (isinstance(shape, list)
                                  and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise reader.fail(f"member {name!r} has a malformed shape {shape!r} in the structure")
    return name, declared
