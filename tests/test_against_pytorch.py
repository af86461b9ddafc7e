"""pargraph against PyTorch itself, computed live: optimizers on every parameter shape, numeric
edges (saturated losses, -inf, constant inputs, float16 reductions) and index checks."""

import numpy as np
import pytest
import torch

import pargraph
from pargraph import nn, optim

OPTIMIZERS = [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3)),
    ("Adam", dict(lr=0.1)), ("Adam", dict(lr=0.1, amsgrad=True, weight_decay=0.2)),
    ("AdamW", dict(lr=0.1)), ("AdamW", dict(lr=0.1, amsgrad=True, weight_decay=0.3)),
    ("RMSprop", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.5)), ("Adadelta", dict(weight_decay=0.1)),
]


def _start(shape: str, rng: np.random.Generator) -> np.ndarray:
    if shape == "0-d":
        return np.asarray(rng.standard_normal())
    if shape == "1-d":
        return rng.standard_normal(3)
    return rng.standard_normal((4, 3)).T  # non-contiguous


@pytest.mark.parametrize("shape", ["0-d", "1-d", "non-contiguous"])
@pytest.mark.parametrize("name, options", OPTIMIZERS)
def test_every_optimizer_updates_every_parameter_shape_as_pytorch(name, options, shape):
    rng = np.random.default_rng(3)
    start = _start(shape, rng)
    grads = [rng.standard_normal(start.shape) for _ in range(3)]
    ours = nn.Parameter(pargraph.tensor(start))
    theirs = torch.nn.Parameter(torch.tensor(start))
    our_opt = getattr(optim, name)([ours], **options)
    their_opt = getattr(torch.optim, name)([theirs], **options)
    for g in grads:
        for param, opt, lib in ((ours, our_opt, pargraph), (theirs, their_opt, torch)):
            opt.zero_grad()
            (param * lib.tensor(g)).sum().backward()
            opt.step()
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    assert ours.shape == theirs.shape


def _both(fn, *arrays, grad=True, grad_of=None):
    """``fn`` applied by pargraph and by PyTorch to tensors of ``arrays``: (values, grads of
    the float arrays, or of the first ``grad_of`` of them)."""
    out = []
    for lib in (pargraph, torch):
        tensors = [lib.tensor(a, requires_grad=grad and a.dtype.kind == "f" and
                              (grad_of is None or k < grad_of))
                   for k, a in enumerate(arrays)]
        result = fn(lib, *tensors)
        grads = []
        if grad and result.requires_grad:
            result.sum().backward()
            grads = [t.grad.numpy() for t in tensors if t.requires_grad]
        out.append((result.detach().numpy(), grads))
    return out


def _assert_same(ours, theirs, rtol=1e-6, atol=0.0):
    np.testing.assert_allclose(ours[0], theirs[0], rtol=rtol, atol=atol, equal_nan=True)
    assert ours[0].dtype == theirs[0].dtype
    for a, b in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("x", [20.0, -20.0, 40.0, 0.0, 1e-30])
@pytest.mark.parametrize("target", [0.0, 1.0, 0.25])
def test_binary_cross_entropy_at_saturation(x, target):
    for dtype in (np.float32, np.float64):
        logits = np.array([x, -x, 0.5], dtype=dtype)
        targets = np.full(3, target, dtype=dtype)
        _assert_same(*_both(lambda lib, a, t: lib.nn.BCELoss()(lib.sigmoid(a), t),
                            logits, targets))
        _assert_same(*_both(lambda lib, a, t: lib.nn.functional.binary_cross_entropy(
            lib.sigmoid(a), t, reduction="none"), logits, targets))


def test_binary_cross_entropy_refuses_probabilities_outside_0_1():
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        nn.functional.binary_cross_entropy(pargraph.tensor([1.5]), pargraph.tensor([1.0])).item()


