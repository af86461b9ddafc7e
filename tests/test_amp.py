"""CPU autocast as PyTorch's: which ops cast to what, the values they give, gradients through
the casts, and what switches it off."""

import threading
import warnings

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")


def _pair(shape, seed):
    value = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return pargraph.tensor(value), torch.tensor(value)


def _both(fn):
    """``fn(lib, tensors)`` run on pargraph and on torch with the same float32 inputs."""
    inputs = [_pair(shape, seed) for seed, shape in enumerate(
        [(3, 8), (4, 8), (4,), (1, 2, 5, 5), (3, 2, 3, 3), (3, 4)])]
    ours = fn(pargraph, [a for a, _ in inputs])
    theirs = fn(torch, [b for _, b in inputs])
    return ours, theirs


def _dtype_name(dtype) -> str:
    return str(dtype).split(".")[-1]


OPS = {
    "linear": lambda lib, t: lib.nn.functional.linear(t[0], t[1], t[2]),
    "matmul": lambda lib, t: t[0] @ t[1].T,
    "rmatmul": lambda lib, t: t[0].T.__rmatmul__(t[1]),
    "mm": lambda lib, t: lib.mm(t[0], t[1].T),
    "bmm": lambda lib, t: lib.bmm(t[0][None], t[1].T[None]),
    "addmm": lambda lib, t: lib.addmm(t[5], t[0], t[1].T),
    "baddbmm": lambda lib, t: lib.baddbmm(t[5][None], t[0][None], t[1].T[None]),
    "conv2d": lambda lib, t: lib.nn.functional.conv2d(t[3], t[4][:, :2]),
    "conv_transpose2d": lambda lib, t: lib.nn.functional.conv_transpose2d(
        t[3], t[4][:2, :1]),
    "sdpa": lambda lib, t: lib.nn.functional.scaled_dot_product_attention(
        t[0][None], t[0][None], t[0][None]),
    # float32 list: a lower-precision input is computed in float32
    "cross_entropy": lambda lib, t: lib.nn.functional.cross_entropy(
        t[0] @ t[1].T, lib.tensor([0, 1, 2])),
    "mse_loss": lambda lib, t: lib.nn.functional.mse_loss(t[0] @ t[1].T, t[5]),
    "cdist": lambda lib, t: lib.cdist(t[0] @ t[1].T, t[5]),
    # promote list: mixed dtypes go to the widest
    "stack": lambda lib, t: lib.stack([t[0] @ t[1].T, t[5]]),
    "cat": lambda lib, t: lib.cat([t[0] @ t[1].T, t[0] @ t[1].T]),
    # not on a list: runs in its input's dtype
    "exp": lambda lib, t: lib.exp(t[0] @ t[1].T),
    "float64": lambda lib, t: t[0].double() @ t[1].double().T,
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_ops_under_cpu_autocast_give_pytorchs_dtypes_and_values(name, dtype):
    def run(lib, t):
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            return OPS[name](lib, t)

    ours, theirs = _both(run)
    assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype), (ours.dtype, theirs.dtype)
    expected = theirs.detach().double().numpy()
    tolerance = 2e-2 if _dtype_name(theirs.dtype) in ("bfloat16", "float16") else 1e-2
    np.testing.assert_allclose(ours.detach().double().numpy(), expected, rtol=tolerance,
                               atol=tolerance * np.abs(expected).max())


def test_a_training_step_under_autocast_gives_float32_gradients_like_pytorchs():
    def step(lib, t):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.ReLU(), lib.nn.Linear(16, 3))
        with lib.no_grad():
            for k, p in enumerate(model.parameters()):
                p.copy_(lib.tensor(np.random.default_rng(10 + k).standard_normal(
                    tuple(p.shape)).astype(np.float32)) * 0.3)
        with lib.autocast("cpu"):
            out = model(t[0])
            loss = lib.nn.functional.cross_entropy(out, lib.tensor([0, 1, 2]))
        loss.backward()
        return out, loss, [p.grad for p in model.parameters()]

    (out, loss, grads), (t_out, t_loss, t_grads) = _both(step)
    assert _dtype_name(out.dtype) == "bfloat16" and _dtype_name(loss.dtype) == "float32"
    assert _dtype_name(t_out.dtype) == "bfloat16" and _dtype_name(t_loss.dtype) == "float32"
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=2e-2)
    for ours, theirs in zip(grads, t_grads):
        assert ours.dtype == pargraph.float32
        scale = np.abs(theirs.numpy()).max()
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=3e-2 * scale)


