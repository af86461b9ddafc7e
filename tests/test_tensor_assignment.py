"""In-place updates as PyTorch programs write them: ``-=`` on parameters, ``.data``, item
assignment, and the PyTorch rules that guard them."""

import contextlib
import gc
import math
import textwrap

import numpy as np
import pytest

import pargraph
from pargraph import nn
from pargraph.engine import execution
from pargraph.graph import Node


def test_seed_style_loop_on_a_bare_leaf():
    w = pargraph.tensor([1.0, -2.0], requires_grad=True)
    original = w
    for _ in range(50):
        loss = ((w - 3) ** 2).sum()
        loss.backward()
        with pargraph.no_grad():
            w -= 0.1 * w.grad
        w.grad.zero_()
    assert w is original and w.requires_grad and w.is_leaf
    np.testing.assert_allclose(w.detach().numpy(), [3.0, 3.0], atol=1e-3)


@pytest.mark.parametrize("update", [
    lambda p: p.__isub__(0.1 * p.grad),
    lambda p: p.data.add_(-0.1 * p.grad),
    lambda p: p.data.sub_(0.1 * p.grad),
    lambda p: p.data.__isub__(0.1 * p.grad),
], ids=["p -= ...", "p.data.add_", "p.data.sub_", "p.data -= ..."])
def test_manual_updates_of_model_parameters_change_the_model(update):
    pargraph.manual_seed(0)
    model = nn.Linear(3, 1)
    x, y = pargraph.randn(16, 3), pargraph.randn(16, 1)
    losses = []
    for _ in range(30):
        loss = ((model(x) - y) ** 2).mean()
        losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        with pargraph.no_grad():
            for p in model.parameters():
                update(p)
    assert losses[-1] < 0.8 * losses[0]
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())


def test_in_place_on_a_leaf_that_requires_grad_is_refused_outside_no_grad():
    w = pargraph.ones(2, requires_grad=True)
    for change in (lambda: w.__iadd__(1), lambda: w.__imul__(2), lambda: w.__setitem__(0, 5.0),
                   lambda: w.__itruediv__(2), lambda: w.__ipow__(2)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            change()
    with pargraph.no_grad():
        w += 1
        w *= 3
        w /= 2
        w **= 2
        w[0] = 0.5
    assert w.tolist() == [0.5, 9.0] and w.requires_grad and w.is_leaf
    w.data[1] = 7.0  # .data bypasses the rule, as in PyTorch
    assert w.tolist() == [0.5, 7.0]


def test_data_and_detach_share_data_both_ways():
    p = nn.Parameter(pargraph.zeros(3))
    d, e = p.data, p.detach()
    d.add_(1)
    assert p.tolist() == [1.0, 1.0, 1.0] and e.tolist() == [1.0, 1.0, 1.0]
    with pargraph.no_grad():
        p.mul_(4)
    assert d.tolist() == [4.0, 4.0, 4.0] and not d.requires_grad and p.requires_grad
    p.data = pargraph.tensor([1.0, 2.0])  # assigning .data may change the shape
    assert p.shape == (2,) and p.requires_grad and p.is_leaf
    leaf = p.detach().requires_grad_()
    (leaf * 2).sum().backward()
    assert leaf.grad.tolist() == [2.0, 2.0] and p.grad is None


def test_item_assignment():
    x = pargraph.zeros(3, 4)
    x[0] = 1.0
    x[:, 1:] = pargraph.full((3, 3), 2.0)
    x[x > 1.5] = 0
    x[pargraph.tensor([2]), 0] = pargraph.tensor([9.0])
    expected = np.zeros((3, 4), np.float32)
    expected[0, 0] = 1  # row 0's 2s became 0 with the rest
    expected[2, 0] = 9
    np.testing.assert_array_equal(x.numpy(), expected)
    with pytest.raises(RuntimeError, match="cannot be broadcast to indexing result"):
        x[0] = pargraph.ones(5)
    ints = pargraph.arange(4)
    ints[1] = 7.9  # cast to the tensor's dtype
    assert ints.tolist() == [0, 7, 2, 3]


def test_item_assignment_is_differentiable():
    x = pargraph.ones(2, 3, requires_grad=True)
    v = pargraph.tensor([5.0, 6.0], requires_grad=True)
    h = x * 2
    h[:, 0] = v * v
    h.sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 2.0], [0.0, 2.0, 2.0]]
    assert v.grad.tolist() == [10.0, 12.0]