@pytest.mark.parametrize("row", [[-np.inf] * 3, [-np.inf, 0.0, -np.inf], [np.inf, 1.0, 2.0],
                                 [1.0, 2.0, 3.0]])
def test_logsumexp_of_infinite_rows(row):
    x = np.array([row, [0.5, 1.0, -2.0]])
    _assert_same(*_both(lambda lib, a: lib.logsumexp(a, 1), x, grad=False))
    _assert_same(*_both(lambda lib, a: a.logsumexp(dim=1, keepdim=True), x, grad=False))


def test_cross_entropy_with_every_target_ignored_has_zero_gradients():
    logits = np.random.default_rng(0).standard_normal((3, 4))
    for targets in ([-100] * 3, [1, -100, -100], [5, 5, 5]):
        ignore = 5 if targets[0] == 5 else -100
        _assert_same(*_both(lambda lib, a, t: lib.nn.functional.cross_entropy(
            a, t, ignore_index=ignore), logits, np.array(targets)))


@pytest.mark.parametrize("shape", [(5,), (2, 3)])
def test_std_and_var_of_a_constant_have_zero_gradient(shape):
    x = np.full(shape, 3.0)
    for fn in (lambda lib, a: a.std(), lambda lib, a: a.std(-1), lambda lib, a: a.var(),
               lambda lib, a: a.std(0, correction=0)):
        _assert_same(*_both(fn, x))


HALF_REDUCTIONS = {
    "sum": lambda lib, a: a.sum(), "mean": lambda lib, a: a.mean(),
    "mean_dim": lambda lib, a: a.mean(-1), "var": lambda lib, a: a.var(),
    "std": lambda lib, a: a.std(-1), "norm": lambda lib, a: a.norm(),
    "norm_dim": lambda lib, a: a.norm(dim=-1), "logsumexp": lambda lib, a: a.logsumexp(-1),
    "softmax": lambda lib, a: lib.softmax(a / 100, -1),
    "log_softmax": lambda lib, a: lib.log_softmax(a / 100, -1),
    "mse_loss": lambda lib, a: lib.nn.functional.mse_loss(a, lib.zeros_like(a)),
    "l1_loss": lambda lib, a: lib.nn.functional.l1_loss(a, lib.zeros_like(a)),
    "smooth_l1_loss": lambda lib, a: lib.nn.functional.smooth_l1_loss(a, lib.zeros_like(a)),
    "amax": lambda lib, a: a.amax(-1), "cumsum": lambda lib, a: a.cumsum(-1)[..., -1],
    "prod": lambda lib, a: (a / 100 + 0.9995).prod(-1),
    "layer_norm": lambda lib, a: lib.nn.functional.layer_norm(a, (a.shape[-1],)),
    "batch_norm": lambda lib, a: lib.nn.functional.batch_norm(a, None, None, training=True),
    "cross_entropy": lambda lib, a: lib.nn.functional.cross_entropy(
        a / 10, lib.zeros(a.shape[0], dtype=lib.int64)),
    "bce_with_logits": lambda lib, a: lib.nn.functional.binary_cross_entropy_with_logits(
        a / 100, lib.ones_like(a)),
    "matmul": lambda lib, a: a @ a.T,
}


@pytest.mark.parametrize("name", sorted(HALF_REDUCTIONS))
@pytest.mark.parametrize("value", [100.0, 3.0])
def test_half_precision_reductions_accumulate_in_float32(name, value):
    x = np.full((4, 1000), value, dtype=np.float16)
    x[:, ::7] += np.float16(1)
    ours, theirs = _both(HALF_REDUCTIONS[name], x, grad=False)
    _assert_same(ours, theirs, rtol=1e-3)


