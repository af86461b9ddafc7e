"""The fused kernels (pargraph.ops.kernels): numba's compiled LSTM cell agrees with numpy's
formula on generated shapes and values (NaN, infinities, saturated gates), a float32 LSTM on
them equals PyTorch's, and the ``pargraph.kernels`` setting picks them or refuses clearly."""

import importlib.util

import dask
import numba  # noqa: F401  the test extra installs it: the compiled kernels are under test
import numpy as np
import pytest

import pargraph
from pargraph import ops
from pargraph.ops.kernels import kernels

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


@pytest.fixture
def chosen():
    """``chosen(name)``: run the fused ops with ``pargraph.kernels = name`` from now on."""
    settings = []

    def choose(name):
        if settings:
            settings.pop().__exit__(None, None, None)
        settings.append(dask.config.set({"pargraph.kernels": name}))
        settings[-1].__enter__()
        kernels.reset()
        return kernels

    yield choose
    if settings:
        settings.pop().__exit__(None, None, None)
    kernels.reset()


def _cell_cases(count=40):
    """Generated LSTM cell arguments: batch dimensions from none to two, hidden sizes from 1
    to 33, gates from small to saturated, and NaN and infinities at random places."""
    rng = np.random.default_rng(0)
    for k in range(count):
        lead = tuple(int(d) for d in rng.integers(1, 6, size=k % 3))
        n = int(rng.choice([1, 2, 7, 16, 33]))
        scale = float(rng.choice([0.1, 1.0, 5.0, 40.0]))
        gx = (rng.standard_normal(lead + (4 * n,)) * scale).astype(np.float32)
        h = rng.standard_normal(lead + (n,)).astype(np.float32)
        c = (rng.standard_normal(lead + (n,)) * scale).astype(np.float32)
        w = (rng.standard_normal((4 * n, n)) / np.sqrt(n)).astype(np.float32)
        b = rng.standard_normal(4 * n).astype(np.float32) if k % 4 else None
        if k % 5 == 4:
            flat = gx.reshape(-1)
            flat[rng.integers(0, flat.size, 3)] = rng.choice([np.nan, np.inf, -np.inf], 3)
        grad = rng.standard_normal((6,) + lead + (n,)).astype(np.float32)
        grad[2:, ...] *= k % 2  # the gates' own gradients: zeros unless something read them
        yield gx, h, c, w, b, grad


def _both(chosen, function):
    chosen("numba")
    fused = function()
    assert kernels.name == "numba"
    chosen("numpy")
    return fused, function()


def test_the_fused_lstm_cell_agrees_with_numpys_formula(chosen):
    for gx, h, c, w, b, grad in _cell_cases():
        fused, plain = _both(chosen, lambda: ops.lstm_cell.forward(gx, h, c, w, b))
        assert fused.shape == plain.shape and fused.dtype == plain.dtype == np.float32
        np.testing.assert_array_equal(np.isnan(fused), np.isnan(plain))
        np.testing.assert_allclose(fused, plain, rtol=2e-6, atol=2e-6 * max(1, abs(c).max()))
        fused_grads, plain_grads = _both(
            chosen, lambda: ops.lstm_cell_grads.forward(grad, plain, c))
        np.testing.assert_array_equal(np.isnan(fused_grads), np.isnan(plain_grads))
        finite = np.isfinite(plain_grads)
        np.testing.assert_allclose(fused_grads[finite], plain_grads[finite], rtol=1e-5,
                                   atol=1e-5 * max(1, abs(c).max()))


def _sequence_cases(count=36):
    """Generated LSTM directions: 1 to 6 steps, batch dimensions from none to two, either
    direction, gates laid out time-major or batch-first (strided steps), with and without a
    hidden bias, a gradient of the outputs alone or of every row, NaN and infinities."""
    rng = np.random.default_rng(1)
    for k in range(count):
        steps, n = int(rng.integers(1, 7)), int(rng.choice([1, 2, 7, 16, 33]))
        lead = tuple(int(d) for d in rng.integers(1, 5, size=k % 3))
        scale = float(rng.choice([0.1, 1.0, 5.0]))
        gx = (rng.standard_normal(lead + (steps, 4 * n)) * scale).astype(np.float32)
        gx = np.moveaxis(gx, -2, 0) if k % 2 else np.ascontiguousarray(np.moveaxis(gx, -2, 0))
        h0, c0 = (rng.standard_normal(lead + (n,)).astype(np.float32) for _ in range(2))
        w = (rng.standard_normal((4 * n, n)) / np.sqrt(n)).astype(np.float32)
        b = rng.standard_normal(4 * n).astype(np.float32) if k % 3 else None
        if k % 7 == 6:
            gx[tuple(rng.integers(0, d) for d in gx.shape)] = rng.choice([np.nan, np.inf])
        every = (steps, 6) + lead + (n,)
        grad = rng.standard_normal(every if k % 4 == 3 else (steps,) + lead + (n,))
        yield gx, h0, c0, w, b, grad.astype(np.float32), bool(k % 5 % 2)


