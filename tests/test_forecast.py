"""Forecasts of a traced step on other threads and workers (pargraph.forecast)."""

import collections
import dataclasses
import gc
import json
import statistics
import sys
import time

import dask
import numpy as np
import pytest

import pargraph
from pargraph.caller_costs import Away
from pargraph.machine_costs import (
    REPLAY_CALLS_UNDER,
    CallCost,
    Network,
    measure_replay,
)
from pargraph.trace import RunClock, outside_seconds

#: A cluster whose messages cost little next to the ops below, given rather than measured.
FAST_NETWORK = Network(task_latency=1e-3, scheduler_task=1e-4, run_latency=2e-3, run_node=0.0,
                       transfer_latency=1e-3, bandwidth=1e9,
                       replicate_latency=2e-3, worker_task=2e-4,
                       compiled_latency=1e-3)
#: The caller's Python as fast after any wait: the time outside the runs as traced.
FLAT = Away((0.0,), (0.0,))
#: The caller's Python 1 ms slower after 300 ms of waiting, rising in a straight line.
RISING = Away((0.0, 0.3), (1e-3, 2e-3))


_ops: dict = {}


def sleeper(seconds: float):
    """A custom op that sleeps ``seconds`` forward and backward: known work, no core."""
    if seconds not in _ops:
        @pargraph.library.custom_op(f"forecast_test::sleep_{seconds * 1e3:g}ms",
                                    mutates_args=(), cost=seconds)
        def op(x):
            time.sleep(seconds)
            return x + 1.0

        op.register_fake(lambda x: pargraph.empty_like(x))
        op.register_autograd(lambda ctx, grad: op(grad) - 1.0)
        _ops[seconds] = op
    return _ops[seconds]


def training_step(model):
    """One step of ``model`` on a leaf of four ones: forward, backward, the loss and the
    gradient read back."""
    x = pargraph.ones(4, requires_grad=True)

    def step():
        x.grad = None
        loss = model(x)
        loss.backward()
        loss.item()
        x.grad.numpy()

    return step


def traced(model, steps: int = 2, threads: int = 1):
    """A trace of one step of ``model`` (forward and backward) on ``threads`` threads, after
    ``steps`` steps that let the runner settle."""
    step = training_step(model)
    with dask.config.set(scheduler="threads", num_workers=threads):
        for _ in range(steps):
            step()
        with pargraph.trace() as tr:
            step()
    return tr


def runs_speedup(fc, threads: int | None = None, workers: int | None = None) -> float:
    """The forecast speed-up of the step's runs alone, over one thread or one worker: the
    step less its time outside the runs (recording ops), which a busy machine stretches in the
    trace and no thread shortens, so that a verdict does not follow the machine's load."""
    def runs(**config) -> float:
        return fc.step_time(**config) - fc.outcome(**config).outside

    if threads is not None:
        return runs(threads=1) / runs(threads=threads)
    return runs(workers=1) / runs(workers=workers)


def branches(n: int, seconds: float):
    op = sleeper(seconds)
    return lambda x: pargraph.stack([op(x * (k + 1)) for k in range(n)]).sum()


def eager_and_compiled(branches: int, seconds: float):
    """Traces of one training step of ``branches`` sleeps of ``seconds``, eager then compiled,
    each on one thread after three steps: yields ``(trace, compiled)``."""
    sleep = sleeper(seconds)
    x = pargraph.ones(4, requires_grad=True)

    def train(x):
        x.grad = None
        loss = pargraph.stack([sleep(x * (k + 1)) for k in range(branches)]).sum()
        loss.backward()
        return loss

    for run, compiled in ((train, False), (pargraph.compile(train), True)):
        with dask.config.set(scheduler="threads", num_workers=1):
            for _ in range(3):
                run(x).item()
            with pargraph.trace() as tr:
                run(x).item()
        yield tr, compiled


def test_a_compiled_step_is_partitioned_as_its_program_was_captured():
    """Sleeps of 10 ms with no declared cost are estimated at next to nothing. An eager run
    learns their measured times and partitions its branches with them (``lowering.Timing``);
    a compiled step's program keeps the plan it was captured with, from the estimates: one
    task, its sleeps one after another on four threads as on one. The forecast of each
    partitions as the real run does."""
    @pargraph.library.custom_op("forecast_test::uncosted_sleep", mutates_args=())
    def sleep(x):
        time.sleep(0.01)
        return x + 1.0

    sleep.register_fake(lambda x: pargraph.empty_like(x))
    x = pargraph.ones(4)

    def step(x):
        return pargraph.stack([sleep(x * (k + 1)) for k in range(8)]).sum()

    speedups = {}
    for run, compiled in ((step, False), (pargraph.compile(step), True)):
        with dask.config.set(scheduler="threads", num_workers=4):
            for _ in range(4):  # the eager runs time their nodes and partition again
                run(x).item()
            start = time.perf_counter()
            run(x).item()
            took = time.perf_counter() - start
        with dask.config.set(scheduler="threads", num_workers=1), pargraph.trace() as tr:
            run(x).item()
        speedups[compiled] = runs_speedup(pargraph.forecast(tr, threads=[1, 4], gil=0.0,
                                                            measure_gil=False),
                                          threads=4)
        if compiled:
            assert took >= 0.08  # one task: the eight sleeps one after another
    assert speedups[True] == pytest.approx(1.0, abs=0.05)
    assert speedups[False] > 2.5


def chain(n: int, seconds: float):
    op = sleeper(seconds)

    def model(x):
        for _ in range(n):
            x = op(x)
        return (x * x).sum()  # its gradient needs the forward's end: one chain, both ways
    return model


def linears_step(width: int, batch: int, layers: int = 4, adam: bool = False):
    """A training step of ``layers`` Linear layers side by side with SGD (or Adam), and its
    input."""
    pargraph.manual_seed(0)
    model = pargraph.nn.ModuleList([pargraph.nn.Linear(width, width) for _ in range(layers)])
    opt = (pargraph.optim.Adam(model.parameters(), lr=1e-3) if adam
           else pargraph.optim.SGD(model.parameters(), lr=0.01))

    def train(x):
        opt.zero_grad()
        loss = sum(layer(x).tanh().sum() for layer in model)
        loss.backward()
        opt.step()
        return loss

    return train, pargraph.randn(batch, width)


def traced_call(run, x):
    """A trace of one call of ``run(x)`` on one thread, after three that let it settle."""
    with dask.config.set(scheduler="threads", num_workers=1):
        for _ in range(3):
            run(x).item()
        with pargraph.trace() as tr:
            run(x).item()
    return tr


def test_independent_branches_forecast_their_parallelism_and_no_more():
    tr = traced(branches(8, 0.02))
    fc = pargraph.forecast(tr, threads=[1, 2, 4, 8], gil=0.0, measure_gil=False)
    available = tr.summary(print_it=False).available_parallelism
    speedups = [fc.speedup(threads=n) for n in (1, 2, 4, 8)]
    assert speedups[0] == 1.0
    assert all(a < b for a, b in zip(speedups, speedups[1:]))  # more threads, faster
    assert speedups[3] <= min(8.0, available) + 1e-9
    assert 1.6 < runs_speedup(fc, threads=2) <= 2.0 + 1e-9  # the runs scale with branches
    assert 4.0 < runs_speedup(fc, threads=8) <= 8.0 + 1e-9
    # one thread: each node's time alone (its kind's, measured, else its traced time) one
    # after another (no op here calls BLAS), and the step's time outside its runs. A cheap
    # node the branches share is recomputed in each, as the runner's groups do: it counts
    # as often as it runs
    alone = {r.key: fc.one_thread.get(r.key, r.duration) for r in tr.nodes()}
    ran = [s.key for s in fc.outcome(threads=1).segments]
    assert set(ran) == set(alone)
    work = sum(alone[key] for key in ran)
    assert fc.step_time(threads=1) == pytest.approx(work + fc.outcome(threads=1).outside,
                                                    rel=0.01)


