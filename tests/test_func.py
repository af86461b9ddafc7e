"""pargraph.func against torch.func 2.13: grad, grad_and_value, vjp, jacrev, jacfwd, hessian,
vmap and functional_call, nested and composed (per-sample gradients, MAML's inner step),
on float64 values; and their errors."""

import numpy as np
import pytest

import pargraph
from pargraph import func

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
# torch.func warns of its own use of torch.jit.script.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")

RNG = np.random.default_rng(0)
X = RNG.standard_normal(3)
M = RNG.standard_normal((4, 3))


def _close(ours, theirs):
    ours_leaves, theirs_leaves = (pargraph.pytree.flatten(ours)[0],
                                  pargraph.pytree.flatten(theirs)[0])
    assert len(ours_leaves) == len(theirs_leaves)
    for a, b in zip(ours_leaves, theirs_leaves):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


def f(lib, x):
    return (lib.sin(x) * x ** 2).sum()


def g(lib, m, x):
    return lib.tanh(m @ x) * x.sum()


@pytest.mark.parametrize("transform", [
    lambda lib, T: T.grad(lambda x: f(lib, x))(lib.tensor(X)),
    lambda lib, T: T.grad_and_value(lambda x: f(lib, x))(lib.tensor(X)),
    lambda lib, T: T.grad(lambda x: T.grad(lambda y: (y ** 3).sum())(x).sum())(lib.tensor(X)),
    lambda lib, T: T.grad(lambda m, x: g(lib, m, x).sum(), argnums=(0, 1))(
        lib.tensor(M), lib.tensor(X)),
    lambda lib, T: T.grad(lambda p: (p["w"] @ p["b"]).sum())(
        {"w": lib.tensor(M), "b": lib.tensor(X)}),
    lambda lib, T: T.grad(lambda x: (f(lib, x), x.mean()), has_aux=True)(lib.tensor(X)),
    lambda lib, T: T.jacrev(lambda m, x: g(lib, m, x), argnums=1)(lib.tensor(M),
                                                                  lib.tensor(X)),
    lambda lib, T: T.jacrev(lambda m, x: g(lib, m, x), argnums=(0, 1))(lib.tensor(M),
                                                                       lib.tensor(X)),
    lambda lib, T: T.jacfwd(lambda x: lib.sin(x) * x.sum())(lib.tensor(X)),
    lambda lib, T: T.hessian(lambda x: f(lib, x))(lib.tensor(X)),
    lambda lib, T: T.vmap(lambda m, x: m.dot(x), in_dims=(0, None))(lib.tensor(M),
                                                                     lib.tensor(X)),
    lambda lib, T: T.vmap(lambda x: (x * 2, x.sum()), in_dims=1, out_dims=(1, 0))(
        lib.tensor(M)),
    lambda lib, T: T.vmap(T.grad(lambda m, x: g(lib, m, x).sum()), in_dims=(0, None))(
        lib.tensor(M.reshape(2, 2, 3)), lib.tensor(X)),
    lambda lib, T: T.vmap(T.jacrev(lambda x: lib.sin(x) * x))(lib.tensor(M)),
], ids=["grad", "grad_and_value", "grad_of_grad", "argnums", "dict", "has_aux", "jacrev",
        "jacrev_argnums", "jacfwd", "hessian", "vmap_in_dims", "vmap_out_dims",
        "per_sample_grad", "vmap_jacrev"])
def test_transforms_as_torch_funcs(transform):
    _close(transform(pargraph, func), transform(torch, torch.func))


def test_vjp_as_torch_funcs():
    for lib, T in ((pargraph, func), (torch, torch.func)):
        out, vjp_fn = T.vjp(lambda m, x: g(lib, m, x), lib.tensor(M), lib.tensor(X))
        grads = vjp_fn(lib.tensor(np.linspace(0.5, 2.0, 4)))
        if lib is pargraph:
            ours = (out, grads)
        else:
            _close(ours, (out, grads))


def test_per_sample_gradients_of_a_model_as_torch_funcs():
    """The torch.func tutorial's per-sample gradients: functional_call, grad, vmap."""
    def run(lib, T):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        model = model.double()
        return model

    theirs = run(torch, torch.func)
    ours = run(pargraph, func)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x, y = RNG.standard_normal((5, 3)), np.array([0, 1, 1, 0, 1])

    def per_sample(lib, T, model):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, xi, yi):
            out = T.functional_call(model, p, (xi.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, yi.unsqueeze(0))

        return T.vmap(T.grad(loss), in_dims=(None, 0, 0))(params, lib.tensor(x),
                                                          lib.tensor(y))

    _close(per_sample(pargraph, func, ours), per_sample(torch, torch.func, theirs))
    assert all(p.grad is None for p in ours.parameters())  # the module kept its own


def test_maml_inner_step_differentiates_through_the_update():
    """grad of the loss after one functional SGD step, through the step (second order)."""
    def outer(lib, T, w):
        def inner_loss(weights, x):
            return ((x @ weights) ** 2).sum()

        adapted = w - 0.1 * T.grad(inner_loss)(w, lib.tensor(M))
        return inner_loss(adapted, lib.tensor(M) + 1)

    ours_w = pargraph.tensor(X, requires_grad=True)
    theirs_w = torch.tensor(X, requires_grad=True)
    outer(pargraph, func, ours_w).backward()
    outer(torch, torch.func, theirs_w).backward()
    np.testing.assert_allclose(ours_w.grad.numpy(), theirs_w.grad.numpy(), rtol=1e-10)


def test_functional_call_ties_weights_and_checks_keys_as_pytorchs():
    def make(lib):
        a, b = lib.nn.Linear(2, 2), lib.nn.Linear(2, 2)
        b.weight = a.weight
        return lib.nn.Sequential(a, b).double()

    theirs, ours = make(torch), make(pargraph)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    results, messages = [], []
    for lib, T, model in ((pargraph, func, ours), (torch, torch.func, theirs)):
        results.append(T.functional_call(model, {"0.weight": lib.eye(2, dtype=lib.float64)},
                                         (lib.ones(1, 2, dtype=lib.float64),)))
        with pytest.raises(RuntimeError) as caught:
            T.functional_call(model, {"0.weight": lib.eye(2)}, (lib.ones(1, 2),), strict=True)
        messages.append(str(caught.value).splitlines()[1:])
    _close(*results)
    assert messages[0] == messages[1]


@pytest.mark.parametrize("call", [
    lambda lib, T: T.grad(lambda x: x * 2)(lib.ones(2)),
    lambda lib, T: T.vmap(lambda x, y: x + y)(lib.ones(2), lib.ones(3)),
    lambda lib, T: T.vmap(lambda x: x + lib.rand(1))(lib.ones(2)),
    lambda lib, T: T.vmap(lambda x: x, randomness="sometimes")(lib.ones(2)),
])
def test_errors_as_torch_funcs(call):
    caught = []
    for lib, T in ((pargraph, func), (torch, torch.func)):
        with pytest.raises(Exception) as raised:
            call(lib, T)
        caught.append((type(raised.value).__name__, str(raised.value)))
    assert caught[0] == caught[1]


def test_vmap_randomness_same_draws_the_same_numbers_for_every_element():
    out = func.vmap(lambda x: x + pargraph.rand(2), randomness="same")(pargraph.zeros(3, 2))
    assert np.ptp(out.numpy(), axis=0).max() == 0
    out = func.vmap(lambda x: x + pargraph.rand(2), randomness="different")(
        pargraph.zeros(3, 2))
    assert np.ptp(out.numpy(), axis=0).min() > 0
