"""Every LR scheduler against PyTorch's: the same learning rates (and CyclicLR's momentum)
step by step, alone and combined."""

import warnings

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

CASES = [
    ("ConstantLR", {"factor": 0.25, "total_iters": 3}),
    ("LinearLR", {"start_factor": 0.2, "end_factor": 0.9, "total_iters": 4}),
    ("ExponentialLR", {"gamma": 0.8}),
    ("PolynomialLR", {"total_iters": 6, "power": 2.0}),
    ("MultiplicativeLR", {"lr_lambda": lambda epoch: 0.9 + 0.01 * epoch}),
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.01}),
    ("CyclicLR", {"base_lr": 0.1, "max_lr": 1.0, "step_size_up": 3, "mode": "triangular2"}),
    ("CyclicLR", {"base_lr": 0.1, "max_lr": 1.0, "step_size_up": 2, "step_size_down": 4,
                  "mode": "exp_range", "gamma": 0.9}),
    ("StepLR", {"step_size": 2, "gamma": 0.5}),
]


def _optimizers(momentum=0.9):
    ours = pargraph.optim.SGD([pargraph.zeros(1, requires_grad=True)], lr=1.0,
                              momentum=momentum)
    theirs = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0, momentum=momentum)
    return ours, theirs


def _sequence(scheduler, optimizer, steps=15):
    seen = [(scheduler.get_last_lr()[0], optimizer.param_groups[0]["momentum"])]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        seen.append((scheduler.get_last_lr()[0], optimizer.param_groups[0]["momentum"]))
    return seen


@pytest.mark.parametrize("name,options", CASES, ids=[c[0] for c in CASES])
def test_schedulers_give_pytorchs_rates(name, options):
    ours_opt, theirs_opt = _optimizers()
    ours = getattr(pargraph.optim.lr_scheduler, name)(ours_opt, **options)
    theirs = getattr(torch.optim.lr_scheduler, name)(theirs_opt, **options)
    np.testing.assert_allclose(_sequence(ours, ours_opt), _sequence(theirs, theirs_opt),
                               rtol=1e-12)


def test_sequential_and_chained_schedulers_give_pytorchs_rates():
    results = []
    for library in (pargraph, torch):
        S = library.optim.lr_scheduler
        opt = _optimizers()[0 if library is pargraph else 1]
        warm = S.LinearLR(opt, start_factor=0.1, total_iters=3)
        decay = S.ExponentialLR(opt, gamma=0.7)
        sequential = S.SequentialLR(opt, [warm, decay], milestones=[3])
        first = _sequence(sequential, opt, 8)
        opt = _optimizers()[0 if library is pargraph else 1]
        chained = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
                                      S.ExponentialLR(opt, gamma=0.9)])
        results.append((first, _sequence(chained, opt, 6)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)


def test_bad_arguments_raise_as_pytorch_does():
    opt = _optimizers()[0]
    S = pargraph.optim.lr_scheduler
    with pytest.raises(ValueError, match="between 0 and 1"):
        S.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="Expected positive integer T_0"):
        S.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        S.SequentialLR(opt, [S.ExponentialLR(opt, 0.5)], milestones=[1])
    with pytest.raises(ValueError, match="must support momentum"):
        S.CyclicLR(pargraph.optim.Adagrad([pargraph.zeros(1, requires_grad=True)]), 0.1, 1.0)


def test_a_schedule_stepped_before_its_optimizer_warns_as_pytorchs():
    messages = []
    for library in (pargraph, torch):
        w = library.zeros(1, requires_grad=True)
        opt = library.optim.SGD([w], lr=1.0)
        sched = library.optim.lr_scheduler.StepLR(opt, 1, 0.5)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`") as seen:
            sched.step()
        messages.append(str(seen[0].message))
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()  # once only
        # In the right order, and inside SequentialLR's first schedule: no warning.
        opt = library.optim.SGD([w], lr=1.0)
        S = library.optim.lr_scheduler
        sequential = S.SequentialLR(opt, [S.LinearLR(opt, 0.1, total_iters=2),
                                          S.ExponentialLR(opt, 0.9)], milestones=[2])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt.step()
            sequential.step()
        assert sorted(k for k in sched.state_dict() if k in ("_step_count", "last_epoch")) == \
            ["_step_count", "last_epoch"]
    assert messages[0] == messages[1]