def test_a_chain_forecasts_no_speed_up():
    fc = pargraph.forecast(traced(chain(6, 0.01)), threads=[1, 8], gil=0.0, measure_gil=False)
    assert fc.speedup(threads=8) == pytest.approx(1.0, abs=0.05)


def test_the_gil_share_decides_how_far_branches_scale():
    tr = traced(branches(8, 0.02))
    free = runs_speedup(pargraph.forecast(tr, threads=[8], gil=0.0, measure_gil=False),
                        threads=8)
    half = runs_speedup(pargraph.forecast(tr, threads=[8], gil={"forecast_test::sleep_20ms": 0.5},
                                          measure_gil=False), threads=8)
    held = runs_speedup(pargraph.forecast(tr, threads=[8], gil=1.0, measure_gil=False),
                        threads=8)
    assert held == pytest.approx(1.0, abs=0.05)  # the GIL held throughout: one at a time
    assert 1.5 < half < 2.1  # half of each sleep takes turns: at most 2x
    assert free > 4.0


def test_a_trace_measures_the_gil_share_of_its_ops():
    fc = pargraph.forecast(traced(branches(4, 0.01)), threads=[1, 4])
    assert fc.measured_kinds >= 1
    sleeps = [key for key, record in fc.trace.records.items()
              if record.op == "forecast_test::sleep_10ms"]
    assert sleeps and all(fc.shares[key] < 0.3 for key in sleeps)
    assert runs_speedup(fc, threads=4) > 1.5  # four branches that mostly wait


def test_a_trace_is_measured_once_for_all_its_forecasts(monkeypatch):
    """The calls a trace kept are timed on the first forecast of it; every later one reads
    those costs, so that the same trace forecasts the same, however the machine moves."""
    module = sys.modules["pargraph.forecast"]
    tr = traced(branches(4, 0.01))
    first = pargraph.forecast(tr, threads=[1, 2])
    assert set(tr.measured) == {"calls", "pairs", "replay"}

    def again(*args: object) -> None:
        raise AssertionError("the trace's calls were measured again")

    monkeypatch.setattr(module, "call_costs", again)
    monkeypatch.setattr(module, "pair_costs", again)
    monkeypatch.setattr(module, "measure_replay", again)
    second = pargraph.forecast(tr, threads=[1, 2])
    assert second.shares == first.shares and second.pairs == first.pairs
    assert second.handover == first.handover
    assert second.step_time(threads=2) == first.step_time(threads=2)


def test_the_measuring_is_bounded_by_the_dask_config():
    """``pargraph.measure-seconds`` bounds the seconds a forecast measures its trace's calls:
    at 0 nothing is measured and every kind holds the GIL throughout; a bad bound is a clear
    error naming the key."""
    tr = traced(branches(4, 0.01))
    with dask.config.set({"pargraph.measure-seconds": 0}):
        fc = pargraph.forecast(tr, threads=[1, 4])
    assert fc.measured_kinds == 0
    assert tr.measured == {"calls": {}, "pairs": {}, "replay": None} and fc.handover == 0.0
    assert set(fc.shares.values()) == {1.0}
    for bad in (-1, "soon", True):
        with dask.config.set({"pargraph.measure-seconds": bad}), \
                pytest.raises(ValueError, match="pargraph.measure-seconds.*got"):
            pargraph.forecast(traced(branches(2, 0.01)), threads=[1])


def small_ops_step():
    """A trace of a step of eight branches of small elementwise ops on one thread."""
    a = pargraph.randn(64, 64)

    def step():
        return sum((a * k).tanh().sum() for k in range(1, 9)).item()

    with dask.config.set(scheduler="threads", num_workers=1):
        step()
        step()
        with pargraph.trace() as tr:
            step()
    return tr


def test_the_steps_small_calls_are_replayed_on_one_thread_and_on_two():
    """The replay makes each node that computes a call of its kind, in the step's order, on
    one thread and on two: every node of a step of small ops, each kind's time alone; a
    budget of 0 replays nothing, and a step that only waits has nothing to replay."""
    tr = small_ops_step()
    replay = measure_replay(tr, budget=0.3)
    traced = [tr.samples.kinds.get(node.key) for run in tr.run_records for node in run.computed]
    assert list(replay.kinds) == [kind for kind in traced if kind in replay.kinds]
    assert {kind[0] for kind in replay.kinds} >= {"mul", "sum"}
    assert all(0 < seconds < REPLAY_CALLS_UNDER for seconds in replay.seconds.values())
    assert 0.0 < replay.speedup < 2.5  # two threads on two cores, at most about twice
    assert measure_replay(tr, budget=0.0) is None
    sleeps = traced_call(lambda x: sleeper(0.001)(sleeper(0.001)(x)), pargraph.ones(1))
    assert measure_replay(sleeps, budget=0.3) is None


def test_the_hand_over_is_fitted_to_the_replay_and_slows_nodes_side_by_side():
    """The forecast fits the seconds per node lost to the GIL's hand-overs so that its
    simulation of the replay gives the replay's measured speed-up: none where the replay
    was as fast as its shares say or faster (nodes holding the GIL a fifth of their time:
    about 1.7x), more the slower the replay was; and a forecast on two threads is no faster
    for it (its small run split into tasks, ``pargraph.single-task-below``, as a bigger
    step's would be; test_simulation shows the nodes side by side slowed)."""
    tr = small_ops_step()
    forecast = pargraph.forecast(tr, threads=[1])
    # every kind holding the GIL a fifth of its time, which a hand-over waits for
    tr.measured["calls"] = {kind: dataclasses.replace(cost, gil_share=0.2, contention=0.0,
                                                      on_core=1.0)
                            for kind, cost in forecast.kind_costs.items()}
    tr.measured["pairs"] = {}
    replay = tr.measured["replay"]

    def fitted(speedup: float) -> tuple[pargraph.Forecast, float]:
        tr.measured["replay"] = dataclasses.replace(replay, speedup=speedup)
        with dask.config.set({"pargraph.single-task-below": 0}):
            fc = pargraph.forecast(tr, threads=[1, 2])
            return fc, fc.step_time(threads=2)

    (free, free_step), (slow, slow_step), (slower, slower_step) = \
        fitted(2.0), fitted(1.4), fitted(1.1)
    assert free.handover == 0.0 < slow.handover < slower.handover
    # the fit's own check: the replay simulated with the fitted hand-over
    for fc, speedup in ((slow, 1.4), (slower, 1.1)):
        assert fc._replay_speedup(fc.handover) == pytest.approx(speedup, rel=0.01)
    assert free_step <= slow_step <= slower_step