def test_the_fused_lstm_sequence_agrees_with_numpys_steps(chosen):
    for gx, h0, c0, w, b, grad, reverse in _sequence_cases():
        chosen("numba")
        out = np.empty((gx.shape[0], 6) + c0.shape, np.float32)
        assert kernels.lstm_sequence(gx, h0, c0, w, b, out, reverse)  # the kernel ran
        fused, plain = _both(chosen, lambda: ops.lstm_sequence.forward(gx, h0, c0, w, b,
                                                                       reverse=reverse))
        np.testing.assert_array_equal(fused, out)
        np.testing.assert_array_equal(np.isnan(fused), np.isnan(plain))
        np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)
        fused_grads, plain_grads = _both(chosen, lambda: ops.lstm_sequence_grads.forward(
            grad, plain, h0, c0, w, reverse=reverse))
        assert fused_grads.shape == plain_grads.shape and fused_grads.dtype == np.float32
        np.testing.assert_array_equal(np.isnan(fused_grads), np.isnan(plain_grads))
        finite = np.isfinite(plain_grads)
        np.testing.assert_allclose(fused_grads[finite], plain_grads[finite], rtol=1e-4,
                                   atol=1e-4 * max(1, abs(plain_grads[finite]).max()))


def test_other_dtypes_take_numpys_formula(chosen):
    gx, h, c, w, b, grad = list(_cell_cases(2))[1]
    for dtype in (np.float64, np.float16):
        args = [a.astype(dtype) for a in (gx, h, c, w, b)]
        fused, plain = _both(chosen, lambda: ops.lstm_cell.forward(*args))
        np.testing.assert_array_equal(fused, plain)
        assert fused.dtype == dtype
        fused, plain = _both(chosen, lambda: ops.lstm_cell_grads.forward(
            grad.astype(dtype), fused, args[2]))
        np.testing.assert_array_equal(fused, plain)


@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False),
                                                             (2, True, True)])
def test_a_float32_lstm_on_the_fused_kernels_equals_pytorch(chosen, layers, bidirectional,
                                                            batch_first):
    chosen("numba")
    torch.manual_seed(0)
    options = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    theirs = torch.nn.LSTM(5, 12, **options)
    ours = pargraph.nn.LSTM(5, 12, **options)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((4, 9, 5)).astype(np.float32) * 2
    a, b = pargraph.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (out_a, (h_a, c_a)), (out_b, (h_b, c_b)) = ours(a), theirs(b)
    for p, q in ((out_a, out_b), (h_a, h_b), (c_a, c_b)):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    (out_a.square().sum() + c_a.sum()).backward()
    (out_b.square().sum() + c_b.sum()).backward()
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_the_setting_is_checked_and_numba_asked_for_must_be_there(chosen, monkeypatch):
    with pytest.raises(ValueError, match="pargraph.kernels is 'fast'; expected 'auto'"):
        chosen("fast").module()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "numba" else real(name, *a))
    with pytest.raises(RuntimeError, match=r"numba is not installed: pip install"):
        chosen("numba").module()
    assert chosen("auto").module() is None and kernels.name == "numpy"


