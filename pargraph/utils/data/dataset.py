"""Datasets: map-style (``Dataset``: ``TensorDataset``, ``Subset``, ``ConcatDataset``,
``random_split``) and iterable (``IterableDataset``, ``ChainDataset``), as in
``torch.utils.data.dataset``."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import tensor
from pargraph.utils.data.sampler import generator_of


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` and, for the samplers,
    ``__len__`` (as in PyTorch, the base class has none: ``len()`` is a TypeError)."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__``. With ``num_workers > 0`` each
    worker iterates its own copy; ``get_worker_info()`` tells the copy which share to yield.

    Examples
    --------
    >>> from pargraph.utils.data import IterableDataset
    >>> class Count(IterableDataset):
    ...     def __iter__(self):
    ...         return iter(range(3))
    >>> list(Count())
    [0, 1, 2]
    """

    def __iter__(self) -> Iterator:
        raise NotImplementedError

    def __add__(self, other: IterableDataset) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets one after another.

    Examples
    --------
    >>> from pargraph.utils.data import ChainDataset, IterableDataset
    >>> class Count(IterableDataset):
    ...     def __init__(self, n): self.n = n
    ...     def __iter__(self): return iter(range(self.n))
    >>> list(ChainDataset([Count(2), Count(3)]))
    [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets: Iterable) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)


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


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import Subset, TensorDataset
    >>> part = Subset(TensorDataset(pargraph.arange(10)), [2, 5])
    >>> len(part), part[1][0].item()
    (2, 5)
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index: int) -> Any:
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import ConcatDataset, TensorDataset
    >>> both = ConcatDataset([TensorDataset(pargraph.zeros(2)), TensorDataset(pargraph.ones(3))])
    >>> len(both), both[4][0].item()
    (5, 1.0)
    """

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1]) if self.cumulative_sizes else 0

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = int(self.cumulative_sizes[which - 1]) if which else 0
        return self.datasets[which][index - start]


class StackDataset(Dataset):
    """Datasets of one length side by side: item ``i`` is the tuple (or, given by keyword,
    the dict) of their items ``i``.

    Examples
    --------
    >>> from pargraph.utils.data import StackDataset
    >>> StackDataset(range(3), [10, 20, 30])[1], StackDataset(x=range(2), y="ab")[0]
    ((1, 20), {'x': 0, 'y': 'a'})
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        datasets = args or tuple(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(self._length != len(dataset) for dataset in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets: Any = args if args else kwargs

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self) -> int:
        return self._length


def random_split(dataset: Dataset, lengths: Sequence[float],
                 generator: Any = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths (or
    fractions summing to 1, the remainder spread round-robin, as in PyTorch).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import TensorDataset, random_split
    >>> train, test = random_split(TensorDataset(pargraph.arange(10)), [0.8, 0.2],
    ...                            generator=pargraph.Generator().manual_seed(0))
    >>> len(train), len(test), sorted(train.indices + test.indices) == list(range(10))
    (8, 2, True)
    """
    n = len(dataset)
    if all(0 <= length <= 1 for length in lengths) and math.isclose(sum(lengths), 1) and \
            sum(lengths) <= 1 + 1e-9 and not all(isinstance(x, int) for x in lengths):
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for k in range(n - sum(sizes)):
            sizes[k % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = generator_of(generator).permutation(n).tolist()
    subsets, start = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, order[start:start + length]))
        start += length
    return subsets
