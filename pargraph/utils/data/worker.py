"""DataLoader worker processes: each loads the batches it is asked for (or, for an iterable
dataset, the next batches of its own copy) and sends them back as numpy arrays; a failure
comes back with the worker's traceback. ``get_worker_info`` tells dataset code which worker
it runs in."""

from __future__ import annotations

import itertools
import random
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.context import context
from pargraph.factories import from_numpy, manual_seed


@dataclass(frozen=True)
class WorkerInfo:
    """Where dataset code runs: ``id`` of ``num_workers``, the worker's ``seed`` and its copy
    of the ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


class WorkerState:
    """This process's worker info (``None`` in the main process)."""

    def __init__(self) -> None:
        self.info: WorkerInfo | None = None


state = context.register("data_worker", WorkerState())


def get_worker_info() -> WorkerInfo | None:
    """In a ``DataLoader`` worker process, its :class:`WorkerInfo`; elsewhere ``None``.

    Examples
    --------
    >>> from pargraph.utils.data import get_worker_info
    >>> get_worker_info() is None  # the main process
    True
    """
    return state.info


@dataclass(frozen=True)
class Failure:
    """An exception raised in a worker: its type, and the message the main process raises."""

    kind: type
    message: str

    def reraise(self) -> None:
        try:
            error = self.kind(self.message)
        except Exception:  # an exception type that takes other arguments
            error = RuntimeError(self.message)
        raise error


class Exhausted:
    """An iterable dataset's copy in a worker has no more batches."""


@dataclass(frozen=True)
class _Wired:
    """A tensor on its way from a worker: its array."""

    array: np.ndarray


def to_wire(value: Any) -> Any:
    """``value`` with each tensor replaced by its array (computed here, in the worker)."""
    if isinstance(value, Tensor):
        return _Wired(value.detach().numpy())
    if isinstance(value, dict):
        return {key: to_wire(v) for key, v in value.items()}
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(to_wire(v) for v in value)
    return value


def from_wire(value: Any) -> Any:
    """The inverse of :func:`to_wire`, in the main process."""
    if isinstance(value, _Wired):
        return from_numpy(value.array)
    if isinstance(value, dict):
        return {key: from_wire(v) for key, v in value.items()}
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(from_wire(v) for v in value)
    return value


def _failure(worker_id: int) -> Failure:
    """The exception being handled, as PyTorch reports a worker's."""
    kind = sys.exc_info()[0] or RuntimeError
    return Failure(kind, f"Caught {kind.__name__} in DataLoader worker process {worker_id}.\n"
                         f"Original {traceback.format_exc()}")


def loop(dataset: Any, fetch: Callable[[Any], Any], iterable: bool, batch_size: int | None,
         drop_last: bool, index_queue: Any, result_queue: Any, worker_id: int,
         num_workers: int, seed: int, init_fn: Callable[[int], None] | None) -> None:
    """A worker process's life: seed, ``init_fn(worker_id)``, then each job from
    ``index_queue`` (``(number, indices)``; ``None`` ends) answered on ``result_queue`` as
    ``(number, batch, worker_id)``."""
    import dask

    dask.config.set(scheduler="sync")  # no thread pools in a forked child
    state.info = WorkerInfo(worker_id, num_workers, seed, dataset)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    manual_seed(seed)
    try:
        if init_fn is not None:
            init_fn(worker_id)
        stream = iter(dataset) if iterable else None
    except Exception:
        result_queue.put((None, _failure(worker_id), worker_id))
        return
    while True:
        job = index_queue.get()
        if job is None:
            return
        number, indices = job
        try:
            if stream is not None:
                samples = list(itertools.islice(stream, batch_size or 1))
                if not samples or (drop_last and batch_size and len(samples) < batch_size):
                    result_queue.put((number, Exhausted(), worker_id))
                    continue
                batch = fetch(samples if batch_size else samples[0])
            else:
                batch = fetch(indices)
            result_queue.put((number, to_wire(batch), worker_id))
        except Exception:
            result_queue.put((number, _failure(worker_id), worker_id))