def test_kinds_that_compute_are_measured_side_by_side_and_slow_each_other_so(monkeypatch):
    """A forecast measures the kinds of op that compute and hold a good part of the step in
    pairs (a sleep gives the GIL away: not paired), and its simulated nodes slow each other as
    those pairs say: four branches of products on two threads, two at a time, take clearly
    longer with every pair slowing each other by half their time than with none slowed.
    A product's simulated time is compared, not the step's. The step ends with a sleep, which
    holds a good part of it too."""
    a = pargraph.randn(160, 160)
    sleep = sleeper(0.001)

    def step():
        return sleep(sum(((a * k) @ a).tanh().sum() for k in range(1, 5))).item()

    with dask.config.set(scheduler="threads", num_workers=1):
        step()
        step()
        with pargraph.trace() as tr:
            step()
    # The kinds' costs alone, given: each kind's traced time, on a core but for the sleep,
    # holding no GIL, BLAS as fast on one thread as on every core. As measured on a busy
    # machine, a product's call can lose its core (and look like one that waits) or its GIL
    # share and BLAS ratio move, which would keep the products apart, as the runner would.
    traced = collections.defaultdict(list)
    for key, kind in tr.samples.kinds.items():
        traced[kind].append(tr.records[key].duration)
    costs = {kind: CallCost(0.0, statistics.median(seconds), 0.0,
                            statistics.median(seconds) if kind[0] == "matmul" else 0.0,
                            0.0 if kind[0].startswith("forecast_test::") else 1.0)
             for kind, seconds in traced.items()}
    # what the trace keeps measured is what its forecasts read; no hand-overs fitted
    tr.measured["calls"], tr.measured["replay"] = costs, None
    fc = pargraph.forecast(tr, threads=[1])
    paired_kinds = {kind for pair in fc.pairs for kind in pair}
    paired = {kind[0] for kind in paired_kinds}
    assert "matmul" in paired and not any(op.startswith("forecast_test::") for op in paired)
    assert all(0.0 <= slowing <= 4.0 for slowing in fc.pairs.values())
    # nor a run's start and task costs as a busy machine measures them, which could make the
    # calling thread's way faster than any two threads of this small step
    module = sys.modules["pargraph.forecast"]
    local = dataclasses.replace(module.local_costs(), run=0.0, task=0.0)
    monkeypatch.setattr(module, "local_costs", lambda: local)
    kinds = list(costs)
    # the four products as long as each other: a busy machine stretches one traced call
    # several times over, and a product that long would overlap the others for a small
    # part of its time only
    products = [record for record in tr.records.values() if record.op == "matmul"]
    middle = statistics.median(record.duration for record in products)
    for record in products:
        record.stop = record.start + middle

    def runs_on_two(slowing: float) -> dict[str, float]:
        """Each product's simulated seconds on two threads, each branch a task of its own
        (the partition's grain would merge branches whose traced time a busy machine made
        short, and run them on one thread)."""
        tr.measured["pairs"] = {(a, b): slowing for a in kinds for b in kinds}
        with dask.config.set({"pargraph.task-grain": 1, "pargraph.single-task-below": 0}):
            fc = pargraph.forecast(tr, threads=[2])
            outcome = fc.outcome(threads=2)
        # a kind measured beside itself takes its GIL share from that pair, not from its
        # call's own trials (0.0 here)
        assert {fc.kind_costs[kind].gil_share for kind in paired_kinds} == {slowing}
        return {s.key: s.stop - s.start for s in outcome.segments if s.op == "matmul"}

    # a slowing of 1 would make the calling thread's way as fast, which the forecast would
    # take as the runner does: each product then alone again
    slowed, alone = runs_on_two(0.5), runs_on_two(0.0)
    ratios = [slowed[key] / alone[key] for key in alone]
    # Products that ran side by side took about 1.5x as long, and none took less.
    assert len(ratios) == 4 and min(ratios) > 0.99 and max(ratios) > 1.3, ratios
    # shares given by the caller ("what if"): nothing is measured in pairs
    assert pargraph.forecast(tr, threads=[1], gil=0.5).pairs == {}


def test_workers_pay_for_transfers_and_scheduling():
    tr = traced(branches(8, 0.02))
    fc = pargraph.forecast(tr, threads=[1], workers=[1, 2, 4], network=FAST_NETWORK, gil=0.0,
                           measure_gil=False)
    one, four = fc.outcome(workers=1), fc.outcome(workers=4)
    # one worker holds every value: only x.grad (4 floats) travels, to the caller reading it
    assert one.transfers == pytest.approx(16 / FAST_NETWORK.bandwidth)
    assert four.transfers > 0.0
    assert one.scheduling > 0.0
    assert fc.step_time(workers=1) > fc.step_time(threads=1)  # a cluster's latencies add
    assert 2.5 < runs_speedup(fc, workers=4) <= 4.0 + 1e-9
    slow = Network(**{**FAST_NETWORK.__dict__, "transfer_latency": 0.05})
    assert pargraph.forecast(tr, threads=[], workers=[4], network=slow,
                             gil=0.0, measure_gil=False).step_time(workers=4) > \
        fc.step_time(workers=4)


def test_a_value_the_caller_reads_travels_back_from_the_cluster():
    """A value a run kept on a cluster (x.grad here) comes back when the caller reads it: a
    round trip, then its bytes, once per read; a 0-d loss comes back with its run, and a
    value the block did not compute is no run's."""
    op = sleeper(0.01)
    before = pargraph.ones(3) * 2
    before.numpy()

    def model(x):
        before.numpy()  # realized before the block: read where it is
        return sum(op(x * (k + 1)).sum() for k in range(2))

    tr = traced(model)
    # after the step's one run: x.grad's 4 floats (the loss is 0-d)
    assert tr.reads == [(len(tr.run_records), 16)]

    def forecast(network: Network) -> pargraph.Forecast:
        # the caller's Python as fast after any wait, so that the waits' lengths move
        # nothing but the runs
        return pargraph.forecast(tr, threads=[1, 2], workers=[1, 2], network=network, gil=0.0,
                                 measure_gil=False, away=FLAT)

    fast = forecast(FAST_NETWORK)
    slow = forecast(Network(**{**FAST_NETWORK.__dict__, "read_latency": 0.05}))
    narrow = forecast(Network(**{**FAST_NETWORK.__dict__, "bandwidth": 1e3}))  # 16 B: 16 ms
    for n in (1, 2):
        assert slow.step_time(workers=n) == pytest.approx(fast.step_time(workers=n) + 0.05)
        more = narrow.outcome(workers=n).transfers - fast.outcome(workers=n).transfers
        assert more >= 0.016 - 16 / FAST_NETWORK.bandwidth - 1e-12
        assert slow.outcome(workers=n).transfers == pytest.approx(
            fast.outcome(workers=n).transfers + 0.05)
        assert slow.step_time(threads=n) == fast.step_time(threads=n)  # values stay here
        # the predicted timeline draws the read on the caller's lane, after the run's nodes
        reads = [s for s in slow.outcome(workers=n).segments if s.lane == "client"]
        assert [(s.op, s.phase) for s in reads] == [("read back", "transfer")]
        assert reads[0].stop - reads[0].start == pytest.approx(0.05 + 16 / FAST_NETWORK.bandwidth)
        assert reads[0].start >= max(s.stop for s in slow.outcome(workers=n).segments
                                     if s.lane != "client")
        assert not [s for s in slow.outcome(threads=n).segments if s.lane == "client"]
    # a value read twice travels twice; reads after each run follow that run
    x = pargraph.ones(4)
    with dask.config.set(scheduler="threads", num_workers=1), pargraph.trace() as twice:
        y = (x * 2).exp()
        y.numpy(), y.numpy()
        z = (y + 1).sum()
        z.item()
        (y * 3).tolist()
    assert twice.reads == [(1, 16), (1, 16), (3, 16)]