def _pool_cases(count=60):
    """Generated 2-d max pooling: kernels 1-3, strides 1-2, dilations 1-2, paddings up to
    half the kernel plus a ceil-mode row or column, small integer values (ties), NaN and
    whole -inf inputs, float32 and float64; windows that hold an input position, as
    PyTorch's geometry makes them."""
    from pargraph.ops.convolution import _geometry

    rng = np.random.default_rng(5)
    made = 0
    while made < count:
        kernel, stride, dilation = (tuple(int(v) for v in rng.integers(1, hi, 2))
                                    for hi in (4, 3, 3))
        low = [int(rng.integers(0, (k - 1) * d // 2 + 1)) for k, d in zip(kernel, dilation)]
        padding = tuple((lo, lo + int(rng.integers(0, 2))) for lo in low)
        size = tuple(int(rng.integers(max(k * d, 2), 9)) for k, d in zip(kernel, dilation))
        x = rng.integers(-3, 3, (2, 2) + size).astype([np.float32, np.float64][made % 2])
        if made % 3 == 0:
            x.ravel()[rng.integers(0, x.size, 4)] = np.nan
        if made % 7 == 0:
            x[:] = -np.inf
        out = _geometry(x.shape, kernel, stride, padding, dilation)
        if any(all(not 0 <= i * s - p[0] + a * d < n for a in range(k)) for o, s, p, k, d, n
               in zip(out, stride, padding, kernel, dilation, size) for i in range(o)):
            continue  # a window of padding alone: PyTorch's geometry never makes one
        made += 1
        yield x, dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)


def test_the_fused_pooling_indices_equal_numpys_and_pytorchs(chosen):
    """Max pooling's indices in one pass (numba) equal numpy's formula on generated windows
    (ties: the first; NaN: the last; never padding), and PyTorch's where its geometry
    applies (symmetric padding, at most half the kernel)."""
    for x, attrs in _pool_cases():
        fused, plain = _both(chosen, lambda: ops.pool_argmax.forward(x, **attrs))
        np.testing.assert_array_equal(fused, plain)
        if all(lo == hi and 2 * lo <= k for (lo, hi), k in zip(attrs["padding"],
                                                                attrs["kernel"])):
            _, theirs = torch.nn.functional.max_pool2d(
                torch.tensor(x), attrs["kernel"], attrs["stride"],
                [lo for lo, _ in attrs["padding"]], attrs["dilation"], return_indices=True)
            np.testing.assert_array_equal(fused, theirs.numpy())


def _along_cases(count=40):
    """Generated gathers and scatters along the last dimension: 1-4 dimensions, sizes from 1
    to 9, indices negative and positive with repeats, float32, float64, int32 and int64."""
    rng = np.random.default_rng(11)
    for k in range(count):
        lead = tuple(int(d) for d in rng.integers(1, 5, size=k % 4))
        n, m = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        dtype = [np.float32, np.float64, np.int32, np.int64][k % 4]
        x = (rng.standard_normal(lead + (n,)) * 10).astype(dtype)
        index = rng.integers(-n, n, lead + (m,))
        yield x, index, (rng.standard_normal(lead + (m,)) * 10).astype(dtype)


def test_the_gather_and_scatter_kernels_equal_numpys_and_pytorchs(chosen):
    """take_along_dim and put_along_dim through the numba kernels equal numpy's
    ``take_along_axis`` and ``np.add.at`` (in order: an integer sum is exact) and PyTorch's
    gather and scatter_add, and an index out of range raises as numpy's does."""
    for x, index, g in _along_cases():
        dim = x.ndim - 1
        fused, plain = _both(chosen, lambda: ops.take_along_dim.forward(x, index, dim))
        np.testing.assert_array_equal(fused, plain)
        positive = index % x.shape[-1]
        np.testing.assert_array_equal(fused, torch.gather(torch.tensor(x), dim,
                                                          torch.tensor(positive)).numpy())
        added, plain = _both(chosen, lambda: ops.put_along_dim.forward(
            g, index, shape=x.shape, dim=dim))
        np.testing.assert_allclose(added, plain, rtol=1e-6)
        theirs = torch.zeros(x.shape, dtype=torch.tensor(g).dtype).scatter_add(
            dim, torch.tensor(positive), torch.tensor(g))
        np.testing.assert_allclose(added, theirs.numpy(), rtol=1e-6)
        for name in ("numba", "numpy"):
            chosen(name)
            with pytest.raises(IndexError, match="out of bounds"):
                ops.take_along_dim.forward(x, index + 2 * x.shape[-1], dim)
            with pytest.raises(IndexError, match="out of bounds"):
                ops.put_along_dim.forward(g, index - 2 * x.shape[-1], shape=x.shape, dim=dim)


def _softmax_cases(count=30):
    """Generated softmax rows: 1-4 dimensions, rows of 1 to 300 values, scales from small to
    overflowing exp, NaN, +-inf and whole -inf rows, float32 and float64, every dimension."""
    rng = np.random.default_rng(13)
    for k in range(count):
        shape = tuple(int(n) for n in rng.integers(1, 6, int(rng.integers(0, 3)))) + (
            int(rng.choice([1, 2, 7, 64, 300])),)
        x = (rng.standard_normal(shape) * float(rng.choice([0.1, 3.0, 100.0]))).astype(
            [np.float32, np.float64][k % 2])
        if k % 3 == 1:
            x.ravel()[rng.integers(0, x.size, 3)] = rng.choice([np.nan, np.inf, -np.inf], 3)
        if k % 5 == 2:
            x[..., :] = -np.inf
        yield x, int(rng.integers(0, x.ndim)), rng.standard_normal(shape).astype(x.dtype)


def test_the_fused_softmax_and_its_gradient_equal_numpys_and_pytorchs(chosen):
    """Softmax over any dimension (the kernels take the last) and its gradient through the
    numba kernels equal numpy's formula and PyTorch's, NaN and infinities included."""
    for x, dim, g in _softmax_cases():
        tolerance = dict(rtol=3e-6, atol=1e-7) if x.dtype == np.float32 else \
            dict(rtol=1e-12, atol=1e-15)
        fused, plain = _both(chosen, lambda: ops.softmax_of.forward(x, dim=(dim,)))
        np.testing.assert_allclose(fused, plain, **tolerance)
        np.testing.assert_allclose(fused, torch.softmax(torch.tensor(x), dim).numpy(),
                                   **tolerance)
        y = np.nan_to_num(plain)
        if x.dtype == np.float32:  # g - sum(g * y) cancels: the sums' rounding, relative to g
            tolerance = dict(rtol=3e-6, atol=1e-6 * float(np.abs(g).max()))
        fused, plain = _both(chosen, lambda: ops.softmax_backward.forward(g, y, dim=(dim,)))
        np.testing.assert_allclose(fused, plain, **tolerance)
        theirs = torch._softmax_backward_data(torch.tensor(g), torch.tensor(y), dim,
                                              torch.tensor(y).dtype)
        np.testing.assert_allclose(fused, theirs.numpy(), **tolerance)
