"""Names real PyTorch programs use (#13): devices, Size, hooks, and a
pytorch/examples program run unchanged with ``import pargraph as torch``."""

from itertools import count

import numpy as np
import pytest

import pargraph
import pargraph as torch


def test_cpu_is_the_only_device():
    assert not torch.cuda.is_available() and torch.cuda.device_count() == 0
    cpu = torch.device("cpu")
    assert cpu.type == "cpu" and str(cpu) == "cpu" and cpu == "cpu"
    assert torch.ones(2).to(cpu).device == "cpu"
    torch.set_default_device("cpu")
    with pytest.raises(RuntimeError, match="pargraph runs on the CPU; device 'cuda'"):
        torch.set_default_device("cuda")
    with pytest.raises(RuntimeError, match="device 'cuda:0' is not available"):
        torch.ones(2).to(torch.device("cuda:0"))


def test_size_is_a_tuple_with_numel():
    x = torch.zeros(2, 3)
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(1) == 3
    assert isinstance(x.shape, tuple) and x.size().numel() == 6
    assert repr(x.shape) == "pargraph.Size([2, 3])"


def test_products_check_their_operands_like_pytorch():
    with pytest.raises(RuntimeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied "
                                            r"\(2x3 and 2x3\)"):
        torch.mm(torch.ones(2, 3), torch.ones(2, 3))
    with pytest.raises(RuntimeError, match="mm: self must be a 2D tensor, got 3D"):
        torch.ones(1, 2, 3).mm(torch.ones(3, 2))
    with pytest.raises(RuntimeError, match="same batch size, got 2 and 3"):
        torch.bmm(torch.ones(2, 2, 2), torch.ones(3, 2, 2))
    assert torch.ones(2, 4).view_as(torch.zeros(8)).shape == (8,)