def test_an_eager_run_on_a_cluster_sends_the_values_the_step_made_as_data_tasks(monkeypatch):
    """A value the step made here (a random mask) goes to the cluster in the run's graph:
    riding in the task that reads it, or, read by several tasks and over INLINE_BYTES, as a
    data task of its own, which the scheduler takes up as any task (``lowering.lower``). A
    value made before the block is held there after its second read, and travels no more."""
    from pargraph.simulation import Simulation

    op = sleeper(0.01)
    before = pargraph.rand(4)

    def masked(shape: tuple):
        def model(x):
            mask = pargraph.rand(*shape)
            return op(x * mask * before).sum() + op(x * (mask * 2)).sum()
        return model

    simulated = []

    class Recorded(Simulation):
        def __init__(self, tasks, nodes, *args, **kwargs):
            super().__init__(tasks, nodes, *args, **kwargs)
            simulated.append([nodes[t.members[0]].op.name for t in tasks
                              if len(t.members) == 1])

    monkeypatch.setattr(sys.modules["pargraph.forecast"], "Simulation", Recorded)

    def data_tasks(tr, workers: int) -> int:
        simulated.clear()
        pargraph.forecast(tr, threads=[], workers=[workers], network=FAST_NETWORK, gil=0.0,
                          measure_gil=False)
        return sum(names.count("leaf") for names in simulated)

    small, big = traced(masked((4,))), traced(masked((1024, 4)))  # 16 B and 16 KiB
    for tr in (small, big):
        shipped = [key for run in tr.run_records for key in run.shipped]
        assert len(shipped) == len(set(shipped)) >= 1
        assert before._node.key not in shipped
    assert data_tasks(big, 2) == 1  # its two branches' tasks read it
    assert data_tasks(big, 1) == data_tasks(small, 2) == 0  # one task reads it; it is small


def test_a_transfer_takes_the_workers_and_the_schedulers_cores():
    tr = traced(branches(8, 0.02))
    busy = Network(**{**FAST_NETWORK.__dict__, "worker_transfer": 0.01,
                      "scheduler_transfer": 0.004})

    def forecast(network: Network, cores: int | None = None) -> pargraph.Forecast:
        return pargraph.forecast(tr, threads=[], workers=[1, 2], network=network, gil=0.0,
                                 measure_gil=False, cores=cores)

    fast, slow = forecast(FAST_NETWORK), forecast(busy)
    assert slow.step_time(workers=1) == pytest.approx(fast.step_time(workers=1))  # no transfer
    # each transfer lasts until the sender's and the reader's halves of 10 ms are done
    assert slow.outcome(workers=2).transfers >= fast.outcome(workers=2).transfers + 0.005
    assert slow.step_time(workers=2) > fast.step_time(workers=2)
    # on one shared core, the transfers' time on it delays the branches' work too
    shared = forecast(busy, cores=1).outcome(workers=2)
    assert shared.core_wait > forecast(FAST_NETWORK, cores=1).outcome(workers=2).core_wait
    # each array a transfer moves costs its two workers more time on a core
    per_array = Network(**{**FAST_NETWORK.__dict__, "worker_value": 0.01})
    assert forecast(per_array).outcome(workers=2).transfers >= \
        fast.outcome(workers=2).transfers + 0.005
    # and each byte: the 16 bytes of a 4-element float32 value, half on each worker
    per_byte = Network(**{**FAST_NETWORK.__dict__, "worker_byte": 1e-3})
    assert forecast(per_byte).outcome(workers=2).transfers >= \
        fast.outcome(workers=2).transfers + 0.008


def test_a_transfer_that_starts_beside_another_costs_the_cores_less():
    """Processes already awake handle several messages a turn of their loops: a transfer
    that starts while another moves costs the overlap's time on a core, one alone the
    full."""
    tr = traced(branches(8, 0.02))
    alone = Network(**{**FAST_NETWORK.__dict__, "worker_transfer": 0.01,
                       "scheduler_transfer": 0.004})
    beside = Network(**{**alone.__dict__, "worker_transfer_overlap": 0.002,
                        "scheduler_transfer_overlap": 0.0005})
    assert alone.transfer_costs(True) == alone.transfer_costs(False) == (0.01, 0.004)
    assert beside.transfer_costs(True) == (0.002, 0.0005)
    assert beside.transfer_costs(False) == (0.01, 0.004)

    def outcome(network: Network, workers: int):
        return pargraph.forecast(tr, threads=[], workers=[workers], network=network, gil=0.0,
                                 measure_gil=False, cores=1).outcome(workers=workers)

    # a wide fan-out over four workers moves several values at once: cheaper beside
    assert outcome(beside, 4).transfers < outcome(alone, 4).transfers
    assert outcome(beside, 4).step_time < outcome(alone, 4).step_time


def test_training_state_is_copied_to_a_second_worker_before_the_next_step():
    tr = traced_call(*linears_step(16, 8))
    slow_copy = Network(**{**FAST_NETWORK.__dict__, "replicate_latency": 0.05,
                           "worker_replicate": 0.002, "scheduler_replicate": 0.001})

    def step(replicas: int, network: Network = slow_copy) -> float:
        with dask.config.set({"pargraph.replicas": replicas}):
            return pargraph.forecast(tr, threads=[], workers=[2], network=network,
                                     gil=0.0, measure_gil=False).step_time(workers=2)

    assert step(2) >= step(1) + 0.05  # the step waits for the copies of the parameters
    assert step(2, FAST_NETWORK) < step(2)
    # a copy also lasts until its time on the two workers' cores is done (15 ms each)
    busy_copy = Network(**{**FAST_NETWORK.__dict__, "replicate_latency": 1e-3,
                           "worker_replicate": 0.03})
    assert step(2, busy_copy) >= step(1, busy_copy) + 0.015
    # and each array copied is (de)serialized on its own: 8 parameters of 10 ms each, half
    # on the sender's core and half on the reader's
    per_array = Network(**{**FAST_NETWORK.__dict__, "worker_value": 0.01})
    assert step(2, per_array) >= step(2, FAST_NETWORK) + 0.035
    # and each byte: 16 x 16 float32 weights are 1 KiB, half of 1 ms a byte on each core
    per_byte = Network(**{**FAST_NETWORK.__dict__, "worker_byte": 1e-3})
    assert step(2, per_byte) >= step(2, FAST_NETWORK) + 0.5
    one = pargraph.forecast(tr, threads=[], workers=[1], network=slow_copy, gil=0.0,
                            measure_gil=False)
    assert one.outcome(workers=1).transfers == 0.0  # one worker: nowhere to copy to


