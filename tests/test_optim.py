"""optim: each optimizer's update against its formula in numpy, state, schedulers, errors."""

import math

import dask
import numpy as np
import pytest

import pargraph
from pargraph import optim
from pargraph.engine import execution
from pargraph.optim import lr_scheduler

R = np.random.default_rng(11)
GRADS = [R.standard_normal(3) for _ in range(3)]
START = R.standard_normal(3)


def run(make_opt, steps=3):
    """Apply the fixed gradients GRADS to a parameter starting at START; return its values."""
    p = pargraph.tensor(START.copy(), requires_grad=True)
    opt = make_opt([p])
    values = []
    for g in GRADS[:steps]:
        opt.zero_grad()
        (p * pargraph.tensor(g)).sum().backward()  # d/dp = g
        opt.step()
        values.append(p.detach().numpy().copy())
    return values, opt, p


def sgd_reference(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p, buf, out = START.copy(), None, []
    for g in GRADS:
        d = g + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
        out.append(p)
    return out


def adam_reference(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                   decoupled=False):
    p, m, v, v_max, out = START.copy(), 0.0, 0.0, 0.0, []
    for step, g in enumerate(GRADS, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        v_max = np.maximum(v_max, v) if amsgrad else v
        denom = np.sqrt(v_max) / math.sqrt(1 - betas[1] ** step) + eps
        p = p - lr / (1 - betas[0] ** step) * m / denom
        out.append(p)
    return out


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.1, momentum=0.9, dampening=0.3),
    dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.05, weight_decay=0.1, momentum=0.5),
])
def test_sgd_matches_formula(kwargs):
    values, *_ = run(lambda ps: optim.SGD(ps, **kwargs))
    np.testing.assert_allclose(values, sgd_reference(**kwargs), rtol=1e-12)


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1), dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6), dict(lr=0.1, weight_decay=0.2),
    dict(lr=0.1, amsgrad=True),
])
def test_adam_matches_formula(kwargs):
    values, *_ = run(lambda ps: optim.Adam(ps, **kwargs))
    np.testing.assert_allclose(values, adam_reference(**kwargs), rtol=1e-12)


@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.1, weight_decay=0.3, amsgrad=True)])
def test_adamw_matches_formula(kwargs):
    values, *_ = run(lambda ps: optim.AdamW(ps, **kwargs))
    reference = adam_reference(decoupled=True, **{"weight_decay": 0.01, **kwargs})
    np.testing.assert_allclose(values, reference, rtol=1e-12)


def test_step_skips_parameters_without_grad_and_updates_in_one_run(record_runs):
    a = pargraph.ones(2, requires_grad=True)
    b = pargraph.ones(2, requires_grad=True)
    c = pargraph.ones(2, requires_grad=True)
    opt = optim.SGD([a, b, c], lr=0.5, momentum=0.9)
    (a.sum() + (b * 2).sum()).backward()
    runs = record_runs
    runs.clear()  # only the step's own runs
    opt.step()
    assert len(runs) == 1 and any(k.startswith("sgd_update-") for k in runs[0])
    assert a.tolist() == [0.5, 0.5] and b.tolist() == [0.0, 0.0] and c.tolist() == [1.0, 1.0]
    assert a.is_leaf and a.requires_grad and c not in opt.state


def test_a_failed_step_changes_nothing(monkeypatch):
    p = pargraph.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    before_param = p.detach().numpy().copy()
    before_state = {k: (v.numpy().copy() if isinstance(v, pargraph.Tensor) else v)
                    for k, v in opt.state[p].items()}
    (p * p).sum().backward()

    def failing_run(lowered, keys, get):
        raise MemoryError("worker ran out of memory")

    monkeypatch.setattr(execution, "execute", failing_run)
    with pytest.raises(MemoryError):
        opt.step()
    monkeypatch.undo()
    np.testing.assert_array_equal(p.detach().numpy(), before_param)
    for key, value in opt.state[p].items():
        np.testing.assert_array_equal(np.asarray(value), before_state[key])


def test_zero_grad_set_to_none():
    p = pargraph.ones(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    p.sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_round_trip_continues_identically():
    uninterrupted, *_ = run(lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True), steps=3)
    _, opt, p = run(lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True), steps=1)
    saved_state, saved_param = opt.state_dict(), p.detach().numpy().copy()
    q = pargraph.tensor(saved_param, requires_grad=True)
    resumed = optim.Adam([q], lr=0.5, amsgrad=True)
    resumed.load_state_dict(saved_state)
    assert resumed.param_groups[0]["lr"] == 0.1
    for g in GRADS[1:]:
        resumed.zero_grad()
        (q * pargraph.tensor(g)).sum().backward()
        resumed.step()
    np.testing.assert_allclose(q.detach().numpy(), uninterrupted[-1], rtol=1e-12)


