"""Compiled steps (pargraph.compile): a replayed step equals the eager one bit for bit, its
guards capture again when what it depends on changes, and graph breaks fall back to eager."""

import warnings

import dask
import numpy as np
import pytest

import pargraph
from pargraph import nn, optim
from pargraph.nn import functional as F


class Branches(nn.Module):
    """Two independent branches, summed: a little of what pargraph runs side by side."""

    def __init__(self, dropout: float = 0.0, norm: bool = False) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        right = [nn.Linear(6, 8)]
        if norm:
            right.append(nn.BatchNorm1d(8))
        right += [nn.Tanh(), nn.Dropout(dropout), nn.Linear(8, 3)]
        self.right = nn.Sequential(*right)

    def forward(self, x):
        return self.left(x) + self.right(x)


def _batches(n: int = 6, size: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [(pargraph.tensor(rng.standard_normal((size, 6)).astype(np.float32)),
             pargraph.tensor(rng.integers(0, 3, size))) for _ in range(n)]


def _train(compiled: bool, make_opt, batches, scheduler=None, dropout=0.0, norm=False,
           clip=None, **compile_args):
    """Losses and final state of a training run, compiled or eager, from seed 0."""
    pargraph.manual_seed(0)
    model = Branches(dropout, norm)
    opt = make_opt(model.parameters())
    sched = scheduler(opt) if scheduler else None
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss

    run = pargraph.compile(step, **compile_args) if compiled else step
    losses = []
    for x, y in batches:
        losses.append(run(x, y).item())
        if sched is not None:
            sched.step()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return losses, state, opt, run


def _compiled_step(model, opt):
    """The usual training step, compiled."""
    @pargraph.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _assert_same(eager, compiled):
    assert eager[0] == compiled[0]
    assert eager[1].keys() == compiled[1].keys()
    for key in eager[1]:
        np.testing.assert_array_equal(eager[1][key], compiled[1][key], err_msg=key)


OPTIMIZERS = {
    "sgd": lambda p: optim.SGD(p, lr=0.1),
    "sgd momentum nesterov decay": lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                       weight_decay=1e-2),
    "adam": lambda p: optim.Adam(p, lr=0.01),
    "adamw amsgrad": lambda p: optim.AdamW(p, lr=0.01, amsgrad=True),
    "rmsprop centered momentum": lambda p: optim.RMSprop(p, lr=0.01, centered=True,
                                                         momentum=0.5),
    "adagrad": lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.01),
}


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_training_equals_eager_bit_for_bit(name, scheduler):
    batches = _batches()
    # A scheduler that changes the learning rate at every call: an input, not a constant.
    decay = lambda opt: optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)  # noqa: E731
    with dask.config.set(scheduler=scheduler):
        eager = _train(False, OPTIMIZERS[name], batches, decay)
        compiled = _train(True, OPTIMIZERS[name], batches, decay)
    _assert_same(eager, compiled)
    run = compiled[3]
    assert run.eager is None
    # The first step makes the optimizer's state, the second captures with it.
    assert run.captures <= 2 and run.replays == len(batches) - run.captures
    assert compiled[2].state_dict()["param_groups"] == eager[2].state_dict()["param_groups"]
    for index, state in eager[2].state_dict()["state"].items():
        other = compiled[2].state_dict()["state"][index]
        for key, value in state.items():
            np.testing.assert_array_equal(np.asarray(value), np.asarray(other[key]))


def test_dropout_draws_the_eager_masks_and_batch_norm_keeps_its_statistics():
    batches = _batches(5)
    adam = OPTIMIZERS["adam"]
    eager = _train(False, adam, batches, dropout=0.5, norm=True)
    compiled = _train(True, adam, batches, dropout=0.5, norm=True)
    _assert_same(eager, compiled)
    assert "right.1.running_mean" in compiled[1]
    assert compiled[1]["right.1.num_batches_tracked"] == 5