def test_a_compiled_steps_trace_keeps_which_nodes_read_each_parameter():
    """A compiled step keeps its nodes, not the values they read: each leaf becomes one
    value-less stand-in that keeps ``requires_grad``, so that a forecast places the readers
    of a parameter together, as the program's plan does."""
    train, x = linears_step(32, 64)
    (run,) = traced_call(pargraph.compile(train), x).run_records
    assert run.compiled
    inside = {id(node) for node in run.computed}
    read = {id(i): i for node in run.computed for i in node.input_nodes() if id(i) not in inside}
    weights = [i for i in read.values() if i.shape == (32, 32)]
    # each weight is read by its forward, its input's gradient and its update: one stand-in
    assert len(weights) == 4 and all(w.requires_grad for w in weights)
    assert sum(i.requires_grad for i in read.values()) == 8  # the weights and the biases


def test_a_transfer_moves_what_the_reader_reads():
    op = sleeper(0.02)

    def model(x):  # each branch makes 8 MB and hands on one number
        return sum(op(x.sum().expand(1000, 1000) * (k + 1)).sum() for k in range(2))

    tr = traced(model)
    slow = Network(**{**FAST_NETWORK.__dict__, "bandwidth": 1e6})  # a second per megabyte
    two = pargraph.forecast(tr, threads=[], workers=[2], network=slow, gil=0.0,
                            measure_gil=False).outcome(
        workers=2)
    assert two.transfers > 0.0  # the branches ran on both workers, and met
    assert two.transfers < 0.5  # numbers and gradients of 4 values, not the 8 MB blocks


def test_a_compiled_steps_updates_of_big_state_run_after_its_tasks(monkeypatch):
    """A compiled step updates each state of 1 MiB or more after its group tasks, one update
    after another in the calling thread (``in_place``): the trace says which nodes those are,
    and the forecast partitions the rest, which return what the updates read, and runs the
    updates after every other node of the run, on one lane, on any number of threads."""
    module = sys.modules["pargraph.forecast"]
    partitioned = []

    def placed_partition(computed, granularity, outputs, work):
        partitioned.append(({id(n) for n in computed}, list(outputs)))
        return real(computed, granularity, outputs, work)

    real = module.placed_partition
    monkeypatch.setattr(module, "placed_partition", placed_partition)
    train, x = linears_step(512, 256, layers=2, adam=True)
    tr = traced_call(pargraph.compile(train), x)
    run = tr.run_records[-1]
    assert run.compiled
    # each weight (512 x 512 float32: 1 MiB) and its two moments: three updates a weight
    assert len(run.after) == 6
    assert {tr.records[key].phase for key in run.after} == {"update"}
    fc = pargraph.forecast(tr, threads=[1, 4], gil=0.0, measure_gil=False)
    for threads in (1, 4):
        segments = fc.outcome(threads=threads).segments
        after = sorted((s for s in segments if s.key in run.after), key=lambda s: s.start)
        rest = [s for s in segments if s.key not in run.after]
        assert [s.key for s in after] and {s.lane for s in after} == {"thread 0"}
        assert after[0].start >= max(s.stop for s in rest) - 1e-12
        assert all(a.stop <= b.start + 1e-12 for a, b in zip(after, after[1:]))
    # each partition has the step's other nodes, which return what the updates read
    assert partitioned
    computed = {node.key for node in run.computed}
    read = {i.key for node in run.computed if node.key in run.after
            for i in node.input_nodes()} & computed - set(run.after)
    for inside, outputs in partitioned:
        assert len(inside) == len(run.computed) - len(run.after)
        assert all(id(node) in inside for node in outputs)
        assert read and read <= {node.key for node in outputs}


def test_compiled_and_eager_steps_forecast_alike():
    train, x = linears_step(32, 64)
    for run in (train, pargraph.compile(train)):
        for _ in range(3):
            run(x).item()
        with pargraph.trace() as tr:
            run(x).item()
        fc = pargraph.forecast(tr, threads=[1, 2], gil=0.5, measure_gil=False)
        assert fc.step_time(threads=2) <= fc.step_time(threads=1)
        # the forecast sees every node the step ran, each once
        segments = fc.outcome(threads=2).segments
        assert {s.key for s in segments} == {r.key for r in tr.nodes()}


def test_threads_and_workers_that_share_a_machines_cores_wait_for_them():
    tr = traced(branches(8, 0.02))
    # no GIL, and (not measured) all on a core: the branches scale with the cores alone
    own = pargraph.forecast(tr, threads=[1, 8], workers=[1, 4], network=FAST_NETWORK,
                            gil=0.0, measure_gil=False)
    shared = pargraph.forecast(tr, threads=[1, 8], workers=[1, 4], network=FAST_NETWORK,
                               gil=0.0, measure_gil=False, cores=2)
    assert runs_speedup(own, threads=8) > 4.0
    assert 1.5 < runs_speedup(shared, threads=8) <= 2.0 + 1e-9
    assert shared.outcome(threads=8).core_wait > 0.0 == own.outcome(threads=8).core_wait
    assert runs_speedup(own, workers=4) > 2.5
    assert runs_speedup(shared, workers=4) <= 2.0 + 1e-9
    assert shared.step_time(threads=1) == pytest.approx(own.step_time(threads=1))
    # sleeps measured as waiting need no core: two cores hold sixteen threads of them
    waiting = pargraph.forecast(tr, threads=[1, 8], cores=2)
    assert runs_speedup(waiting, threads=8) > 4.0
    with pytest.raises(ValueError, match="cores must be a whole number of at least 1"):
        pargraph.forecast(tr, cores=0)


def test_a_clusters_own_loops_take_their_share_of_shared_cores():
    """Between tasks each worker (with its nanny) and the scheduler keep part of a core busy
    (Network.worker_idle, scheduler_idle): where the processes share the machine's cores,
    four workers of busy lanes on two cores wait for those turns, and the step lasts longer;
    on cores of their own, or with no loops measured, nothing changes."""
    tr = traced(branches(8, 0.01))
    # busy lanes: the sleeps held on a core (not measured, so all on a core), no GIL
    quiet = Network(**{**FAST_NETWORK.__dict__, "worker_task": 1e-4})
    busy = Network(**{**quiet.__dict__, "worker_idle": 0.2, "scheduler_idle": 0.1})

    def runs(network: Network, cores: int | None) -> float:
        fc = pargraph.forecast(tr, threads=[], workers=[4], network=network, gil=0.0,
                               measure_gil=False, cores=cores)
        return fc.step_time(workers=4) - fc.outcome(workers=4).outside

    # 80 ms of work on two cores; the loops want 0.9 of a core for the run's length
    assert runs(busy, 2) > runs(quiet, 2) * 1.2
    assert runs(busy, None) == pytest.approx(runs(quiet, None))
    # and the turns end with the run: the last task's end is the run's
    fc = pargraph.forecast(tr, threads=[], workers=[4], network=busy, gil=0.0,
                           measure_gil=False, cores=2)
    outcome = fc.outcome(workers=4)
    assert max(s.stop for s in outcome.segments) == pytest.approx(
        outcome.step_time - outcome.outside, abs=0.003)