def test_parameter_groups_have_their_own_hyperparameters():
    a = pargraph.ones(1, requires_grad=True)
    b = pargraph.ones(1, requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    (a + b).sum().backward()
    opt.step()
    assert a.item() == pytest.approx(0.9) and b.item() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_optimizer_input_errors():
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    leaf = pargraph.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.Adam([leaf * 2])
    with pytest.raises(ValueError, match="does not require gradients"):
        optim.SGD([pargraph.ones(2)], lr=0.1)
    assert optim.SGD([leaf]).defaults["lr"] == 1e-3  # PyTorch's default since 2.x

    class Custom(optim.Optimizer):  # a user's optimizer, as in PyTorch
        def __init__(self, params, lr=optim.optimizer.required):
            super().__init__(params, {"lr": lr})

    with pytest.raises(ValueError, match="required optimization parameter lr"):
        Custom([leaf])


def test_step_lr_and_cosine_annealing():
    opt = optim.SGD([pargraph.ones(1, requires_grad=True)], lr=1.0)
    step = lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    lrs = []
    for _ in range(7):
        lrs.append(step.get_last_lr()[0])
        step.step()
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]
    opt = optim.SGD([pargraph.ones(1, requires_grad=True)], lr=0.1)
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.01)
    values = []
    for _ in range(11):
        values.append(opt.param_groups[0]["lr"])
        cosine.step()
    expected = [0.01 + 0.09 * (1 + math.cos(math.pi * e / 10)) / 2 for e in range(11)]
    np.testing.assert_allclose(values, expected)
    restored = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    restored.load_state_dict(cosine.state_dict())
    assert restored.last_epoch == cosine.last_epoch


def _reference(update, steps=3):
    """Run ``update(p, g, state, t)`` (numpy, torch.optim's documented algorithm) on GRADS."""
    p, state, out = START.copy(), {}, []
    for t, g in enumerate(GRADS[:steps], start=1):
        p = update(p, g.copy(), state, t)
        out.append(p.copy())
    return out


def rmsprop_reference(lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                      centered=False):
    def update(p, g, s, t):
        g = g + weight_decay * p
        s["v"] = alpha * s.get("v", 0.0) + (1 - alpha) * g * g
        v = s["v"]
        if centered:
            s["ga"] = alpha * s.get("ga", 0.0) + (1 - alpha) * g
            v = v - s["ga"] ** 2
        avg = np.sqrt(v) + eps
        if momentum:
            s["b"] = momentum * s.get("b", 0.0) + g / avg
            return p - lr * s["b"]
        return p - lr * g / avg
    return _reference(update)


def adagrad_reference(lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                      eps=1e-10):
    def update(p, g, s, t):
        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s["sum"] = s.get("sum", initial_accumulator_value) + g * g
        return p - clr * g / (np.sqrt(s["sum"]) + eps)
    return _reference(update)


def adadelta_reference(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    def update(p, g, s, t):
        g = g + weight_decay * p
        s["v"] = rho * s.get("v", 0.0) + (1 - rho) * g * g
        delta = np.sqrt(s.get("u", 0.0) + eps) / np.sqrt(s["v"] + eps) * g
        s["u"] = rho * s.get("u", 0.0) + (1 - rho) * delta * delta
        return p - lr * delta
    return _reference(update)


@pytest.mark.parametrize("make, reference", [
    (lambda ps: optim.RMSprop(ps, lr=0.01), lambda: rmsprop_reference(0.01)),
    (lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True, weight_decay=0.1),
     lambda: rmsprop_reference(0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    (lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.5, initial_accumulator_value=0.3),
     lambda: adagrad_reference(0.1, lr_decay=0.5, initial_accumulator_value=0.3)),
    (lambda ps: optim.Adagrad(ps, lr=0.1, weight_decay=0.2),
     lambda: adagrad_reference(0.1, weight_decay=0.2)),
    (lambda ps: optim.Adadelta(ps), lambda: adadelta_reference()),
    (lambda ps: optim.Adadelta(ps, lr=0.5, rho=0.8, weight_decay=0.1),
     lambda: adadelta_reference(0.5, rho=0.8, weight_decay=0.1)),
])
def test_rmsprop_adagrad_adadelta_match_their_formulas(make, reference):
    values, opt, p = run(make)
    np.testing.assert_allclose(values, reference(), rtol=1e-10)
    assert int(opt.state_dict()["state"][0]["step"]) == 3


def test_multistep_lambda_and_onecycle_schedules():
    def sgd(lr=1.0, **kw):
        return optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=lr, **kw)

    multi = lr_scheduler.MultiStepLR(sgd(), milestones=[3, 1], gamma=0.5)
    seen = [multi.get_last_lr()[0]]
    for _ in range(4):
        multi.step()
        seen.append(multi.get_last_lr()[0])
    assert seen == [1.0, 0.5, 0.5, 0.25, 0.25]
    opt = sgd()
    opt.add_param_group({"params": [pargraph.zeros(1, requires_grad=True)], "lr": 2.0})
    lam = lr_scheduler.LambdaLR(opt, [lambda e: 1 / (e + 1), lambda e: 0.9 ** e])
    lam.step()
    assert lam.get_last_lr() == [0.5, 2.0 * 0.9]
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])

    # OneCycle, by the formulas of Smith's 1cycle policy as PyTorch documents them
    opt = sgd(momentum=0.9)
    cycle = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    lrs, moms = [], []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        if len(lrs) < 10:
            cycle.step()

    def cos(start, end, pct):
        return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)

    initial, low, up_end = 1.0 / 25, 1.0 / 25 / 1e4, 0.3 * 10 - 1
    expected = [cos(initial, 1.0, k / up_end) if k <= up_end else
                cos(1.0, low, (k - up_end) / (9 - up_end)) for k in range(10)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    assert moms[0] == pytest.approx(0.95) and min(moms) == pytest.approx(0.85)
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        cycle.step()
        cycle.step()
    adam = optim.Adam([pargraph.zeros(1, requires_grad=True)], lr=0.1)
    lr_scheduler.OneCycleLR(adam, max_lr=0.1, epochs=2, steps_per_epoch=5)
    assert adam.param_groups[0]["betas"][0] == pytest.approx(0.95)


def test_reduce_lr_on_plateau_waits_patience_then_cools_down():
    opt = optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0)
    plateau = lr_scheduler.ReduceLROnPlateau(opt, patience=2, factor=0.5, cooldown=1,
                                             min_lr=0.2)
    lrs = []
    for loss in [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]:
        plateau.step(pargraph.tensor(loss))
        lrs.append(plateau.get_last_lr()[0])
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25]
    for _ in range(10):
        plateau.step(0.9)
    assert plateau.get_last_lr() == [0.2]  # never below min_lr
    maximize = lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=0)
    maximize.step(1.0)
    maximize.step(2.0)
    assert opt.param_groups[0]["lr"] == 0.2


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.1)), ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    ("Adagrad", dict(lr=0.1)), ("Adadelta", dict(lr=1.0)), ("Adamax", dict(lr=0.1)),
    ("NAdam", dict(lr=0.1)), ("RAdam", dict(lr=0.1)), ("ASGD", dict(lr=0.1)),
    ("Rprop", dict(lr=0.1)),
])
@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_step_updates_the_state_tensors_a_program_holds(name, kwargs, scheduler):
    """As in PyTorch, a step changes the optimizer's state tensors in place: a program that
    took ``opt.state[p]["exp_avg"]`` (a monitor, a custom schedule) reads the new moments
    through it, and ``opt.state[p]`` stays the same dict."""
    torch = pytest.importorskip("torch")  # the test extra installs the CPU build
    ours = pargraph.tensor(START.copy(), requires_grad=True)
    theirs = torch.tensor(START.copy(), requires_grad=True)
    opts = [getattr(optim, name)([ours], **kwargs), getattr(torch.optim, name)([theirs], **kwargs)]
    held = []
    with dask.config.set(scheduler=scheduler):
        for k, g in enumerate(GRADS):
            for opt, p, lib in zip(opts, (ours, theirs), (pargraph, torch)):
                opt.zero_grad()
                (p * lib.tensor(g)).sum().backward()
                opt.step()
            if k == 0:
                held = [(opt.state[p], dict(opt.state[p])) for opt, p in zip(opts, (ours, theirs))]
        (state, tensors), (torch_state, torch_tensors) = held
        assert opts[0].state[ours] is state and opts[1].state[theirs] is torch_state
        names = sorted(n for n, v in torch_tensors.items() if isinstance(v, torch.Tensor)
                       and v.numel() > 1)
        assert names and names == sorted(n for n, v in tensors.items()
                                         if isinstance(v, pargraph.Tensor) and v.numel() > 1)
        assert len({id(tensors[n]) for n in names}) == len(names)  # a tensor per name
        for n in names:
            assert state[n] is tensors[n]
            np.testing.assert_allclose(tensors[n].numpy(), torch_tensors[n].numpy(), rtol=1e-6,
                                       atol=1e-12, err_msg=n)
