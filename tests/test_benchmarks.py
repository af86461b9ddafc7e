"""The benchmarks' hand-written numpy baseline does the same work as pargraph's step, and
the in-process comparisons time what they say."""

import dataclasses
import os
import sys
from collections import Counter

import dask
import numpy as np
import pytest

from benchmarks import loop


@pytest.mark.parametrize("threads", [1, 2])
def test_the_numpy_baseline_trains_like_pargraph(threads):
    workload = loop.WORKLOADS["branchy"]
    pargraph_step = loop._pargraph_step(workload)
    initial = [[(layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy())
                for layer in tower if hasattr(layer, "weight")]
               for tower in pargraph_step.towers]
    numpy_step = loop._numpy_step(workload, threads, initial)
    pargraph_losses = [pargraph_step() for _ in range(3)]
    numpy_losses = [numpy_step() for _ in range(3)]
    assert pargraph_losses[0] > pargraph_losses[-1]  # it trains
    np.testing.assert_allclose(numpy_losses, pargraph_losses, rtol=1e-5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_numpy_baseline_keeps_its_heap():
    """Three 1 MiB arrays made and freed per step: with glibc's adaptive thresholds the heap's
    top is given back to the kernel at each step, and its pages fault in again at the next;
    kept, a step faults in no page."""
    import subprocess

    probe = (
        "import resource, sys\n"
        "import numpy as np\n"
        "from benchmarks.loop import keep_heap\n"
        "kept = sys.argv[1] == 'kept' and keep_heap()\n"
        "def step():\n"
        "    arrays = [np.ones(1 << 17) for _ in range(3)]\n"
        "for _ in range(5): step()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(100): step()\n"
        "print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    faults = {}
    for mode in ("kept", "adaptive"):
        out = subprocess.run([sys.executable, "-c", probe, mode], capture_output=True,
                             text=True, check=True, cwd=root,
                             env={**os.environ, "PYTHONPATH": root}).stdout.split()
        faults[mode] = int(out[1])
        assert out[0] == ("True" if mode == "kept" else "False")
    assert faults["adaptive"] >= 100 * 256  # a MiB of pages a step at least
    assert faults["kept"] < 100


def test_a_run_measures_the_blas_kernels_a_stock_numpy_picks():
    """The machine's OpenBLAS variables are unset for a run (and said so in its report), or
    kept and reported; set, OPENBLAS_CORETYPE names the kernels numpy runs."""
    import subprocess

    from benchmarks import run

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    machine = {**os.environ, "OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512",
               "PYTHONPATH": root}
    machine.pop(run.UNSET, None)
    stock = run.stock_environment(machine)
    assert "OPENBLAS_CORETYPE" not in stock and "OPENBLAS_L2_SIZE" not in stock
    assert stock[run.UNSET] == "OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512"
    assert run.stock_environment(stock) is None  # the re-run process runs on
    told = {name: subprocess.run([sys.executable, "-c",
                                  "from benchmarks import run; print(run.blas())"],
                                 capture_output=True, text=True, check=True, cwd=root,
                                 env=env).stdout
            for name, env in (("machine", machine), ("stock", stock))}
    assert "kept: OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512" in told["machine"]
    assert "this run unset them" in told["stock"] and "kept" not in told["stock"]
    if "openblas" in told["machine"]:
        assert "running its Haswell kernels" in told["machine"]


def test_the_modes_benchmark_times_every_way_and_restores_the_choice(monkeypatch):
    from benchmarks import modes
    from pargraph.engine import modes as engine_modes

    choose, run = dask.config.get("pargraph.adaptive", True), engine_modes.run_on_threads
    on_dask, dask_runs = modes._on_dask_threads, []

    def counted(*args):
        dask_runs.append(len(args))
        return on_dask(*args)

    monkeypatch.setattr(modes, "_on_dask_threads", counted)
    # branchy: a step of many group tasks, so that the threaded ways run their runners
    times = modes.compare("branchy", blocks=1, steps=2)
    assert len(dask_runs) >= 2  # dask's threads ran the group tasks
    assert set(times) == {"pargraph's threads", "dask's threads", "one thread, one BLAS thread",
                          "one thread, BLAS free"}
    assert all(len(seconds) == 2 and min(seconds) > 0 for seconds in times.values())
    assert dask.config.get("pargraph.adaptive", True) == choose
    assert engine_modes.run_on_threads is run


def test_the_versions_benchmark_runs_another_pargraph_beside_this_one():
    import pargraph
    from benchmarks import versions
    here = os.path.dirname(pargraph.__file__)
    times = versions.compare(here, "small", blocks=1, steps=2, mode="inline")
    assert set(times) == {"this", here}
    assert all(len(seconds) == 2 and min(seconds) > 0 for seconds in times.values())
    other = sys.modules["pargraph_pargraph"]
    # its own modules all through, none of this pargraph's
    assert other.__file__ != pargraph.__file__
    assert other.optim.optimizer.Tensor is other.Tensor is not pargraph.Tensor
    assert dask.config.get("pargraph.adaptive", True) is True  # the forced mode is undone
    # a layer model, compiled by each version
    times = versions.compare(here, "conv", blocks=1, steps=2, compiled="step")
    assert all(len(seconds) == 2 and min(seconds) > 0 for seconds in times.values())
    from benchmarks.loop import pargraph_step

    steps = {label: pargraph_step("conv", package, "step")
             for label, package in (("this", "pargraph"), ("other", "pargraph_pargraph"))}
    assert [type(step.compiled).__module__.split(".")[0] for step in steps.values()] == \
        ["pargraph", "pargraph_pargraph"]
    assert all(isinstance(step(), float) for step in steps.values())


def test_targets_report_their_spread_over_the_rounds():
    """A ratio is also taken round by round (rounds run close together in time), so that a
    target decided by the machine's state shows it."""
    import statistics

    from benchmarks.harness import in_rounds, per_round

    assert per_round([2.0, 3.0, 4.0], [1.0, 2.0, 2.0]) == "per round 1.50-2.00x"
    assert per_round([2.0], [1.0]) == ""  # one round: no spread
    calls = []
    timings = in_rounds({"a": lambda: calls.append(1), "b": lambda: None}, rounds=3, steps=4,
                        warmup=1)
    assert len(calls) == 3 * (1 + 4)
    a = timings["a"]
    assert len(a.samples) == 12 and len(a.round_medians) == 3
    assert a.round_medians == [statistics.median(a.samples[k:k + 4]) for k in (0, 4, 8)]
    result = loop.compare("small", ["pargraph sync"], rounds=2, steps=2, warmup=1)
    assert len(result["pargraph sync"]["round_medians"]) == 2
    assert min(result["pargraph sync"]["round_medians"]) > 0
    # a block also lasts ``seconds``, and stops once it has: one step asked for, sleeps of
    # at least 10 ms timed (however late a busy machine wakes them)
    import time

    block = in_rounds({"a": lambda: time.sleep(0.01)}, rounds=1, steps=1, warmup=0,
                      seconds=0.05)["a"].samples
    assert sum(block) >= 0.05 and sum(block[:-1]) < 0.05 and len(block) <= 5


def test_the_forecast_benchmark_traces_a_step_after_each_round_of_measurements(monkeypatch):
    """The traces a forecast is made from meet the machine of the minutes the measurements
    meet: one step on one thread is traced after each round, once two untraced steps paid for
    the switch from two threads, and the forecast takes the median of them."""
    import pargraph
    from benchmarks import forecast, scaling

    monkeypatch.setattr(scaling, "WARM_SECONDS", 0.0)
    monkeypatch.setattr(scaling, "TIMED_SECONDS", 0.0)

    calls: list = []  # each step's thread count, and "trace" where a trace begins
    traced = forecast._traced
    monkeypatch.setattr(forecast, "_traced", lambda step: calls.append("trace") or traced(step))

    def make():
        def step():
            calls.append(dask.config.get("num_workers"))
            (pargraph.ones(8) * 2).exp().sum().item()
        return step

    traces: list = []
    steps = forecast.measure_threads(make, (1, 2), 4, traces)
    assert sorted(steps) == [1, 2] and min(steps.values()) > 0
    assert len(traces) == forecast.ROUNDS
    # each trace follows the round's last block (two threads), then two untraced steps on one
    starts = [k for k, call in enumerate(calls) if call == "trace"]
    assert len(starts) == forecast.ROUNDS
    assert all(calls[k - 3:k + 2] == [2, 1, 1, "trace", 1] for k in starts)
    assert all(len(t.run_records) == 1 and t.run_records[0].threads == 1 for t in traces)
    fc = forecast.traced_forecast(None, (1, 2), (), traces=traces)
    by_time = sorted(traces, key=lambda t: t.stopped - t.started - t.collecting)
    assert fc.trace is by_time[(len(traces) - 1) // 2]
    with pytest.raises(ValueError, match="a step to trace, or traces"):
        forecast.traced_forecast(None, (1,), ())


def test_the_forecast_benchmark_counts_the_runners_ways_per_thread_count(monkeypatch):
    """Each thread count's steps' runs, by the way the runner chose: what FORECAST.md shows
    beside a two-thread measurement (a speed-up near 1 with every run in the calling thread
    is the runner's choice, not the machine's)."""
    import pargraph
    from benchmarks import forecast, scaling
    from pargraph.engine import modes

    monkeypatch.setattr(scaling, "WARM_SECONDS", 0.0)
    monkeypatch.setattr(scaling, "TIMED_SECONDS", 0.0)

    def make():
        a = pargraph.ones(512, 512)  # products of milliseconds: never run as one task

        def step():
            (a.exp() @ a + a.tanh() @ a).sum().item()
        return step

    ways: dict = {}
    forecast.measure_threads(make, (1, 2), 8, None, ways)
    assert set(ways) == {1, 2}
    # every step on two threads is one run of two branches, which the runner times
    assert sum(ways[2].values()) >= 8 and set(ways[2]) <= set(modes.MODES)


def test_the_forecast_benchmark_times_each_worker_count_for_seconds_in_rounds(monkeypatch):
    """Each worker count is measured in WORKER_ROUNDS rounds, on a cluster of its own each,
    the counts taking turns, and each round times WORKER_SECONDS of steps at least: a
    handful of steps on four workers sharing two cores leaves a median as uncertain as the
    target. The steps take their time on a clock of the test's own."""
    import contextlib
    import types

    from benchmarks import forecast, harness

    clusters: list = []
    clock = [0.0]

    @contextlib.contextmanager
    def cluster(count):
        clusters.append(count)
        yield "sync"

    monkeypatch.setattr(forecast, "worker_processes", cluster)
    monkeypatch.setattr(forecast, "WORKER_SECONDS", 0.05)
    monkeypatch.setattr(harness, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    ran: dict = {}

    def make():
        def step():
            ran[clusters[-1]] = ran.get(clusters[-1], 0) + 1
            clock[0] += 0.005 * clusters[-1]
        return step

    steps = forecast.measure_workers(make, (1, 2), 2)
    assert clusters == [1, 2] * forecast.WORKER_ROUNDS
    assert steps == {1: pytest.approx(0.005), 2: pytest.approx(0.01)}
    # five warm-up steps a round, then 0.05 s of steps: ten of 5 ms, five of 10 ms at least
    assert ran[1] >= forecast.WORKER_ROUNDS * (5 + 10)
    assert ran[2] >= forecast.WORKER_ROUNDS * (5 + 5)


def test_the_forecast_benchmark_repeats_each_kind_of_workload_as_asked(monkeypatch):
    """Both kinds of workload are traced, forecast and measured several times in a row (the
    sleeping graphs' steps on many threads meet the machine's slow stretches as the numpy
    workloads' do), as many as asked, and ``--repeats`` stays the numpy workloads' own."""
    from benchmarks import forecast

    asked = []

    def compare(makers, threads, workers, steps, repeats=1):
        asked.append((threads, repeats))
        return []

    monkeypatch.setattr(forecast, "compare", compare)
    monkeypatch.setattr(forecast, "loopback", lambda measure: None)
    forecast.main(["--no-write"])
    forecast.main(["--no-write", "--repeats", "4", "--sleeping-repeats", "2"])
    sleeping, real = forecast.scaling.THREADS, forecast.REAL_THREADS
    assert asked == [(sleeping, 5), (real, 5), (sleeping, 2), (real, 4)]


def test_the_forecast_benchmark_takes_the_median_of_the_latest_loopbacks(monkeypatch):
    """Each workload's forecast on workers takes the median of the loopback measured right
    before it and the two measured before that: one measured in a slow stretch (100 ms a
    run) no longer decides a workload's forecast alone."""
    from benchmarks import forecast
    from pargraph.machine_costs import Network

    one = Network(1e-3, 1e-4, 2e-3, 0.0, 1e-3, 1e9, 2e-3)
    measured = iter([dataclasses.replace(one, run_latency=s)
                     for s in (0.004, 0.1, 0.005, 0.006, 0.007)])
    used = []

    class Forecast:
        def __init__(self, network):
            self.network = network
            used.append(network.run_latency)

        def speedup(self, **config):
            return 1.0

        def step_time(self, **config):
            return 0.01

    monkeypatch.setattr(forecast, "measure_loopback", lambda: next(measured))
    monkeypatch.setattr(forecast, "cores_delivered", lambda: (2.0, 0.0))
    monkeypatch.setattr(forecast, "calls_delivered", lambda: 2.0)
    monkeypatch.setattr(forecast, "measure_threads", lambda *a, **k: {1: 0.01})
    monkeypatch.setattr(forecast, "measure_workers", lambda make, workers, steps: {
        w: 0.01 for w in workers})
    monkeypatch.setattr(forecast, "measure_away", lambda: None)
    monkeypatch.setattr(forecast, "traced_forecast",
                        lambda step, threads, workers, network, traces, away: Forecast(network))
    rows = forecast.compare({"a": lambda: None, "b": lambda: None}, (1,), (1, 2), 1,
                            repeats=2)
    assert used == pytest.approx([0.004, 0.052, 0.005, 0.006])
    assert all(len(row["stolen"]) == 2 and all(0.0 <= share <= 1.0 for share in row["stolen"])
               for row in rows)
    assert [n.run_latency for n in rows[0]["network"]] == pytest.approx([0.004, 0.052])
    assert len(rows) == 6  # per workload, one row a configuration


def test_the_kernels_benchmark_compiles_then_loads_numbas_kernels_and_times_both_ways():
    from benchmarks import kernels

    found = kernels.measure(calls=40)
    assert [found[k]["kernels"] for k in ("compiling", "cached", "numpy")] == \
        ["numba", "numba", "numpy"]
    assert all(v > 0 for run in found.values() for k, v in run.items() if k != "kernels")


def test_the_forecast_benchmark_says_what_the_machines_cores_gave_each_workload():
    from benchmarks.forecast import calls_delivered, cores_delivered, cores_table

    median, low = cores_delivered(0.3)
    assert 0.3 < median < 2.5 and 0.0 <= low <= 1.0  # two threads of products, two cores
    assert 0.2 < calls_delivered(0.2) < 2.5
    from benchmarks.forecast import cpu_seconds, stolen_share

    before = cpu_seconds()
    sum(range(2_000_000))  # some CPU time passes
    after = cpu_seconds()
    assert 0.0 <= before[0] <= before[1] and after[1] > before[1] and after[0] >= before[0]
    assert 0.0 <= stolen_share(before, after) <= 1.0
    assert stolen_share((10.0, 100.0), (15.0, 150.0)) == pytest.approx(0.1)
    assert stolen_share((10.0, 100.0), (10.0, 100.0)) == 0.0
    from pargraph.caller_costs import Away
    from pargraph.machine_costs import Network

    away = Away((0.0, 0.01, 0.02, 0.5), (1e-4, 2e-4, 4e-4, 9e-4))
    network = Network(task_latency=3e-3, scheduler_task=1e-3, run_latency=8e-3, run_node=0.0,
                      transfer_latency=2e-3, bandwidth=1e9, replicate_latency=3e-3)
    ways = Counter({"threads": 98, "inline, one BLAS thread": 7})
    row = {"workload": "towers", "cores": [((1.93, 0.05), (1.12, 0.6))], "calls": [(1.2, 0.9)],
           "stolen": [0.18], "ways": [ways], "threads": 2, "network": [network],
           "away": [away]}
    assert cores_table([row, row]).splitlines()[2:] == [
        "| towers | 1.93x (5%) | 1.12x (60%) | 1.20x, 0.90x | 18% | 98 of 105 (2) "
        "| 3.00, 8.00, 2.00 ms | +0.20, +0.54 ms |"]
    # a repeated workload: a line per repetition, and each repetition's distance per row
    again = {**row, "cores": row["cores"] * 2, "calls": row["calls"] * 2,
             "stolen": [0.18, 0.0], "ways": [ways, Counter()], "network": [network] * 2,
             "away": [away] * 2}
    assert len(cores_table([again]).splitlines()) == 4
    assert "| - |" in cores_table([again]).splitlines()[3]
    from benchmarks.forecast import table

    rows = [{"workload": "towers", "where": "threads", "count": 2, "measured": 1.5,
             "forecast": 1.65, "step": 0.01, "forecast_step": 0.009, "offs": [0.1, -0.05]}]
    assert table(rows).splitlines()[2] == \
        "| towers | 2 threads | 10.0 ms | 9.0 ms | 1.50x | 1.65x | +10.0% | +10.0%, -5.0% |"


def test_the_forecast_benchmark_says_how_far_each_rows_steps_moved_from_the_run_before():
    """Read back from the FORECAST.md the run before wrote, each row's measured and forecast
    step set beside this run's tell a miss whose measured step moved from one whose
    forecast did; a row the run before did not have says so."""
    from benchmarks.forecast import steps_before, table

    row = {"workload": "towers", "where": "threads", "count": 2, "measured": 1.5,
           "forecast": 1.65, "step": 0.01, "forecast_step": 0.009, "offs": [0.1, -0.05]}
    earlier = "# Forecasts\n\n" + table([row]) + "\n\n| towers | 1.93x (5%) | 1.1x | 3.00 ms |\n"
    before = steps_before(earlier)
    assert before == {("towers", "2 threads"): (pytest.approx(0.01), pytest.approx(0.009))}
    slower = {**row, "step": 0.0125, "forecast_step": 0.0081}
    one = {**row, "count": 1, "step": 0.02}
    lines = table([slower, one], before).splitlines()
    assert lines[0].endswith("| steps against the run before: measured, forecast |")
    assert lines[1].count("---") == 9
    assert lines[2].endswith("| +10.0%, -5.0% | +25.0%, -10.0% |")
    assert lines[3].startswith("| towers | 1 thread |") and lines[3].endswith("| - |")
    assert "steps against" not in table([row], {})
