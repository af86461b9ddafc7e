"""This machine's costs for forecasts (pargraph.machine_costs): calls timed alone and beside
another, and the loopback's messages measured on real processes."""

import json
import time

import numpy as np

from pargraph.machine_costs import (
    CallCost,
    Network,
    loopback,
    measure_call,
    measure_loopback,
)
from tests.test_forecast import FAST_NETWORK


def test_measured_calls_tell_a_wait_from_python_work():
    class Op:  # what measure_call runs: an op's forward on the recorded arguments
        def __init__(self, forward):
            self.forward = forward

    def python_work(x):
        total = 0
        for k in range(30_000):
            total += k
        return x

    x = np.ones(4, np.float32)
    # The suite's other processes share the two cores, and a busy machine biases a share one
    # way (docs/forecast.md, "Noise"): a wait's share up, Python work's down. The least
    # disturbed of three measurements of each is the one to judge.
    waits = [measure_call(Op(lambda x: (time.sleep(0.002), x + 1)[1]), {}, (x,))
             for _ in range(3)]
    works = [measure_call(Op(python_work), {}, (x,)) for _ in range(3)]
    assert all(isinstance(c, CallCost) and c.seconds >= 0.002 for c in waits)
    assert all(0.0 <= c.gil_share <= 1.0 for c in waits + works)
    assert min(c.gil_share for c in waits) < 0.3
    assert max(c.gil_share for c in works) > 0.6


def test_the_loopback_costs_are_measured_once_and_kept(tmp_path, monkeypatch):
    from pargraph import machine_costs as module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    loopback.cache_clear()
    measured = []
    monkeypatch.setattr(module, "measure_loopback", lambda: measured.append(1) or FAST_NETWORK)
    try:
        assert loopback() == FAST_NETWORK and measured == [1]
        saved = json.loads((tmp_path / "pargraph" / "loopback.json").read_text())
        assert Network(**saved) == FAST_NETWORK
        loopback.cache_clear()
        assert loopback() == FAST_NETWORK and measured == [1]  # read back, not measured
        assert loopback(measure=True) == FAST_NETWORK and measured == [1, 1]
    finally:
        loopback.cache_clear()


def test_the_loopback_is_measured_on_real_scheduler_and_worker_processes():
    network = measure_loopback(repeats=1)
    assert 0 < network.scheduler_task <= network.task_latency < 1.0
    assert network.run_latency >= 0 and network.run_node >= 0
    assert 0 < network.transfer_latency < 1.0 and network.bandwidth > 1e6