def test_load_state_dict_returns_named_missing_and_unexpected_keys():
    result = nn.Linear(2, 2).load_state_dict({"weight": np.zeros((2, 2)), "extra": 1},
                                             strict=False)
    expected = torch.nn.Linear(2, 2).load_state_dict(
        {"weight": torch.zeros(2, 2), "extra": torch.tensor(1)}, strict=False)
    assert result.missing_keys == expected.missing_keys == ["bias"]
    assert result.unexpected_keys == expected.unexpected_keys == ["extra"]
    assert result == (["bias"], ["extra"])
    assert repr(nn.Linear(2, 2).load_state_dict(nn.Linear(2, 2).state_dict())) == \
        "<All keys matched successfully>"


def _registry_outcome(lib, action):
    """Run ``action`` on a module holding a parameter, a buffer and a child: what each
    registry holds afterwards, or the error raised."""

    class Holder(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = lib.nn.Parameter(lib.ones(2))
            self.register_buffer("steps", lib.tensor(0))
            self.child = lib.nn.Linear(2, 2)

    m = Holder()
    try:
        action(lib, m)
    except Exception as error:  # the kind of error is what is compared
        return type(error).__name__
    state = sorted(m.state_dict())
    return ([n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()],
            [n for n, _ in m.named_children()], state,
            {k: getattr(m, k) is None for k in ("weight", "steps", "child")
             if hasattr(m, k)})


REGISTRY_ACTIONS = {
    "buffer +=": lambda lib, m: setattr(m, "steps", m.steps + 1),
    "buffer in place": lambda lib, m: m.steps.add_(1),
    "buffer = tensor": lambda lib, m: setattr(m, "steps", lib.zeros(3)),
    "buffer = None": lambda lib, m: setattr(m, "steps", None),
    "buffer = int": lambda lib, m: setattr(m, "steps", 3),
    "buffer = Parameter": lambda lib, m: setattr(m, "steps", lib.nn.Parameter(lib.ones(1))),
    "del buffer": lambda lib, m: delattr(m, "steps"),
    "parameter = tensor": lambda lib, m: setattr(m, "weight", lib.zeros(2)),
    "parameter = None": lambda lib, m: setattr(m, "weight", None),
    "parameter = Parameter": lambda lib, m: setattr(m, "weight", lib.nn.Parameter(lib.ones(3))),
    "parameter = Module": lambda lib, m: setattr(m, "weight", lib.nn.ReLU()),
    "del parameter": lambda lib, m: delattr(m, "weight"),
    "child = None": lambda lib, m: setattr(m, "child", None),
    "child = tensor": lambda lib, m: setattr(m, "child", lib.zeros(1)),
    "child = Parameter": lambda lib, m: setattr(m, "child", lib.nn.Parameter(lib.ones(1))),
    "del child": lambda lib, m: delattr(m, "child"),
    "register existing attribute": lambda lib, m: m.register_buffer("training", lib.ones(1)),
    "register dotted name": lambda lib, m: m.register_parameter("a.b", None),
    "register non-tensor buffer": lambda lib, m: m.register_buffer("x", 3),
    "register tensor as parameter": lambda lib, m: m.register_parameter("x", lib.ones(1)),
}


@pytest.mark.parametrize("action", sorted(REGISTRY_ACTIONS))
def test_assigning_to_registered_names_behaves_as_pytorch(action):
    ours = _registry_outcome(pargraph, REGISTRY_ACTIONS[action])
    theirs = _registry_outcome(torch, REGISTRY_ACTIONS[action])
    assert ours == theirs


INDEX_OPS = {  # op: (function of the library and an index tensor, size of the indexed dim)
    "Embedding": (lambda lib, i: lib.nn.Embedding.from_pretrained(
        lib.arange(10.0).reshape(5, 2))(i), 5),
    "F.embedding": (lambda lib, i: lib.nn.functional.embedding(i, lib.ones(5, 2)), 5),
    "gather": (lambda lib, i: lib.ones(2, 5).gather(1, i.reshape(1, -1)), 5),
    "index_select": (lambda lib, i: lib.ones(5, 2).index_select(0, i), 5),
    "scatter": (lambda lib, i: lib.zeros(5).scatter(0, i, lib.ones(i.shape)), 5),
    "scatter value": (lambda lib, i: lib.zeros(5).scatter(0, i, 2.0), 5),
    "scatter_add": (lambda lib, i: lib.zeros(5).scatter_add(0, i, lib.ones(i.shape)), 5),
    "one_hot": (lambda lib, i: lib.nn.functional.one_hot(i, 5), 5),
    "nll_loss": (lambda lib, i: lib.nn.functional.nll_loss(lib.zeros(i.shape[0], 5), i), 5),
    "cross_entropy": (lambda lib, i: lib.nn.functional.cross_entropy(
        lib.zeros(i.shape[0], 5), i, weight=lib.ones(5)), 5),
}


def _error_of(run):
    try:
        run()
    except (IndexError, RuntimeError, ValueError) as error:
        return error
    return None


@pytest.mark.parametrize("name", sorted(INDEX_OPS))
@pytest.mark.parametrize("bad", [-1, -6, 5, 7])
def test_index_taking_ops_refuse_what_pytorch_refuses(name, bad):
    fn, size = INDEX_OPS[name]
    values = [0, bad, 1]
    theirs = _error_of(lambda: fn(torch, torch.tensor(values)))
    assert theirs is not None

    def same(ours):  # nll_loss words its message its own way, naming the classes too
        return type(ours) is type(theirs) and (str(theirs) in str(ours) or (
            name in ("nll_loss", "cross_entropy") and f"target {bad} is out of" in str(ours)))

    # A constant index is checked before anything runs.
    ours = _error_of(lambda: fn(pargraph, pargraph.tensor(values)).sum().item())
    assert same(ours), (ours, theirs)
    # A computed one in the task that reads it, naming the line that recorded the op.
    computed = pargraph.tensor(values) * 1
    ours = _error_of(lambda: fn(pargraph, computed).sum().item())
    assert same(ours), (ours, theirs)
    assert "test_against_pytorch.py" in str(ours)
    # Indices in range still work, and equal PyTorch's.
    good = [0, size - 1, 1]
    np.testing.assert_array_equal(fn(pargraph, pargraph.tensor(good) * 1).detach().numpy(),
                                  fn(torch, torch.tensor(good)).detach().numpy())


@pytest.mark.parametrize("data", [[2**63], [-2**63 - 1], 2**63, [[1], [2**64]], [1, 2**63]])
def test_integers_beyond_int64_are_refused(data):
    with pytest.raises(ValueError, match="Overflow"):
        torch.tensor(data)
    with pytest.raises(ValueError, match="Overflow"):
        pargraph.tensor(data)
    assert pargraph.tensor([2**63 - 1, -2**63]).tolist() == [2**63 - 1, -2**63]
    assert pargraph.tensor([1.5, 2**63]).dtype == np.float32
    with pytest.raises(RuntimeError, match="without overflow"):
        pargraph.tensor([2**40], dtype=pargraph.int32)


@pytest.mark.parametrize("make", [
    lambda lib: lib.full((2,), 2**63), lambda lib: lib.full((2,), -2**63 - 1, dtype=lib.int64),
    lambda lib: lib.arange(2**63, 2**63 + 2), lambda lib: lib.arange(-2**63 - 2, -2**63),
    lambda lib: lib.zeros(2, dtype=lib.int64).fill_(2**63),
    lambda lib: lib.full((2,), 2**31, dtype=lib.int32),
])
def test_factories_refuse_integers_their_dtype_cannot_hold(make):
    # numpy would wrap arange's bounds around and raise its own OverflowError for full and
    # fill_. (PyTorch words a negative value beyond int64 as an OverflowError of its own.)
    with pytest.raises((RuntimeError, OverflowError)):
        make(torch)
    with pytest.raises(RuntimeError, match="without overflow"):
        make(pargraph)


SATURATING = {  # losses and the functions under them, at logits far from 0
    "bce_with_logits": lambda lib, a, t: lib.nn.functional.binary_cross_entropy_with_logits(
        a, t, reduction="none"),
    "cross_entropy": lambda lib, a, t: lib.nn.functional.cross_entropy(
        a.reshape(2, -1), lib.tensor([0, 2])),
    "cross_entropy_soft": lambda lib, a, t: lib.nn.functional.cross_entropy(
        a.reshape(2, -1), lib.softmax(t.reshape(2, -1), 1)),
    "cross_entropy_smoothed": lambda lib, a, t: lib.nn.functional.cross_entropy(
        a.reshape(2, -1), lib.tensor([1, 0]), label_smoothing=0.1),
    "nll_of_log_softmax": lambda lib, a, t: lib.nn.functional.nll_loss(
        lib.log_softmax(a.reshape(2, -1), 1), lib.tensor([2, 1])),
    "mse": lambda lib, a, t: lib.nn.functional.mse_loss(a, t),
    "l1": lambda lib, a, t: lib.nn.functional.l1_loss(a, t),
    "smooth_l1": lambda lib, a, t: lib.nn.functional.smooth_l1_loss(a, t),
    "softplus": lambda lib, a, t: lib.nn.functional.softplus(a),
    "logsumexp": lambda lib, a, t: a.logsumexp(0),
    "sigmoid": lambda lib, a, t: a.sigmoid(),
    "tanh": lambda lib, a, t: a.tanh(),
    "softmax": lambda lib, a, t: lib.softmax(a, 0) * t,
    "log_softmax": lambda lib, a, t: lib.log_softmax(a, 0) * t,
}


@pytest.mark.parametrize("name", sorted(SATURATING))
@pytest.mark.parametrize("scale", [1e2, 1e4, 1e30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_losses_at_saturation_equal_pytorchs(name, scale, dtype):
    logits = (np.array([1.0, -1.0, 0.005, -0.5, 2.0, -3.0]) * scale).astype(dtype)
    targets = np.array([0.0, 1.0, 1.0, 0.0, 0.25, 1.0], dtype=dtype)
    # atol: PyTorch's vectorized exp flushes results below float32's normal range to 0
    # (sigmoid(-100)), numpy keeps them (3.8e-44).
    _assert_same(*_both(lambda lib, a, t: SATURATING[name](lib, a, t), logits, targets,
                        grad_of=1), rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "__iadd__", "__imul__"])
def test_in_place_ops_cast_their_result_to_the_tensor_type_as_pytorch_does(op):
    """An in-place op writes any result type into its tensor (float64 into float32, int64
    into int32) except floating point into integer and non-bool into bool, where PyTorch
    raises; bool subtraction raises too."""
    names = ["bool", "int32", "int64", "float16", "float32", "float64"]
    for mine in names:
        for theirs in names:
            values = np.array([1, 0, 3]) if mine == "bool" or theirs == "bool" else \
                np.array([1, 2, 3])
            ours_x = pargraph.tensor(values.astype(mine))
            ours_y = pargraph.tensor(np.array([2, 1, 2]).astype(theirs))
            torch_x = torch.tensor(values.astype(mine))
            torch_y = torch.tensor(np.array([2, 1, 2]).astype(theirs))
            try:
                expected = getattr(torch_x, op)(torch_y)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    getattr(ours_x, op)(ours_y)
                continue
            found = getattr(ours_x, op)(ours_y)
            assert found is ours_x
            assert found.dtype == getattr(pargraph, str(expected.dtype).split(".")[-1])
            np.testing.assert_allclose(found.numpy(), expected.numpy(), rtol=1e-3,
                                       err_msg=f"{mine}.{op}({theirs})")


@pytest.mark.parametrize("left, right", [("mask", "mask"), ("mask", "ints"), ("ints", "mask"),
                                         ("mask", True), (1.0, "mask"), ("floats", False)])
def test_subtracting_bools_raises_pytorchs_error_when_recorded(left, right):
    def make(library, v):
        values = {"mask": [True, False], "ints": [1, 2], "floats": [1.0, 2.0]}
        return library.tensor(values[v]) if isinstance(v, str) else v

    with pytest.raises(RuntimeError) as expected:
        make(torch, left) - make(torch, right)
    with pytest.raises(RuntimeError) as found:
        make(pargraph, left) - make(pargraph, right)  # raises here, not at .item()
    assert str(expected.value) in str(found.value)


def test_leaf_hooks_outlive_optimizer_steps_and_post_accumulate_hooks_step_in_backward():
    """A parameter's ``register_hook`` applies after its updates, a handle removes its hook
    only, and ``register_post_accumulate_grad_hook`` runs an optimizer per parameter during
    the backward pass (PyTorch's optimizer-in-backward recipe), as in PyTorch."""
    def run(library):
        library.manual_seed(0)
        model = library.nn.Sequential(library.nn.Linear(3, 4), library.nn.ReLU(),
                                      library.nn.Linear(4, 1))
        with library.no_grad():
            for p in model.parameters():
                p.copy_(library.arange(p.numel(), dtype=library.float32).reshape(p.shape)
                        * 0.1 - 0.3)
        optimizers = {p: library.optim.Adam([p], lr=0.01) for p in model.parameters()}
        seen = []

        def step_in_backward(p):
            seen.append(p.grad.detach().numpy().copy())
            optimizers[p].step()
            optimizers[p].zero_grad()

        handles = [p.register_post_accumulate_grad_hook(step_in_backward)
                   for p in model.parameters()]
        x = library.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
        for _ in range(3):
            model(x).pow(2).sum().backward()
        handles[0].remove()
        model(x).pow(2).sum().backward()
        grads = [model[0].weight.grad.numpy().copy()]
        p = library.nn.Parameter(library.ones(2))
        p.register_hook(lambda g: g * 10)
        opt = library.optim.SGD([p], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            (p * 3).sum().backward()
            grads.append(p.grad.numpy().copy())
            opt.step()
        first = p.register_hook(lambda g: g + 1)
        p.register_hook(lambda g: g * 2)
        first.remove()
        opt.zero_grad()
        (p * 3).sum().backward()
        grads.append(p.grad.numpy().copy())
        return seen, [p.detach().numpy() for p in model.parameters()], grads

    ours, theirs = run(pargraph), run(torch)
    for mine, expected in zip(ours, theirs):
        assert len(mine) == len(expected)
        for a, b in zip(mine, expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (pargraph.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(print)


def test_buffers_assigned_as_nn_buffer_register_as_pytorchs():
    def run(library):
        kept = library.nn.Buffer(library.ones(2), persistent=False)

        class Counter(library.nn.Module):
            def __init__(self):
                super().__init__()
                self.count = library.nn.Buffer(library.zeros(2))
                self.scale = kept

            def forward(self, x):
                self.count += x
                return self.count * self.scale

        m = Counter()
        m(library.ones(2))
        return (list(m.state_dict()), [name for name, _ in m.named_buffers()],
                m.count.tolist(), str(m.double().count.dtype).split(".")[-1],
                library.nn.Buffer(library.ones(1, requires_grad=True)).requires_grad)

    assert run(pargraph) == run(torch)


@pytest.mark.parametrize("call", [
    lambda t: t.ones(2, 3).sum_to_size(1, 3), lambda t: t.ones(2, 3).sum_to_size((2, 1)),
    lambda t: t.ones(2, 3).sum_to_size(3), lambda t: t.ones(2, 3).sum_to_size(4),
    lambda t: t.ones(2, 3).allclose(t.ones(2, 3) + 1e-9),
    lambda t: t.tensor([0.0, 1.0]).bernoulli(),
    lambda t: t.tensor([-1.0, 0.2, 3.0]).hardshrink(),
    lambda t: t.tensor([[-1.0, 2.0]]).prelu(t.tensor([0.25])),
    lambda t: t.tensor([1.0, 2.0, 3.0]).cumprod_(0),
    lambda t: t.tensor([[3.0, 4.0], [1.0, 0.0]]).renorm_(2, 0, 1.0),
    lambda t: t.tensor([1.0, 2.0]).polygamma_(1), lambda t: t.tensor([2.0, 3.0]).mvlgamma_(2),
    lambda t: t.tensor([1.0, 2.0]).i0_(),
    lambda t: t.tensor([1.0, 2.0]).nextafter_(t.tensor([2.0, 1.0])),
    lambda t: t.arange(5).split_with_sizes([2, 3])[1],
    lambda t: (t.ones(1).get_device(), t.ones(1).is_pinned(), t.ones(1).is_conj()),
    lambda t: t.ones(1).pin_memory(),
    lambda t: t.nn.functional.pdist(t.tensor([[0.0, 1.0], [2.0, 3.0], [1.0, -1.0]])),
    lambda t: t.nn.functional.channel_shuffle(t.arange(8.0).reshape(1, 4, 2), 2),
])
def test_more_tensor_methods_behave_as_pytorchs(call):
    def outcome(library):
        try:
            found = call(library)
        except RuntimeError as error:
            return "raises", str(error)
        return "gives", found.tolist() if hasattr(found, "tolist") else found

    (kind, ours), (expected_kind, theirs) = outcome(pargraph), outcome(torch)
    assert kind == expected_kind
    if kind == "raises":
        assert ours == theirs
    elif isinstance(theirs, list):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    else:
        assert ours == theirs


@pytest.mark.parametrize("enabled", [True, False])
def test_fork_rng_puts_the_generator_back_as_pytorchs(enabled):
    def draws(library):
        library.manual_seed(3)
        with library.random.fork_rng(enabled=enabled):
            inside = library.rand(4)
        after = library.rand(2)
        return (library.random.initial_seed(), library.equal(inside[:2], after),
                library.random.get_rng_state().shape[0] > 0)

    ours, theirs = draws(pargraph), draws(torch)
    assert ours[:2] == theirs[:2] and ours[2] and theirs[2]


def test_printed_models_read_as_pytorchs():
    def printed(library):
        nn = library.nn
        return [repr(m) for m in (
            nn.MSELoss(reduction="sum"), nn.CrossEntropyLoss(label_smoothing=0.1),
            nn.ConstantPad1d(2, 3.5), nn.ZeroPad2d(1), nn.LogSoftmax(dim=1),
            nn.MultiheadAttention(8, 2, batch_first=True),
            nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                          nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1, ceil_mode=True),
                          nn.Flatten(), nn.Dropout(0.3), nn.Linear(8, 2, bias=False)),
            nn.LSTM(4, 8, num_layers=2, batch_first=True, bidirectional=True),
            nn.TransformerEncoderLayer(8, 2, 16, batch_first=True))]

    assert printed(pargraph) == printed(torch)


def test_cumsum_dtype_membership_and_reshape_errors_as_pytorchs():
    def run(library):
        x = library.tensor([1, 2, 3])
        with pytest.raises(RuntimeError) as bad_shape:
            library.arange(24.0).view(5, -1)
        with pytest.raises(RuntimeError) as bad_element:
            "a" in x  # noqa: B015
        return (str(library.cumsum(x, 0, dtype=library.float64).dtype).split(".")[-1],
                x.cumsum(0, dtype=library.float32).tolist(), 2 in x, 4.0 in x,
                library.tensor(3) in x, str(bad_shape.value).split(": ")[-1],
                str(bad_element.value))

    assert run(pargraph) == run(torch)
