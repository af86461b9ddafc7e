"""Ctrl-C at any moment of training leaves parameters, gradients, optimizer state, checkpoints
and the recording context all old or all new (pargraph.interrupts), and training resumed
after it ends exactly where an uninterrupted run ends."""

import json
import pathlib
import signal
import subprocess
import sys
import threading

import pytest

import pargraph
from pargraph.interrupts import interrupts


@pytest.fixture(autouse=True)
def python_handles_sigint():
    """Python's own SIGINT handler, whatever started the tests: a shell starts a background
    job with SIGINT ignored, and Python then installs none (no KeyboardInterrupt at all)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)

SCRIPT = pathlib.Path(__file__).with_name("interrupted_training.py")


@pytest.mark.parametrize("scheduler", ["sync", "threads", "threads-compiled"])
def test_real_sigints_at_random_moments_tear_nothing(scheduler, tmp_path):
    # "-compiled": the training step is pargraph.compile's: captures and replays.
    # In its own process: a KeyboardInterrupt that escaped would end pytest. A replay is short,
    # so random signals miss it more often: compiled steps get more of them.
    steps = "100" if scheduler.endswith("-compiled") else "70"
    done = subprocess.run([sys.executable, str(SCRIPT), scheduler, steps, "3", str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["interrupts"] >= 30, report
    assert report["torn"] == [] and report["grads_torn"] == 0, report
    assert report["grad_mode_off"] == 0 and report["context_left"] == 0, report
    assert report["bad_checkpoint"] == 0, report
    assert report["final_equal"], report
    if scheduler.endswith("-compiled"):  # the interrupts met replays, not eager steps
        assert report["eager"] is None and report["replays"] >= 50, report


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


def test_undo_runs_its_change_to_the_end_whatever_ctrl_c_cuts_short():
    done, tries = [], []

    def change():  # a Ctrl-C lands before the first try's block begins, one inside the second
        tries.append(len(tries))
        if len(tries) == 1:
            raise KeyboardInterrupt
        signal.raise_signal(signal.SIGINT)
        done.append("all put back")

    with pytest.raises(KeyboardInterrupt):
        interrupts.undo(change)
    assert tries == [0, 1] and done == ["all put back"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


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
    from pargraph import execution

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

    from pargraph.execution import run_on_threads

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
