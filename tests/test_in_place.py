"""A compiled step's replays write big parameters and optimizer state into the arrays they
replace (pargraph.in_place), bit for bit as the eager step computes them, only where nothing
else could see the old array, and never before every other task of the step has succeeded."""

import os
import signal

import dask
import numpy as np
import pytest

import pargraph
from pargraph import nn, ops, optim
from pargraph.nn import functional as F
from tests.test_compiler import OPTIMIZERS, _assert_same, _batches, _compiled_step, _train

#: Every state in place, whatever its size (the test models are small).
EVERY_STATE = {"pargraph.in-place-bytes": 0}


def _written(run) -> int:
    return sum(p.in_place.written for p in run.programs if p.in_place is not None)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_updates_in_place_equal_the_eager_step_bit_for_bit(name, scheduler):
    batches = _batches()
    decay = lambda opt: optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)  # noqa: E731
    with dask.config.set(EVERY_STATE, scheduler=scheduler):
        eager = _train(False, OPTIMIZERS[name], batches, decay)
        compiled = _train(True, OPTIMIZERS[name], batches, decay)
    _assert_same(eager, compiled)
    run = compiled[3]
    # 4 parameters per branch, each with its new value (and moments) written in place at
    # every replay: the updates that make them are not the group tasks'.
    assert run.replays >= 4 and _written(run) >= 8 * run.replays
    for index, state in eager[2].state_dict()["state"].items():
        other = compiled[2].state_dict()["state"][index]
        for key, value in state.items():
            np.testing.assert_array_equal(np.asarray(value), np.asarray(other[key]))


def _adam_run(**config):
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 4))
    opt = optim.Adam(model.parameters(), lr=0.01)
    step = _compiled_step(model, opt)
    x, y = pargraph.randn(8, 256), pargraph.randint(0, 4, (8,))
    with dask.config.set(config):
        for _ in range(3):  # the second call captures with Adam's state
            step(x, y)
    return model, opt, step, (x, y)


def test_a_state_of_a_mebibyte_or_more_keeps_its_array_and_smaller_ones_do_not():
    model, opt, step, batch = _adam_run()
    big, small = model[0].weight, model[2].weight  # 1 MiB and 16 KiB
    arrays = [id(big._node.value), id(opt.state[big]["exp_avg"]._node.value),
              id(small._node.value)]
    before = big.detach().numpy().copy()
    written = _written(step)
    step(*batch)
    assert id(big._node.value) == arrays[0] and not np.array_equal(big.detach().numpy(), before)
    assert id(opt.state[big]["exp_avg"]._node.value) == arrays[1]
    assert id(small._node.value) != arrays[2]
    assert _written(step) == written + 3  # the 1024 x 256 weight and its two moments


def test_none_turns_it_off():
    with dask.config.set({"pargraph.in-place-bytes": None}):
        model, opt, step, batch = _adam_run()
        step(*batch)
    assert all(p.in_place is None for p in step.programs)


@pytest.mark.parametrize("hold", ["numpy", "array", "node"])
def test_an_array_someone_else_holds_gets_a_new_one(hold):
    """What the user kept of the old state (an array from ``numpy()``, or a tensor on the old
    node) keeps the old values, as after an eager step."""
    model, opt, step, batch = _adam_run()
    weight = model[0].weight
    kept = {"numpy": lambda: weight.detach().numpy(),
            "array": lambda: weight._node.value,
            "node": lambda: pargraph.Tensor(weight._node)}[hold]()
    value = (lambda: kept.detach().numpy()) if hold == "node" else (lambda: kept)
    old = value().copy()
    written = _written(step)
    step(*batch)
    np.testing.assert_array_equal(value(), old)
    assert not np.array_equal(weight.detach().numpy(), old)
    assert _written(step) == written + 2  # the moments only


def test_an_error_in_a_task_leaves_every_state_old_and_its_array_untouched():
    model, opt, step, (x, y) = _adam_run()
    weight = model[0].weight
    old = weight.detach().numpy().copy()
    moment = opt.state[weight]["exp_avg"].numpy().copy()
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        step(x, pargraph.tensor([0, 1, 9, 2, 0, 1, 2, 3]))
    np.testing.assert_array_equal(weight._node.value, old)
    np.testing.assert_array_equal(opt.state[weight]["exp_avg"].numpy(), moment)
    step(x, y)
    assert not np.array_equal(weight.detach().numpy(), old)


def test_a_ctrl_c_during_the_updates_waits_for_the_landing(monkeypatch):
    """A real SIGINT while an update writes in place: the step finishes and lands (all new),
    then the KeyboardInterrupt is raised."""
    model, opt, step, batch = _adam_run()
    eager_model, eager_opt, _, _ = _adam_run(**{"pargraph.in-place-bytes": None})
    forward = ops.REGISTRY["adam_step"].forward
    sent = []

    def interrupted(*args, **kwargs):
        if kwargs.get("out") is not None and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        return forward(*args, **kwargs)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        steps = opt.state[model[0].weight]["step"]
        monkeypatch.setattr(ops.REGISTRY["adam_step"], "forward", interrupted)
        with pytest.raises(KeyboardInterrupt):
            step(*batch)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sent and opt.state[model[0].weight]["step"] == steps + 1
    eager_opt.zero_grad()
    F.cross_entropy(eager_model(batch[0]), batch[1]).backward()
    eager_opt.step()
    for mine, theirs in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_array_equal(mine.detach().numpy(), theirs.detach().numpy())


def test_an_update_another_task_reads_stays_a_task():
    """A norm of a weight after the step reads its new value: that weight's updates are
    computed by group tasks, the other parameters' in place, and the run equals the eager
    one."""
    def run(compiled):
        pargraph.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            return model[2].weight.square().sum()

        go = pargraph.compile(step) if compiled else step
        norms = [go(x, y).item() for x, y in _batches(5)]
        return norms, [p.detach().numpy() for p in model.parameters()], go

    with dask.config.set(EVERY_STATE):
        eager = run(False)
        compiled = run(True)
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1], compiled[1]):
        np.testing.assert_array_equal(a, b)
    program = compiled[2].programs[0]
    assert program.in_place is not None
    names = [node.op.name for node in program.in_place.nodes]
    assert sorted(names) == ["momentum_buffer"] * 3 + ["sgd_step"] * 3


def test_a_trace_of_a_replay_has_the_updates_in_place_too():
    model, opt, step, batch = _adam_run(**EVERY_STATE)
    with dask.config.set(EVERY_STATE):
        step(*batch)
        with pargraph.trace() as tr:
            step(*batch)
    program = step.programs[0]
    assert program.in_place is not None
    assert {record.key for record in tr.records.values()} == \
        {node.key for node in program.computed}
    updates = {node.key for node in program.in_place.nodes}
    assert all(tr.records[key].stop > tr.records[key].start for key in updates)


def test_a_replay_needs_one_weight_of_memory_beyond_what_it_holds():
    """Adam's new parameter and moments go into the old arrays: the step's peak above what it
    holds is its temporaries, one weight's worth, where PyTorch's needs two and an eager or
    out-of-place step three."""
    from tests.test_memory import _peak_above_held

    compiled, weight = _peak_above_held(True)
    assert compiled <= 1.3 * weight, compiled / weight


def test_under_anomaly_detection_nothing_is_overwritten():
    """The anomaly checks look at each result and may raise: the updates make new arrays."""
    model, opt, step, batch = _adam_run()
    written = _written(step)
    with pargraph.autograd.detect_anomaly():
        step(*batch)
    assert _written(step) == written
    step(*batch)
    assert _written(step) == written + 3
