"""nn.utils.weight_norm / remove_weight_norm against torch 2.13: parameters and state_dict
keys, forward values and the gradients of g and v, a training step, eager and compiled."""

import warnings

import numpy as np
import pytest

import pargraph
from pargraph import nn

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def _pair(ours, theirs):
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy())
                            for k, v in ours.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("make, dim, shape", [
    (lambda lib: lib.nn.Linear(3, 2), 0, (4, 3)), (lambda lib: lib.nn.Linear(3, 2), None, (4, 3)),
    (lambda lib: lib.nn.Conv2d(2, 3, 3), 0, (2, 2, 5, 5)),
    (lambda lib: lib.nn.Conv2d(2, 3, 3), 1, (2, 2, 5, 5)),
])
@pytest.mark.parametrize("compiled", [False, True])
def test_weight_norm_trains_as_pytorchs(make, dim, shape, compiled):
    pargraph.manual_seed(0)
    ours, theirs = _pair(make(pargraph), make(torch))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn.utils.weight_norm(ours, dim=dim)
        torch.nn.utils.weight_norm(theirs, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(v.shape) for v in ours.state_dict().values()] == \
        [tuple(v.shape) for v in theirs.state_dict().values()]
    ours_opt = pargraph.optim.SGD(ours.parameters(), lr=0.1)
    theirs_opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    def step(v):
        ours_opt.zero_grad()
        loss = ours(v).pow(2).mean()
        loss.backward()
        ours_opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    for _ in range(3):
        loss = run(pargraph.tensor(x))
        theirs_opt.zero_grad()
        expected = theirs(torch.tensor(x)).pow(2).mean()
        expected.backward()
        theirs_opt.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
    for name in ("weight_g", "weight_v"):
        np.testing.assert_allclose(getattr(ours, name).detach().numpy(),
                                   getattr(theirs, name).detach().numpy(), rtol=1e-4, atol=1e-6)
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert sorted(n for n, _ in ours.named_parameters()) == \
        sorted(n for n, _ in theirs.named_parameters())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                               rtol=1e-4, atol=1e-6)


def test_weight_norm_warns_and_refuses_twice_and_missing():
    layer = nn.Linear(2, 2)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        nn.utils.weight_norm(layer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
            nn.utils.weight_norm(layer)
    with pytest.raises(ValueError, match="weight_norm of 'bias' not found"):
        nn.utils.remove_weight_norm(layer, "bias")
