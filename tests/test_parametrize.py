"""nn.utils.parametrize and nn.utils.parametrizations (weight_norm, spectral_norm) against
torch 2.13: the parametrized tensor, state_dict keys, classes, assignment through
right_inverse, removal, caching, errors, and training steps eager and compiled."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import pargraph
from pargraph import nn
from pargraph.nn.utils import parametrize
from pargraph.nn.utils.parametrizations import spectral_norm, weight_norm

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

    return Symmetric()


def _scaled(lib):
    """A parametrization with a right_inverse that returns two tensors."""
    class Scaled(lib.nn.Module):
        def forward(self, scale, direction):
            return scale * direction

        def right_inverse(self, weight):
            scale = weight.abs().amax()
            return scale.reshape(1, 1), weight / scale

    return Scaled()


def _copy_into(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def _raised(call):
    try:
        call()
    except Exception as error:  # the message and type are what the tests compare
        return type(error).__name__, str(error).replace("torch.", "").replace("pargraph.", "")
    return None


def test_a_parametrized_weight_is_computed_from_its_original_with_its_gradient():
    pargraph.manual_seed(0)
    theirs = torch.nn.Linear(3, 3)
    ours = nn.Linear(3, 3)
    _copy_into(ours, theirs)
    parametrize.register_parametrization(ours, "weight", _symmetric(pargraph))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", _symmetric(torch))
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert isinstance(ours, nn.Linear)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    ours(pargraph.tensor(x)).pow(2).sum().backward()
    theirs(torch.tensor(x)).pow(2).sum().backward()
    # float32 sums of terms near 5 that cancel to -0.003 in one element: an absolute bound
    # at float32's resolution of those terms, as BLAS's blocking differs run to run.
    np.testing.assert_allclose(ours.parametrizations.weight.original.grad.numpy(),
                               theirs.parametrizations.weight.original.grad.numpy(), rtol=1e-5,
                               atol=1e-6)
    assert parametrize.is_parametrized(ours) and parametrize.is_parametrized(ours, "weight")
    assert not parametrize.is_parametrized(ours, "bias")
    assert parametrize.type_before_parametrizations(ours) is nn.Linear


def test_the_original_stays_the_parameter_object_an_optimizer_holds():
    layer = nn.Linear(2, 2)
    before = layer.weight
    optimizer = pargraph.optim.SGD(layer.parameters(), lr=0.5)
    parametrize.register_parametrization(layer, "weight", _symmetric(pargraph))
    assert layer.parametrizations.weight.original is before
    layer(pargraph.ones(1, 2)).sum().backward()
    old = before.detach().numpy().copy()
    optimizer.step()
    assert not np.array_equal(before.detach().numpy(), old)


def test_right_inverse_with_several_tensors_and_assignment_as_pytorchs():
    pargraph.manual_seed(1)
    theirs = torch.nn.Linear(3, 2)
    ours = nn.Linear(3, 2)
    _copy_into(ours, theirs)
    parametrize.register_parametrization(ours, "weight", _scaled(pargraph))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", _scaled(torch))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k in (0, 1):
        np.testing.assert_allclose(
            getattr(ours.parametrizations.weight, f"original{k}").detach().numpy(),
            getattr(theirs.parametrizations.weight, f"original{k}").detach().numpy(), rtol=1e-6)
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours.weight = pargraph.tensor(value)
    with torch.no_grad():
        theirs.weight = torch.tensor(value)
    np.testing.assert_allclose(ours.weight.detach().numpy(), value, rtol=1e-6)
    np.testing.assert_allclose(ours.parametrizations.weight.original0.detach().numpy(),
                               theirs.parametrizations.weight.original0.detach().numpy())
    assert _raised(lambda: parametrize.remove_parametrizations(ours, "weight", False)) == \
        _raised(lambda: torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight",
                                                                           False))
    parametrize.remove_parametrizations(ours, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight")
    assert type(ours) is nn.Linear and isinstance(ours.weight, nn.Parameter)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), value, rtol=1e-6)


def test_a_second_parametrization_applies_to_the_first_ones_output_and_removal():
    layer = nn.Linear(3, 3)
    original = layer.weight.detach().numpy().copy()

    class Double(nn.Module):
        def forward(self, x):
            return x * 2

    parametrize.register_parametrization(layer, "weight", _symmetric(pargraph))
    parametrize.register_parametrization(layer, "weight", Double())
    symmetric = np.triu(original) + np.triu(original, 1).T
    np.testing.assert_allclose(layer.weight.detach().numpy(), 2 * symmetric)
    assert len(layer.parametrizations.weight) == 2
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), original)
    assert type(layer) is nn.Linear and not hasattr(layer, "parametrizations")


@pytest.mark.parametrize("case", ["shape", "dtype", "missing", "appended shape", "not a tensor",
                                  "no right_inverse", "not parametrized"])
def test_errors_are_pytorchs(case):
    def attempt(lib):
        layer = lib.nn.Linear(3, 2)

        class Row(lib.nn.Module):
            def forward(self, x):
                return x[:1]

        class Doubled(lib.nn.Module):
            def forward(self, x):
                return x.double()

        class Number(lib.nn.Module):
            def forward(self, x):
                return 1.0

        class Twice(lib.nn.Module):
            def forward(self, x):
                return x * 2

        register = lib.nn.utils.parametrize.register_parametrization
        if case == "shape":
            register(layer, "weight", Row())
        elif case == "dtype":
            register(layer, "weight", Doubled())
        elif case == "missing":
            register(layer, "kernel", Twice())
        elif case == "appended shape":
            register(layer, "weight", Twice())
            register(layer, "weight", Row())
        elif case == "not a tensor":
            register(layer, "weight", Number())
        elif case == "no right_inverse":
            register(layer, "weight", Twice())
            layer.weight = lib.zeros(2, 3)
        else:
            lib.nn.utils.parametrize.remove_parametrizations(layer, "weight")

    ours, theirs = _raised(lambda: attempt(pargraph)), _raised(lambda: attempt(torch))
    assert theirs is not None
    assert ours[0] == theirs[0]
    # The module's repr is in two of the messages; the rest must read the same.
    assert ours[1].split("Linear(")[0] == theirs[1].split("Linear(")[0]
    assert ours[1].split(")")[-1] == theirs[1].split(")")[-1]


def test_cached_computes_a_parametrized_tensor_once_per_block():
    calls = []

    class Counted(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1

    layer = parametrize.register_parametrization(nn.Linear(2, 2), "weight", Counted())
    calls.clear()
    with parametrize.cached():
        first = layer.weight
        with parametrize.cached():
            assert layer.weight is first
        assert layer.weight is first
    assert len(calls) == 1
    assert layer.weight is not first and len(calls) == 2


def test_a_parametrized_module_deep_copies_but_does_not_pickle_as_pytorchs():
    layer = parametrize.register_parametrization(nn.Linear(2, 2), "weight", _symmetric(pargraph))
    twin = copy.deepcopy(layer)
    assert type(twin).__name__ == "ParametrizedLinear"
    np.testing.assert_array_equal(twin.weight.detach().numpy(), layer.weight.detach().numpy())
    assert twin.parametrizations.weight.original is not layer.parametrizations.weight.original
    theirs = torch.nn.utils.parametrize.register_parametrization(torch.nn.Linear(2, 2), "weight",
                                                                 _symmetric(torch))
    assert _raised(lambda: pickle.dumps(layer)) == _raised(lambda: pickle.dumps(theirs))


@pytest.mark.parametrize("make, dim, shape", [
    (lambda lib: lib.nn.Linear(3, 2), 0, (4, 3)), (lambda lib: lib.nn.Linear(3, 2), None, (4, 3)),
    (lambda lib: lib.nn.Conv1d(2, 3, 3), 0, (2, 2, 7)),
    (lambda lib: lib.nn.Conv1d(2, 3, 3), 1, (2, 2, 7)),
])
@pytest.mark.parametrize("compiled", [False, True])
def test_weight_norm_parametrization_trains_as_pytorchs(make, dim, shape, compiled):
    pargraph.manual_seed(0)
    theirs, ours = make(torch), make(pargraph)
    _copy_into(ours, theirs)
    weight_norm(ours, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(v.shape) for v in ours.state_dict().values()] == \
        [tuple(v.shape) for v in theirs.state_dict().values()]
    assert repr(ours) == repr(theirs)
    _train_alike(ours, theirs, shape, compiled)


def test_weight_norm_loads_the_older_api_state_dict():
    pargraph.manual_seed(0)
    older = nn.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn.utils.weight_norm(older)
    newer = weight_norm(nn.Linear(3, 2))
    newer.load_state_dict(older.state_dict())
    np.testing.assert_allclose(newer.weight.detach().numpy(), older.weight.detach().numpy())


@pytest.mark.parametrize("make, shape", [
    (lambda lib: lib.nn.Linear(5, 4), (6, 5)),
    (lambda lib: lib.nn.Conv2d(2, 3, 3), (2, 2, 6, 6)),
    (lambda lib: lib.nn.ConvTranspose2d(3, 2, 3), (2, 3, 4, 4)),
])
@pytest.mark.parametrize("compiled", [False, True])
def test_spectral_norm_trains_as_pytorchs(make, shape, compiled):
    """The power iteration's vectors are random at the start, so ours start from PyTorch's
    (loaded with the state_dict); then losses, weights and vectors follow PyTorch's."""
    pargraph.manual_seed(0)
    theirs, ours = make(torch), make(pargraph)
    torch.nn.utils.parametrizations.spectral_norm(theirs)
    spectral_norm(ours)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_into(ours, theirs)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    _train_alike(ours, theirs, shape, compiled)
    for key in ("parametrizations.weight.0._u", "parametrizations.weight.0._v"):
        np.testing.assert_allclose(ours.state_dict()[key].numpy(),
                                   theirs.state_dict()[key].numpy(), rtol=1e-4, atol=1e-6)
    ours.eval()
    theirs.eval()
    u = ours.state_dict()["parametrizations.weight.0._u"].numpy().copy()
    x = np.ones(shape, np.float32)
    np.testing.assert_allclose(ours(pargraph.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(ours.state_dict()["parametrizations.weight.0._u"].numpy(), u)


def test_spectral_norm_errors_and_vectors_are_pytorchs():
    for call in (lambda lib: lib.nn.utils.parametrizations.spectral_norm(
                     lib.nn.Linear(2, 2), n_power_iterations=0),
                 lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2),
                                                                         dim=2),
                 lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2),
                                                                         "kernel")):
        ours, theirs = _raised(lambda: call(pargraph)), _raised(lambda: call(torch))
        assert ours[0] == theirs[0] and ours[1].split("Linear(")[0] == \
            theirs[1].split("Linear(")[0]
    layer = spectral_norm(nn.Linear(6, 5))
    # After 15 power-iteration steps at registration, sigma is close to the top singular value.
    weight = layer.parametrizations.weight.original.detach().numpy()
    top = np.linalg.svd(weight, compute_uv=False)[0]
    np.testing.assert_allclose(np.linalg.svd(layer.weight.detach().numpy(),
                                             compute_uv=False)[0], 1.0, rtol=2e-2)
    assert top > 0


