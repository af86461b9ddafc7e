"""``DistributedSampler``: each of ``num_replicas`` processes visits its own share of a
dataset's indices, as ``torch.utils.data.distributed``."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized
from typing import Any

from pargraph.factories import Generator, randperm
from pargraph.utils.data.sampler import Sampler


class DistributedSampler(Sampler):
    """Indices ``rank``, ``rank + num_replicas``, ... of the dataset's (shuffled, per
    ``seed + epoch``) order, padded by repeating indices so every replica gets as many (or
    cut, with ``drop_last``). pargraph has no process group: give ``num_replicas`` and
    ``rank``.

    Examples
    --------
    >>> from pargraph.utils.data.distributed import DistributedSampler
    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            generator = Generator().manual_seed(self.seed + self.epoch)
            indices: list[Any] = randperm(len(self.dataset), generator=generator).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose shuffle the next iteration uses (all replicas must agree)."""
        self.epoch = epoch
