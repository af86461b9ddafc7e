"""``pargraph.context``: the process's state objects in one place, each once, and a forked child
resetting those that cannot cross a fork."""

import os
import signal

import dask
import pytest

import pargraph


def test_a_forked_child_resets_every_state_that_asks(monkeypatch):
    from pargraph.context import Context

    calls = []

    class Threads:
        def after_fork(self):
            calls.append("threads")

    own = Context()
    own.register("threads", Threads())
    own.register("plain", object())
    own.after_fork()
    assert calls == ["threads"]
    with pytest.raises(ValueError, match="registered already"):
        own.register("plain", object())


def test_every_state_is_reachable_by_its_name_and_refuses_a_second_registration():

    states = pargraph.context.states()
    assert states["allocator"] is pargraph.runtime.allocator
    assert states["grad_mode"] is pargraph.graph.grad_mode
    assert states["clusters"] is pargraph.remote.state.clusters
    with pytest.raises(AttributeError, match="no state named 'nothing'"):
        pargraph.context.nothing  # noqa: B018
    with pytest.raises(ValueError, match="'allocator' is registered already"):
        pargraph.context.register("allocator", object())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_forked_child_collects_garbage_and_trains_on_threads():
    """A fork made while another thread's run pauses the garbage collector, and after the
    parent ran steps on helper threads: in the child no run is in progress and none of the
    parent's helpers exists, so the context gives it the collector back and a pool of its
    own, and its threaded step gives the parent's numbers."""
    import gc

    import pargraph

    def step():
        x = pargraph.ones(64, 64, requires_grad=True)
        branches = [(x * k).tanh().sum() for k in range(4)]
        loss = pargraph.stack(branches).sum()
        loss.backward()
        return loss.item(), float(x.grad.sum().item())

    assert gc.isenabled()
    with dask.config.set({"scheduler": "threads", "pargraph.adaptive": "threads"}):
        expected = step()
        with pargraph.context.execution.collector:  # a run in progress while forking
            child = os.fork()
            if child == 0:  # pragma: no cover (the child reports through its exit code)
                signal.alarm(30)
                try:
                    os._exit(0 if gc.isenabled() and step() == expected else 1)
                except BaseException:
                    os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
