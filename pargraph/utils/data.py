"""``pargraph.utils.data``: ``Dataset``, ``TensorDataset`` and a seeded ``DataLoader``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import default_generator, tensor
from pargraph.functions import stack


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` and ``__len__``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class TensorDataset(Dataset):
    """Samples are the rows of the given tensors (which share their first dimension).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import TensorDataset
    >>> ds = TensorDataset(pargraph.zeros(5, 2), pargraph.arange(5))
    >>> len(ds), ds[3][1].item()
    (5, 3)
    """

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        lengths = {t.shape[0] if t.shape else None for t in tensors}
        if len(lengths) != 1 or None in lengths:
            raise ValueError("Size mismatch between tensors: first dimensions are "
                             f"{[t.shape[:1] for t in tensors]}")
        self.tensors = tensors
        self._arrays = [t.detach()._value() for t in tensors]

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def batch(self, indices: np.ndarray) -> tuple[Tensor, ...]:
        """Many samples at once: one numpy gather per tensor instead of one node per sample."""
        return tuple(tensor(array[indices]) for array in self._arrays)


def default_collate(samples: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch (tensors, numbers, tuples and dicts of them)."""
    first = samples[0]
    if isinstance(first, Tensor):
        return stack(samples)
    if isinstance(first, (int, float, bool, np.generic, np.ndarray)):
        return tensor(np.stack([np.asarray(s) for s in samples]))
    if isinstance(first, dict):
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(column)) for column in zip(*samples))
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}")


class DataLoader:
    """Batches of a dataset, optionally shuffled by a seeded generator.

    Without ``generator``, shuffling draws from the generator ``pargraph.manual_seed`` seeds.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(pargraph.arange(10)), batch_size=4, drop_last=True)
    >>> [batch.tolist() for (batch,) in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """

    def __init__(self, dataset: Dataset, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, generator: np.random.Generator | None = None,
                 collate_fn: Callable[[list], Any] | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer, got {batch_size}")
        self.dataset, self.batch_size = dataset, batch_size
        self.shuffle, self.drop_last = shuffle, drop_last
        self.generator, self.collate_fn = generator, collate_fn

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        n = len(self.dataset)
        if self.shuffle:
            order = (self.generator or default_generator()).permutation(n)
        else:
            order = np.arange(n)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            indices = order[start:start + self.batch_size]
            if self.collate_fn is None and isinstance(self.dataset, TensorDataset):
                yield self.dataset.batch(indices)
            else:
                collate = self.collate_fn or default_collate
                yield collate([self.dataset[int(i)] for i in indices])