def test_clip_grad_norm_inside_the_step():
    batches = _batches(4)
    eager = _train(False, OPTIMIZERS["sgd"], batches, clip=0.05)
    compiled = _train(True, OPTIMIZERS["sgd"], batches, clip=0.05)
    _assert_same(eager, compiled)
    assert compiled[3].eager is None


def test_gradients_accumulate_over_calls_without_zero_grad():
    def run(compiled):
        pargraph.manual_seed(0)
        model = Branches()
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def accumulate(x, y):
            loss = F.cross_entropy(model(x), y) / 2
            loss.backward()
            return loss

        forward_backward = pargraph.compile(accumulate) if compiled else accumulate
        losses = []
        for k, (x, y) in enumerate(_batches(8)):
            losses.append(forward_backward(x, y).item())
            if k % 2:
                opt.step()
                opt.zero_grad()
        grads = [p.grad for p in model.parameters()]
        return (losses, [p.detach().numpy().copy() for p in model.parameters()], grads,
                forward_backward)

    eager, compiled = run(False), run(True)
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1], compiled[1]):
        np.testing.assert_array_equal(a, b)
    assert all(g is None for g in compiled[2])
    # .grad None (after zero_grad) and .grad set (the second call of a pair) are two plans.
    assert compiled[3].captures == 2 and compiled[3].eager is None


def test_a_zero_dim_parameter_and_data_parallel():
    def run(compiled):
        pargraph.manual_seed(0)
        scale = nn.Parameter(pargraph.tensor(1.5))
        model = nn.DataParallel(nn.Linear(6, 3), shards=2)
        opt = optim.Adam([scale, *model.parameters()], lr=0.05)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x) * scale, y)
            loss.backward()
            opt.step()
            return loss

        f = pargraph.compile(step) if compiled else step
        losses = [f(x, y).item() for x, y in _batches(5, size=8)]
        return losses, scale.item(), model.module.weight.detach().numpy().copy()

    eager, compiled = run(False), run(True)
    assert eager[:2] == compiled[:2]
    np.testing.assert_array_equal(eager[2], compiled[2])


def test_a_smaller_last_batch_is_a_second_plan_and_eval_recaptures():
    batches = _batches(3, size=5) + _batches(1, size=2, seed=1) + _batches(2, size=5, seed=2)
    eager = _train(False, OPTIMIZERS["sgd"], batches)
    compiled = _train(True, OPTIMIZERS["sgd"], batches)
    _assert_same(eager, compiled)
    run = compiled[3]
    # The first call (no .grad yet), the full batches, the smaller one.
    assert run.captures == 3 and len(run.programs) == 3

    pargraph.manual_seed(0)
    model = Branches(dropout=0.5, norm=True)
    forward = pargraph.compile(lambda x: model(x) * 1)
    x = _batches(1)[0][0]
    with pargraph.no_grad():
        first = forward(x).numpy()
        model.eval()
        evaluated = forward(x).numpy()
        again = forward(x).numpy()
    assert forward.captures == 2
    np.testing.assert_array_equal(evaluated, again)  # no dropout, running statistics
    assert not np.array_equal(first, evaluated)
    with pargraph.no_grad():
        np.testing.assert_array_equal(model(x).numpy(), evaluated)


def test_python_numbers_passed_in_are_inputs_and_results_follow_them():
    w = pargraph.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    @pargraph.compile
    def step(x, scale):
        opt.zero_grad()
        loss = (w * x).sum() * scale
        loss.backward()
        opt.step()
        return loss, scale * 2

    x = pargraph.tensor([1.0, 1.0])
    results = [step(x, s) for s in (1.0, 0.5, 2.0, 3.0)]
    # The first call makes w.grad; the second captures with it; the others replay.
    assert step.captures == 2 and step.replays == 2
    assert [r[1] for r in results] == [2.0, 1.0, 4.0, 6.0]
    assert [round(r[0].item(), 4) for r in results] == [3.0, 1.4, 5.4, 6.9]
    np.testing.assert_allclose(w.detach().numpy(), [0.35, 1.35], rtol=1e-6)

    # A number Python decides with is a guard: another outcome captures again.
    @pargraph.compile
    def branchy(x, flag):
        return x * 2 if flag > 0 else x * 3

    assert branchy(x, 1).tolist() == [2.0, 2.0]
    assert branchy(x, 5).tolist() == [2.0, 2.0]
    assert branchy(x, -1).tolist() == [3.0, 3.0]
    assert branchy.captures == 2


