"""utils.data: datasets, batching, seeded shuffling."""

import warnings

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
    orders = [next(iter(DataLoader(ds, batch_size=20, shuffle=True,
                                   generator=pargraph.Generator().manual_seed(4))))[0].tolist()
              for _ in range(2)]
    assert orders[0] == orders[1] and sorted(orders[0]) == list(range(20))


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


# --- samplers and worker processes ---------------------------------------------------------

torch = pytest.importorskip("torch")


def _error_of(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - compared with PyTorch's below
        return type(error).__name__, str(error)
    return None


@pytest.mark.parametrize("make", [
    lambda data: data.RandomSampler(range(3), replacement="x"),
    lambda data: data.RandomSampler(range(3), num_samples=0),
    lambda data: data.BatchSampler(range(3), 0, False),
    lambda data: data.BatchSampler(range(3), 2, "x"),
    lambda data: data.WeightedRandomSampler([[1.0]], 2),
    lambda data: data.WeightedRandomSampler([1.0], 0),
    lambda data: data.WeightedRandomSampler([1.0], 2, replacement="y"),
    lambda data: list(data.WeightedRandomSampler([0.0, 0.0], 2)),
    lambda data: data.DataLoader(range(4), num_workers=-1),
    lambda data: data.DataLoader(range(4), prefetch_factor=2),
    lambda data: data.DataLoader(range(4), persistent_workers=True),
    lambda data: data.DataLoader(range(4), sampler=[0, 1], shuffle=True),
    lambda data: data.DataLoader(range(4), batch_sampler=[[0]], batch_size=2),
    lambda data: data.DataLoader(range(4), batch_size=None, drop_last=True),
    lambda data: data.DataLoader(range(4), batch_size=0),
])
def test_sampler_and_loader_errors_are_pytorchs(make):
    from pargraph.utils import data

    assert _error_of(lambda: make(data)) == _error_of(lambda: make(torch.utils.data))


def test_samplers_visit_what_pytorchs_visit():
    from pargraph.utils.data import (
        BatchSampler,
        RandomSampler,
        SequentialSampler,
        SubsetRandomSampler,
        WeightedRandomSampler,
    )

    generator = pargraph.Generator().manual_seed(0)
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert sorted(RandomSampler(range(6), generator=generator)) == list(range(6))
    long = list(RandomSampler(range(4), num_samples=10, generator=generator))
    assert len(long) == 10 and sorted(long[:4]) == sorted(long[4:8]) == [0, 1, 2, 3]
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50, generator=generator))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    assert sorted(SubsetRandomSampler([9, 4, 7], generator=generator)) == [4, 7, 9]
    weighted = list(WeightedRandomSampler([0.0, 3.0, 1.0], 400, generator=generator))
    assert set(weighted) == {1, 2} and 250 < weighted.count(1) < 350
    distinct = list(WeightedRandomSampler([1.0, 0.0, 2.0], 3, replacement=False))
    assert sorted(distinct) == [0, 1, 2] and distinct[2] == 1  # zero weight comes last
    for drop_last in (False, True):
        ours = list(BatchSampler(SequentialSampler(range(7)), 3, drop_last))
        theirs = list(torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(
            range(7)), 3, drop_last))
        assert ours == theirs
        assert len(BatchSampler(range(7), 3, drop_last)) == len(ours)


def test_pytorchs_module_paths_import():
    from pargraph.utils.data.dataloader import DataLoader as Loader
    from pargraph.utils.data.dataset import Dataset as Base
    from pargraph.utils.data.sampler import RandomSampler as Random

    assert Loader is DataLoader and Base is Dataset
    assert Random.__name__ == "RandomSampler"


class Squares(Dataset):
    """Sample i is (i, i squared, the worker that loaded it, a random draw)."""

    def __init__(self, n, fail_at=None, exit_at=None, sleep=0.0):
        self.n, self.fail_at, self.exit_at, self.sleep = n, fail_at, exit_at, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import os
        import time

        from pargraph.utils.data import get_worker_info

        if i == self.fail_at:
            raise ValueError(f"sample {i} is broken")
        if i == self.exit_at:
            os._exit(3)
        time.sleep(self.sleep)
        info = get_worker_info()
        return i, float(i * i), -1 if info is None else info.id, float(np.random.rand())


def test_worker_processes_give_the_batches_in_the_samplers_order():
    data = Squares(23)

    def batches(workers, seed=0):
        loader = DataLoader(data, batch_size=4, shuffle=True, num_workers=workers,
                            generator=pargraph.Generator().manual_seed(seed))
        return [[column.tolist() for column in batch] for batch in loader]

    alone, two, three = batches(0), batches(2), batches(3)
    assert [b[:2] for b in two] == [b[:2] for b in three] == [b[:2] for b in alone]
    assert {i for b in alone for i in b[0]} == set(range(23))
    assert {w for b in alone for w in b[2]} == {-1}
    assert {w for b in three for w in b[2]} == {0, 1, 2}  # batches went to every worker
    assert [b[3] for b in batches(2)] == [b[3] for b in two]  # draws repeat under one seed
    assert [b[3] for b in batches(2, seed=1)] != [b[3] for b in two]


