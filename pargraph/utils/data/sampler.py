"""Samplers: the order in which a ``DataLoader`` visits a map-style dataset's indices, and
how it groups them into batches, as in ``torch.utils.data.sampler``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import default_generator


def generator_of(generator: Any) -> np.random.Generator:
    """The numpy generator behind a ``pargraph.Generator`` (default: the one ``manual_seed``
    seeds)."""
    if generator is None:
        return default_generator()
    return getattr(generator, "numpy_generator", generator)


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


def _check_flag(name: str, value: Any, error: type[Exception] = ValueError) -> None:
    if not isinstance(value, bool):
        raise error(f"{name} should be a boolean value, but got {name}={value}")


class Sampler:
    """Iterates over indices of a dataset; subclasses define ``__iter__`` (and ``__len__``)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1.

    Examples
    --------
    >>> from pargraph.utils.data import SequentialSampler
    >>> list(SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (repeated when ``num_samples`` asks for more), or
    ``num_samples`` draws with ``replacement``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import RandomSampler
    >>> sorted(RandomSampler(range(4), generator=pargraph.Generator().manual_seed(0)))
    [0, 1, 2, 3]
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None) -> None:
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        _check_flag("replacement", replacement, TypeError)
        _check_count("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, rng = len(self.data_source), generator_of(self.generator)
        if self.replacement:  # drawn 32 at a time, as PyTorch's: num_samples may be 1e10
            for _ in range(self.num_samples // 32):
                yield from rng.integers(0, n, 32).tolist()
            yield from rng.integers(0, n, self.num_samples % 32).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        if self.num_samples % n:
            yield from rng.permutation(n)[:self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import SubsetRandomSampler
    >>> sorted(SubsetRandomSampler([5, 7, 9], generator=pargraph.Generator().manual_seed(0)))
    [5, 7, 9]
    """

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        for k in generator_of(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[k]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.utils.data import WeightedRandomSampler
    >>> set(WeightedRandomSampler([0.0, 1.0, 0.0], 5))
    {1}
    """

    def __init__(self, weights: Sequence[float] | Tensor, num_samples: int,
                 replacement: bool = True, generator: Any = None) -> None:
        _check_count("num_samples", num_samples)
        _check_flag("replacement", replacement)
        values = weights.detach().numpy() if isinstance(weights, Tensor) else weights
        array = np.asarray(values, dtype=np.float64)
        if array.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(array.shape)}")
        self.weights, self.num_samples = array, num_samples
        self.replacement, self.generator = replacement, generator

    def __iter__(self) -> Iterator[int]:
        weights, rng = self.weights, generator_of(self.generator)
        if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if self.replacement:
            picks = rng.choice(len(weights), self.num_samples, True, weights / weights.sum())
        else:  # Gumbel top-k: the weighted draws first, then zero weights (as PyTorch)
            if self.num_samples > len(weights):
                raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples "
                                   "without replacement")
            with np.errstate(divide="ignore"):
                keys = np.log(weights) + rng.gumbel(size=len(weights))
            picks = np.argsort(-keys, kind="stable")[:self.num_samples]
        return iter(picks.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter, unless
    ``drop_last``).

    Examples
    --------
    >>> from pargraph.utils.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        _check_count("batch_size", batch_size)
        _check_flag("drop_last", drop_last)
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
