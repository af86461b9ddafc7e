"""autograd.Function (#13): a user's op with its own backward, run as graph nodes on every
scheduler, with PyTorch's ctx API and error messages."""

import numpy as np
import pytest

import pargraph
from pargraph.autograd import Function


class ScaledExp(Function):
    calls = 0

    @staticmethod
    def forward(ctx, x, k):
        out = (x * k).exp()
        ctx.save_for_backward(out)
        ctx.k = k
        return out

    @staticmethod
    def backward(ctx, grad):
        ScaledExp.calls += 1
        out, = ctx.saved_tensors
        return grad * out * ctx.k, None


class StraightThroughRound(Function):
    """Round in the forward pass, pass the gradient through unchanged: a gradient that is not
    the forward's derivative, so the test sees that the user's backward is the one used."""

    @staticmethod
    def forward(ctx, x):
        return (x * 2).clamp(-1e9, 1e9) * 0.5 + pargraph.tensor(np.round(x.detach().numpy())
                                                                - x.detach().numpy())

    @staticmethod
    def backward(ctx, grad):
        return grad


class ProductAndSum(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y, x + y

    @staticmethod
    def backward(ctx, grad_product, grad_sum):
        x, y = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return grad_product * y + grad_sum, None


class Cube(Function):
    """The newer style: forward without ctx, then setup_context."""

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return 3 * x ** 2 * grad


def test_a_function_is_differentiated_by_its_own_backward_on_every_scheduler(scheduler):
    x = pargraph.tensor([0.5, -1.0, 2.0], dtype=pargraph.float64, requires_grad=True)
    assert pargraph.autograd.gradcheck(lambda t: ScaledExp.apply(t, 0.5), [x])
    assert pargraph.autograd.gradcheck(Cube.apply, [x])
    y = StraightThroughRound.apply(x)
    np.testing.assert_allclose(y.detach().numpy(), [0.0, -1.0, 2.0])  # numpy rounds half even
    (y * pargraph.tensor([1.0, 2.0, 3.0], dtype=pargraph.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0, 3.0])
    assert y.grad_fn.name() == "StraightThroughRoundBackward"


def test_several_outputs_none_gradients_and_needs_input_grad():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    y = pargraph.tensor([3.0, 5.0])
    product, total = ProductAndSum.apply(x, y)
    (2 * product + total).sum().backward()  # d/dx: 2 * y + 1
    assert x.grad.tolist() == [7.0, 11.0] and y.grad is None
    with pargraph.no_grad():
        assert not ScaledExp.apply(x, 1.0).requires_grad


def test_the_backward_runs_every_step_and_is_never_replayed_from_a_template():
    x = pargraph.tensor([0.1, 0.2], requires_grad=True)
    before = ScaledExp.calls
    for k in (1.0, 2.0, 3.0):  # ctx.k differs per call: a replayed graph would be wrong
        x.grad = None
        ScaledExp.apply(x, k).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), k * np.exp(k * np.array([0.1, 0.2])),
                                   rtol=1e-6)
    assert ScaledExp.calls == before + 3


def test_the_forward_ops_carry_the_function_name_into_the_trace():
    x = pargraph.tensor([0.1, 0.2], requires_grad=True)
    with pargraph.trace() as t:
        ScaledExp.apply(x, 2.0).sum().backward()
        x.grad.numpy()
    scopes = {r.scope for r in t.nodes()}
    assert "ScaledExp" in scopes


def test_function_errors_follow_pytorch():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad

    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = pargraph.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function TooFewBackward returned an incorrect "
                                           r"number of gradients \(expected 2, got 1\)"):
        TooFew.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match=r"Function WrongShapeBackward returned an invalid "
                                           r"gradient at index 0 - got \[\] but expected shape "
                                           r"compatible with \[3\]"):
        WrongShape.apply(x).backward()
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        pargraph.autograd.FunctionCtx((True,)).save_for_backward(np.ones(2))


def test_a_backward_returning_none_for_a_tensor_gives_it_no_gradient():
    """As PyTorch: None is no gradient, not zeros (``b.grad`` stays None), and
    ``autograd.grad`` on it raises unless ``allow_unused``."""
    class LeftOnly(pargraph.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, None

    a = pargraph.tensor([1.0, 2.0], requires_grad=True)
    b = pargraph.tensor([3.0, 4.0], requires_grad=True)
    LeftOnly.apply(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad is None
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        pargraph.autograd.grad(LeftOnly.apply(a, b).sum(), [b])
    assert pargraph.autograd.grad(LeftOnly.apply(a, b).sum(), [b], allow_unused=True) == (None,)