def _train_alike(ours, theirs, shape, compiled):
    """Three Adam steps on the same data: losses and parameters as PyTorch's."""
    ours_opt = pargraph.optim.Adam(ours.parameters(), lr=0.05)
    theirs_opt = torch.optim.Adam(theirs.parameters(), lr=0.05)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    def step(v):
        ours_opt.zero_grad()
        loss = ours(v).pow(2).mean()
        loss.backward()
        ours_opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    for _ in range(3):
        loss = run(pargraph.tensor(x))
        theirs_opt.zero_grad()
        expected = theirs(torch.tensor(x)).pow(2).mean()
        expected.backward()
        theirs_opt.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-4)
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    for key, value in theirs_state.items():
        np.testing.assert_allclose(ours_state[key].numpy(), value.numpy(), rtol=1e-4, atol=1e-5)


def test_mv_and_conjugate_transposes_are_pytorchs():
    rng = np.random.default_rng(0)
    a, v = rng.standard_normal((3, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(pargraph.mv(pargraph.tensor(a), pargraph.tensor(v)).numpy(),
                               a @ v)
    np.testing.assert_allclose(pargraph.tensor(a).mv(pargraph.tensor(v)).numpy(), a @ v)
    b = rng.standard_normal((2, 3, 4))
    assert pargraph.tensor(a).H.shape == (4, 3)
    np.testing.assert_array_equal(pargraph.tensor(b).mH.numpy(), b.swapaxes(-1, -2))
    np.testing.assert_array_equal(pargraph.tensor(b).adjoint().numpy(), b.swapaxes(-1, -2))
    np.testing.assert_array_equal(pargraph.adjoint(pargraph.tensor(b)).numpy(),
                                  b.swapaxes(-1, -2))
    x = pargraph.tensor(a, requires_grad=True)
    x.mv(pargraph.tensor(v)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.tile(v, (3, 1)))
    for call in (lambda lib: lib.mv(lib.ones(3, 4), lib.ones(3, 4)),
                 lambda lib: lib.mv(lib.ones(4), lib.ones(4)),
                 lambda lib: lib.mv(lib.ones(3, 4), lib.ones(5)),
                 lambda lib: lib.ones(2, 3, 4).H, lambda lib: lib.ones(3).H,
                 lambda lib: lib.ones(3).mH):
        assert _raised(lambda: call(pargraph)) == _raised(lambda: call(torch))


def test_load_state_dict_pre_hooks_see_the_module_and_its_prefix():
    model = nn.Sequential(nn.Linear(2, 2))
    seen = []
    model[0].register_load_state_dict_pre_hook(
        lambda module, state, prefix, *rest: seen.append((type(module).__name__, prefix)))
    state = model.state_dict()
    model.load_state_dict(state)
    assert seen == [("Linear", "0.")]
    assert list(state) == ["0.weight", "0.bias"]  # the caller's dict is left as it was


@pytest.mark.parametrize("make, shape", [
    (lambda lib: lib.nn.Linear(5, 4), (6, 5)),
    (lambda lib: lib.nn.Conv2d(2, 3, 3), (2, 2, 6, 6)),
    (lambda lib: lib.nn.ConvTranspose2d(3, 2, 3), (2, 3, 4, 4)),
])
@pytest.mark.parametrize("compiled", [False, True])
def test_the_older_spectral_norm_trains_as_pytorchs(make, shape, compiled):
    """``nn.utils.spectral_norm`` (a forward pre-hook; ``weight_orig``, ``weight_u``,
    ``weight_v``), still what most GAN programs call: from PyTorch's vectors, the same
    losses, parameters and vectors; removed, the same weight."""
    pargraph.manual_seed(0)
    theirs, ours = make(torch), make(pargraph)
    torch.nn.utils.spectral_norm(theirs)
    nn.utils.spectral_norm(ours)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_into(ours, theirs)
    _train_alike(ours, theirs, shape, compiled)
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_the_older_spectral_norm_errors_are_pytorchs():
    def twice(lib):
        layer = lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2))
        lib.nn.utils.spectral_norm(layer)

    for call in (twice,
                 lambda lib: lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2), n_power_iterations=0),
                 lambda lib: lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2, bias=False), "bias"),
                 lambda lib: lib.nn.utils.remove_spectral_norm(lib.nn.Linear(2, 2))):
        ours, theirs = _raised(lambda: call(pargraph)), _raised(lambda: call(torch))
        assert theirs is not None and ours[0] == theirs[0]
        assert ours[1].split("Linear(")[0] == theirs[1].split("Linear(")[0]