def test_a_compiled_step_goes_to_one_worker_as_one_task():
    for tr, compiled in eager_and_compiled(branches=6, seconds=0.005):
        assert all(r.compiled == compiled for r in tr.run_records)
        network = Network(**{**FAST_NETWORK.__dict__, "run_node": 1e-3})
        # (nothing measured: forecasts that differ in one cost differ by it alone)
        def forecast(network: Network, workers: int) -> float:
            return pargraph.forecast(tr, threads=[], workers=[workers], network=network,
                                     gil=0.0, measure_gil=False).outcome(workers=workers)

        one = forecast(network, 1)
        nodes = sum(len(r.computed) for r in tr.run_records)
        sent = network.run_latency + network.run_node * nodes
        per_value = Network(**{**network.__dict__, "compiled_value": 0.01})
        landing = forecast(per_value, 1).scheduling - one.scheduling

        def sent_nodes(workers: int) -> float:
            """What 10 ms per compiled node adds to the run's scheduling on ``workers``, each
            of its sleeps a group of its own."""
            with dask.config.set({"pargraph.single-task-below": 0, "pargraph.task-grain": 0}):
                added = [forecast(Network(**{**network.__dict__, "compiled_node": per_node}),
                                  workers).scheduling for per_node in (0.0, 0.01)]
            return added[1] - added[0]

        if compiled:  # the program is on the cluster: its call sends one task per group
            assert one.scheduling < sent
            # and lands what it read and wrote: x and its gradient, at least
            assert landing >= 0.01 - 1e-9
            # and costs per node what its workers, which hold the program, take to run it
            assert sent_nodes(1) == pytest.approx(0.01 * nodes)
            assert sent_nodes(2) == pytest.approx(0.01 * nodes)
        else:  # each node is recorded, lowered and sent
            assert one.scheduling >= sent
            assert landing == pytest.approx(0.0, abs=1e-6)
            assert sent_nodes(2) == pytest.approx(0.0, abs=1e-6)


def test_a_compiled_steps_call_here_costs_its_program_per_call_node_and_value(monkeypatch):
    """A compiled step's call on this machine runs its program's guards, a step per node
    and the landing of each value it writes beyond its ops' own time (LocalCosts, measured):
    a forecast on threads charges them, an eager step's forecast not."""
    import sys

    from pargraph.machine_costs import LocalCosts

    module = sys.modules["pargraph.forecast"]
    for tr, compiled in eager_and_compiled(branches=4, seconds=0.002):

        def step(costs: LocalCosts, threads: int) -> tuple[float, int]:
            """The step's time, and how many node runs it has (a cheap node copied into
            several groups runs in each, and pays a step in each)."""
            monkeypatch.setattr(module, "local_costs", lambda: costs)
            outcome = pargraph.forecast(tr, threads=[threads], gil=0.0, measure_gil=False,
                                        away=FLAT).outcome(threads=threads)
            return outcome.step_time, len(outcome.segments)

        free = LocalCosts(run=0.0, task=0.0)
        charged = LocalCosts(run=0.0, task=0.0, compiled_call=0.01, compiled_node=1e-3,
                             compiled_value=2e-3)
        (record,) = tr.run_records
        for threads in (1, 2):
            (free_step, node_runs), (charged_step, _) = step(free, threads), \
                step(charged, threads)
            assert node_runs >= len(record.computed)
            expected = 0.01 + 1e-3 * node_runs + 2e-3 * len(record.outputs)
            added = charged_step - free_step
            if compiled:
                # on one thread all of it (less the run's own gaps, which the steps fill);
                # on two the nodes' steps may overlap the sleeps
                assert added == pytest.approx(expected, abs=5e-4) if threads == 1 else \
                    0.01 + 2e-3 * len(record.outputs) - 1e-9 <= added <= expected + 1e-9, \
                    (threads, added, expected)
            else:
                assert added == pytest.approx(0.0, abs=1e-9), (threads, added)


def test_a_collectors_pass_inside_the_trace_is_left_out_of_the_step():
    step = training_step(branches(4, 0.002))
    step()
    cycles = []
    for _ in range(300_000):  # garbage only a full pass of the collector frees
        cell: list = []
        cell.append(cell)
        cycles.append(cell)
    with pargraph.trace() as tr:
        step()
        del cycles
        start = time.perf_counter()
        gc.collect()
        took = time.perf_counter() - start
    assert took > 0.005 and tr.collecting >= 0.9 * took
    fc = pargraph.forecast(tr, threads=[1], gil=0.0, measure_gil=False, away=FLAT)
    traced_outside = (tr.stopped - tr.started - sum(b - a for a, b in tr.runs)
                      - tr.bookkeeping)
    assert fc.outcome(threads=1).outside == pytest.approx(traced_outside - tr.collecting)
    assert fc.outcome(threads=1).outside < traced_outside - 0.9 * took


def test_a_collectors_pass_inside_a_run_is_counted_once():
    """A pass that begins inside a run (here an op's own) is the run's time: the trace does
    not count it as the collector's too, which the step's time outside the runs leaves out."""

    @pargraph.library.custom_op("test::collects", mutates_args=())
    def collects(x):
        gc.collect()
        return x + 1.0

    collects.register_fake(lambda x: pargraph.empty_like(x))
    x = pargraph.ones(4)
    (collects(x) * 2).sum().item()
    with pargraph.trace() as tr:
        start = time.perf_counter()
        (collects(x) * 2).sum().item()
        took = time.perf_counter() - start
    assert sum(b - a for a, b in tr.runs) > 0
    assert tr.collecting == 0.0
    fc = pargraph.forecast(tr, threads=[1], gil=0.0, measure_gil=False)
    assert 0.0 <= fc.outcome(threads=1).outside < took


def test_the_table_the_timeline_and_the_picture(tmp_path, capsys):
    tr = traced(branches(4, 0.01))
    fc = pargraph.forecast(tr, threads=[1, 2, 4], workers=[2], network=FAST_NETWORK, gil=0.0,
                           measure_gil=False)
    print(fc)
    text = capsys.readouterr().out
    for label in ("1 thread", "2 threads", "4 threads", "2 workers x 1 thread",
                  "critical path", "traced on 1 thread"):
        assert label in text
    assert [row["count"] for row in fc.rows() if row["where"] == "threads"] == [1, 2, 4]
    path = tmp_path / "forecast.json"
    fc.to_chrome(path, threads=4)
    events = json.loads(path.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["args"]["key"] for e in slices} == {r.key for r in tr.nodes()}
    lanes = {e["tid"] for e in slices}
    assert 1 < len(lanes) <= 4
    picture = tmp_path / "forecast.png"
    fc.plot(picture, threads=4)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_questions_are_clear_errors():
    tr = traced(branches(2, 0.001))
    fc = pargraph.forecast(tr, threads=[1], gil=0.0, measure_gil=False)
    with pytest.raises(ValueError, match="name one configuration: threads=N or workers=N"):
        fc.step_time(threads=2, workers=2)
    with pytest.raises(ValueError, match="name one configuration"):
        fc.speedup()
    with pytest.raises(ValueError, match="threads must be a whole number of at least 1, got 0"):
        fc.step_time(threads=0)
    with pytest.raises(ValueError, match="workers must be a whole number of at least 1, got 2.5"):
        pargraph.forecast(tr, threads=[], workers=[2.5], network=FAST_NETWORK)
    with pytest.raises(ValueError, match="between 0 and 1; got 1.5"):
        pargraph.forecast(tr, gil=1.5)
    with pytest.raises(ValueError, match="threads_per_worker must be at least 1"):
        pargraph.forecast(tr, threads_per_worker=0)
    with pargraph.trace() as empty:
        pass
    with pytest.raises(ValueError, match="the trace holds no run"):
        pargraph.forecast(empty)