def test_norm_gradient_at_zero_is_zero_and_unknown_orders_raise():
    x = torch.zeros(3, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # PyTorch's subgradient, not nan
    assert torch.ones(2).norm(-1).item() == 0.5  # (1 + 1) ** -1, as PyTorch's
    with pytest.raises(NotImplementedError, match="p='max'"):
        torch.ones(2).norm("max")
    a = np.arange(6.0).reshape(2, 3)
    assert torch.tensor(a).norm("nuc").item() == pytest.approx(
        np.linalg.svd(a, compute_uv=False).sum())
    assert torch.linalg.norm(torch.tensor(a), ord=2).item() == pytest.approx(
        np.linalg.svd(a, compute_uv=False)[0])
    assert torch.allclose(torch.linalg.norm(torch.ones(2, 2), ord=1, dim=1), torch.full((2,), 2.0))
    assert not torch.allclose(torch.ones(2), torch.zeros(2))


def test_pytorch_examples_regression_runs_unchanged():
    """pytorch/examples regression/main.py, its loop as written (import line changed)."""
    import pargraph.nn.functional as F

    torch.manual_seed(0)
    POLY_DEGREE = 4
    W_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5

    def make_features(x):
        x = x.unsqueeze(1)
        return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)

    def f(x):
        return x.mm(W_target) + b_target.item()

    def get_batch(batch_size=32):
        random = torch.randn(batch_size)
        x = make_features(random)
        y = f(x)
        return x, y

    fc = torch.nn.Linear(W_target.size(0), 1)
    for batch_idx in count(1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        if loss < 1e-3 or batch_idx == 2000:
            break
    assert loss < 1e-3, (batch_idx, loss)
    learned = fc.weight.detach().numpy().ravel()
    np.testing.assert_allclose(learned, W_target.numpy().ravel(), atol=0.1)
    assert pargraph.is_tensor(output)


def test_device_and_dtype_keywords_of_factories_and_layers():
    assert torch.zeros(2, device="cpu").tolist() == [0.0, 0.0]
    assert torch.tensor([1.0], device=torch.device("cpu")).device == "cpu"
    layer = torch.nn.Linear(3, 2, device="cpu", dtype=torch.float64)
    assert layer.weight.dtype == np.float64 and layer.bias.dtype == np.float64
    assert layer(torch.ones(1, 3, dtype=torch.float64)).dtype == np.float64
    for make in (lambda: torch.randn(2, device="cuda"), lambda: torch.arange(3, device="cuda"),
                 lambda: torch.nn.Linear(3, 2, device="cuda")):
        with pytest.raises(RuntimeError, match="pargraph runs on the CPU"):
            make()


def test_clip_grad_norm_scales_like_pytorch_and_is_recorded_not_run():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(5)
    w = torch.tensor(a, requires_grad=True)
    v = torch.tensor(b, requires_grad=True)
    ((w * w).sum() + (v * 3).sum()).backward()
    grads = [2 * a, np.full(5, 3.0)]
    total = torch.nn.utils.clip_grad_norm_([w, v], max_norm=1.5)
    assert w.grad._node.value is None  # joins the step's graph; nothing ran yet
    expected_total = np.sqrt(sum((g ** 2).sum() for g in grads))
    assert np.isclose(total.item(), expected_total)
    scale = min(1.5 / (expected_total + 1e-6), 1.0)
    np.testing.assert_allclose(w.grad.numpy(), grads[0] * scale)
    np.testing.assert_allclose(v.grad.numpy(), grads[1] * scale)

    inf_total = torch.nn.utils.clip_grad_norm_(v, max_norm=100.0, norm_type=float("inf"))
    assert np.isclose(inf_total.item(), 3.0 * scale)  # below max_norm: unchanged
    np.testing.assert_allclose(v.grad.numpy(), grads[1] * scale)
    v.grad = torch.tensor([float("nan")] * 5, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        torch.nn.utils.clip_grad_norm_([v], 1.0, error_if_nonfinite=True)


def test_parameters_to_vector_and_back():
    """PyTorch's flat view of a model's parameters (second-order and evolutionary methods):
    the vector is recorded, so a gradient flows back through it; putting a vector back gives
    each parameter its slice, with no history."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    params = list(model.parameters())
    flat = torch.nn.utils.parameters_to_vector(model.parameters())
    expected = np.concatenate([p.detach().numpy().ravel() for p in params])
    assert flat.shape == (26,) and flat.requires_grad
    np.testing.assert_array_equal(flat.detach().numpy(), expected)
    (flat * torch.arange(26.0)).sum().backward()
    np.testing.assert_array_equal(
        np.concatenate([p.grad.numpy().ravel() for p in params]), np.arange(26.0))
    torch.nn.utils.vector_to_parameters(flat.detach() * 2, model.parameters())
    for p, before in zip(params, np.split(expected, np.cumsum([p.numel() for p in params]))):
        np.testing.assert_array_equal(p.detach().numpy().ravel(), before * 2)
        assert p.requires_grad and p.grad_fn is None
    assert model(torch.ones(1, 3)).shape == (1, 2)
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: numpy.ndarray"):
        torch.nn.utils.vector_to_parameters(np.zeros(26), model.parameters())
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        torch.nn.utils.vector_to_parameters([0.0] * 26, model.parameters())


def test_clip_grad_value_and_the_new_activation_modules():
    w = torch.ones(3, requires_grad=True)
    (w * torch.tensor([-5.0, 0.2, 7.0])).sum().backward()
    torch.nn.utils.clip_grad_value_(w, 1.0)
    assert w.grad.tolist() == pytest.approx([-1.0, 0.2, 1.0])
    x = torch.tensor([-2.0, 0.0, 3.0])
    assert torch.nn.LeakyReLU(0.5)(x).tolist() == [-1.0, 0.0, 3.0]
    assert torch.nn.SiLU()(x).tolist() == pytest.approx((x.numpy() / (1 + np.exp(-x.numpy())))
                                                       .tolist())
    assert torch.nn.Softplus(beta=2.0)(x).tolist() == pytest.approx(
        (np.log1p(np.exp(2 * x.numpy())) / 2).tolist(), rel=1e-6)
    assert torch.nn.LogSoftmax(dim=0)(x).exp().sum().item() == pytest.approx(1.0)
    assert "negative_slope=0.5" in repr(torch.nn.LeakyReLU(0.5))
    with pytest.raises(RuntimeError, match="masked_fill only supports boolean masks"):
        x.masked_fill(torch.tensor([1, 0, 1]), 0.0)
    with pytest.raises(RuntimeError, match="not broadcastable to the tensor's shape"):
        x.masked_fill(torch.tensor([[True], [False]]), 0.0)
    with pytest.raises(RuntimeError, match="repeat dims can not be smaller"):
        torch.ones(2, 2).repeat(2)


def test_grad_fn_names_are_pytorchs():
    F = torch.nn.functional
    x = torch.ones(3, 4, requires_grad=True)
    names = {
        "MeanBackward0": x.mean(), "MeanBackward1": x.mean(0), "SumBackward0": x.sum(),
        "SumBackward1": x.sum(1), "SelectBackward0": x[1], "SliceBackward0": x[:, 1:],
        "IndexBackward0": x[torch.tensor([0, 2])], "SoftmaxBackward0": x.softmax(1),
        "LogSoftmaxBackward0": x.log_softmax(1), "VarBackward0": x.var(),
        "StdBackward0": x.std(0), "UnsqueezeBackward0": x.unsqueeze(0),
        "StackBackward0": torch.stack([x, x]), "TBackward0": x.t(),
        "TransposeBackward0": x.transpose(0, 1), "MseLossBackward0": F.mse_loss(x, x.detach()),
        "NllLossBackward0": F.cross_entropy(x, torch.tensor([0, 1, 2])),
        "SmoothL1LossBackward0": F.smooth_l1_loss(x, x.detach()),
    }
    assert {name: t.grad_fn.name() for name, t in names.items()} == {n: n for n in names}
    assert repr(x.mean()) == "tensor(1., grad_fn=<MeanBackward0>)"
    assert x.detach().mean().grad_fn is None  # a name only where there is a graph


def test_tensor_hooks_see_and_replace_gradients_each_backward():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    for _ in range(2):  # the second backward has the same structure: hooks still run
        x.grad = None
        y = x * 3
        y.register_hook(lambda g: seen.append(g) or g * 0.5)  # non-leaf: changes what flows on
        (y * y).sum().backward()
        assert x.grad.tolist() == [9.0, 18.0]  # 2*y*0.5*3
    assert [g.tolist() for g in seen] == [[6.0, 12.0]] * 2  # realized with the step
    leaf = torch.ones(2, requires_grad=True)
    handle = leaf.register_hook(lambda g: g + 1)
    leaf.sum().backward()
    handle.remove()
    leaf.sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0]  # (1 + 1) + 1
    with pytest.raises(RuntimeError, match="hook .* has changed the size of value"):
        bad = torch.ones(2, requires_grad=True)
        bad.register_hook(lambda g: g.sum())
        (bad * 2).sum().backward()
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't"):
        torch.ones(2).register_hook(print)


def test_module_forward_hooks_and_apply():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    outputs = []
    handle = model[0].register_forward_hook(lambda m, args, out: outputs.append(out.shape))
    pre = model.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    result = model(torch.ones(4, 2))
    assert outputs == [(4, 3)]
    np.testing.assert_allclose(result.detach().numpy(),
                               np.maximum(model[0].bias.detach().numpy(), 0)[None].repeat(4, 0))
    handle.remove()
    pre.remove()
    model(torch.ones(1, 2))
    assert outputs == [(4, 3)]
    names = []
    model.apply(lambda m: names.append(type(m).__name__))
    assert names == ["Linear", "ReLU", "Sequential"]


def test_normal_initializers_have_pytorchs_spread():
    from pargraph.nn import init

    torch.manual_seed(0)
    w = init.kaiming_normal_(torch.zeros(256, 512), nonlinearity="relu")
    assert np.std(w.numpy()) == pytest.approx(np.sqrt(2.0 / 512), rel=0.02)
    w = init.kaiming_normal_(torch.zeros(256, 512), mode="fan_out", nonlinearity="relu")
    assert np.std(w.numpy()) == pytest.approx(np.sqrt(2.0 / 256), rel=0.02)
    w = init.xavier_normal_(torch.zeros(256, 512), gain=2.0)
    assert np.std(w.numpy()) == pytest.approx(2.0 * np.sqrt(2.0 / 768), rel=0.02)
    assert abs(float(np.mean(w.numpy()))) < 0.01
    assert not torch.accelerator.is_available() and torch.accelerator.current_accelerator() is None


def test_pytorch_examples_mnist_network_and_loop_run_unchanged():
    """pytorch/examples mnist/main.py: its Net, train loop, Adadelta and StepLR as written
    (import line changed), on 64 random 28x28 images instead of the download."""
    import pargraph.nn as nn
    import pargraph.nn.functional as F
    import pargraph.optim as optim
    from pargraph.optim.lr_scheduler import StepLR
    from pargraph.utils.data import DataLoader, TensorDataset

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()  # noqa: UP008  (as the example writes it)
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    def train(model, device, train_loader, optimizer, epoch):
        model.train()
        losses = []
        for batch_idx, (data, target) in enumerate(train_loader):  # noqa: B007
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    def test(model, device, test_loader):
        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        return correct

    torch.manual_seed(1)
    device = torch.device("cpu")
    images = torch.randn(64, 1, 28, 28)
    labels = torch.randint(0, 10, (64,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(1, 4):
        losses += train(model, device, loader, optimizer, epoch)
        scheduler.step()
    assert np.mean(losses[-4:]) < np.mean(losses[:4])  # it learns the 64 images
    # Above chance (6.4 of 64); PyTorch itself gets 10 to 35 over seeds 1-8.
    assert test(model, device, loader) > 6.4


def test_pytorch_tutorials_polynomial_custom_function_runs_unchanged():
    """pytorch/tutorials polynomial_custom_function.py (import line changed; 300 of its 2000
    steps)."""
    import math

    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    dtype = torch.float
    device = torch.device("cpu")
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)
    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    losses = []
    for t in range(300):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    assert losses[0] > losses[1] > losses[2]
    assert f'Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)'


def test_full_backward_hooks_see_and_replace_gradients_as_pytorchs():
    """``register_full_backward_hook`` gets (grad_input, grad_output) and may replace
    grad_input; ``register_full_backward_pre_hook`` may replace grad_output; with no input
    that requires grad the hook fires with ``(None,)`` and PyTorch's warning; handles remove."""
    import warnings

    torch = pytest.importorskip("torch")
    weights = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    seen = []
    for library in (pargraph, torch):
        net = library.nn.Sequential(library.nn.Linear(3, 2), library.nn.Tanh(),
                                    library.nn.Linear(2, 1))
        with library.no_grad():
            for k, p in enumerate(net.parameters()):
                p.copy_(library.tensor(np.cos(np.arange(p.numel()) + k).reshape(
                    tuple(p.shape)).astype(np.float32)))
        calls = []

        def record(module, grad_input, grad_output, calls=calls):
            calls.append((type(module).__name__,
                          [None if g is None else g.detach().numpy().copy() for g in grad_input],
                          [g.detach().numpy().copy() for g in grad_output]))

        handles = [net[1].register_full_backward_hook(record),
                   net[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,)),
                   net[2].register_full_backward_pre_hook(lambda m, go: (go[0] * -1,)),
                   net[0].register_full_backward_hook(record)]
        x = library.tensor(weights, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            net(x).sum().backward()
        first = [p.grad.numpy().copy() for p in net.parameters()] + [x.grad.numpy().copy()]
        for handle in handles:
            handle.remove()
        x.grad = None
        net.zero_grad()
        net(x).sum().backward()
        again = [p.grad.numpy().copy() for p in net.parameters()]
        seen.append((calls, first, again, [str(w.message)[:40] for w in caught]))
    for ours, theirs in zip(seen[0][:3], seen[1][:3]):
        for a, b in zip(ours, theirs):
            if isinstance(a, tuple):
                assert a[0] == b[0]
                for u, v in zip(a[1] + a[2], b[1] + b[2]):
                    np.testing.assert_allclose(u, v, rtol=1e-6)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-6)
    assert seen[0][3] == seen[1][3] == []
    # No input requires grad: the hook fires with (None,), after a warning.
    for library in (pargraph, torch):
        layer, fired = library.nn.Linear(3, 1), []
        layer.register_full_backward_hook(lambda m, gi, go: fired.append(gi))
        with pytest.warns(UserWarning, match="no inputs require gradients"):
            layer(library.ones(2, 3)).sum().backward()
        assert fired == [(None,)]


def test_module_paths_half_and_the_missing_keys_message_as_pytorchs():
    torch = pytest.importorskip("torch")
    found = []
    for library in (pargraph, torch):
        net = library.nn.Sequential(library.nn.Linear(2, 2), library.nn.BatchNorm1d(2))
        with pytest.raises(AttributeError) as missing:
            net.get_submodule("2")
        with pytest.raises(RuntimeError) as loading:
            library.nn.Linear(2, 2).load_state_dict({"weight": library.ones(2, 2),
                                                      "extra": library.ones(1)})
        found.append([type(net.get_submodule("1")).__name__, net.get_submodule("") is net,
                      tuple(net.get_parameter("0.weight").shape),
                      net.get_buffer("1.running_mean").tolist(), str(missing.value),
                      str(library.nn.Linear(2, 2).half().weight.dtype).split(".")[-1],
                      str(library.nn.Linear(2, 2).bfloat16().bias.dtype).split(".")[-1],
                      str(loading.value)])
    assert found[0] == found[1]