@pytest.mark.parametrize("older", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_a_spectrally_normalized_module_called_twice_in_a_step_as_pytorchs(older, compiled):
    """A GAN's discriminator reads the real and the fake batch in one step: each call moves
    the vectors, and the first call's backward reads the values it used."""
    def make(lib):
        lib.manual_seed(0)
        norm = lib.nn.utils.spectral_norm if older else \
            lib.nn.utils.parametrizations.spectral_norm
        return lib.nn.Sequential(norm(lib.nn.Linear(3, 4)), lib.nn.LeakyReLU(0.2),
                                 norm(lib.nn.Linear(4, 1)))

    theirs, ours = make(torch), make(pargraph)
    _copy_into(ours, theirs)
    rng = np.random.default_rng(0)
    real, fake = (rng.standard_normal((5, 3)).astype(np.float32) for _ in range(2))
    ours_opt = pargraph.optim.SGD(ours.parameters(), lr=0.1)
    theirs_opt = torch.optim.SGD(theirs.parameters(), lr=0.1)

    def loss_of(lib, model, a, b):
        return lib.relu(1 - model(a)).mean() + lib.relu(1 + model(b)).mean()

    def step(a, b):
        ours_opt.zero_grad()
        loss = loss_of(pargraph, ours, a, b)
        loss.backward()
        ours_opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    for _ in range(3):
        loss = run(pargraph.tensor(real), pargraph.tensor(fake))
        theirs_opt.zero_grad()
        expected = loss_of(torch, theirs, torch.tensor(real), torch.tensor(fake))
        expected.backward()
        theirs_opt.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-4,
                                   atol=1e-6)