def test_a_product_with_blas_on_every_core_wants_every_core(monkeypatch):
    """On a machine of two cores (``cores=2``), two nodes of one core each run side by side;
    a product with BLAS on every core (``widths``: 2) wants both, so a node beside it makes
    three threads on two cores, each at two thirds of its pace, as Linux shares them. A step
    whose run on two threads gives BLAS every core (a product and a small branch beside it) is
    simulated so."""
    from pargraph.engine.lowering import ALL_BLAS, blas_threads_of
    from pargraph.simulation import Outcome, Simulation, Task

    a, v = pargraph.randn(384, 384), pargraph.randn(1000)
    with dask.config.set(scheduler="threads", num_workers=1), pargraph.trace() as tr:
        ((a @ a).tanh().sum() + v.exp().sum()).item()
    run = tr.run_records[0]
    assert blas_threads_of(run.computed, 2) is ALL_BLAS
    simulated = []

    class Recorded(Simulation):
        def __init__(self, tasks, nodes, *args, **kwargs):
            super().__init__(tasks, nodes, *args, **kwargs)
            # the two-thread step's simulations (the traced one-thread step's are simulated
            # too, for the caller's time outside the runs)
            if any(isinstance(a, Outcome) and a.config == ("threads", 2) for a in args):
                simulated.append({n.op.name: w for n, w in zip(nodes, self.widths)})

    monkeypatch.setattr(sys.modules["pargraph.forecast"], "Simulation", Recorded)
    for cores, width in ((2, 2), (None, 1)):
        simulated.clear()
        pargraph.forecast(tr, threads=[2], gil=0.0, measure_gil=False, cores=cores)
        assert {w["matmul"] for w in simulated} == {width}
        assert {w["exp"] for w in simulated} == {1}

    nodes = [pargraph.ones(1)._node for _ in range(3)]

    def spans(widths: list[int]) -> tuple[list, float]:
        outcome = Outcome(("threads", 2), 0.0, 2)
        Simulation([Task([k], 0) for k in range(len(widths))], nodes, [0.01] * 3,
                   [0.0] * 3, 1, 3, False, None, 0.0, outcome, cores=2, widths=widths).run()
        return sorted(s.stop for s in outcome.segments), outcome.core_wait

    assert spans([1, 1]) == (pytest.approx([0.01, 0.01]), 0.0)
    # 30 ms of a core's work on two: both end at 15 ms, each 5 ms of it without a core
    assert spans([2, 1]) == (pytest.approx([0.015, 0.015]), pytest.approx(0.01))
    assert spans([2, 2]) == (pytest.approx([0.02, 0.02]), pytest.approx(0.02))
    assert spans([1, 1, 1]) == (pytest.approx([0.015] * 3), pytest.approx(0.015))


def test_threads_taking_turns_on_one_gil_want_one_core_between_them():
    """On two cores, two threads of one process holding its GIL throughout take turns, each
    at half its pace, and want one core between them: a third thread that releases the GIL
    runs beside them on the other core at its own pace, not after them. Four threads that
    release it want four cores of two, and each goes at half its pace."""
    from pargraph.simulation import Outcome, Simulation, Task

    nodes = [pargraph.ones(1)._node for _ in range(4)]

    def stops(shares: list[float]) -> list[float]:
        outcome = Outcome(("threads", len(shares)), 0.0, len(shares))
        Simulation([Task([k], 0) for k in range(len(shares))], nodes, [0.01] * 4, shares, 1,
                   len(shares), False, None, 0.0, outcome, cores=2).run()
        stop = {s.key: s.stop for s in outcome.segments}
        return [stop[node.key] for node in nodes[:len(shares)]]

    assert stops([1.0, 1.0, 0.0]) == pytest.approx([0.02, 0.02, 0.01])
    assert stops([0.0] * 4) == pytest.approx([0.02] * 4)


def _wait(fc, threads: int) -> float:
    """The simulated wait on a one-run step's run (its step less its time outside)."""
    return fc.step_time(threads=threads) - fc.outcome(threads=threads).outside


def test_the_work_outside_the_runs_is_as_traced_where_the_caller_comes_back_as_fast():
    """With the caller's Python as fast after any wait, its work between and around the runs
    (recording ops, reading values back) is the trace's on every configuration."""
    tr = traced(branches(8, 0.02))
    fc = pargraph.forecast(tr, threads=[1, 8], gil=0.0, measure_gil=False, away=FLAT)
    assert fc._outside() > 0
    for n in (1, 8):
        assert fc.outcome(threads=n).outside == pytest.approx(fc._outside())


def test_the_caller_back_from_a_shorter_wait_than_traced_spends_less_time_outside():
    """The first Python after a run pays for the caches the wait lost: on eight threads the
    step waits about 45 ms on its run where the trace's configuration waits 330 ms on one, and
    its time outside the runs is less by what the caller's Python saves after the shorter
    wait; on the traced configuration it is as traced."""
    tr = traced(branches(8, 0.02))
    fc = pargraph.forecast(tr, threads=[1, 8], gil=0.0, measure_gil=False, away=RISING)
    assert _wait(fc, 8) < _wait(fc, 1) / 4
    # a slowing that makes the shorter wait save half the traced Python, however fast this
    # machine ran it (a fixed one can save more than there is, which the forecast caps)
    rise = fc._outside() / 2 / (_wait(fc, 1) - _wait(fc, 8))
    away = Away((0.0, 1.0), (0.0, rise))
    fc = pargraph.forecast(tr, threads=[1, 8], gil=0.0, measure_gil=False, away=away)
    assert fc.outcome(threads=1).outside == fc._outside()
    saved = away.extra(_wait(fc, 1)) - away.extra(_wait(fc, 8))
    assert saved == pytest.approx(fc._outside() / 2) and saved > 0
    assert fc.outcome(threads=8).outside == pytest.approx(fc._outside() - saved, abs=1e-9)


def test_a_step_traced_on_many_threads_forecasts_more_time_outside_on_one():
    """A longer wait than traced costs the caller's Python more (a trace on eight threads,
    forecast on one)."""
    tr = traced(branches(8, 0.02), threads=8)
    fc = pargraph.forecast(tr, threads=[1, 8], gil=0.0, measure_gil=False, away=RISING)
    assert fc.outcome(threads=8).outside == fc._outside()
    more = fc.outcome(threads=1).outside - fc._outside()
    assert more == pytest.approx(RISING.extra(_wait(fc, 1)) - RISING.extra(_wait(fc, 8)))
    assert more > 0.5e-3


def test_the_caller_saves_at_most_its_python_after_each_run():
    """However much slower a wait made the traced Python, a forecast cannot save more than
    the Python after the run took: the time outside never goes below none."""
    tr = traced(branches(8, 0.02))
    steep = Away((0.0, 0.1), (0.0, 10.0))
    fc = pargraph.forecast(tr, threads=[1, 8], gil=0.0, measure_gil=False, away=steep)
    assert fc.outcome(threads=8).outside == 0.0 < fc.outcome(threads=1).outside