def test_a_workers_exception_is_raised_with_its_traceback():
    loader = DataLoader(Squares(20, fail_at=13), batch_size=4, num_workers=2)
    with pytest.raises(ValueError) as caught:
        list(loader)
    message = str(caught.value)
    assert "Caught ValueError in DataLoader worker process 1." in message  # batch 3: worker 1
    assert "sample 13 is broken" in message and "__getitem__" in message


def test_a_worker_that_dies_or_hangs_is_reported():
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited"):
        list(DataLoader(Squares(8, exit_at=5), batch_size=2, num_workers=2))
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        list(DataLoader(Squares(4, sleep=3.0), batch_size=2, num_workers=1, timeout=0.5))


class Shards(pargraph.utils.data.IterableDataset):
    """0..n-1, each worker yielding its own share (every num_workers-th item)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        from pargraph.utils.data import get_worker_info

        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def _ids(worker_id):
    np.random.seed(1000 + worker_id)


def test_iterable_datasets_workers_init_and_persistent_workers():
    alone = [b.tolist() for b in DataLoader(Shards(10), batch_size=3)]
    assert alone == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    shared = [b.tolist() for b in DataLoader(Shards(10), batch_size=3, num_workers=2)]
    assert shared == [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]  # worker 0, worker 1, in turn
    dropped = [b.tolist() for b in DataLoader(Shards(10), batch_size=3, drop_last=True,
                                              num_workers=2)]
    assert dropped == [[0, 2, 4], [1, 3, 5]]
    seeded = DataLoader(Squares(6), batch_size=3, num_workers=2, worker_init_fn=_ids,
                        persistent_workers=True)
    first = [b[3].tolist() for b in seeded]
    pids = [p.pid for p in seeded._workers.processes]
    second = [b[3].tolist() for b in seeded]
    assert [p.pid for p in seeded._workers.processes] == pids  # the same processes
    np.random.seed(1000)
    assert first[0] == list(np.random.rand(3))  # worker 0's batch, after worker_init_fn
    assert second != first  # the workers' generators went on
    seeded._workers.close()


def test_batch_size_none_yields_samples():
    loader = DataLoader(Squares(3), batch_size=None)
    first = next(iter(loader))
    assert first[:3] == [0, 0.0, -1]  # a tuple sample comes as a list, as in PyTorch


@pytest.mark.parametrize("size, replicas, drop_last", [(10, 3, False), (10, 3, True),
                                                       (2, 4, False), (8, 2, False)])
def test_distributed_sampler_gives_each_replica_pytorchs_share(size, replicas, drop_last):
    pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as Theirs

    from pargraph.utils.data.distributed import DistributedSampler

    for rank in range(replicas):
        ours = DistributedSampler(range(size), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = Theirs(range(size), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    shares = [DistributedSampler(range(size), replicas, rank, seed=3) for rank in range(replicas)]
    first = [list(s) for s in shares]
    if not drop_last:
        assert set().union(*first) == set(range(size))
    for s in shares:
        s.set_epoch(1)
    assert [list(s) for s in shares] != first or size < 3
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(RuntimeError, match="distributed package"):
        DistributedSampler(range(4))


def test_stack_dataset_unbatched_samples_and_pin_memory_as_pytorchs():
    torch = pytest.importorskip("torch")

    def run(library):
        data = library.utils.data
        stacked = data.StackDataset(data.TensorDataset(library.arange(3)), list("abc"))
        named = data.StackDataset(x=range(2), y=[5, 6])
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            loader = data.DataLoader(stacked, batch_size=None, pin_memory=True)
            first = next(iter(loader))
        with pytest.raises(ValueError, match="Size mismatch"):
            data.StackDataset(range(2), range(3))
        return (type(first).__name__, first[1], named[1], len(stacked),
                [str(w.message) for w in seen if "pin_memory" in str(w.message)])

    assert run(pargraph) == run(torch)
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        list(pargraph.utils.data.ChainDataset([range(2)]))


@pytest.mark.parametrize("num_samples", [int(1e10), 1_000_003, 31, 1])
def test_a_sampler_with_replacement_draws_as_it_goes(num_samples):
    # minGPT's and makemore's loaders draw from RandomSampler(replacement=True,
    # num_samples=int(1e10)): PyTorch draws 32 at a time, so the first batch comes at once.
    import itertools
    import tracemalloc

    from pargraph.utils.data import RandomSampler

    data = TensorDataset(pargraph.arange(20.0).reshape(10, 2), pargraph.arange(10))
    sampler = RandomSampler(data, replacement=True, num_samples=num_samples,
                            generator=pargraph.Generator().manual_seed(3))
    loader = DataLoader(data, sampler=sampler, batch_size=4)
    assert len(sampler) == num_samples and len(loader) == -(-num_samples // 4)
    tracemalloc.start()
    batches = list(itertools.islice(iter(loader), 50))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**22, peak  # bounded, whatever num_samples is
    drawn = [int(i) for _, y in batches for i in y]
    assert len(drawn) == min(num_samples, 200) and all(0 <= i < 10 for i in drawn)
    again = RandomSampler(data, replacement=True, num_samples=num_samples,
                          generator=pargraph.Generator().manual_seed(3))
    assert list(itertools.islice(iter(again), len(drawn))) == drawn
    if num_samples < 10**7:
        assert sum(1 for _ in sampler) == num_samples
