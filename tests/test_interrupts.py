"""Ctrl-C at any moment of training leaves parameters, gradients, optimizer state, checkpoints
and the recording context all old or all new (pargraph.interrupts), and training resumed
after it ends exactly where an uninterrupted run ends."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import pargraph
from pargraph.interrupts import interrupts
from tests.ctrl_c import CtrlCAt


@pytest.fixture(autouse=True)
def python_handles_sigint():
    """Python's own SIGINT handler, whatever started the tests: a shell starts a background
    job with SIGINT ignored, and Python then installs none (no KeyboardInterrupt at all)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)

SCRIPT = pathlib.Path(__file__).with_name("interrupted_training.py")


@pytest.mark.parametrize("scheduler", ["sync", "threads", "threads-compiled",
                                       "threads-compiled-in-place"])
def test_real_sigints_at_random_moments_tear_nothing(scheduler, tmp_path):
    # "-compiled": the training step is pargraph.compile's: captures and replays; "-in-place":
    # every replay writes the new parameters and optimizer state into the old arrays.
    # In its own process: a KeyboardInterrupt that escaped would end pytest. A replay is short,
    # so random signals miss it more often: compiled steps get more of them.
    # (50 to 200 interrupts each; by hand the script runs longer: STEPS is its second argument.)
    # On past those steps until 30 have landed: a fast machine's steps leave less time to land.
    steps = "80" if scheduler.endswith("-in-place") else "60" if "-compiled" in scheduler \
        else "25"
    done = subprocess.run([sys.executable, str(SCRIPT), scheduler, steps, "3", str(tmp_path),
                           "30"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["interrupts"] >= 30, report
    assert report["torn"] == [] and report["grads_torn"] == 0, report
    assert report["grad_mode_off"] == 0 and report["context_left"] == 0, report
    assert report["bad_checkpoint"] == 0, report
    assert report["final_equal"], report
    if "-compiled" in scheduler:  # the interrupts met replays, not eager steps
        assert report["eager"] is None and report["replays"] >= 50, report
    if scheduler.endswith("-in-place"):  # 4 parameters and 8 moments per tower and replay
        assert report["written_in_place"] >= 50 * 16 * 12, report
    elif "-compiled" in scheduler:
        assert report["written_in_place"] == 0, report


EVERYWHERE = pathlib.Path(__file__).with_name("interrupted_everywhere.py")


@pytest.mark.parametrize("mode, scheduler, stride", [("eager", "sync", 53),
                                                     ("capture", "sync", 131),
                                                     ("replay", "threads", 3),
                                                     ("eager", "threads-split", 83),
                                                     ("replay", "threads-split", 7)])
def test_a_ctrl_c_at_every_kth_point_of_a_step_tears_nothing(mode, scheduler, stride):
    # Every point where Python could raise one, one run per point (a stride of 1) is the
    # same script run by hand: python tests/interrupted_everywhere.py eager sync
    done = subprocess.run([sys.executable, str(EVERYWHERE), mode, scheduler, str(stride)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["interrupted"] >= 50, report
    for found in ("torn", "grad_mode_off", "context_left", "grads_torn", "handler_left",
                  "interval_left"):
        assert report[found] == [], report


def test_a_ctrl_c_at_every_point_of_a_save_leaves_the_old_or_the_new_checkpoint():
    # In a process of its own: zipfile's finalizers complain about the files they were
    # writing (Python's "Exception ignored"), which pytest reports.
    done = subprocess.run([sys.executable, str(EVERYWHERE), "save", "sync"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["interrupted"] >= 100, report
    assert report["bad"] == [] and report["other_errors"] == [], report


def test_a_sigint_inside_a_deferred_block_is_raised_when_it_ends():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            signal.raise_signal(signal.SIGINT)
            steps.append("after the signal")
            with interrupts.deferred():  # nested blocks raise at the outermost end
                steps.append("nested")
            steps.append("end")
    assert steps == ["after the signal", "nested", "end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failsafe_block_raises_at_once_and_holds_a_second_ctrl_c_while_it_cleans_up():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.failsafe():
            try:
                signal.raise_signal(signal.SIGINT)
                steps.append("after the first")  # not reached: raised at once
            except KeyboardInterrupt:
                signal.raise_signal(signal.SIGINT)  # the second: held while it cleans up
                steps.append("cleaned up")
                raise
    assert steps == ["cleaned up"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failsafe_block_holds_ctrl_c_in_its_deferred_blocks_and_swallowed_errors():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.failsafe():
            with interrupts.deferred():
                signal.raise_signal(signal.SIGINT)
                steps.append("deferred")
            steps.append("after the deferred block")  # not reached: raised as it ends
    with pytest.raises(KeyboardInterrupt):
        with interrupts.failsafe():
            try:
                raise ValueError
            except ValueError:
                signal.raise_signal(signal.SIGINT)
                steps.append("swallowed")
            steps.append("went on")  # held until the block ends
    assert steps == ["deferred", "swallowed", "went on"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failsafe_block_inside_an_except_clause_still_raises_at_once():
    steps = []
    try:
        raise KeyboardInterrupt  # the user's own: save a checkpoint on Ctrl-C
    except KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            with interrupts.failsafe():
                signal.raise_signal(signal.SIGINT)
                steps.append("not reached")
    assert steps == []


def test_a_handler_of_the_users_own_gets_the_held_signal():
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        with interrupts.deferred():
            signal.raise_signal(signal.SIGINT)
            assert received == []
        assert received == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_other_threads_defer_nothing_and_change_no_handler():
    seen = []

    def other():
        with interrupts.deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def test_an_interrupted_run_keeps_the_deferred_backward_for_the_next(monkeypatch):
    from pargraph.engine import execution

    w = pargraph.tensor([1.0, 2.0], requires_grad=True)
    (w * 3).sum().backward()

    def interrupted(*args):
        raise KeyboardInterrupt

    original = execution.execute
    monkeypatch.setattr(execution, "execute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pargraph.compute()
    runs = []
    monkeypatch.setattr(execution, "execute", lambda *args: runs.append(1) or original(*args))
    pargraph.compute()  # runs this thread's deferred work: the interrupted backward's
    assert runs == [1]
    assert w.grad.tolist() == [3.0, 3.0]


def test_a_sigint_stops_a_threaded_run_between_tasks_and_leaves_its_pool_usable():
    # Raised inside Condition.wait, a KeyboardInterrupt can leave the run's condition lock
    # held, and the pool's threads waiting for it forever: the run takes it between tasks.
    import time

    from dask.task_spec import Task

    from pargraph.engine.threads import run_on_threads

    main = threading.main_thread().ident
    started = []

    def task(k):
        started.append(k)
        if len(started) == 1:  # the first task to start, in whichever thread
            signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.02)
        return k

    graph = {f"t{k}": Task(f"t{k}", task, k) for k in range(20)}
    with pytest.raises(KeyboardInterrupt):
        run_on_threads(graph, list(graph), threads=2)
    assert len(started) < 20  # stopped between tasks, not after all of them
    ran_in = set()

    def named(k):
        ran_in.add(threading.current_thread().name)
        time.sleep(0.05)  # long enough for the helper to take a task too
        return k

    graph = {f"u{k}": Task(f"u{k}", named, k) for k in range(4)}
    assert run_on_threads(graph, list(graph), threads=2) == [0, 1, 2, 3]
    assert len(ran_in) == 2  # this thread and the pool's: the helper is free


# --- a second Ctrl-C while a failure cleans up ------------------------------------------------


def at_every_point(fail, check) -> int:
    """``fail(probe)`` fails (it arms the probe at its first failure) and ``check()`` asserts
    what the failure's cleanup must have left, for a second SIGINT at each point of the
    cleanup where Python could raise one, in turn; returns how many points it took."""
    n = 1
    while True:
        with pytest.raises(KeyboardInterrupt):
            with CtrlCAt(n, armed=False) as probe:
                fail(probe)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        check()
        if not probe.sent:  # the cleanup ended before its n-th point
            return n
        n += 1


def test_a_second_ctrl_c_anywhere_in_a_failed_saves_cleanup_leaves_no_temporary(
        tmp_path, monkeypatch):
    from pargraph import serialization

    path = tmp_path / "state.npz"
    pargraph.save({"w": pargraph.ones(2)}, path)

    def interrupted_write(*args, **kwargs):
        probe.arm()
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C, while the file is written

    def fail(started):
        nonlocal probe
        probe = started
        pargraph.save({"w": pargraph.zeros(2)}, path)

    def check():
        assert sorted(os.listdir(tmp_path)) == ["state.npz"]
        assert pargraph.load(path)["w"].tolist() == [1.0, 1.0]

    probe = None
    monkeypatch.setattr(serialization.np, "savez", interrupted_write)
    assert at_every_point(fail, check) > 5


def test_a_second_ctrl_c_anywhere_in_a_failed_captures_rollback_changes_nothing():
    pargraph.manual_seed(0)
    model = pargraph.nn.Linear(3, 2)
    opt = pargraph.optim.Adam(model.parameters(), lr=0.1)
    x = pargraph.ones(4, 3)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    probe = None

    def train_step(x):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
        probe.arm()
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C, late in the capturing call

    def fail(started):
        nonlocal probe
        probe = started
        pargraph.compile(train_step)(x)

    def check():
        assert all(np.array_equal(p.detach().numpy(), b)
                   for p, b in zip(model.parameters(), before))
        assert all(p.grad is None for p in model.parameters()) and not opt.state
        assert pargraph.is_grad_enabled()

    assert at_every_point(fail, check) > 5
    probe = CtrlCAt(0)  # sends nothing: the step now trains as eager does
    step = pargraph.compile(lambda x: (opt.zero_grad(), model(x).pow(2).sum().backward(),
                                       opt.step()))
    step(x)
    step(x)
    pargraph.manual_seed(0)
    eager = pargraph.nn.Linear(3, 2)
    eager_opt = pargraph.optim.Adam(eager.parameters(), lr=0.1)
    for _ in range(2):
        eager_opt.zero_grad()
        eager(x).pow(2).sum().backward()
        eager_opt.step()
    assert all(np.array_equal(p.detach().numpy(), q.detach().numpy())
               for p, q in zip(model.parameters(), eager.parameters()))


def test_a_second_ctrl_c_anywhere_in_a_failed_lbfgs_steps_restore_changes_nothing():
    w = pargraph.tensor([1.0, -2.0], dtype=pargraph.float64, requires_grad=True)
    opt = pargraph.optim.LBFGS([w], lr=0.5, max_iter=4)
    evaluations = []
    probe = None

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        evaluations.append(1)
        if len(evaluations) == 3:  # the first Ctrl-C, after w moved twice
            probe.arm()
            signal.raise_signal(signal.SIGINT)
        return loss

    def fail(started):
        nonlocal probe
        probe = started
        evaluations.clear()
        opt.step(closure)

    def check():
        assert w.tolist() == [1.0, -2.0] and not opt.state

    assert at_every_point(fail, check) > 5


def test_a_ctrl_c_as_a_capture_keeps_its_program_leaves_state_and_programs_consistent():
    # Landing just after the program was kept, a Ctrl-C used to roll the call back and keep
    # the program: the next call replayed it onto state it never produced (Adam's moments
    # stayed a step behind the parameters).
    def run(interrupt_at, calls=4):
        pargraph.manual_seed(0)
        model = pargraph.nn.Linear(3, 2)
        opt = pargraph.optim.Adam(model.parameters(), lr=0.1)
        x = pargraph.ones(4, 3)

        def train_step(x):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()

        step = pargraph.compile(train_step)

        class Programs(list):
            def insert(self, index, program):
                super().insert(index, program)
                if len(self) == interrupt_at:
                    signal.raise_signal(signal.SIGINT)

        step.programs = Programs()
        for _ in range(calls):
            try:
                step(x)
            except KeyboardInterrupt:
                pass
        return [p.detach().numpy() for p in model.parameters()], \
            [s["exp_avg"].numpy() for s in opt.state.values()], \
            [float(s["step"]) for s in opt.state.values()]

    for interrupt_at in (1, 2):
        params, moments, steps = run(interrupt_at)
        assert steps[0] in (3.0, 4.0) and steps == [steps[0]] * 2
        expected = run(None, calls=int(steps[0]))  # uninterrupted, as many steps
        assert all(np.array_equal(a, b) for a, b in zip(params, expected[0]))
        assert all(np.array_equal(a, b) for a, b in zip(moments, expected[1]))


def test_a_wait_stops_for_a_held_ctrl_c_only_where_no_other_commit_is_open():
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            signal.raise_signal(signal.SIGINT)
            seen.append(interrupts.stopping())  # a wait in this block may stop
            with interrupts.deferred():
                seen.append(interrupts.stopping())  # not inside another block's commit
            with interrupts.failsafe():
                seen.append(interrupts.stopping())
    assert seen == [True, False, True]
    assert not interrupts.stopping()
    with interrupts.deferred():  # nothing held is left over to raise here
        pass
