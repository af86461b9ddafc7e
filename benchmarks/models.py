"""The benchmark models, written for pargraph and PyTorch (the memory and cluster workloads)."""

from __future__ import annotations

import numpy as np

import pargraph
from pargraph import nn, optim

WIDE = dict(towers=8, sizes=(256, 512, 512, 10), batch=512)


def init_layers(sizes: tuple[int, ...], rng: np.random.Generator) -> list[tuple]:
    """PyTorch's default Linear initialization, as numpy arrays (weight (out, in), bias)."""
    layers = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        bound = 1 / np.sqrt(fan_in)
        layers.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    return layers


def data(inputs: int, batch: int, classes: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, inputs)).astype(np.float32),
            rng.integers(0, classes, batch))


# --- pargraph ------------------------------------------------------------------------------

class PargraphTowers(nn.Module):
    def __init__(self, towers: list[list[tuple]]) -> None:
        super().__init__()
        self.towers = nn.ModuleList(_sequential(layers) for layers in towers)

    def forward(self, x):
        return pargraph.stack([tower(x) for tower in self.towers]).mean(0)


def _sequential(layers: list[tuple]) -> nn.Sequential:
    modules = []
    for k, (w, b) in enumerate(layers):
        linear = nn.Linear(w.shape[1], w.shape[0])
        linear.load_state_dict({"weight": w, "bias": b})
        modules.append(linear)
        if k < len(layers) - 1:
            modules.append(nn.ReLU())
    return nn.Sequential(*modules)


def pargraph_step(model, x, y, lr: float = 0.01, compiled: bool = False):
    opt = optim.SGD(model.parameters(), lr=lr)
    tx, ty = pargraph.tensor(x), pargraph.tensor(y)
    loss_fn = nn.CrossEntropyLoss()

    def train(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = pargraph.compile(train) if compiled else train

    def step():
        return run(tx, ty).item()

    return step


def pargraph_wide(towers):
    return PargraphTowers(towers)


# --- PyTorch -----------------------------------------------------------------------------

def torch_step(torch, towers, x, y, lr: float = 0.01):
    """The same step in PyTorch (towers: a list of layer lists; one tower = an MLP)."""
    def build(layers):
        modules = []
        for k, (w, b) in enumerate(layers):
            linear = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(w))
                linear.bias.copy_(torch.from_numpy(b))
            modules.append(linear)
            if k < len(layers) - 1:
                modules.append(torch.nn.ReLU())
        return torch.nn.Sequential(*modules)

    models = torch.nn.ModuleList(build(layers) for layers in towers)
    opt = torch.optim.SGD(models.parameters(), lr=lr)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        logits = torch.stack([m(tx) for m in models]).mean(0)
        loss = loss_fn(logits, ty)
        loss.backward()
        opt.step()
        return loss.item()

    return step