def test_a_value_read_mid_step_is_a_graph_break_that_names_the_line():
    w = pargraph.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    seen = []

    def step(x):
        opt.zero_grad()
        loss = (w * x).sum()
        seen.append(loss.item())  # reads a value in the middle of the step
        loss.backward()
        opt.step()
        return loss

    run = pargraph.compile(step)
    x = pargraph.tensor([1.0, 1.0])
    with pytest.warns(UserWarning, match=r"reads a value at .*test_compiler.py.*line"):
        run(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        run(x)
    assert "graph break" in run.eager
    assert seen == pytest.approx([3.0, 2.8])
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 1.8], rtol=1e-6)

    strict = pargraph.compile(step, fullgraph=True)
    with pytest.raises(pargraph.GraphBreak, match=r"test_compiler.py.*line"):
        strict(x)


@pytest.mark.parametrize("make", [
    lambda opt: optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
    lambda opt: optim.lr_scheduler.SequentialLR(opt, [
        optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=1),
        optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)], milestones=[2]),
])
def test_a_scheduler_stepped_inside_the_function_is_a_graph_break_and_still_moves(make):
    # Replays would not run its Python again: the rate would stop moving, silently.
    def train(compiled, **compile_args):
        pargraph.manual_seed(0)
        model = nn.Linear(3, 2)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = make(opt)
        x = pargraph.ones(4, 3)

        def step(x):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
            sched.step()

        run = pargraph.compile(step, **compile_args) if compiled else step
        for _ in range(4):
            run(x)
        return opt.param_groups[0]["lr"], model.weight.detach().numpy()

    eager = train(False)
    with pytest.warns(UserWarning, match=r"\.step\(\) runs at .*test_compiler.py.*line"):
        compiled = train(True)
    assert compiled[0] == eager[0]
    np.testing.assert_array_equal(compiled[1], eager[1])
    with pytest.raises(pargraph.GraphBreak, match=r"step\(\) runs at .*test_compiler.py"):
        train(True, fullgraph=True)


def test_guards_that_keep_changing_end_in_eager_with_a_warning_naming_them():
    @pargraph.compile(cache_size=3)
    def double(x):
        return x * 2

    for n in range(1, 4):
        assert double(pargraph.ones(n)).tolist() == [2.0] * n
    with pytest.warns(UserWarning, match=r"argument 0 \(a tensor of shape \(3,\)"):
        assert double(pargraph.ones(4)).tolist() == [2.0] * 4
    assert double.eager is not None and double.captures == 3


def test_errors_in_a_replayed_step_name_the_op_and_the_line():
    model = nn.Linear(6, 3)

    @pargraph.compile
    def step(x, y):
        return F.cross_entropy(model(x), y)

    x, y = _batches(1)[0]
    step(x, y)
    step(x, y)
    with pytest.raises(IndexError, match=r"(?s)Target 7 is out of bounds.*test_compiler.py"):
        step(x, pargraph.tensor([0, 1, 7, 2, 0]))