def test_pytorch_habits():
    loss = pargraph.tensor(0.12345)
    assert f"{loss:.3f}" == "0.123" and "{:+.2f}".format(loss) == "+0.12"  # noqa: UP032
    with pytest.raises(TypeError):
        f"{pargraph.ones(2):.3f}"
    assert f"{pargraph.ones(2)}" == str(pargraph.ones(2))
    t = pargraph.ones(2)
    assert t.cpu() is t and t.to("cpu") is t
    assert t.to(pargraph.ones(1, dtype=pargraph.float64)).dtype == pargraph.float64
    with pytest.raises(RuntimeError, match="pargraph runs on the CPU"):
        t.to("cuda")
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert model.to("cpu") is model and model.cpu() is model
    assert model.double() is model and all(p.dtype == pargraph.float64
                                           for p in model.parameters())
    out = model(pargraph.ones(4, 2, dtype=pargraph.float64))
    assert out.dtype == pargraph.float64
    out.sum().backward()
    model.float()
    assert all(p.dtype == pargraph.float32 and p.requires_grad and p.grad is not None
               and p.grad.dtype == pargraph.float32 for p in model.parameters())
    assert model.to(pargraph.float64) is model and model[0].weight.dtype == pargraph.float64


POLYNOMIAL_NN = """
import torch
import math

x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)
model = torch.nn.Sequential(
    torch.nn.Linear(3, 1),
    torch.nn.Flatten(0, 1)
)
loss_fn = torch.nn.MSELoss(reduction='sum')
learning_rate = 1e-6
for t in range(2000):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad
linear_layer = model[0]
print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
      f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
"""

TWO_LAYER_NET_NN = """
import torch

N, D_in, H, D_out = 64, 1000, 100, 10
x = torch.randn(N, D_in)
y = torch.randn(N, D_out)
model = torch.nn.Sequential(
    torch.nn.Linear(D_in, H),
    torch.nn.ReLU(),
    torch.nn.Linear(H, D_out),
)
loss_fn = torch.nn.MSELoss(reduction='sum')
learning_rate = 1e-4
for t in range(500):
    y_pred = model(x)
    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad
"""


@pytest.mark.parametrize("program", [POLYNOMIAL_NN, TWO_LAYER_NET_NN],
                         ids=["polynomial_nn", "two_layer_net_nn"])
def test_pytorch_tutorial_programs_train_unchanged(program, capsys):
    source = textwrap.dedent(program).replace("import torch\n", "import pargraph as torch\n")
    pargraph.manual_seed(0)
    exec(compile(source, "tutorial.py", "exec"), {"__name__": "__main__"})
    losses = [float(line.split()[1]) for line in capsys.readouterr().out.splitlines()
              if line[:1].isdigit()]
    assert len(losses) >= 5 and losses[-1] < 0.5 * losses[0]
    assert all(math.isfinite(v) for v in losses)


class _CountComputed:
    """An execution observer: how many nodes each run computes."""

    def __init__(self) -> None:
        self.counts: list[int] = []

    @contextlib.contextmanager
    def run(self, computed, get, outputs=()):
        self.counts.append(len(computed))
        yield

    def read(self, node):
        pass  # reads are not counted


#: Hand-written updates of the PyTorch tutorials, through ``.data`` and under no_grad.
HAND_UPDATES = {
    "data.add_": lambda p: p.data.add_(p.grad.data, alpha=-0.01),
    "data.sub_": lambda p: p.data.sub_(0.01 * p.grad.data),
    "data.mul_": lambda p: p.data.mul_(0.999),
    "data.div_": lambda p: p.data.div_(1.001),
    "data.copy_": lambda p: p.data.copy_(p.data - 0.01 * p.grad),
    "data.clamp_": lambda p: p.data.clamp_(-0.5, 0.5),
    "data.pow_": lambda p: p.data.pow_(1.0),
    "data =": lambda p: setattr(p, "data", p.data - 0.01 * p.grad),
    "no_grad -=": lambda p: p.sub_(0.01 * p.grad),
}


@pytest.mark.parametrize("update", sorted(HAND_UPDATES))
def test_hand_written_updates_run_in_flat_work_and_memory(update):
    # A replaced value must stay kept for its replacement: otherwise each run computes the
    # whole chain of earlier updates again, and every step takes longer than the last: a
    # count that grows once after step 100, or one node kept per step, fails. The tutorials'
    # form runs 1,000 steps, the others 300.
    steps = 1000 if update == "data.add_" else 300
    pargraph.manual_seed(0)
    model = pargraph.nn.Linear(8, 4)
    x, y = pargraph.randn(16, 8), pargraph.randn(16, 4)
    counter = _CountComputed()
    execution.local.observers.append(counter)
    nodes = []
    try:
        for step in range(steps):
            model.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            with pargraph.no_grad():
                for p in model.parameters():
                    HAND_UPDATES[update](p)
            loss.item()
            if step in (100, steps - 1):
                gc.collect()
                nodes.append(sum(type(o) is Node for o in gc.get_objects()))
    finally:
        execution.local.observers.remove(counter)
    assert max(counter.counts[100:]) == counter.counts[100], "a run computed more each step"
    assert nodes[1] <= nodes[0], "nodes pile up"
    assert np.isfinite(loss.item())
