"""``repr`` and ``str`` of tensors, and print options, as PyTorch prints them."""

import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda: pargraph.tensor(5.0, requires_grad=True) ** 2,
         "tensor(25., grad_fn=<PowBackward0>)"),
        (lambda: pargraph.tensor([1.0, 2.0, 3.0]), "tensor([1., 2., 3.])"),
        (lambda: pargraph.tensor([0.1, -2.0]), "tensor([ 0.1000, -2.0000])"),
        (lambda: pargraph.tensor(2.5), "tensor(2.5000)"),
        (lambda: pargraph.tensor([1, 2]), "tensor([1, 2])"),
        (lambda: pargraph.tensor([True, False]), "tensor([ True, False])"),
        (lambda: pargraph.ones(2, requires_grad=True), "tensor([1., 1.], requires_grad=True)"),
        (lambda: pargraph.ones(1, dtype=pargraph.float64), "tensor([1.], dtype=pargraph.float64)"),
        (lambda: pargraph.zeros(0), "tensor([])"),
        (lambda: pargraph.tensor([[1.0, -1.0], [0.5, 2.0]]),
         "tensor([[ 1.0000, -1.0000],\n        [ 0.5000,  2.0000]])"),
        (lambda: pargraph.tensor([float("inf"), 1.0]), "tensor([inf, 1.])"),
    ],
)
def test_repr_matches_pytorch(make, text):
    assert repr(make()) == text


@pytest.mark.parametrize("values", [[1e-8, 1.0], [123456789.0, 1.0], [1.5, 2000.25],
                                    [1e9, 2e9], [1.0, 2.0], [1.0, 5000.0], [float("nan"), 1.5,
                                                                           float("inf")],
                                    [0.0, -0.5], [[1.0, -1.0], [0.5, 2.0]], [3.0, -7.0, 0.0]])
@pytest.mark.parametrize("settings", [{}, {"precision": 2}, {"sci_mode": False},
                                      {"sci_mode": True}, {"profile": "short"}])
def test_printing_is_pytorchs(values, settings):
    try:
        pargraph.set_printoptions(**settings)
        torch.set_printoptions(**settings)
        assert repr(pargraph.tensor(values)) == repr(torch.tensor(values))
    finally:
        pargraph.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
