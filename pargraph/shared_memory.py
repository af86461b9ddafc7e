"""Tensors in memory that other processes map: ``share_memory_()`` for Hogwild training.

A shared tensor's values live in an anonymous memory file (``memfd_create``) mapped into this
process; a process forked afterwards maps the same pages, and one started otherwise
(``spawn``) receives the file's descriptor when the tensor is pickled through
``multiprocessing`` (:func:`reduce_shared`, registered by :mod:`pargraph.multiprocessing`).
Between runs the tensor's node holds an array over the mapping, so a read sees what any process
last wrote; a run reads a copy of it taken as the run starts (one copy of every shared tensor
per run: sharing is for Hogwild's small models).

pargraph computes an update into a new array and points the tensor at it; for a shared tensor
that happens at once, as an in-place change of shared storage does in PyTorch
(``Tensor._rebind`` realizes the new node), so a process that ends right after it loses
nothing. The run that computes the update reads a copy of the values taken as it starts
(:meth:`SharedTensors.snapshot`), and :meth:`SharedTensors.write_back` then adds the update's
change (new values less that copy) into the mapping, element by element, and points the node at
the mapping again: after each run (``execution``), optimizer step and compiled step (whose
call takes the snapshot as it binds its slots). So, as with PyTorch's in-place ``add_`` on
shared memory, the updates of several processes add up; an element two processes add to at the
same instant may lose one of the additions (Hogwild's races).
"""

from __future__ import annotations

import mmap
import os
import tempfile
import threading
import weakref
from typing import Any

import numpy as np

from pargraph import ops
from pargraph.context import context
from pargraph.graph import Node


class SharedBuffer:
    """One tensor's memory file: its descriptor, its mapping and the array over it."""

    __slots__ = ("fd", "mapping", "array", "__weakref__")

    def __init__(self, fd: int, shape: tuple, dtype: np.dtype) -> None:
        dtype = np.dtype(dtype)
        size = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
        self.fd = fd
        self.mapping = mmap.mmap(fd, size)
        self.array = np.frombuffer(self.mapping, dtype, count=int(np.prod(shape, dtype=np.int64))
                                   ).reshape(shape)

    @classmethod
    def new(cls, shape: tuple, dtype: np.dtype) -> SharedBuffer:
        """A fresh memory file for values of ``shape`` and ``dtype`` (zeros): an anonymous
        one where the system has ``memfd_create`` (Linux), else an unlinked temporary file."""
        if hasattr(os, "memfd_create"):
            return cls(os.memfd_create("pargraph-shared", os.MFD_CLOEXEC), shape, dtype)
        with tempfile.TemporaryFile() as file:
            return cls(os.dup(file.fileno()), shape, dtype)

    def close(self) -> None:
        """Unmap and close (the memory goes when no process maps it any more)."""
        try:
            self.mapping.close()
        except BufferError:  # an array over it is still alive: the mapping stays with it
            pass
        os.close(self.fd)


class _Entry:
    """A shared tensor's record: the tensor (weakly), its buffer, the node whose value is the
    mapping, and the copy of the values an update in progress reads."""

    __slots__ = ("tensor", "buffer", "mapped", "snapshot")

    def __init__(self, tensor: weakref.ref, buffer: SharedBuffer, mapped: Node) -> None:
        self.tensor, self.buffer, self.mapped = tensor, buffer, mapped
        self.snapshot: np.ndarray | None = None


class SharedTensors:
    """This process's shared tensors and their buffers, by the tensor's id (a tensor is not
    hashable: it compares elementwise). Forked children inherit the table, and their writes
    reach the same pages."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}

    def __bool__(self) -> bool:
        return bool(self._entries)

    def _live(self) -> list[tuple[Any, _Entry]]:
        with self._lock:
            entries = list(self._entries.values())
        return [(tensor, entry) for entry in entries if (tensor := entry.tensor()) is not None]

    def buffer_of(self, tensor: Any) -> SharedBuffer | None:
        """``tensor``'s buffer, or None if it is not shared."""
        entry = self._entries.get(id(tensor))
        return entry.buffer if entry is not None and entry.tensor() is tensor else None

    def share(self, tensor: Any, value: np.ndarray) -> None:
        """Move ``tensor`` (whose current ``value`` is given) into a new memory file."""
        buffer = SharedBuffer.new(value.shape, value.dtype)
        np.copyto(buffer.array, value)
        self.adopt(tensor, buffer)

    def adopt(self, tensor: Any, buffer: SharedBuffer) -> None:
        """Point ``tensor`` at ``buffer``'s values and keep them shared from now on."""
        node = ops.constant(buffer.array)
        tensor._replace(node)
        key = id(tensor)

        def forget(_: Any, key: int = key) -> None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.tensor() is None:
                    del self._entries[key]
                    entry.buffer.close()

        with self._lock:
            self._entries[key] = _Entry(weakref.ref(tensor, forget), buffer, node)

    def snapshot(self) -> None:
        """As a run starts: every shared tensor's node reads a copy of its mapping taken now,
        so that the run sees one state of it and an update's change is known."""
        for _, entry in self._live():
            entry.snapshot = entry.buffer.array.copy()
            entry.mapped.value = entry.snapshot

    def write_back(self) -> None:
        """After a run, an optimizer's step or a landing: each shared tensor's new values,
        computed into a new array, go into its mapping (their change since the snapshot
        added, else copied), and its node holds the mapping again; a tensor without new
        values reads the mapping again (its snapshot kept for an update computed but not yet
        bound to it, as an optimizer's step binds after its run)."""
        for tensor, entry in self._live():
            node: Node = tensor._node
            value, target = node.value, entry.buffer.array
            if node is entry.mapped or not isinstance(value, np.ndarray) or value is target:
                entry.mapped.value = target
                continue
            if value.shape != target.shape or value.dtype != target.dtype:
                raise RuntimeError(f"a shared tensor of shape {target.shape} and dtype "
                                   f"{target.dtype} was given values of shape {value.shape} "
                                   f"and dtype {value.dtype}: shared memory cannot be resized "
                                   "(as in PyTorch)")
            if entry.snapshot is not None:
                target += value - entry.snapshot  # this process's change, added
            else:
                np.copyto(target, value)
            entry.mapped.value = target
            node.value, entry.mapped, entry.snapshot = target, node, None


#: The shared tensors of this process.
shared_tensors = context.register("shared_tensors", SharedTensors())


def reduce_shared(tensor: Any, rebuild_as: Any) -> tuple | None:
    """What ``multiprocessing`` pickles for a shared ``tensor``: its descriptor (passed to the
    receiving process), shape, dtype and ``requires_grad``, rebuilt by ``rebuild_as``; None
    for a tensor that is not shared."""
    from multiprocessing.reduction import DupFd

    buffer = shared_tensors.buffer_of(tensor)
    if buffer is None:
        return None
    return rebuild_as, (DupFd(buffer.fd), buffer.array.shape, buffer.array.dtype.str,
                        bool(tensor.requires_grad))


def rebuilt_buffer(fd_holder: Any, shape: tuple, dtype: str) -> SharedBuffer:
    """The buffer a receiving process maps from a pickled descriptor."""
    return SharedBuffer(fd_holder.detach(), tuple(shape), np.dtype(dtype))
