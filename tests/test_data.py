"""utils.data: datasets, batching, seeded shuffling."""

import numpy as np
import pytest

import pargraph
from pargraph.utils.data import DataLoader, Dataset, TensorDataset


def test_tensor_dataset_and_loader_batches():
    x = pargraph.arange(10).reshape(10, 1).float()
    y = pargraph.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[4][1].item() == 4
    batches = list(DataLoader(ds, batch_size=4))
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    assert len(DataLoader(ds, batch_size=4)) == 3
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [len(b[1]) for b in DataLoader(ds, batch_size=4, drop_last=True)] == [4, 4]
    assert batches[0][0].dtype == np.float32 and batches[0][0].shape == (4, 1)
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(pargraph.zeros(3), pargraph.zeros(4))


def test_shuffle_is_a_seeded_permutation():
    ds = TensorDataset(pargraph.arange(20))
    pargraph.manual_seed(1)
    first = [b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True)]
    pargraph.manual_seed(1)
    second = [b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True)]
    assert first == second
    assert sorted(sum(first, [])) == list(range(20)) and sum(first, []) != list(range(20))
    by_generator = DataLoader(ds, batch_size=20, shuffle=True,
                              generator=np.random.default_rng(4))
    expected = np.random.default_rng(4).permutation(20).tolist()
    assert next(iter(by_generator))[0].tolist() == expected


def test_custom_dataset_is_collated():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": pargraph.tensor([float(i)]), "y": i * i}

    batch = next(iter(DataLoader(Squares(), batch_size=3)))
    assert batch["x"].shape == (3, 1) and batch["y"].tolist() == [0, 1, 4]


def test_random_split_subset_concat_and_a_seeded_generator():
    from pargraph.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset, random_split

    data = TensorDataset(pargraph.arange(10), pargraph.arange(10) * 2)
    first = random_split(data, [7, 3], generator=pargraph.Generator().manual_seed(5))
    again = random_split(data, [0.7, 0.3], generator=pargraph.Generator().manual_seed(5))
    assert [s.indices for s in first] == [s.indices for s in again]
    assert sorted(first[0].indices + first[1].indices) == list(range(10))
    x, y = first[1][2]
    assert y.item() == 2 * x.item() and x.item() == first[1].indices[2]
    uneven = random_split(data, [0.5, 0.25, 0.25])  # 5, 2, 2 and the remainder to the first
    assert [len(s) for s in uneven] == [6, 2, 2]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(data, [4, 4])
    both = ConcatDataset([Subset(data, [9, 8]), data])
    assert len(both) == 12 and both[1][0].item() == 8 and both[2][0].item() == 0
    assert both[-1][0].item() == 9
    batches = [b[0].tolist() for b in DataLoader(data, batch_size=5, shuffle=True,
                                                 generator=pargraph.Generator().manual_seed(1))]
    batches_again = [b[0].tolist() for b in DataLoader(
        data, batch_size=5, shuffle=True, generator=pargraph.Generator().manual_seed(1))]
    assert batches == batches_again and sorted(sum(batches, [])) == list(range(10))
