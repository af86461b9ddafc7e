"""NAdam, RAdam, Adamax, Rprop, ASGD and Adafactor against PyTorch: the same parameters after
every step of a small training loop, eager and compiled."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

CASES = [
    ("NAdam", {"lr": 0.05, "weight_decay": 0.01}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.05}), ("RAdam", {"lr": 0.05, "betas": (0.9, 0.5), "weight_decay": 0.1}),
    ("Adamax", {"lr": 0.05, "weight_decay": 0.01}),
    ("Rprop", {"lr": 0.02}), ("ASGD", {"lr": 0.05, "t0": 3, "weight_decay": 0.01}),
    ("Adafactor", {"lr": 0.05}),
    ("Adafactor", {"lr": 0.5, "weight_decay": 0.1, "d": 2.0, "beta2_decay": -0.5,
                   "eps": (1e-20, 1e-3), "maximize": True}),
]


def _train(library, name, options, steps=8, compiled=False):
    rng = np.random.default_rng(0)
    w0, x, y = rng.standard_normal((3, 2)), rng.standard_normal((16, 3)), rng.standard_normal(16)
    w = library.tensor(w0, requires_grad=True)
    opt = getattr(library.optim, name)([w], **options)
    data = library.tensor(x), library.tensor(y)

    def step(x, y):
        opt.zero_grad()
        loss = ((x @ w).sum(1) - y).pow(2).mean() + (x @ w).sin().sum() * 0.1
        loss.backward()
        opt.step()

    run = pargraph.compile(step) if compiled else step
    seen = []
    for _ in range(steps):
        run(*data)
        seen.append(w.detach().numpy().copy())
    return np.array(seen)


@pytest.mark.parametrize("name,options", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_optimizers_follow_pytorch_step_by_step(name, options):
    theirs = _train(torch, name, options)
    # PyTorch keeps NAdam's mu_product, ASGD's eta and mu and uses Rprop's etas as float32
    # scalars even for float64 parameters: 1e-8 apart, relatively, from the exact values.
    rtol = 1e-5 if name in ("NAdam", "Rprop", "ASGD") else 1e-9
    np.testing.assert_allclose(_train(pargraph, name, options), theirs, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "Rprop", "ASGD", "Adafactor"])
def test_compiled_steps_equal_eager_ones(name):
    options = dict(CASES[[c[0] for c in CASES].index(name)][1])
    np.testing.assert_array_equal(_train(pargraph, name, options, compiled=True),
                                  _train(pargraph, name, options))


def test_bad_hyperparameters_raise():
    w = [pargraph.zeros(1, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        pargraph.optim.NAdam(w, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid eta values"):
        pargraph.optim.Rprop(w, etas=(1.5, 1.2))
    for options in (dict(d=0.5), dict(beta2_decay=0.1), dict(eps=(None, -1.0)), dict(lr=-1.0)):
        messages = []
        for library in (pargraph, torch):
            with pytest.raises(ValueError) as raised:
                library.optim.Adafactor([library.zeros(1, requires_grad=True)], **options)
            messages.append(str(raised.value))
        assert messages[0] == messages[1]


# --- LBFGS ----------------------------------------------------------------------------------

LBFGS_A = np.random.default_rng(7).standard_normal((20, 5))
LBFGS_B = np.random.default_rng(8).standard_normal(20)


def _lbfgs_run(lib, line_search, steps=4, fail_at=None):
    w = lib.tensor(np.zeros(5), requires_grad=True)
    v = lib.tensor(np.full(3, 0.5), requires_grad=True)
    opt = lib.optim.LBFGS([w, v], lr=0.8, max_iter=7, history_size=4,
                          line_search_fn=line_search)
    a, b, calls = lib.tensor(LBFGS_A), lib.tensor(LBFGS_B), []

    def closure():
        calls.append(1)
        if fail_at is not None and len(calls) == fail_at:
            raise ValueError("the data ran out")
        opt.zero_grad()
        loss = ((a @ w - b) ** 2).mean() + (v ** 4).sum() + (w.sin() * v.sum()).sum()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    return losses, w, v, opt, closure


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_takes_pytorchs_steps(line_search):
    ours = _lbfgs_run(pargraph, line_search)
    theirs = _lbfgs_run(torch, line_search)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    for a, b in zip(ours[1:3], theirs[1:3]):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                                   atol=1e-14)
    assert ours[3].state_dict()["state"][0]["func_evals"] == \
        theirs[3].state_dict()["state"][0]["func_evals"]
    # The saved state continues the same way.
    again = pargraph.optim.LBFGS([ours[1], ours[2]], lr=0.8, max_iter=7, history_size=4,
                                 line_search_fn=line_search)
    again.load_state_dict(ours[3].state_dict())
    assert again.step(ours[4]).item() == pytest.approx(theirs[3].step(theirs[4]).item(),
                                                      rel=1e-12)


def test_a_failed_lbfgs_step_leaves_everything_as_it_was():
    _, w, v, opt, closure = _lbfgs_run(pargraph, "strong_wolfe", steps=1)
    before = (w.detach().numpy().copy(), v.detach().numpy().copy(),
              opt.state_dict()["state"][0]["n_iter"])
    failing = {"calls": 0}

    def breaks_midway():
        failing["calls"] += 1
        if failing["calls"] == 4:
            raise ValueError("the data ran out")
        return closure()

    with pytest.raises(ValueError, match="ran out"):
        opt.step(breaks_midway)
    np.testing.assert_array_equal(w.detach().numpy(), before[0])
    np.testing.assert_array_equal(v.detach().numpy(), before[1])
    assert opt.state_dict()["state"][0]["n_iter"] == before[2]
    with pytest.raises(RuntimeError, match="requires a closure"):
        opt.step()
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        pargraph.optim.LBFGS([w], line_search_fn="armijo")


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_adafactor_keeps_one_estimate_per_element_of_a_vector_and_factors_the_last_two_dims(
        shape):
    """A vector (and a 0-d parameter) keeps a variance per element; a 3-d parameter a row
    and a column estimate per matrix of its last two dimensions, as PyTorch's."""
    rng = np.random.default_rng(3)
    start, grads = rng.standard_normal(shape), [rng.standard_normal(shape) for _ in range(4)]
    seen = []
    for library in (pargraph, torch):
        w = library.tensor(start.copy(), requires_grad=True)
        opt = library.optim.Adafactor([w], lr=0.1, weight_decay=0.01)
        for g in grads:
            opt.zero_grad()
            (w * library.tensor(g)).sum().backward()
            opt.step()
        seen.append((w.detach().numpy().copy(), {k: np.asarray(v) for k, v in
                                                  opt.state[w].items() if k != "step"}))
    (ours, our_state), (theirs, their_state) = seen
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    assert sorted(our_state) == sorted(their_state)
    for name, value in their_state.items():
        np.testing.assert_allclose(our_state[name], value, rtol=1e-9, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("shape, options", [
    ((4, 3), {}), ((3, 5), {"nesterov": False, "weight_decay": 0.0}),
    ((4, 3), {"adjust_lr_fn": "match_rms_adamw", "momentum": 0.5}),
    ((5, 2), {"adjust_lr_fn": "original", "ns_steps": 3, "eps": 1e-3}),
])
def test_muon_follows_pytorch_step_by_step(shape, options):
    """Muon's Newton-Schulz iterations run in bfloat16, as PyTorch's (each ``addmm`` summed
    in float32 and rounded once): small matrices give PyTorch's parameters exactly."""
    rng = np.random.default_rng(4)
    start, grads = rng.standard_normal(shape).astype(np.float32), \
        [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    seen = []
    for library in (pargraph, torch):
        w = library.tensor(start.copy(), requires_grad=True)
        opt = library.optim.Muon([w], lr=0.02, **options)
        steps = []
        for g in grads:
            opt.zero_grad()
            (w * library.tensor(g)).sum().backward()
            opt.step()
            steps.append(w.detach().numpy().copy())
        seen.append((np.array(steps), opt.state[w]["momentum_buffer"].numpy()))
    np.testing.assert_array_equal(seen[0][1], seen[1][1])
    np.testing.assert_allclose(seen[0][0], seen[1][0], rtol=0, atol=1e-7)


def test_muon_compiled_equals_eager_and_refuses_what_pytorch_refuses():
    options = {"lr": 0.05, "nesterov": True}
    np.testing.assert_array_equal(_train(pargraph, "Muon", options, compiled=True),
                                  _train(pargraph, "Muon", options))
    assert np.abs(_train(pargraph, "Muon", options) - _train(torch, "Muon", options)).max() < 1e-6
    for params, opts in (([(3,)], {}), ([(2, 2)], {"adjust_lr_fn": "other"}),
                         ([(2, 2)], {"momentum": -1.0})):
        messages = []
        for library in (pargraph, torch):
            with pytest.raises(ValueError) as raised:
                library.optim.Muon([library.zeros(*s, requires_grad=True) for s in params],
                                   **opts)
            messages.append(str(raised.value).replace("pargraph.Size", "torch.Size"))
        assert messages[0] == messages[1]


EVERY = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
         "ASGD", "Rprop", "Adafactor"]


@pytest.mark.parametrize("name", EVERY)
def test_optimizers_take_pytorchs_settings_and_ascend_with_maximize(name):
    """Every PyTorch optimizer setting is accepted and kept in the groups with PyTorch's
    default, and ``maximize=True`` ascends as PyTorch's does."""
    def defaults(library):
        return getattr(library.optim, name)([library.ones(2, requires_grad=True)]).defaults

    ours, theirs = defaults(pargraph), defaults(torch)
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():  # of PyTorch's type too: printed groups show 0, not 0.0
        assert (type(ours[key]), ours[key]) == (type(value), value), key
    options = {"lr": 0.05, "maximize": True}
    if "foreach" in theirs:
        options["foreach"] = False
    np.testing.assert_allclose(_train(pargraph, name, options, steps=4),
                               _train(torch, name, options, steps=4), rtol=1e-5, atol=1e-12)
    np.testing.assert_array_equal(_train(pargraph, name, options, steps=4, compiled=True),
                                  _train(pargraph, name, options, steps=4))


def test_optimizer_settings_pytorch_refuses_are_refused():
    w = pargraph.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        pargraph.optim.Adam([w], foreach=True, fused=True)
    with pytest.raises(NotImplementedError, match=r"SGD\(differentiable=True\)"):
        pargraph.optim.SGD([w], differentiable=True)
    opt = pargraph.optim.Adam([w], capturable=True)  # PyTorch refuses CPU tensors at step()
    (w * 2).sum().backward()
    with pytest.raises(AssertionError, match="capturable=True"):
        opt.step()
    assert w.tolist() == [1.0, 1.0] and not opt.state


def test_adam_with_decoupled_weight_decay_is_adamw():
    options = {"lr": 0.05, "weight_decay": 0.1}
    np.testing.assert_array_equal(
        _train(pargraph, "Adam", {**options, "decoupled_weight_decay": True}),
        _train(pargraph, "AdamW", options))
    np.testing.assert_allclose(
        _train(pargraph, "Adam", {**options, "decoupled_weight_decay": True}),
        _train(torch, "Adam", {**options, "decoupled_weight_decay": True}), rtol=1e-9)


def test_optimizers_take_named_parameters_as_pytorch_does():
    def state(library):
        library.manual_seed(0)
        model = library.nn.Sequential(library.nn.Linear(3, 2), library.nn.Linear(2, 1))
        head = list(model.named_parameters())
        opt = library.optim.SGD(head[:2], lr=0.1, momentum=0.9)
        opt.add_param_group({"params": head[2:], "lr": 0.01})
        with pytest.raises(ValueError, match="cannot add param group without names"):
            opt.add_param_group({"params": [library.ones(1, requires_grad=True)]})
        model(library.ones(4, 3)).sum().backward()
        opt.step()
        saved = opt.state_dict()
        return [group["param_names"] for group in saved["param_groups"]], sorted(saved["state"])

    assert state(pargraph) == state(torch)


def test_a_compiled_step_captures_again_when_an_optimizer_setting_changes():
    """``nesterov`` (a choice of formula, not a number read at each call) is a guard."""
    def run(compiled):
        rng = np.random.default_rng(0)
        w = pargraph.tensor(rng.standard_normal(3), requires_grad=True)
        opt = pargraph.optim.SGD([w], lr=0.1, momentum=0.9)

        def step():
            opt.zero_grad()
            (w.sin() * w).sum().backward()
            opt.step()

        fn = pargraph.compile(step) if compiled else step
        for k in range(6):
            opt.param_groups[0]["nesterov"] = k >= 3
            fn()
        return w.detach().numpy(), fn

    eager, _ = run(False)
    compiled, fn = run(True)
    np.testing.assert_array_equal(compiled, eager)
    assert fn.captures == 3  # no state yet, then a momentum buffer, then nesterov


@pytest.mark.parametrize("name", ["Adam", "SGD", "RMSprop"])
def test_a_state_dicts_step_is_pytorchs_tensor_and_loads_back_as_a_count(name):
    options = {"lr": 0.05, "momentum": 0.9} if name != "Adam" else {"lr": 0.05}
    saved = []
    for library in (pargraph, torch):
        w = library.ones(3, requires_grad=True)
        opt = getattr(library.optim, name)([w], **options)
        for _ in range(3):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        saved.append(opt.state_dict())
    ours, theirs = (sd["state"][0] for sd in saved)
    assert sorted(ours) == sorted(theirs)
    if "step" in theirs:
        assert str(ours["step"].dtype).split(".")[-1] == str(theirs["step"].dtype).split(".")[-1]
        assert tuple(ours["step"].shape) == () and float(ours["step"]) == float(theirs["step"])
    # A fresh optimizer loaded from it takes the next step the saved one takes.
    runs = []
    for state in (None, saved[0]):
        w = pargraph.tensor([0.5, 1.0, 2.0], requires_grad=True)
        opt = getattr(pargraph.optim, name)([w], **options)
        opt.load_state_dict(state or saved[0])
        if state is None:
            opt.state_dict()  # the same load, then one more step each
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        runs.append(w.detach().numpy())
        if "step" in theirs:
            assert type(opt.state[w]["step"]) is int and opt.state[w]["step"] == 4
    np.testing.assert_array_equal(runs[0], runs[1])


def test_get_total_norm_and_clip_grads_with_norm_are_pytorchs():
    rng = np.random.default_rng(3)
    values = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    found = []
    for library in (pargraph, torch):
        params = [library.tensor(v, requires_grad=True) for v in values]
        sum((p ** 3).sum() for p in params).backward()
        grads = [p.grad for p in params]
        norms = [float(library.nn.utils.get_total_norm(grads, norm_type=t))
                 for t in (2.0, 1, float("inf"))]
        library.nn.utils.clip_grads_with_norm_(params, 0.5, library.nn.utils.get_total_norm(grads))
        found.append((norms, [p.grad.numpy().copy() for p in params]))
    np.testing.assert_allclose(found[0][0], found[1][0], rtol=1e-12)
    for ours, theirs in zip(found[0][1], found[1][1]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    with pytest.raises(RuntimeError, match="non-finite"):
        pargraph.nn.utils.get_total_norm([pargraph.tensor([float("nan")])],
                                         error_if_nonfinite=True)


def test_an_optimizer_of_the_users_with_its_own_step_trains_as_in_pytorch():
    """A research optimizer written against ``torch.optim.Optimizer``: its own ``step`` under
    ``no_grad``, ``self.state[p]`` empty the first time, in-place updates; and step and
    state-dict hooks around it."""
    def make(library):
        class SignMomentum(library.optim.Optimizer):
            def __init__(self, params, lr=0.05, momentum=0.9):
                super().__init__(params, {"lr": lr, "momentum": momentum})

            @library.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is None:
                            continue
                        state = self.state[p]
                        if len(state) == 0:
                            state["buf"], state["step"] = library.zeros_like(p), 0
                        state["buf"].mul_(group["momentum"]).add_(p.grad)
                        state["step"] += 1
                        p.add_(state["buf"].sign(), alpha=-group["lr"])
        return SignMomentum

    found = []
    for library in (pargraph, torch):
        w = library.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        x = library.tensor([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]])
        opt, seen = make(library)([w]), []
        opt.register_step_pre_hook(lambda o, args, kwargs: seen.append("pre"))
        opt.register_step_post_hook(lambda o, args, kwargs: seen.append("post"))
        opt.register_state_dict_pre_hook(lambda o: seen.append("state_dict"))
        opt.register_load_state_dict_post_hook(lambda o: seen.append("loaded"))
        for _ in range(4):
            opt.zero_grad()
            ((x @ w).tanh() ** 2).sum().backward()
            opt.step()
        state = opt.state_dict()
        opt.load_state_dict(state)
        found.append((w.detach().numpy().tolist(), seen, state["state"][0]["step"],
                      sorted(state["state"][0])))
    np.testing.assert_allclose(found[0][0], found[1][0], rtol=1e-6)
    assert found[0][1:] == found[1][1:]


def test_a_generators_state_puts_its_draws_back_as_pytorchs():
    for library in (pargraph, torch):
        g = library.Generator().manual_seed(3)
        state = g.get_state()
        first = library.rand(4, generator=g)
        assert g.set_state(state) is g
        assert (library.rand(4, generator=g) == first).all()
        assert g.initial_seed() == 3
        assert library.version.cuda is None
        with library.autograd.profiler.record_function("block"):
            assert (library.ones(2) * 2).sum().item() == 4.0
    # PyTorch's class name (torch.compile is not called here: importing dynamo turns off
    # the distributions' argument checks for the rest of the process).
    assert type(pargraph.compile(pargraph.nn.Linear(2, 1))).__name__ == "OptimizedModule"
