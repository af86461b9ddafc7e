"""Shared memory and ``torch.multiprocessing`` (pargraph.shared_memory, pargraph.multiprocessing):
a shared tensor's updates in forked and spawned processes reach the parent and each other
(Hogwild training), through eager, optimizer and compiled steps; tensors pass through queues;
``spawn`` reports a child's error with its traceback."""

import multiprocessing
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pargraph
import pargraph.multiprocessing as mp
from pargraph.shared_memory import shared_tensors


def _steps(rank, p, steps, compiled=False):
    """SGD steps whose gradient is ``rank + 1`` everywhere: each lowers ``p`` by that much."""
    opt = pargraph.optim.SGD([p], lr=1.0)

    def step():
        opt.zero_grad()
        (p * (rank + 1)).sum().backward()
        opt.step()

    run = pargraph.compile(step) if compiled else step
    for _ in range(steps):
        run()


def _plain_update(rank, p, steps):
    """``p.data.add_`` updates, as older training loops write them (nothing read after them:
    an in-place change of a shared tensor runs at once)."""
    for _ in range(steps):
        with pargraph.no_grad():
            p.data.add_(pargraph.ones(p.shape), alpha=-(rank + 1))


@pytest.mark.parametrize(("method", "how"), [
    (method, how) for method in ("fork", "spawn") for how in ("optimizer", "compiled", "data.add_")
] + [("forkserver", "optimizer")])
def test_processes_one_after_another_add_up_their_updates_exactly(method, how):
    p = pargraph.nn.Parameter(pargraph.zeros(1000)).share_memory_()
    target = {"optimizer": _steps, "compiled": _steps, "data.add_": _plain_update}[how]
    extra = (True,) if how == "compiled" else ()
    context = multiprocessing.get_context(method)
    for rank in range(2):  # one at a time: no race, so the sum is exact
        child = context.Process(target=target, args=(rank, p, 5, *extra))
        child.start()
        child.join(120)
        assert child.exitcode == 0
    np.testing.assert_array_equal(p.detach().numpy(), np.full(1000, -(5 * 1 + 5 * 2)))
    # the parent's own steps start from the children's values and reach the mapping too
    _steps(0, p, 2)
    np.testing.assert_array_equal(p.detach().numpy(), np.full(1000, -17.0))
    np.testing.assert_array_equal(shared_tensors.buffer_of(p).array, np.full(1000, -17.0))


def _from_queue(queue, done):
    tensor, plain = queue.get()
    tensor.add_(1.0)  # a shared tensor: the parent sees it
    tensor.sum().item()
    plain.add_(1.0)  # pickled as its values: the parent's stays
    done.put((tensor.is_shared(), plain.is_shared()))


def test_a_queue_passes_a_shared_tensor_as_its_memory_and_another_as_its_values():
    context = mp.get_context("spawn")
    queue, done = context.Queue(), context.Queue()
    shared, plain = pargraph.zeros(4).share_memory_(), pargraph.zeros(4)
    child = context.Process(target=_from_queue, args=(queue, done))
    child.start()
    queue.put((shared, plain))
    assert done.get(timeout=120) == (True, False)
    child.join(120)
    np.testing.assert_array_equal(shared.numpy(), np.ones(4))
    np.testing.assert_array_equal(plain.numpy(), np.zeros(4))


def _fails(rank):
    if rank == 1:
        raise ValueError("the second process fails")


def test_spawn_runs_every_process_and_raises_a_childs_error_with_its_traceback():
    shared = pargraph.nn.Parameter(pargraph.zeros(2)).share_memory_()
    mp.spawn(_steps, args=(shared, 3), nprocs=1, start_method="spawn")
    np.testing.assert_array_equal(shared.detach().numpy(), [-3.0, -3.0])  # rank 0's 3 steps
    with pytest.raises(mp.ProcessRaisedException, match="the second process fails") as caught:
        mp.spawn(_fails, nprocs=2, start_method="fork")
    assert "Traceback" in str(caught.value) and caught.value.error_index == 1
    assert mp.get_sharing_strategy() == "file_descriptor"
    with pytest.raises(ValueError, match="file descriptor"):
        mp.set_sharing_strategy("file_system")


HOGWILD = """
    import sys
    import torch
    import torch.multiprocessing as mp
    import torch.nn as nn
    import torch.nn.functional as F
    from sklearn.datasets import load_digits


    def train(rank, model, x, y):
        torch.manual_seed(rank)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(100):
            batch = torch.randint(0, x.shape[0], (32,))
            optimizer.zero_grad()
            F.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()


    if __name__ == "__main__":
        torch.manual_seed(0)
        digits = load_digits()
        x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
        y = torch.tensor(digits.target)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        model.share_memory()
        processes = []
        for rank in range(2):
            p = mp.Process(target=train, args=(rank, model, x, y))
            p.start()
            processes.append(p)
        for p in processes:
            p.join()
        print(F.cross_entropy(model(x), y).item(), [p.exitcode for p in processes])
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pytorchs_hogwild_program_trains_one_model_from_two_processes(tmp_path, method):
    """PyTorch's Hogwild example, its imports untouched, through ``python -m pargraph``: two
    processes of 100 steps each bring the shared model's loss below what one process's 100
    steps reach (1.3; 0.56 with both)."""
    program = tmp_path / "hogwild.py"
    program.write_text(textwrap.dedent(HOGWILD).replace(
        "import torch.multiprocessing as mp\n",
        f"import torch.multiprocessing as mp\nmp.set_start_method({method!r}, force=True)\n"))
    done = subprocess.run([sys.executable, "-m", "pargraph", str(program)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loss, codes = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert codes == "[0, 0]" and float(loss) < 0.9, done.stdout


FORKSERVER = """
    import torch
    import torch.multiprocessing as mp


    def grow(p):
        torch.optim.SGD([p], lr=1.0).zero_grad()
        with torch.no_grad():
            p.add_(torch.ones(2))


    if __name__ == "__main__":
        mp.set_start_method("forkserver", force=True)
        p = torch.nn.Parameter(torch.zeros(2)).share_memory_()
        child = mp.Process(target=grow, args=(p,))
        child.start()
        child.join()
        print(child.exitcode, p.detach().tolist())
"""


def test_a_forkserver_process_of_a_program_run_through_pargraph_aliases_torch(tmp_path):
    """Under ``python -m pargraph`` the forkserver's server preloads the alias, so its
    processes import the program (and torch) as pargraph."""
    program = tmp_path / "grow.py"
    program.write_text(textwrap.dedent(FORKSERVER))
    done = subprocess.run([sys.executable, "-m", "pargraph", str(program)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 [1.0, 1.0]"
