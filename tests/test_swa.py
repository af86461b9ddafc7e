"""Weight averaging (``optim.swa_utils``) and ``lerp`` against PyTorch: an EMA model, a SWA run
with SWALR and update_bn, and lerp's values bit for bit."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def _run(library, kind: str, epochs: int = 6, compiled: bool = False):
    """Losses, learning rates and the averaged model's state of a small BatchNorm network
    trained with an EMA or a SWA average, from the same weights and data."""
    rng = np.random.default_rng(0)
    nn, swa_utils = library.nn, library.optim.swa_utils
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    with library.no_grad():
        for p in model.parameters():
            p.copy_(library.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    data = [(library.tensor(rng.standard_normal((8, 4)).astype(np.float32)),
             library.tensor(rng.standard_normal((8, 1)).astype(np.float32))) for _ in range(3)]
    opt = library.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if kind == "ema":
        averaged = swa_utils.AveragedModel(model,
                                           multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
        scheduler = None
    elif kind == "ema per parameter":
        averaged = swa_utils.AveragedModel(model, avg_fn=swa_utils.get_ema_avg_fn(0.8),
                                           use_buffers=True)
        scheduler = None
    else:
        averaged = swa_utils.AveragedModel(model)
        scheduler = swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=3)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    losses, rates = [], []
    for epoch in range(epochs):
        for x, y in data:
            losses.append(run(x, y).item())
            if kind != "swa":
                averaged.update_parameters(model)
        if kind == "swa" and epoch >= 2:
            averaged.update_parameters(model)
        if scheduler is not None:
            scheduler.step()
            rates.append(scheduler.get_last_lr()[0])
    if kind == "swa":
        swa_utils.update_bn([x for x, _ in data], averaged)
    state = {k: np.asarray(v.detach().numpy(), dtype=np.float64)
             for k, v in averaged.state_dict().items()}
    with library.no_grad():
        averaged.eval()
        out = averaged(data[0][0]).detach().numpy()
    return losses, rates, state, out


@pytest.mark.parametrize("kind", ["ema", "ema per parameter", "swa"])
def test_averaged_models_follow_pytorch(kind):
    theirs = _run(torch, kind)
    for ours in (_run(pargraph, kind), _run(pargraph, kind, compiled=True)):
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
        assert ours[2].keys() == theirs[2].keys()
        for key in theirs[2]:
            np.testing.assert_allclose(ours[2][key], theirs[2][key], rtol=1e-5, atol=1e-6,
                                       err_msg=key)
        np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5, atol=1e-6)


def test_averaged_model_errors_and_state():
    model = pargraph.nn.Linear(2, 1)
    swa_utils = pargraph.optim.swa_utils
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(model, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided"):
        swa_utils.get_ema_multi_avg_fn(1.5)
    opt = pargraph.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        swa_utils.SWALR(opt, swa_lr=0.01, anneal_strategy="step")
    averaged = swa_utils.AveragedModel(model)
    assert list(averaged.state_dict()) == ["n_averaged", "module.weight", "module.bias"]
    averaged.update_parameters(model)
    again = swa_utils.AveragedModel(model)
    again.load_state_dict(averaged.state_dict())
    assert int(again.n_averaged) == 1
    assert averaged.module.weight is not model.weight  # a copy, not the model's parameter


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_lerp_equals_pytorchs_fused_formula(dtype):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(4000), rng.standard_normal(4000)
    w = rng.uniform(-0.2, 1.2, 4000)

    def ours(v):
        return pargraph.tensor(v.astype(np.float32)).to(getattr(pargraph, dtype))

    def theirs(v):
        return torch.tensor(v.astype(np.float32)).to(getattr(torch, dtype))

    for weight in (0.3, 0.7, 0.999, -0.2):
        got = ours(a).lerp(ours(b), weight).double().numpy()
        want = torch.lerp(theirs(a), theirs(b), weight).double().numpy()
        # float64's fused multiply-add has no wider type to be emulated in: 1 ulp apart
        if dtype == "float64":
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
        else:
            np.testing.assert_array_equal(got, want)
    got = ours(a).lerp(ours(b), ours(w)).double().numpy()
    want = torch.lerp(theirs(a), theirs(b), theirs(w)).double().numpy()
    if dtype == "float64":
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    else:
        np.testing.assert_array_equal(got, want)
