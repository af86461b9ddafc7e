"""``autograd.functional`` (jacobian, hessian, vjp, jvp, vhp, hvp) against PyTorch: values for
single and tuple inputs and outputs, create_graph, strict mode and its errors."""

import numpy as np
import pytest

import pargraph
from pargraph.autograd import functional

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

RNG = np.random.default_rng(0)
A, B, V2, V3 = (RNG.standard_normal(s) for s in ((2, 3), (3,), (2,), (3,)))


def _functions(lib):
    def single(x):  # (2, 3) -> (2,)
        return (x.sin() * x).sum(1)

    def pair(x, y):  # ((2, 3), (3,)) -> ((2,), scalar)
        return (x * y).tanh().sum(1), (x.exp() * y).sum()

    def scalar(x, y):  # ((2, 3), (3,)) -> scalar
        return ((x @ y) ** 2).sum() + (y ** 3).sum()

    return single, pair, scalar


def _both(name, *args, **kwargs):
    """``functional.<name>`` on pargraph and on torch, with the same float64 arguments."""
    results = []
    for lib, api in ((pargraph, functional), (torch, torch.autograd.functional)):
        fns = dict(zip(("single", "pair", "scalar"), _functions(lib)))
        converted = [fns[a] if isinstance(a, str) and a in fns else
                     tuple(lib.tensor(v) for v in a) if isinstance(a, tuple) else
                     lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        results.append(getattr(api, name)(*converted, **kwargs))
    return results


def _assert_close(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _assert_close(o, t)
        return
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("name,args", [
    ("jacobian", ("single", A)),
    ("jacobian", ("pair", (A, B))),
    ("jacobian", ("scalar", (A, B))),
    ("hessian", ("scalar", (A, B))),
    ("vjp", ("single", A, V2)),
    ("vjp", ("scalar", (A, B))),
    ("jvp", ("single", A, A)),
    ("jvp", ("pair", (A, B), (A, B))),
    ("vhp", ("scalar", (A, B), (A, B))),
    ("hvp", ("scalar", (A, B), (A, B))),
])
def test_values_follow_pytorch(name, args):
    ours, theirs = _both(name, *args)
    _assert_close(ours, theirs)


def test_create_graph_makes_results_differentiable_again():
    seconds = []
    for lib, api in ((pargraph, functional), (torch, torch.autograd.functional)):
        x = lib.tensor(A, requires_grad=True)
        jac = api.jacobian(_functions(lib)[0], x, create_graph=True)
        assert jac.requires_grad
        seconds.append(lib.autograd.grad(jac.sum(), x)[0].numpy())
    np.testing.assert_allclose(seconds[0], seconds[1], rtol=1e-10)
    plain = functional.jacobian(_functions(pargraph)[0], pargraph.tensor(A))
    assert not plain.requires_grad


def test_unused_inputs_give_zeros_or_raise_in_strict_mode():
    def ignores_y(x, y):
        return x * 2

    for lib, api in ((pargraph, functional), (torch, torch.autograd.functional)):
        x, y = lib.tensor(V3), lib.tensor(V2)
        jx, jy = api.jacobian(ignores_y, (x, y))
        assert tuple(jy.shape) == (3, 2) and not jy.numpy().any()
        with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is "
                                               "independent of input 1"):
            api.jacobian(ignores_y, (x, y), strict=True)
        with pytest.raises(RuntimeError, match="independent of input 1. This is not allowed"):
            api.vjp(ignores_y, (x, y), lib.ones(3), strict=True)


@pytest.mark.parametrize("call,message", [
    (lambda api, lib: api.jacobian(lambda x: x, [lib.ones(2)]),
     "The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the "
     "given inputs has type <class 'list'>."),
    (lambda api, lib: api.jacobian(lambda x, y: x, (lib.ones(2), 3.0)),
     "The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the "
     "value at index 1 has type <class 'float'>."),
    (lambda api, lib: api.vjp(lambda x: x * 2, lib.ones(2)),
     "The vector v can only be None if the user-provided function returns a single Tensor "
     "with a single element."),
    (lambda api, lib: api.vjp(lambda x: x * 2, lib.ones(2), lib.ones(3)),
     r"v has invalid size: should be torch.Size\(\[2\]\) but got torch.Size\(\[3\]\)."),
    (lambda api, lib: api.hessian(lambda x: x * 2, lib.ones(2)),
     "The Tensor returned by the function given to hessian should contain a single element"),
    (lambda api, lib: api.hvp(lambda x: (x, x), lib.ones(1)),
     "The function given to hvp should return a single Tensor"),
    (lambda api, lib: api.jacobian(lambda x: x, lib.ones(1), strategy="sideways"),
     'Expected strategy to be either "forward-mode" or "reverse-mode".'),
    (lambda api, lib: api.jacobian(lambda x: x, lib.ones(1), strategy="forward-mode"),
     "only implemented for `vectorize=True`"),
])
def test_errors_say_what_pytorchs_say(call, message):
    for lib, api in ((pargraph, functional), (torch, torch.autograd.functional)):
        with pytest.raises((RuntimeError, TypeError, AssertionError, NotImplementedError),
                           match=message):
            call(api, lib)


def test_a_jacobians_rows_run_as_one_graph():
    calls = []
    x = pargraph.tensor(A)
    with pargraph.trace() as trace:
        jac = functional.jacobian(lambda x: calls.append(1) or (x.sin() * x).sum(1), x)
        jac.numpy()
    assert calls == [1] and len(trace.runs) == 1  # two backward passes, one run


def test_backward_into_chosen_inputs_grad_fn_classes_and_versions_are_pytorchs():
    found = []
    for library in (pargraph, torch):
        x = library.tensor([1.0, 2.0], dtype=library.float64, requires_grad=True)
        z = library.tensor([3.0, 4.0], dtype=library.float64, requires_grad=True)
        hidden = x * z
        (hidden * hidden).sum().backward(inputs=[z, hidden])
        library.autograd.backward([(x * z).sum()], inputs=[x])
        y = (x * 2).sum()
        kinds = [type(y.grad_fn).__name__,
                 [type(f).__name__ for f, _ in y.grad_fn.next_functions]]
        w = library.ones(3)
        versions = [w._version]
        w.add_(1)
        w[0] = 5.0
        versions.append(w._version)
        found.append((x.grad.tolist(), z.grad.tolist(), hidden.grad.tolist(), kinds,
                      versions[1] - versions[0]))
        with pytest.raises(RuntimeError, match="cannot be empty"):
            (x * 2).sum().backward(inputs=[])
    assert found[0] == found[1]


def test_gradgradcheck_passes_true_second_derivatives_and_catches_a_wrong_one():
    class DetachedBackward(pargraph.autograd.Function):  # right first, wrong second derivative
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x.detach()

    x = pargraph.tensor([0.5, -1.5, 2.0], dtype=pargraph.float64, requires_grad=True)
    assert pargraph.autograd.gradgradcheck(lambda t: (t.sin() * t ** 2).sum(), (x,))
    assert pargraph.autograd.gradgradcheck(lambda t, u: t * u, (x, x.detach() * 3))
    assert pargraph.autograd.gradcheck(lambda t: DetachedBackward.apply(t).sum(), (x,))
    assert not pargraph.autograd.gradgradcheck(lambda t: DetachedBackward.apply(t).sum(),
                                               (x,), raise_exception=False)
    with pytest.raises(pargraph.autograd.GradcheckError):
        pargraph.autograd.gradgradcheck(lambda t: DetachedBackward.apply(t).sum(), (x,))
    assert torch.autograd.gradgradcheck(lambda t: (t.sin() * t ** 2).sum(),
                                        (torch.tensor(x.tolist(), dtype=torch.float64,
                                                      requires_grad=True),))


def test_saved_tensor_hooks_say_what_pargraph_does_with_them():
    x = pargraph.ones(2, requires_grad=True)
    with pargraph.autograd.graph.save_on_cpu(), \
            pargraph.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        y = (x * 3).sum()
    y.backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(NotImplementedError, match="saves no tensors"):
        with pargraph.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass
