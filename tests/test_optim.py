"""optim: each optimizer's update against its formula in numpy, state, schedulers, errors."""

import math

import numpy as np
import pytest

import pargraph
from pargraph import execution, optim
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
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        optim.SGD([leaf])


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
