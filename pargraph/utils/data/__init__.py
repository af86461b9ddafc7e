"""``pargraph.utils.data``: datasets, samplers and ``DataLoader``, with PyTorch's module paths
(``pargraph.utils.data.dataset``, ``.sampler``, ``.dataloader``, ``.distributed``)."""

from pargraph.utils.data import distributed
from pargraph.utils.data.dataloader import DataLoader, default_collate, default_convert
from pargraph.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from pargraph.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from pargraph.utils.data.worker import WorkerInfo, get_worker_info

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
    "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
    "SubsetRandomSampler", "distributed",
    "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate",
    "default_convert", "get_worker_info", "random_split",
]