def test_a_run_clock_counts_the_callers_time_between_runs_only():
    """A step's time outside pargraph's runs holds what the caller does between them, and
    none of a run's own time (here a sleeping op's 30 ms, forward and backward side by
    side)."""
    run_only = training_step(branches(1, 0.03))
    run_only()

    def with_python_outside() -> None:
        time.sleep(0.02)
        run_only()

    clock = RunClock()
    with clock.observing():
        run_only()
    assert clock.inside >= 0.03
    for step, slept_outside in ((run_only, 0.0), (with_python_outside, 0.02)):
        start = time.perf_counter()
        seconds = outside_seconds(step)
        took = time.perf_counter() - start
        assert slept_outside <= seconds <= took - 0.03  # the run's sleep is not outside


def test_a_run_clock_counts_a_collectors_pass_inside_a_run_as_the_runs():
    clock = RunClock()
    with clock.observing():
        with clock.run():
            gc.collect()
        gc.collect()
    assert clock.collecting > 0.0 and clock.inside > 0.0  # the pass outside the run counts
    inside_only = RunClock()
    with inside_only.observing(), inside_only.run():
        gc.collect()
    assert inside_only.collecting == 0.0 and inside_only.inside > 0.0



def test_a_thread_back_from_a_wait_takes_the_gil_again_while_another_holds_it():
    """Two nodes that sleep 10 ms, beside one that holds the GIL for 50 ms: each sleeper
    takes the GIL back after its sleep for ``retake`` seconds, sharing it with the node that
    holds it, so each ends later than its sleep and the GIL's work (50 ms and two retakes)
    ends no sooner than its sum; the retakes count as waits for the GIL. Without a node
    holding the GIL, or without a retake cost, the sleepers end with their sleeps."""
    from pargraph.simulation import Outcome, Simulation, Task

    nodes = [pargraph.ones(1)._node, pargraph.zeros(1)._node, pargraph.ones(2)._node]

    def ends(retake: float, holder: bool) -> tuple[list[float], Outcome]:
        members = [0, 1, 2] if holder else [0, 1]
        outcome = Outcome(("threads", 3), 0.0, 3)
        Simulation([Task([m], 0) for m in members], nodes, [0.01, 0.01, 0.05],
                   [0.0, 0.0, 1.0], 1, 3, False, None, 0.0, outcome,
                   on_core=[0.05, 0.05, 1.0], retake=retake).run()
        by_key = {s.key: s.stop for s in outcome.segments}
        return [by_key[nodes[m].key] for m in members], outcome

    (a, b, gil), outcome = ends(0.001, True)
    assert min(a, b) > 0.011 and max(a, b) < 0.015
    assert gil == pytest.approx(0.052)
    assert outcome.gil_wait >= 0.002
    assert ends(0.001, False)[0] == pytest.approx([0.01, 0.01])
    assert ends(0.0, True)[0][:2] == pytest.approx([0.01, 0.01])
    (a, b, gil), _ = ends(0.0, True)
    assert gil == pytest.approx(0.05)


def test_the_retake_is_fitted_so_that_the_simulated_wake_up_loop_takes_as_long_as_timed():
    """The GIL's time a thread back from a wait takes is fitted to the timed loop of threads
    waking into Python: the loop simulated with the fitted retake takes as long as timed; a
    slower loop gives a larger retake; a loop no slower than its turns without hand-overs
    gives none. Given loops (generated around what this machine's threads took), not
    measured ones, so that the fit is checked alone."""
    from pargraph.forecast import fitted_retake
    from pargraph.forecast import simulated_wake_ups as simulated
    from pargraph.machine_costs import WakeUps

    rng = np.random.default_rng(59)
    for _ in range(4):
        threads, sleeps = int(rng.integers(8, 25)), int(rng.integers(4, 10))
        python, alone = rng.uniform(20e-6, 60e-6), rng.uniform(1.05e-3, 1.25e-3)
        turns = simulated(WakeUps(threads, sleeps, python, alone, 1.0), 0.0)
        slower = [WakeUps(threads, sleeps, python, alone, turns * f) for f in (1.1, 1.25)]
        fitted = [fitted_retake(w) for w in slower]
        assert 0.0 < fitted[0] < fitted[1]
        for w, retake in zip(slower, fitted):
            assert simulated(w, retake) == pytest.approx(w.took, rel=0.02)
        assert fitted_retake(WakeUps(threads, sleeps, python, alone, turns * 0.99)) == 0.0
    assert fitted_retake(None) == 0.0


def test_a_step_traced_on_two_threads_keeps_the_blas_threads_its_trace_had():
    """Four wide products side by side on two threads run BLAS on one thread each
    (``lowering.blas_threads_of``), so their traced times are one BLAS thread's. The forecast
    takes them as they are on the traced two threads, and divides each by its kind's measured
    ratio (BLAS on one thread over BLAS on every core) on one thread, where a real run gives
    BLAS every core."""
    from pargraph.engine.lowering import ALL_BLAS, ONE_BLAS, blas_threads_of

    train, x = linears_step(512, 256)
    with dask.config.set(scheduler="threads", num_workers=2):
        for _ in range(3):
            train(x).item()
        with pargraph.trace() as tr:
            train(x).item()
    run = max(tr.run_records, key=lambda r: len(r.computed))
    assert run.threads == 2 and run.blas is ONE_BLAS
    assert blas_threads_of(run.computed, 1) is ALL_BLAS
    products = {n.key for n in run.computed if n.op.blas}
    fc = pargraph.forecast(tr, threads=[1, 2], gil=0.0)  # no GIL waits: times as given
    assert products and products <= set(fc.one_blas_thread)
    for threads, scale in ((2, lambda key: 1.0), (1, lambda key: 1 / fc.one_blas_thread[key])):
        took = {s.key: s.stop - s.start for s in fc.outcome(threads=threads).segments
                if s.key in products}
        assert set(took) == products
        for key, seconds in took.items():
            assert seconds == pytest.approx(tr.records[key].duration * scale(key), rel=1e-6)


def test_a_result_travels_to_a_worker_once_for_all_its_readers_there():
    """A dask worker fetches a key once for all its tasks that read it: of two tasks on a
    worker reading one result made on another, the second waits for the first's message
    and sends none of its own; a task there made ready after the result landed finds it;
    a reader on a third worker fetches its own copy."""
    from pargraph.simulation import Outcome, Simulation, Task

    x = pargraph.ones(4)
    a = x * 2
    first, second = a + 1, a * 3
    later = first + a  # reads the landed result after ``first`` ran
    nodes = [a._node, first._node, second._node, later._node]
    network = Network(**{**FAST_NETWORK.__dict__, "transfer_latency": 0.01,
                         "worker_transfer": 0.002})

    def run(workers: list[int]) -> tuple[float, list[float]]:
        outcome = Outcome(("workers", 3), 0.0, 3)
        tasks = [Task([0], 0)] + [Task([k + 1], w) for k, w in enumerate(workers)]
        Simulation(tasks, nodes[:len(tasks)], [0.01] + [0.001] * len(workers), [0.0] * 4,
                   3, 1, True, network, 0.0, outcome).run()
        return outcome.transfers, [t.done for t in tasks]

    once, done = run([1, 1])  # one message of 10 ms (and the workers' time on a core)
    assert 0.01 <= once < 0.012
    # the second reader waits for the same message: neither runs before it lands, 10 ms
    # after the source's 10 ms
    assert min(done[1], done[2]) >= 0.02 + 0.001
    assert run([1, 2])[0] >= 2 * 0.01  # a reader on another worker: a message of its own
    assert run([1, 1, 1])[0] == pytest.approx(once)  # the later reader fetches nothing
