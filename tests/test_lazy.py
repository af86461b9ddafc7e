"""Lazy modules against PyTorch: the shapes and class they take at their first call, their
state dicts, loading into an uninitialized module, and training after the dry run."""

import numpy as np
import pytest

import pargraph
from pargraph import nn

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

CASES = [
    ("LazyLinear", (5,), {}, (2, 3)),
    ("LazyLinear", (4,), {"bias": False}, (2, 7, 3)),
    ("LazyConv1d", (6, 3), {"padding": 1}, (2, 4, 9)),
    ("LazyConv2d", (8, 3), {"stride": 2, "groups": 2}, (2, 4, 7, 7)),
    ("LazyConv2d", (8, 3, 1, 1, 1, 1, False), {}, (4, 5, 5)),
    ("LazyConv3d", (2, (1, 2, 2)), {}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (3, 2), {"stride": 2}, (2, 4, 5)),
    ("LazyConvTranspose2d", (4, 3), {"stride": 2, "output_padding": 1, "groups": 2},
     (1, 6, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 2, 2, 2)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"momentum": None}, (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), {"affine": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), {"affine": True, "track_running_stats": True}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {"affine": True}, (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_lazy_modules_become_their_layer_as_pytorchs_do(name, args, kwargs, shape):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert ours.has_uninitialized_params() and theirs.has_uninitialized_params()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = ours(pargraph.tensor(x))
    expected = theirs(torch.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ == name[4:]
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert tuple(out.shape) == tuple(expected.shape)
    # With PyTorch's initialized values the layers compute the same
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    with pargraph.no_grad(), torch.no_grad():
        np.testing.assert_allclose(ours(pargraph.tensor(x)).numpy(),
                                   theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_a_lazy_linear_initializes_as_linear_and_trains_after_its_dry_run():
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(16), nn.ReLU(), nn.LazyLinear(1))
    x, y = pargraph.randn(32, 5), pargraph.randn(32, 1)
    model(x)  # the dry run
    first = model[0]
    assert type(first) is nn.Linear and first.in_features == 5
    bound = 1 / np.sqrt(5)
    assert np.abs(first.weight.detach().numpy()).max() <= bound
    assert first.weight.detach().numpy().std() > bound / 4  # initialized, not left empty
    opt = pargraph.optim.Adam(model.parameters(), lr=0.01)
    step = pargraph.compile(lambda x, y: _step(model, opt, x, y))
    losses = [step(x, y).item() for _ in range(60)]
    assert losses[-1] < losses[0] / 2


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_a_state_dict_loads_into_an_uninitialized_lazy_module():
    trained = nn.LazyLinear(3)
    trained(pargraph.ones(2, 4))
    fresh = nn.LazyLinear(3)
    fresh.load_state_dict(trained.state_dict())
    assert tuple(fresh.weight.shape) == (3, 4)
    np.testing.assert_array_equal(fresh.weight.detach().numpy(),
                                  trained.weight.detach().numpy())
    out = fresh(pargraph.ones(2, 4))
    assert type(fresh) is nn.Linear and tuple(out.shape) == (2, 3)


def test_uninitialized_placeholders_say_what_they_are():
    layer = nn.LazyLinear(2)
    assert repr(layer.weight) == "<UninitializedParameter>"
    from pargraph.nn.parameter import is_lazy

    assert is_lazy(layer.weight)
    assert repr(layer) == "LazyLinear(in_features=0, out_features=2, bias=True)"
    assert repr(torch.nn.LazyLinear(2)) == repr(layer)