def test_an_interrupted_replay_leaves_the_state_all_old(monkeypatch):
    from pargraph import ops

    calls = {"n": 0, "armed": False}
    forward = ops.REGISTRY["adam_step"].forward

    def interrupted(*args, **kwargs):  # Ctrl-C while the third update runs
        calls["n"] += calls["armed"]
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return forward(*args, **kwargs)

    monkeypatch.setattr(ops.REGISTRY["adam_step"], "forward", interrupted)
    pargraph.manual_seed(0)
    model = Branches()
    opt = optim.Adam(model.parameters(), lr=0.01)
    step = _compiled_step(model, opt)

    batches = _batches(4)
    for x, y in batches[:3]:
        step(x, y)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    moments = [s["exp_avg"].numpy().copy() for s in opt.state.values()]
    steps = [s["step"] for s in opt.state.values()]
    calls["armed"] = True
    with pytest.raises(KeyboardInterrupt):
        step(*batches[3])
    assert step.replays == 2
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])
    for moment, s in zip(moments, opt.state.values()):
        np.testing.assert_array_equal(moment, s["exp_avg"].numpy())
    assert [s["step"] for s in opt.state.values()] == steps
    # The gradients went before the run, as the eager step's zero_grad() lets them go.
    assert all(p.grad is None for p in model.parameters())
    step(*batches[3])  # and the next call runs the whole step
    assert [s["step"] for s in opt.state.values()] == [n + 1 for n in steps]
    assert step.replays == 3 and all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("where", ["the optimizer", "planning", "the first run"])
def test_a_capture_interrupted_anywhere_changes_nothing(monkeypatch, where):
    from pargraph.compiler import capture, program

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt
    target = {"the optimizer": (optim.Adam, "update"), "planning": (capture, "plan"),
              "the first run": (program.Program, "replay")}[where]
    pargraph.manual_seed(0)
    model = Branches()
    opt = optim.Adam(model.parameters(), lr=0.01)
    step = _compiled_step(model, opt)
    batches = _batches(3)
    eager = _train(False, OPTIMIZERS["adam"], batches)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with monkeypatch.context() as patch:
        patch.setattr(*target, interrupt)
        with pytest.raises(KeyboardInterrupt):
            step(*batches[0])
    for key, value in model.state_dict().items():  # all old, and no node keeps a symbol
        np.testing.assert_array_equal(value.numpy(), before[key])
    assert opt.state == {} and all(p.grad is None for p in model.parameters())
    for x, y in batches:  # the next calls train as the eager run does: Adam's first step
        step(x, y)        # (no state yet) and the next are two captures, then a replay
    assert step.captures == 3 and step.replays == 1
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), eager[1][key])


def test_save_load_resume_of_a_compiled_run(tmp_path):
    batches = _batches(6)
    straight = _train(True, OPTIMIZERS["adam"], batches)

    first = _train(True, OPTIMIZERS["adam"], batches[:3])
    model_state = {k: pargraph.tensor(v) for k, v in first[1].items()}
    pargraph.save({"model": model_state, "opt": first[2].state_dict()}, tmp_path / "ckpt.pt")

    pargraph.manual_seed(0)
    model = Branches()
    opt = OPTIMIZERS["adam"](model.parameters())
    checkpoint = pargraph.load(tmp_path / "ckpt.pt")
    model.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["opt"])
    step = _compiled_step(model, opt)

    losses = [step(x, y).item() for x, y in batches[3:]]
    assert first[0] + losses == straight[0]
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), straight[1][key])


def test_a_trace_of_a_replayed_step_records_every_node():
    model = Branches()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = _compiled_step(model, opt)

    x, y = _batches(1)[0]
    for _ in range(3):
        step(x, y)
    program = step.programs[0]
    with pargraph.trace() as tr:
        step(x, y)
    assert step.replays == 2
    assert {record.key for record in tr.records.values()} == \
        {node.key for node in program.computed}
    assert all(record.stop > record.start for record in tr.records.values())
    phases = {record.phase for record in tr.records.values()}
    assert {"forward", "backward", "update"} <= phases
    assert tr.summary().available_parallelism > 1