def _orthogonal_run(lib, orthogonal_map, use_trivialization, shape=(4, 4), steps=5):
    """An orthogonal Linear trained a few SGD steps from the same weights: its weight after
    each step."""
    rng = np.random.default_rng(5)
    layer = lib.nn.Linear(shape[1], shape[0], bias=False).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(rng.standard_normal(shape)))
    lib.nn.utils.parametrizations.orthogonal(layer, orthogonal_map=orthogonal_map,
                                             use_trivialization=use_trivialization)
    opt = lib.optim.SGD(layer.parameters(), lr=0.1)
    x, y = lib.tensor(rng.standard_normal((8, shape[1]))), lib.tensor(
        rng.standard_normal((8, shape[0])))
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        ((layer(x) - y) ** 2).mean().backward()
        opt.step()
        seen.append(layer.weight.detach().numpy().copy())
    return np.array(seen), sorted(layer.state_dict())


@pytest.mark.parametrize("orthogonal_map,trivial,shape", [
    ("matrix_exp", True, (4, 4)), ("cayley", True, (4, 4)), ("householder", True, (4, 4)),
    ("householder", False, (4, 4)), ("householder", False, (5, 3)),
    ("householder", False, (3, 5)), ("cayley", True, (2, 3, 3))])
def test_orthogonal_trains_as_pytorchs(orthogonal_map, trivial, shape):
    torch = pytest.importorskip("torch")
    if len(shape) == 3:  # a batch of matrices: a parameter of a module of its own
        for lib in (pargraph, torch):
            holder = lib.nn.Module()
            holder.weight = lib.nn.Parameter(lib.tensor(
                np.random.default_rng(2).standard_normal(shape).astype(np.float32)))
            lib.nn.utils.parametrizations.orthogonal(holder, orthogonal_map=orthogonal_map)
            w = holder.weight.detach().numpy()
            np.testing.assert_allclose(w @ np.swapaxes(w, -1, -2), np.broadcast_to(
                np.eye(3), shape), atol=1e-5)
        return
    ours, theirs = (_orthogonal_run(lib, orthogonal_map, trivial, shape)
                    for lib in (pargraph, torch))
    assert ours[1] == theirs[1]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-9, atol=1e-10)
    w = ours[0][-1]
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-10)


def test_orthogonal_assignment_and_errors_as_pytorchs():
    torch = pytest.importorskip("torch")
    for lib in (pargraph, torch):
        orthogonal = lib.nn.utils.parametrizations.orthogonal
        layer = orthogonal(lib.nn.Linear(3, 3))
        q = lib.tensor(np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0],
                       dtype=lib.float32)
        layer.weight = q  # sets the base: the weight is q
        np.testing.assert_allclose(layer.weight.detach().numpy(), q.numpy(), atol=1e-6)
        with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a "
                                             "tensor of 1 dimensions."):
            holder = lib.nn.Module()
            holder.weight = lib.nn.Parameter(lib.ones(3))
            orthogonal(holder)
        with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", '
                                             '"cayley", "householder". Got: qr'):
            orthogonal(lib.nn.Linear(2, 2), orthogonal_map="qr")
        free = orthogonal(lib.nn.Linear(2, 2), orthogonal_map="matrix_exp",
                          use_trivialization=False)
        with pytest.raises(NotImplementedError, match="not possible to assign to the matrix "
                                                      "exponential"):
            free.weight = lib.eye(2)
