"""NAdam, RAdam, Adamax, Rprop and ASGD against PyTorch: the same parameters after every step
of a small training loop, eager and compiled."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

CASES = [
    ("NAdam", {"lr": 0.05, "weight_decay": 0.01}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.05}), ("RAdam", {"lr": 0.05, "betas": (0.9, 0.5), "weight_decay": 0.1}),
    ("Adamax", {"lr": 0.05, "weight_decay": 0.01}),
    ("Rprop", {"lr": 0.02}), ("ASGD", {"lr": 0.05, "t0": 3, "weight_decay": 0.01}),
]


def _train(library, name, options, steps=8, compiled=False):
    rng = np.random.default_rng(0)
    w0, x, y = rng.standard_normal((3, 2)), rng.standard_normal((16, 3)), rng.standard_normal(16)
    w = library.tensor(w0, requires_grad=True)
    opt = getattr(library.optim, name)([w], **options)
    data = library.tensor(x), library.tensor(y)

    def step(x, y):
        opt.zero_grad()
        loss = ((x @ w).sum(1) - y).pow(2).mean() + (x @ w).sin().sum() * 0.1
        loss.backward()
        opt.step()

    run = pargraph.compile(step) if compiled else step
    seen = []
    for _ in range(steps):
        run(*data)
        seen.append(w.detach().numpy().copy())
    return np.array(seen)


@pytest.mark.parametrize("name,options", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_optimizers_follow_pytorch_step_by_step(name, options):
    theirs = _train(torch, name, options)
    # PyTorch keeps NAdam's mu_product, ASGD's eta and mu and uses Rprop's etas as float32
    # scalars even for float64 parameters: 1e-8 apart, relatively, from the exact values.
    rtol = 1e-5 if name in ("NAdam", "Rprop", "ASGD") else 1e-9
    np.testing.assert_allclose(_train(pargraph, name, options), theirs, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "Rprop", "ASGD"])
def test_compiled_steps_equal_eager_ones(name):
    options = dict(CASES[[c[0] for c in CASES].index(name)][1])
    np.testing.assert_array_equal(_train(pargraph, name, options, compiled=True),
                                  _train(pargraph, name, options))


def test_bad_hyperparameters_raise():
    w = [pargraph.zeros(1, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        pargraph.optim.NAdam(w, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid eta values"):
        pargraph.optim.Rprop(w, etas=(1.5, 1.2))