def test_autocast_switches_off_inside_disabled_blocks_other_threads_and_after():
    x = pargraph.ones(2, 3)
    seen = {}

    def other():
        seen["thread"] = (x @ x.T).dtype

    with pargraph.autocast("cpu"):
        assert pargraph.is_autocast_enabled("cpu") and not pargraph.is_autocast_enabled()
        assert pargraph.get_autocast_dtype("cpu") == pargraph.bfloat16
        with pargraph.autocast("cpu", enabled=False):
            assert (x @ x.T).dtype == pargraph.float32
            assert not pargraph.is_autocast_cpu_enabled()
        assert (x @ x.T).dtype == pargraph.bfloat16
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen["thread"] == pargraph.float32
    assert (x @ x.T).dtype == pargraph.float32 and not pargraph.is_autocast_enabled("cpu")

    @pargraph.autocast("cpu", dtype=pargraph.float16)
    def product(t):
        return t @ t.T

    assert product(x).dtype == pargraph.float16


@pytest.mark.parametrize("lib_name", ["pargraph", "torch"])
def test_autocast_refuses_what_pytorchs_refuses(lib_name):
    lib = pargraph if lib_name == "pargraph" else torch
    x = lib.ones(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lib.autocast("cuda"):
            assert (x @ x.T).dtype == lib.float32
        with lib.autocast("cpu", dtype=lib.float64):
            assert (x @ x.T).dtype == lib.float32
    messages = [str(w.message) for w in caught]
    assert any("Disabling autocast" in m and "CUDA" in m for m in messages)
    assert any("CPU autocast, but the target dtype is not supported" in m for m in messages)
    with pytest.raises(RuntimeError, match="'tpu9'"):
        lib.autocast("tpu9")
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        lib.autocast(1)


def test_a_compiled_step_captures_again_when_autocast_changes():
    model = pargraph.nn.Linear(3, 2)

    @pargraph.compile
    def forward(x):
        return model(x)

    x = pargraph.ones(4, 3)
    assert forward(x).dtype == pargraph.float32
    with pargraph.autocast("cpu"):
        inside = forward(x)
    assert inside.dtype == pargraph.bfloat16
    assert forward(x).dtype == pargraph.float32
    assert len(forward.programs) == 2


def test_custom_fwd_casts_the_inputs_and_custom_bwd_runs_under_the_forwards_autocast():
    seen = {}

    class Double(pargraph.autograd.Function):
        @staticmethod
        @pargraph.amp.custom_fwd(device_type="cpu", cast_inputs=pargraph.float32)
        def forward(ctx, x):
            seen["forward"] = (x.dtype, pargraph.is_autocast_enabled("cpu"))
            return x * 2

        @staticmethod
        @pargraph.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            seen["backward"] = pargraph.is_autocast_enabled("cpu")
            return grad * 2

    x = pargraph.ones(3, dtype=pargraph.bfloat16, requires_grad=True)
    with pargraph.autocast("cpu"):
        out = Double.apply(x)
    out.float().sum().backward()
    assert seen == {"forward": (pargraph.float32, False), "backward": False}
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_a_cpu_grad_scaler_scales_skips_and_backs_off_as_pytorchs():
    torch.manual_seed(0)
    weights = np.array([[0.5, -1.0, 2.0]])
    scales, steps = [], []
    for lib in (pargraph, torch):
        model = lib.nn.Linear(3, 1, bias=False)
        with lib.no_grad():
            model.weight.copy_(lib.tensor(weights, dtype=lib.float32))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        trace = []
        for x in ([1.0, 2.0, 3.0], [float("inf"), 1.0, 0.0], [0.5, 0.5, 0.5], [1.0, 0.0, 1.0]):
            opt.zero_grad()
            scaler.scale(model(lib.tensor([x])).sum()).backward()
            scaler.step(opt)
            scaler.update()
            trace.append(scaler.get_scale())
        scales.append(trace)
        steps.append(model.weight.detach().numpy())
    assert scales[0] == scales[1]
    np.testing.assert_allclose(steps[0], steps[1], rtol=1e-6)