def test_compiled_training_on_a_cluster_equals_eager():
    from distributed import Client, LocalCluster

    batches = _batches(5, size=16)
    # Partitioned into several group tasks, placed on the two workers.
    settings = {"pargraph.single-task-below": 0, "pargraph.task-grain": 0}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster), \
            dask.config.set(settings):
        eager = _train(False, OPTIMIZERS["sgd momentum nesterov decay"], batches)
        compiled = _train(True, OPTIMIZERS["sgd momentum nesterov decay"], batches)
        run = compiled[3]
        assert run.replays == 3 and len(run.programs[0].tasks) > 1
    np.testing.assert_allclose(eager[0], compiled[0], rtol=1e-6)
    for key in eager[1]:
        np.testing.assert_allclose(eager[1][key], compiled[1][key], rtol=1e-5, atol=1e-7)


def test_a_compiled_step_on_one_worker_is_one_task_and_trains_as_eager():
    from distributed import Client, LocalCluster, get_task_stream

    batches = _batches(5, size=16)
    settings = {"pargraph.single-task-below": 0, "pargraph.task-grain": 0}
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client, \
            dask.config.set(settings):
        eager = _train(False, OPTIMIZERS["adam"], batches)
        with get_task_stream(client) as stream:
            compiled = _train(True, OPTIMIZERS["adam"], batches)
        run = compiled[3]
        program = run.programs[0]
        assert run.replays == 3 and len(program.tasks) > 1 and program.whole
        # Each run's groups ran as one task on the worker's threads, named after the step.
        whole = [task["key"] for task in stream.data if task["key"].split("-")[0] == "step"]
        assert len(whole) == run.captures + run.replays  # a capturing call runs it too
    np.testing.assert_allclose(eager[0], compiled[0], rtol=1e-6)
    for key in eager[1]:
        np.testing.assert_allclose(eager[1][key], compiled[1][key], rtol=1e-5, atol=1e-7)


def test_a_compiled_step_on_a_worker_process_is_sent_once_and_follows_its_lr_schedule():
    """On a cluster of one worker process the program goes to the cluster once and stays in
    the worker's memory; each step sends its numbers (a learning rate changing every step)
    and trains as eager."""
    from distributed import Client, LocalCluster

    batches = _batches(6, size=16)
    settings = {"pargraph.single-task-below": 0, "pargraph.task-grain": 0}

    def schedule(opt):
        return optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0 / (1 + epoch))

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                      dashboard_address=None) as cluster, Client(cluster), \
            dask.config.set(settings):
        eager = _train(False, OPTIMIZERS["adam"], batches, scheduler=schedule)
        compiled = _train(True, OPTIMIZERS["adam"], batches, scheduler=schedule)
        run = compiled[3]
        program = run.programs[-1]  # the first step makes Adam's state, the second captures
        assert run.captures == 2 and run.replays == 4 and program.whole
        held = program.held[""].key
        run(*batches[0])  # one more step: the same copy of the program
        assert program.held[""].key == held and program.held[""].status == "finished"
    np.testing.assert_allclose(eager[0], compiled[0], rtol=1e-6)
    for key in eager[1]:
        np.testing.assert_allclose(eager[1][key], compiled[1][key], rtol=1e-5, atol=1e-7)


def test_a_compiled_module_replays_its_forward_and_trains_as_eager():
    def run(compiled):
        pargraph.manual_seed(0)
        model = Branches(dropout=0.5, norm=True)
        opt = optim.Adam(model.parameters(), lr=0.01)
        forward = pargraph.compile(model) if compiled else model
        losses = []
        for x, y in _batches(5):
            opt.zero_grad()
            loss = F.cross_entropy(forward(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        forward.eval()
        with pargraph.no_grad():
            evaluated = forward(_batches(1)[0][0]).numpy()
        return losses, {k: v.numpy().copy() for k, v in model.state_dict().items()}, \
            forward, evaluated

    eager, compiled = run(False), run(True)
    _assert_same(eager, compiled)
    np.testing.assert_array_equal(eager[3], compiled[3])
    forward = compiled[2]
    assert forward.captures == 2 and forward.replays == 4  # train, then eval: a guard
    assert isinstance(forward, nn.Module) and not forward.training
    assert list(forward.state_dict()) == [f"_orig_mod.{k}" for k in eager[1]]
    assert forward.left is forward._orig_mod.left  # attributes reach the module
    loss = F.cross_entropy(forward(_batches(1)[0][0]), _batches(1)[0][1])
    assert loss.grad_fn is not None  # replayed nodes have history


def test_an_interrupted_capture_of_a_module_leaves_its_running_statistics(monkeypatch):
    from pargraph.compiler.module import ForwardCapture

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt
    pargraph.manual_seed(0)
    model = Branches(norm=True)
    forward = pargraph.compile(model)
    x = _batches(1)[0][0]
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with monkeypatch.context() as patch:
        patch.setattr(ForwardCapture, "template", interrupt)
        with pytest.raises(KeyboardInterrupt):
            forward(x)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key], err_msg=key)
    captured = forward(x).detach().numpy()
    pargraph.manual_seed(0)
    np.testing.assert_array_equal(captured, Branches(norm=True)(x).detach().numpy())


