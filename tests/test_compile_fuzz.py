"""Compiled steps against eager ones: a sample of the differential fuzzer's random programs
(``tests/compile_fuzz.py``; ``python -m tests.compile_fuzz 1000 --jobs 2`` runs the whole
sweep), and each class of stale replay it found, as a test of its own."""

import copy
import warnings

import dask
import numpy as np
import pytest

import pargraph
from pargraph import nn, optim
from tests import compile_fuzz


@pytest.mark.parametrize("seed", range(0, 60, 3))
def test_a_random_program_compiled_equals_eager(seed):
    spec = compile_fuzz.draw_spec(seed)
    assert compile_fuzz.difference(pargraph, spec) is None, str(spec)


def test_the_sweep_runs_in_several_processes_and_reports_each_programs_finding(
        monkeypatch, capsys):
    # .ci/run's sweep: two processes side by side, each its share of the programs
    assert compile_fuzz.main(["4", "--jobs", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "4 of 4 programs: compiled equals eager"
    # one process: a program that differs, or crashes, is printed with its spec, and fails
    monkeypatch.setattr(compile_fuzz, "difference", lambda torch, spec, on=None: (
        [None, "call 0: result 0 differs"][spec.seed] if spec.seed < 2 else 1 / 0))
    assert compile_fuzz.main(["3"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("seed 1: ") and lines[1] == "    call 0: result 0 differs"
    assert lines[2].startswith("seed 2: ") and lines[3] == "    ZeroDivisionError: division by zero"
    assert lines[4:] == ["1 of 3 programs: compiled equals eager"]
    with pytest.raises(SystemExit):
        compile_fuzz.main(["3", "--jobs", "2", "--workers", "2"])


@pytest.fixture(scope="module")
def two_workers():
    """A ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1."""
    from pargraph.remote.loopback import worker_processes

    with worker_processes(2) as client:
        yield client


@pytest.mark.parametrize("seed", [49])
def test_a_random_program_compiled_on_two_worker_processes_equals_eager(two_workers, seed):
    """The programs' changes between calls (learning rates, attributes, frozen parameters,
    loaded state) reach the copy of the program each worker process holds. ``.ci/run`` runs
    twenty such programs."""
    def executed() -> int:
        return sum(two_workers.run(lambda dask_worker: dask_worker.state.executed_count)
                   .values())

    spec = compile_fuzz.draw_spec(seed)
    before = executed()
    on_cluster = compile_fuzz.on_cluster(two_workers)  # the compiled run's only: entered there
    assert dask.config.get("scheduler", None) is not two_workers
    assert compile_fuzz.difference(pargraph, spec, compiled_on=on_cluster) is None, str(spec)
    assert executed() >= before + len(spec.calls)  # the compiled calls ran on the workers


def _twice(step_of, changes, args=()):
    """The losses and parameters of an eager and a compiled run of the same calls, with
    ``changes[k](model, opt)`` made before call ``k``."""
    runs = []
    for compiled in (False, True):
        pargraph.manual_seed(0)
        model, opt, step = step_of()
        fn = pargraph.compile(step) if compiled else step
        losses = []
        for k, change in enumerate(changes):
            if change is not None:
                change(model, opt)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                losses.append(fn(*args[k:k + 1]).item())
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    return runs


def _mlp(activation=None, norm=False, make_opt=None):
    def step_of():
        layers = [nn.Linear(4, 6)] + ([nn.BatchNorm1d(6)] if norm else [])
        layers += [activation() if activation else nn.ReLU(), nn.Linear(6, 2)]
        model = nn.Sequential(*layers)
        opt = (make_opt or (lambda ps: optim.SGD(ps, lr=0.1)))(model.parameters())
        rng = np.random.default_rng(1)
        x = pargraph.tensor(rng.standard_normal((8, 4)).astype(np.float32))
        y = pargraph.tensor(rng.standard_normal((8, 2)).astype(np.float32))

        def step():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return model, opt, step
    return step_of


def _assert_same(runs):
    (eager_losses, eager_params), (losses, params) = runs
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_a_parameter_frozen_between_calls_stops_training_then_trains_again():
    def freeze(model, opt):
        model[0].weight.requires_grad_(False)
        model[0].weight.grad = None

    def unfreeze(model, opt):
        model[0].weight.requires_grad_(True)

    runs = _twice(_mlp(), [None, None, freeze, None, unfreeze, None])
    _assert_same(runs)
    frozen = _twice(_mlp(), [None, freeze, None, None])
    assert not np.array_equal(frozen[1][1][0], runs[1][1][0])


@pytest.mark.parametrize("module, name, value", [
    (lambda: nn.LeakyReLU(0.01), "negative_slope", 0.5),
    (lambda: nn.ELU(1.0), "alpha", 0.3),
    (lambda: nn.Dropout(0.0), "p", 0.5),
    (lambda: nn.Softplus(1.0), "beta", 3.0),
])
def test_a_module_attribute_changed_between_calls_is_captured_again(module, name, value):
    def change(model, opt):
        setattr(model[1], name, value)

    runs = _twice(_mlp(activation=module), [None, None, change, None])
    _assert_same(runs)


def test_batchnorm_momentum_changed_between_calls_moves_the_running_stats_as_eager():
    stats = []
    for compiled in (False, True):
        pargraph.manual_seed(0)
        model, opt, step = _mlp(norm=True)()
        fn = pargraph.compile(step) if compiled else step
        fn()
        fn()
        model[1].momentum = 0.9
        fn()
        stats.append(model[1].running_mean.numpy().copy())
    np.testing.assert_allclose(stats[1], stats[0], rtol=1e-6)


def test_a_state_dict_loaded_twice_between_calls_gives_eager_numbers():
    saved = {}

    def save(model, opt):
        saved["state"] = copy.deepcopy(opt.state_dict())

    def load(model, opt):
        opt.load_state_dict(saved["state"])

    adam = _mlp(make_opt=lambda ps: optim.Adam(ps, lr=0.05))
    _assert_same(_twice(adam, [None, save, load, None, load, None, None]))


def test_the_step_counts_of_parameters_that_came_apart_are_read_each():
    def freeze(model, opt):
        model[2].bias.requires_grad_(False)
        model[2].bias.grad = None

    def unfreeze(model, opt):
        model[2].bias.requires_grad_(True)

    adam = _mlp(make_opt=lambda ps: optim.AdamW(ps, lr=0.05))
    _assert_same(_twice(adam, [None, None, freeze, None, unfreeze, None, None]))


@pytest.mark.parametrize("expression", [
    lambda w, loss, out: w * loss, lambda w, loss, out: (w + out).mean() + loss,
    lambda w, loss, out: (1 - w) * out.mean() + loss, lambda w, loss, out: max(w, 1.0) * loss,
    lambda w, loss, out: w / (loss + 1), lambda w, loss, out: 2 ** loss + w ** loss,
    lambda w, loss, out: w - loss, lambda w, loss, out: abs(w) * loss,
])
def test_a_python_number_argument_on_either_side_of_a_tensor(expression):
    def step_of():
        model = nn.Linear(4, 2)
        opt = optim.SGD(model.parameters(), lr=0.1)
        x = pargraph.ones(3, 4)

        def step(w):
            opt.zero_grad()
            out = model(x)
            loss = expression(w, (out ** 2).mean(), out)
            loss.backward()
            opt.step()
            return loss
        return model, opt, step

    ws = (0.7, 0.3, 1.5, 0.2)
    runs = _twice(step_of, [None] * 4, args=ws)
    _assert_same(runs)


def test_an_init_under_no_grad_between_calls_of_a_step_without_optimizer():
    def step_of():
        model = nn.Linear(4, 2)
        x = pargraph.ones(3, 4)
        return model, None, lambda: model(x).sum()

    def init(model, opt):
        with pargraph.no_grad():
            model.weight.mul_(0.5)
            model.bias.fill_(0.1)

    runs = _twice(step_of, [init, None, init, None])
    _assert_same(runs)
    assert runs[1][0][2] != runs[1][0][1]  # the second init changed the result
