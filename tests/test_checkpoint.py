"""utils.checkpoint: activation checkpointing as PyTorch's. The checkpointed function's
values are computed again for its backward (not kept), gradients equal the plain call's bit
for bit, and the step's peak memory falls."""

import tracemalloc
import warnings

import numpy as np
import pytest

import pargraph
from pargraph import nn
from pargraph.utils.checkpoint import checkpoint, checkpoint_sequential
from tests.conftest import THROUGH_THE_SCHEDULER


def _block():
    pargraph.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.3), nn.Linear(16, 6),
                         nn.ReLU())


def _gradients(model, x, wrap):
    model.zero_grad()
    x.grad = None
    pargraph.manual_seed(1)  # the same dropout mask in both runs
    loss = wrap(model, x).pow(2).sum()
    loss.backward()
    return [loss.item(), x.grad.numpy().copy()] + [p.grad.numpy().copy()
                                                   for p in model.parameters()]


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_checkpoint_gives_the_plain_calls_gradients_and_recomputes_the_function(scheduler):
    import dask

    model, x = _block(), pargraph.randn(5, 6, requires_grad=True)
    with dask.config.set(scheduler=scheduler):
        plain = _gradients(model, x, lambda m, v: m(v))
        with pargraph.trace() as tr:
            checked = _gradients(model, x, lambda m, v: checkpoint(m, v, use_reentrant=False))
    for a, b in zip(plain, checked):
        np.testing.assert_array_equal(a, b)  # dropout's mask is kept, not drawn again
    recomputed = {r.key.rsplit("-", 2)[0] for r in tr.records.values()}
    assert {"linear_recomputed_backward", "tanh_recomputed_backward"} <= recomputed


def test_checkpoint_against_pytorch_and_sequential_segments():
    torch = pytest.importorskip("torch")  # the test extra installs the CPU build
    from torch.utils.checkpoint import checkpoint_sequential as theirs_sequential

    pargraph.manual_seed(0)
    ours = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(5, 5), nn.Tanh())])
    theirs = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(5, 5),
                                                                  torch.nn.Tanh())])
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy())
                            for k, v in ours.state_dict().items()})
    values = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    x, tx = pargraph.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    checkpoint_sequential(ours, 3, x, use_reentrant=False).sum().backward()
    theirs_sequential(theirs, 3, tx, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)


#: The ways a local run goes: dask's schedulers, in their own order, and pargraph's ways of a
#: threaded run (its threads, or group after group in the calling thread; the latter for a
#: sync run too).
WAYS = {
    "dask sync": {"scheduler": "sync", **THROUGH_THE_SCHEDULER},
    "dask threads": {"scheduler": "threads", **THROUGH_THE_SCHEDULER},
    "pargraph threads": {"scheduler": "threads", "pargraph.adaptive": "threads"},
    "pargraph in order": {"scheduler": "threads", "pargraph.adaptive": "inline, one BLAS thread"},
    "pargraph sync": {"scheduler": "sync"},
}


@pytest.mark.parametrize("way", list(WAYS))
def test_checkpointing_lowers_the_peak_memory_of_a_deep_step(way):
    """Whichever way the run goes: a call's recomputation waits for the later calls' weight
    gradients, which free their recomputed values, and a group's tuple lets go of a value
    once its readers ran (not when the tuple's last reader ran)."""
    import dask

    pargraph.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(12) for m in (nn.Linear(128, 128), nn.Tanh())])
    x = pargraph.randn(1024, 128)

    def peak(wrap):
        for _ in range(2):
            model.zero_grad()
            wrap(x).pow(2).mean().backward()
            model[0].weight.grad.numpy()
        tracemalloc.start()
        model.zero_grad()
        wrap(x).pow(2).mean().backward()
        model[0].weight.grad.numpy()
        used = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return used

    with dask.config.set(WAYS[way]):
        plain = peak(model)
        checked = peak(lambda v: checkpoint_sequential(model, 6, v, use_reentrant=False))
    # 24 activations of 0.5 MiB kept against 6 segments' inputs and one segment's values.
    assert checked < 0.7 * plain, (plain, checked)


@pytest.mark.parametrize("way", ["threads", "inline, one BLAS thread"])
def test_checkpointing_lowers_the_peak_memory_of_a_compiled_step(way):
    """A compiled step's replays, on pargraph's threads and group after group."""
    import dask

    pargraph.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(12) for m in (nn.Linear(128, 128), nn.Tanh())])
    opt = pargraph.optim.SGD(model.parameters(), lr=0.01)
    x = pargraph.randn(1024, 128)

    def peak(wrap):
        @pargraph.compile
        def step(x):
            opt.zero_grad()
            loss = wrap(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        for _ in range(4):
            step(x).item()
        tracemalloc.start()
        step(x).item()
        used = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return used

    with dask.config.set({"pargraph.adaptive": way}):
        plain = peak(model)
        checked = peak(lambda v: checkpoint_sequential(model, 6, v, use_reentrant=False))
    assert checked < 0.6 * plain, (plain, checked)


def test_use_reentrant_as_pytorchs():
    layer = nn.Linear(2, 2)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        checkpoint(layer, pargraph.ones(1, 2, requires_grad=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = checkpoint(layer, pargraph.ones(1, 2), use_reentrant=False)
    assert out.requires_grad  # the parameters require grad
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = checkpoint(layer, pargraph.ones(1, 2), use_reentrant=True)
    assert not out.requires_grad  # PyTorch's reentrant variant: no input requires grad
    with pytest.raises(ValueError, match="Unexpected keyword arguments: nope"):
        checkpoint_sequential(nn.Sequential(layer), 1, pargraph.ones(1, 2),
                              use_reentrant=False, nope=1)


def test_a_checkpoint_inside_a_compiled_step_and_a_second_order_gradient():
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    opt = pargraph.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = checkpoint(model, x, use_reentrant=False).sum()
        loss.backward()
        opt.step()
        return loss

    pargraph.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    eager_model.load_state_dict(model.state_dict())
    compiled = pargraph.compile(step)
    x = pargraph.randn(4, 3)
    losses = [compiled(x).item() for _ in range(3)]
    eager_opt = pargraph.optim.SGD(eager_model.parameters(), lr=0.1)
    expected = []
    for _ in range(3):
        eager_opt.zero_grad()
        loss = eager_model(x).sum()
        loss.backward()
        eager_opt.step()
        expected.append(loss.item())
    assert losses == expected
    v = pargraph.tensor([0.3, -0.2], requires_grad=True)
    y = checkpoint(lambda t: (t ** 3).sum(), v, use_reentrant=False)
    (g,) = pargraph.autograd.grad(y, v, create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), 6 * v.detach().numpy(), rtol=1e-6)