def test_an_argument_with_history_from_outside_runs_eagerly_and_says_why():
    w = pargraph.tensor([1.0, 2.0], requires_grad=True)
    x = pargraph.tensor([3.0, 4.0], requires_grad=True)

    @pargraph.compile
    def loss_of(h):
        loss = (h * w).sum()
        loss.backward()
        return loss

    with pytest.warns(UserWarning, match="argument 0 has autograd history"):
        loss_of(x * 2)  # its backward reaches x, outside the function: as in eager
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    assert loss_of.eager is not None


def test_a_tensor_kept_as_a_module_attribute_is_the_latest_calls():
    """A forward that keeps an activation (``self.last = h``) or a pruning hook's ``weight``:
    each replay sets the attribute again, as the eager call would; a capture that fails puts
    back what was there."""
    class Keeps(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(3, 2)

        def forward(self, x):
            self.last = self.layer(x).tanh()
            return self.last.sum()

    runs = []
    for compiled in (False, True):
        pargraph.manual_seed(0)
        model = Keeps()
        opt = optim.SGD(model.parameters(), lr=0.5)

        def step(x):
            opt.zero_grad()
            loss = model(x)
            loss.backward()
            opt.step()
            return loss

        run = pargraph.compile(step) if compiled else step
        kept = []
        for k in range(4):
            run(pargraph.ones(2, 3) * (k + 1))
            kept.append(model.last.detach().numpy().copy())
        runs.append(kept)
    for eager, replayed in zip(*runs):
        np.testing.assert_array_equal(eager, replayed)


def test_a_compiled_module_whose_forward_keeps_a_tensor_attribute_runs_eagerly():
    class Keeps(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(3, 2)

        def forward(self, x):
            self.last = self.layer(x)
            return self.last

    pargraph.manual_seed(0)
    model = pargraph.compile(Keeps())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            out = model(pargraph.ones(1, 3) * k)
    assert any("sets the tensor attribute 'last'" in str(w.message) for w in caught)
    np.testing.assert_array_equal(model.last.detach().numpy(), out.detach().numpy())


def test_in_place_random_fills_draw_again_at_each_replay():
    """``uniform_``, ``normal_`` and ``bernoulli_`` inside a compiled step draw what the
    eager step draws, call after call: a replay draws again."""
    def step(x):
        noise = x.new_zeros(tuple(x.shape))
        noise.uniform_(-1.0, 1.0)
        other = x.new_zeros(tuple(x.shape)).normal_(0.0, 2.0)
        mask = x.new_zeros(tuple(x.shape)).bernoulli_(pargraph.tensor(0.5))
        return x + noise + other * mask

    runs = []
    for compiled in (False, True):
        pargraph.manual_seed(0)
        run = pargraph.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no graph break: the step is captured
            runs.append([run(pargraph.zeros(4)).numpy().copy() for _ in range(3)])
    assert run.replays == 2
    for eager, replayed in zip(*runs):
        np.testing.assert_array_equal(eager, replayed)
    assert not np.array_equal(runs[1][1], runs[1][2])


def test_a_ctrl_c_while_a_replay_lets_go_of_the_gradients_leaves_none_of_them():
    """A real SIGINT between two of the ``.grad`` a replay lets go of before it runs: all of
    them go (as after ``zero_grad()``), parameters and state stay old."""
    import os
    import signal

    model = Branches()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = _compiled_step(model, opt)
    x, y = _batches(1)[0]
    for _ in range(3):
        step(x, y)
    program = step.programs[0]
    assert len(program.replaced_grads) > 2
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}

    class Interrupting(list):
        def __iter__(self):
            for k, p in enumerate(list.__iter__(self)):
                if k == 1:
                    os.kill(os.getpid(), signal.SIGINT)
                yield p

    plain = program.replaced_grads
    program.replaced_grads = Interrupting(plain)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            step(x, y)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert all(p.grad is None for p in model.parameters())
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])
    program.replaced_grads = plain
    step(x, y)
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_detached_values_in_a_compiled_step_follow_each_call(scheduler):
    """``.detach()`` and ``.data`` of a parameter or of a random draw inside the step (a
    target network's output, noise, fractional pooling's samples) take each call's values
    in a replay, as in an eager step, not the capturing call's."""
    def train(compiled):
        pargraph.manual_seed(0)
        w = pargraph.tensor([1.0, 2.0, -1.0], requires_grad=True)
        opt = pargraph.optim.SGD([w], lr=0.1)
        before = w.detach()  # a view made outside the step, read inside it

        def step():
            opt.zero_grad()
            noise = pargraph.rand(3).detach() + pargraph.rand(3).data
            target = w.detach() * 0.5 + w.data.sum()
            pooled = pargraph.nn.functional.fractional_max_pool2d(
                w.reshape(1, 1, 1, 3).expand(1, 1, 4, 3) * noise, (2, 2), output_size=(2, 2))
            loss = ((w - target) ** 2).sum() + (before * noise).sum() + pooled.sum()
            loss.backward()
            opt.step()
            return loss

        run = pargraph.compile(step) if compiled else step
        losses = [run().item() for _ in range(5)]
        return losses, w.detach().numpy().copy()

    with dask.config.set(scheduler=scheduler):
        (eager, w_eager), (compiled, w_compiled) = train(False), train(True)
    assert eager == compiled
    np.testing.assert_array_equal(w_eager, w_compiled)


