"""The benchmark models, written four ways: pargraph, numpy by hand, raw dask, PyTorch."""

from __future__ import annotations

import numpy as np

import pargraph
from pargraph import nn, optim

WIDE = dict(towers=8, sizes=(256, 512, 512, 10), batch=512)
SMALL = dict(sizes=(32, 64, 64, 4), batch=32)


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


def pargraph_step(model, x, y, lr: float = 0.01):
    opt = optim.SGD(model.parameters(), lr=lr)
    tx, ty = pargraph.tensor(x), pargraph.tensor(y)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(tx), ty)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def pargraph_wide(towers):
    return PargraphTowers(towers)


def pargraph_small(layers):
    return _sequential(layers)


# --- numpy by hand -----------------------------------------------------------------------

def mlp_forward(layers, x):
    activations = [x]
    for k, (w, b) in enumerate(layers):
        z = activations[-1] @ w.T + b
        activations.append(np.maximum(z, 0) if k < len(layers) - 1 else z)
    return activations


def mlp_backward(layers, activations, g):
    grads = []
    for k in range(len(layers) - 1, -1, -1):
        w, _ = layers[k]
        grads.append((g.T @ activations[k], g.sum(0)))
        if k:
            g = (g @ w) * (activations[k] > 0)
    return grads[::-1]


def cross_entropy_grad(logits, y):
    shifted = logits - logits.max(1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(1, keepdims=True)
    loss = float(np.mean(np.log(total[:, 0]) - shifted[np.arange(len(y)), y]))
    g = exp / total
    g[np.arange(len(y)), y] -= 1
    return loss, g / len(y)


def sgd(layers, grads, lr):
    return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(layers, grads)]


def numpy_wide_step(towers, x, y, lr: float = 0.01):
    state = {"towers": towers}

    def step():
        caches = [mlp_forward(layers, x) for layers in state["towers"]]
        logits = sum(c[-1] for c in caches) / len(caches)
        loss, g = cross_entropy_grad(logits, y)
        g = g / len(caches)
        state["towers"] = [sgd(layers, mlp_backward(layers, cache, g), lr)
                           for layers, cache in zip(state["towers"], caches)]
        return loss

    return step


def numpy_small_step(layers, x, y, lr: float = 0.01):
    state = {"layers": layers}

    def step():
        cache = mlp_forward(state["layers"], x)
        loss, g = cross_entropy_grad(cache[-1], y)
        state["layers"] = sgd(state["layers"], mlp_backward(state["layers"], cache, g), lr)
        return loss

    return step


# --- raw dask: one task per layer, forward, backward and update ---------------------------

def _linear(x, w, b, relu):
    z = x @ w.T + b
    return np.maximum(z, 0) if relu else z


def _linear_backward(g, x, w, out, relu):
    """Gradient through relu (if any) and the linear layer: (g_x, g_w, g_b)."""
    if relu:
        g = g * (out > 0)
    return g @ w, g.T @ x, g.sum(0)


def _pick(t, k):
    return t[k]


def _average_loss(y, *logits):
    return cross_entropy_grad(sum(logits) / len(logits), y)


def raw_dask_wide_step(towers, x, y, lr: float = 0.01):
    """The same training step as a hand-written dask task_spec graph."""
    import dask.threaded
    from dask.task_spec import DataNode, Task, TaskRef

    state = {"towers": towers}

    def step():
        graph = {"x": DataNode("x", x), "y": DataNode("y", y)}
        outs = []
        for t, layers in enumerate(state["towers"]):
            prev = "x"
            for k, (w, b) in enumerate(layers):
                graph[f"w-{t}-{k}"] = DataNode(f"w-{t}-{k}", w)
                graph[f"b-{t}-{k}"] = DataNode(f"b-{t}-{k}", b)
                key = f"fwd-{t}-{k}"
                graph[key] = Task(key, _linear, TaskRef(prev), TaskRef(f"w-{t}-{k}"),
                                  TaskRef(f"b-{t}-{k}"), k < len(layers) - 1)
                prev = key
            outs.append(TaskRef(prev))
        graph["loss"] = Task("loss", _average_loss, TaskRef("y"), *outs)
        graph["g"] = Task("g", _scaled_grad, TaskRef("loss"), len(state["towers"]))
        keys = []
        for t, layers in enumerate(state["towers"]):
            g = "g"
            for k in range(len(layers) - 1, -1, -1):
                inp = "x" if k == 0 else f"fwd-{t}-{k - 1}"
                key = f"bwd-{t}-{k}"
                graph[key] = Task(key, _linear_backward, TaskRef(g), TaskRef(inp),
                                  TaskRef(f"w-{t}-{k}"), TaskRef(f"fwd-{t}-{k}"),
                                  k < len(layers) - 1)
                upd = f"upd-{t}-{k}"
                graph[upd] = Task(upd, _update, TaskRef(f"w-{t}-{k}"), TaskRef(f"b-{t}-{k}"),
                                  TaskRef(key), lr)
                keys.append(upd)
                g = f"gx-{t}-{k}"
                graph[g] = Task(g, _pick, TaskRef(key), 0)
        results = dask.threaded.get(graph, ["loss"] + keys)
        n = len(state["towers"][0])
        updated = list(results[1:])
        state["towers"] = [updated[t * n:(t + 1) * n][::-1] for t in range(len(state["towers"]))]
        return results[0][0]

    return step


def _scaled_grad(loss_and_grad, towers):
    return loss_and_grad[1] / towers


def _update(w, b, grads, lr):
    _, gw, gb = grads
    return (w - lr * gw, b - lr * gb)


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
