"""The convolution ops' forms (pargraph.ops.convolution): a 1x1 product, shifted products,
the flipped-kernel convolution and im2col with col2im. Each is taken somewhere in generated
geometries, and every form's output and gradients agree with PyTorch's."""

import numpy as np
import pytest

import pargraph
from pargraph.ops import convolution

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def _cases(count=40):
    """Generated 2-d convolutions: small and larger images, 1-20 channels each way, kernels
    1-5, strides 1-2, dilations 1-2, paddings up to the kernel's reach, float32 and float64."""
    rng = np.random.default_rng(21)
    made = 0
    while made < count:
        k = tuple(int(v) for v in rng.choice([1, 2, 3, 5], 2))
        d = tuple(int(v) for v in rng.integers(1, 3, 2))
        s = (1, 1) if made % 3 else tuple(int(v) for v in rng.integers(1, 3, 2))
        p = tuple(int(rng.integers(0, dd * (kk - 1) + 1)) for kk, dd in zip(k, d))
        size = tuple(int(v) for v in rng.integers(2, 12, 2))
        if any(n + 2 * pp < dd * (kk - 1) + 1 for n, pp, kk, dd in zip(size, p, k, d)):
            continue
        channels, outputs = (int(v) for v in rng.choice([1, 3, 8, 20], 2))
        made += 1
        yield (int(rng.integers(1, 5)), channels) + size, outputs, k, s, p, d, \
            [np.float32, np.float64][made % 2]


def _step(lib, x, w, b, stride, padding, dilation):
    xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
    y = lib.nn.functional.conv2d(xt, wt, bt, stride=stride, padding=padding, dilation=dilation)
    (y * y.sin()).sum().backward()
    return [t.detach().numpy() for t in (y, xt.grad, wt.grad, bt.grad)]


def _input_grad_form(shape, out, kernel, stride, padding, dilation):
    pads = tuple((p, p) for p in padding)
    if convolution._pointwise(kernel, stride, pads, 1):
        return "pointwise"
    if convolution._flipped(out, shape, kernel, stride, pads, dilation, 1):
        return "flipped"
    if convolution._shifted(np.dtype(np.float32), shape, kernel, stride, pads, dilation, 1,
                            True):
        return "shifted"
    return "col2im"


def test_every_form_of_a_convolution_agrees_with_pytorch():
    forms = set()
    for shape, outputs, kernel, stride, padding, dilation, dtype in _cases():
        rng = np.random.default_rng(sum(shape))
        x = rng.standard_normal(shape).astype(dtype)
        w = (rng.standard_normal((outputs, shape[1]) + kernel) / 3).astype(dtype)
        b = rng.standard_normal(outputs).astype(dtype)
        ours = _step(pargraph, x, w, b, stride, padding, dilation)
        theirs = _step(torch, x, w, b, stride, padding, dilation)
        forms.add(_input_grad_form(shape, ours[0].shape, kernel, stride, padding, dilation))
        for mine, reference in zip(ours, theirs):
            scale = max(np.abs(reference).max(), 1.0)
            tolerance = 1e-4 if dtype == np.float32 else 1e-10
            np.testing.assert_allclose(mine, reference, atol=tolerance * scale, rtol=0)
    assert forms == {"pointwise", "flipped", "shifted", "col2im"}
