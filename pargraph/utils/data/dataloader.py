"""``DataLoader``: batches of a dataset in the order a sampler gives, loaded in this process or
ahead of the training loop in worker processes, as ``torch.utils.data.dataloader``."""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import tensor
from pargraph.functions import stack
from pargraph.utils.data import worker
from pargraph.utils.data.dataset import Dataset, IterableDataset, TensorDataset
from pargraph.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    generator_of,
)

#: Seconds between the main process's looks at whether its workers are alive while it waits.
WORKER_POLL = 1.0


def default_collate(samples: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch (tensors, numbers, tuples and dicts of them).

    Examples
    --------
    >>> from pargraph.utils.data import default_collate
    >>> default_collate([(1, 2.0), (3, 4.0)])[0].tolist()
    [1, 3]
    """
    first = samples[0]
    if isinstance(first, Tensor):
        return stack(samples)
    if isinstance(first, (int, float, bool, np.generic, np.ndarray)):
        return tensor(np.stack([np.asarray(s) for s in samples]))
    if isinstance(first, dict):
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(column)) for column in zip(*samples))
    if isinstance(first, (str, bytes)):
        return list(samples)
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}")


def default_convert(sample: Any) -> Any:
    """One sample as a ``DataLoader`` without batching yields it: numpy arrays as tensors."""
    if isinstance(sample, np.ndarray):
        return tensor(sample)
    if isinstance(sample, dict):
        return {key: default_convert(v) for key, v in sample.items()}
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):  # a namedtuple stays one
        return type(sample)(*(default_convert(v) for v in sample))
    if isinstance(sample, (tuple, list)):  # a tuple becomes a list, as in PyTorch
        return [default_convert(v) for v in sample]
    return sample


class _Fetcher:
    """What turns a batch's indices (or an iterable dataset's samples) into the batch: the
    dataset's gather for a ``TensorDataset`` with the default collation, else
    ``collate_fn`` over the samples. A module-level class: it pickles to worker processes."""

    def __init__(self, dataset: Any, collate_fn: Callable, batched: bool,
                 gather: bool) -> None:
        self.dataset, self.collate_fn = dataset, collate_fn
        self.batched, self.gather = batched, gather

    def __call__(self, indices: Any) -> Any:
        if isinstance(self.dataset, IterableDataset):
            return self.collate_fn(indices)  # the samples themselves
        if self.gather:
            return self.dataset.batch(np.asarray(indices))
        if self.batched:
            return self.collate_fn([self.dataset[i] for i in indices])
        return self.collate_fn(self.dataset[indices])


class DataLoader:
    """Batches of a dataset, in the order ``sampler`` gives (sequential, or shuffled by a
    seeded generator), grouped by ``batch_sampler``, as ``torch.utils.data.DataLoader``.

    With ``num_workers > 0``, worker processes (``multiprocessing``'s default start method,
    or ``multiprocessing_context``) load the batches ahead of the loop,
    ``prefetch_factor`` each, and the loop gets them in the sampler's order: the same batches
    as ``num_workers=0``. Each worker is seeded (``random``, numpy's global generator and
    ``pargraph.manual_seed``) with a base seed the generator draws plus its id, so random
    augmentations repeat under one seed. An exception in a worker is raised here, with the
    worker's traceback. ``pin_memory`` has no effect (there is no GPU to pin memory for),
    and warns that it has none, as PyTorch's does without an accelerator.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(pargraph.arange(10)), batch_size=4, drop_last=True)
    >>> [batch.tolist() for (batch,) in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Sampler | Any = None,
                 batch_sampler: Sampler | Any = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if isinstance(dataset, IterableDataset):
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value}")
        elif sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        elif batch_size is not None and (isinstance(batch_size, bool)
                                         or not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        iterable = isinstance(dataset, IterableDataset)
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.num_workers, self.timeout, self.generator = num_workers, timeout, generator
        self.pin_memory, self.pin_memory_device, self.in_order = pin_memory, pin_memory_device, \
            in_order
        if pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", UserWarning, stacklevel=2)
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, \
            multiprocessing_context
        self.prefetch_factor = 2 if num_workers and prefetch_factor is None else prefetch_factor
        self.persistent_workers = persistent_workers
        batched = batch_sampler is not None or (iterable and batch_size is not None)
        self.collate_fn = collate_fn or (default_collate if batched else default_convert)
        self._fetch = _Fetcher(dataset, self.collate_fn, batched,
                               gather=collate_fn is None and batched
                               and isinstance(dataset, TensorDataset))
        self._workers: _Workers | None = None

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # a TypeError when the dataset has no length, as PyTorch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def _jobs(self) -> Iterator[Any]:
        """Each batch's indices, or each sample's index without batching (``None`` for an
        iterable dataset, whose batches come from its own iterator)."""
        if isinstance(self.dataset, IterableDataset):
            return itertools.repeat(None)
        return iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        # Drawn whether or not there are workers, as PyTorch does: the shuffled order after it
        # is the same either way.
        seed = int(generator_of(self.generator).integers(0, 2**63 - 1))
        if self.num_workers == 0:
            return self._in_this_process()
        if self._workers is None or not self.persistent_workers or not self._workers.alive():
            if self._workers is not None:
                self._workers.close()
            self._workers = _Workers(self, seed)
        return self._workers.epoch(self._jobs())

    def _in_this_process(self) -> Iterator[Any]:
        if isinstance(self.dataset, IterableDataset):
            stream = iter(self.dataset)
            while True:
                samples = list(itertools.islice(stream, self.batch_size or 1))
                if not samples or (self.drop_last and self.batch_size
                                   and len(samples) < self.batch_size):
                    return
                yield self._fetch(samples if self.batch_size else samples[0])
        else:
            for indices in self._jobs():
                yield self._fetch(indices)


class _Workers:
    """A loader's worker processes and their queues; one epoch at a time."""

    def __init__(self, loader: DataLoader, seed: int) -> None:
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        self.loader, self.count = loader, loader.num_workers
        self.results = context.Queue()
        self.indices = [context.Queue() for _ in range(self.count)]
        dataset = loader.dataset
        self.processes = [
            context.Process(target=worker.loop, daemon=True, args=(
                dataset, loader._fetch, isinstance(dataset, IterableDataset),
                loader.batch_size, loader.drop_last, self.indices[k], self.results, k,
                self.count, seed + k, loader.worker_init_fn))
            for k in range(self.count)]
        for process in self.processes:
            process.start()
        self._finalizer = weakref.finalize(self, _stop, self.processes, self.indices)

    def alive(self) -> bool:
        return all(process.is_alive() for process in self.processes)

    def close(self, at_once: bool = False) -> None:
        """End the workers: asked to stop, or (``at_once``: one hangs or died) terminated."""
        if at_once:
            for process in self.processes:
                if process.is_alive():
                    process.terminate()
        self._finalizer()

    def _get(self) -> tuple:
        """The next result, noticing workers that died and the loader's ``timeout``."""
        waited, limit = 0.0, self.loader.timeout
        while True:
            wait = min(WORKER_POLL, limit - waited) if limit else WORKER_POLL
            try:
                return self.results.get(timeout=wait)
            except queue.Empty:
                waited += wait
                dead = [p.pid for p in self.processes if not p.is_alive()]
                if dead:
                    self.close(at_once=True)
                    raise RuntimeError(f"DataLoader worker (pid(s) "
                                       f"{', '.join(map(str, dead))}) exited unexpectedly"
                                       ) from None
                if limit and waited >= limit:
                    self.close(at_once=True)
                    raise RuntimeError(f"DataLoader timed out after {limit} seconds") from None

    def epoch(self, jobs: Iterator[Any]) -> Iterator[Any]:
        """The epoch's batches in order: jobs go to the workers in turn (for an iterable
        dataset, to those whose copy is not exhausted), ``prefetch_factor`` each ahead."""
        iterable = isinstance(self.loader.dataset, IterableDataset)
        active = list(range(self.count))
        sent, turn, done = 0, 0, {}
        owner: dict[int, int] = {}
        ahead = self.loader.prefetch_factor * self.count
        finished = False
        try:
            number = 0
            while True:
                while not finished and active and sent - number < ahead:
                    job = next(jobs, StopIteration)
                    if job is StopIteration:
                        finished = True
                        break
                    k = active[turn % len(active)]
                    turn += 1
                    self.indices[k].put((sent, job))
                    owner[sent] = k
                    sent += 1
                if number >= sent:
                    break
                while number not in done:
                    got, batch, k = self._get()
                    if got is None:  # worker_init_fn or iter() failed
                        self.close()
                        batch.reraise()
                    done[got] = batch
                batch = done.pop(number)
                number += 1
                if isinstance(batch, worker.Exhausted):
                    if iterable and owner[number - 1] in active:
                        active.remove(owner[number - 1])
                    continue
                if isinstance(batch, worker.Failure):
                    self.close()
                    batch.reraise()
                yield worker.from_wire(batch)
        finally:
            if not self.loader.persistent_workers:
                self.close()


def _stop(processes: list, indices: list) -> None:
    """End the workers: a ``None`` job each, then wait a little, then terminate."""
    for q in indices:
        try:
            q.put(None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 5.0
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.terminate()
            process.join(1.0)
