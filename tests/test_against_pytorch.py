"""pargraph against PyTorch itself, computed live: optimizers on every parameter shape, numeric
edges (saturated losses, -inf, constant inputs, float16 reductions) and index checks."""

import numpy as np
import pytest
import torch

import pargraph
from pargraph import nn, optim

OPTIMIZERS = [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3)),
    ("Adam", dict(lr=0.1)), ("Adam", dict(lr=0.1, amsgrad=True, weight_decay=0.2)),
    ("AdamW", dict(lr=0.1)), ("AdamW", dict(lr=0.1, amsgrad=True, weight_decay=0.3)),
    ("RMSprop", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.5)), ("Adadelta", dict(weight_decay=0.1)),
]


def _start(shape: str, rng: np.random.Generator) -> np.ndarray:
    if shape == "0-d":
        return np.asarray(rng.standard_normal())
    if shape == "1-d":
        return rng.standard_normal(3)
    return rng.standard_normal((4, 3)).T  # non-contiguous


@pytest.mark.parametrize("shape", ["0-d", "1-d", "non-contiguous"])
@pytest.mark.parametrize("name, options", OPTIMIZERS)
def test_every_optimizer_updates_every_parameter_shape_as_pytorch(name, options, shape):
    rng = np.random.default_rng(3)
    start = _start(shape, rng)
    grads = [rng.standard_normal(start.shape) for _ in range(3)]
    ours = nn.Parameter(pargraph.tensor(start))
    theirs = torch.nn.Parameter(torch.tensor(start))
    our_opt = getattr(optim, name)([ours], **options)
    their_opt = getattr(torch.optim, name)([theirs], **options)
    for g in grads:
        for param, opt, lib in ((ours, our_opt, pargraph), (theirs, their_opt, torch)):
            opt.zero_grad()
            (param * lib.tensor(g)).sum().backward()
            opt.step()
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    assert ours.shape == theirs.shape