def test_an_optimizer_with_step_hooks_is_not_captured_and_its_hooks_run_every_step():
    batches = _batches(4)
    calls = []

    def with_hooks(params):
        opt = optim.SGD(params, lr=0.1, momentum=0.9)
        opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
        opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
        return opt

    eager = _train(False, with_hooks, batches)
    assert calls == ["pre", "post"] * 4
    calls.clear()
    with pytest.warns(UserWarning, match="SGD has step hooks, which a replay would not call"):
        compiled = _train(True, with_hooks, batches)
    assert calls == ["pre", "post"] * 4  # every step ran them: eagerly
    _assert_same(eager[:2], compiled[:2])
    with pytest.raises(pargraph.GraphBreak, match="step hooks"):
        _train(True, with_hooks, batches, fullgraph=True)


def test_a_replay_follows_the_arguments_structure_not_only_their_leaves():
    """Arguments with the same leaves nested otherwise (dict keys in another order, a list
    for a tuple) are another structure: a new capture, never a replay that binds the old
    positions."""
    step = pargraph.compile(lambda d: d["a"] * 2 + d["b"])
    x, y = pargraph.tensor([1.0]), pargraph.tensor([10.0])
    assert step({"a": x, "b": y}).item() == 12.0
    assert step({"b": y, "a": x}).item() == 12.0  # the same leaves, in the other order
    assert step({"a": x, "b": y}).item() == 12.0 and step.captures == 2 and step.replays == 1
    pair = pargraph.compile(lambda p: p[0] - p[1])
    assert pair((x, y)).item() == pair([x, y]).item() == -9.0 and pair.captures == 2
