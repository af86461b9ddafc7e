"""Forecasts against reality: ``pargraph.forecast`` of one traced step, set beside the
speed-ups the same step measures on threads and on a cluster of worker processes.

    python -m benchmarks.forecast           # writes benchmarks/FORECAST.md

Each workload's loopback is measured again (it drifts within minutes); its thread counts are
measured in rounds, one steady step traced on one thread after each round, so that the traces
meet the machine of the minutes the measurements meet; and the
forecast of the median trace for every configuration is compared with the configuration's
measured speed-up (the median of steady-state steps over the same step's median on one thread or
one worker), all of a workload's measurements one after another, its configurations taking turns
in rounds (a cluster started for each worker count in each round). The sleeping graphs of
``benchmarks.scaling`` need no core, so this 2-core machine runs them on 1 to 16 threads and 1
to 4 worker processes for real; the numpy workloads use cores, so they are compared on the
configurations this machine has: 1 and 2 threads, 1 and 2 workers, and since the machine's
shared cores move their speed-ups from minute to minute, each is traced, forecast and measured
five times in a row (``--repeats``), its rows holding the medians of the five forecast and of
the five measured speed-ups; the sleeping graphs, whose steps on many threads or workers meet
the machine's slow stretches too, five times (``--sleeping-repeats``). Worker processes run
one thread each, beside a scheduler process, on 127.0.0.1; the forecasts know that every thread
and process of a configuration shares this machine's cores (``cores=``). Each row also says how
much longer its measured and its forecast step took than in the ``FORECAST.md`` it replaces.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable

import dask
import numpy as np

import pargraph
from benchmarks import harness, scaling
from pargraph.caller_costs import Away, measure_away
from pargraph.machine_costs import (
    Network,
    loopback,
    measure_loopback,
    median_network,
)
from pargraph.remote.loopback import worker_processes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: The numpy workloads: builders of a training step (benchmarks.loop's towers and
#: benchmarks.layer_models' models).
REAL_THREADS, REAL_WORKERS = (1, 2), (1, 2)
#: How far a forecast speed-up may be from the measured one (issue #59).
SLEEPING_LIMIT, REAL_LIMIT = 0.10, 0.15
#: Rounds in which a workload's configurations take turns: the machine gives two threads
#: less than two cores in stretches of up to seconds (docs/forecast.md), which should slow
#: every configuration's measurement a little rather than one of them a lot.
ROUNDS, WORKER_ROUNDS = 4, 3
#: Seconds of steps a worker count's round times at least: a step on four workers sharing
#: two cores varies by about a tenth from one step to the next, so a handful of steps leaves
#: its median as uncertain as the target (docs/forecast.md).
WORKER_SECONDS = 1.5
#: A workload's forecast takes the median of the loopbacks measured right before it and
#: before the workloads just before it, this many in all: one measured in a slow stretch
#: moved every worker row of its workload (docs/forecast.md).
LOOPBACK_LATEST = 3


def real_workloads() -> dict[str, Callable[[], Callable]]:
    from benchmarks.loop import pargraph_step

    return {
        "wide towers (eager)": lambda: pargraph_step("wide"),
        "branchy towers (compiled)": lambda: pargraph_step("branchy", compiled="step"),
        "cnn (compiled)": lambda: pargraph_step("cnn", compiled="step"),
        "attention (eager)": lambda: pargraph_step("attention"),
    }


def sleeping_workloads() -> dict[str, Callable[[], Callable]]:
    return {name: (lambda make=make: scaling.step_of(make()))
            for name, make in scaling.GRAPHS.items()}


def traced_forecast(step: Callable | None, threads: tuple, workers: tuple,
                    network: Network | None = None, traces: list | None = None,
                    away: Away | None = None) -> pargraph.Forecast:
    """The forecast of one steady step, traced on one thread: the median of ``traces``
    (steps traced on one thread, as :func:`measure_threads` makes them), else of three steps
    of ``step`` traced here (one step can meet a burst of the machine's other work).
    ``network``: the loopback's costs (None: the kept measurement); ``away``: the caller's
    slowing after a wait (None: measured once in this process)."""
    if not traces:
        if step is None:
            raise ValueError("traced_forecast: give a step to trace, or traces")
        traces = []
        with dask.config.set(scheduler="threads", num_workers=1):
            scaling.median_step(step, 3, 20, scaling.WARM_SECONDS)
            for _ in range(3):
                traces.append(_traced(step))
    tr = sorted(traces, key=lambda t: t.stopped - t.started - t.collecting)[(len(traces) - 1) // 2]
    # every configuration runs on this machine, so its threads and processes share its cores
    return pargraph.forecast(tr, threads=threads, workers=workers, cores=os.cpu_count(),
                             network=network, away=away)


def cores_delivered(seconds: float = 2.0) -> tuple[float, float]:
    """How much of this machine's two cores two threads get right now: the median speed-up
    of two threads making numpy products (BLAS on one thread each) over the same products
    made one after the other, in rounds of about 25 ms for ``seconds``, and the share of
    rounds under 1.5x. A shared virtual machine's host takes a vCPU away at times, without
    counting it as stolen time (docs/forecast.md)."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((300, 300))

    def products() -> None:
        for _ in range(4):
            a @ a

    with threadpool_limits(1):
        speedups = _pairs_over_one((products, products), seconds)
    return statistics.median(speedups), sum(s < 1.5 for s in speedups) / len(speedups)


def _pairs_over_one(works: tuple[Callable[[], None], Callable[[], None]],
                    seconds: float) -> list[float]:
    """Rounds for ``seconds``: the two ``works`` one after the other, then on two threads at
    once; each round's first time over its second."""
    works[0]()
    ratios = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        for work in works:
            work()
        alone = time.perf_counter() - start
        pair = [threading.Thread(target=work) for work in works]
        start = time.perf_counter()
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join()
        ratios.append(alone / (time.perf_counter() - start))
    return ratios


def calls_delivered(seconds: float = 1.0) -> float:
    """What two threads of small numpy calls get from this machine right now: the median,
    over rounds of about 5 ms for ``seconds``, of the time of the same calls one after the
    other over their time on two threads, with the interpreter's switch interval of
    pargraph's runs. Each call (an elementwise op on 65,536 numbers, about 25 us)
    releases the GIL for its loop and takes it back, so the figure follows what a step of
    many small ops gets (the GIL's hand-overs, waking the other thread) where two threads of
    products (:func:`cores_delivered`) need neither."""
    from pargraph.engine.threads import state

    arrays = [np.random.default_rng(k).random((64, 1024), dtype=np.float32) for k in range(2)]
    outs = [np.empty_like(a) for a in arrays]

    def calls(k: int) -> None:
        for _ in range(40):
            np.tanh(arrays[k], out=outs[k])

    with state.switching.lowered():
        return statistics.median(_pairs_over_one((lambda: calls(0), lambda: calls(1)),
                                                 seconds))


def cpu_seconds() -> tuple[float, float]:
    """This machine's CPU seconds so far, summed over its cores: ``(stolen, total)``, stolen
    being a virtual machine's time its host gave the cores to other machines (``psutil``'s
    ``steal``; 0 where there is none). Over a workload's measurements, the stolen share says
    how much of the machine another tenant took, which no measurement here can undo."""
    import psutil

    times = psutil.cpu_times()
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    return getattr(times, "steal", 0.0), total  # guest time is counted in user time too


def stolen_share(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of the CPU time between two :func:`cpu_seconds` that the host took."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def runner_ways() -> Counter:
    """The runs this process made so far whose way the runner chose, by that way
    (``engine.modes.MODES``: on threads, or in the calling thread)."""
    from pargraph.engine.modes import scheduling

    return Counter(scheduling.ran)


def measure_threads(make: Callable, threads: tuple, steps: int,
                    traces: list | None = None,
                    ways: dict[int, Counter] | None = None) -> dict[int, float]:
    """Each thread count's median step, of a step made for it (a compiled step keeps the
    plan of the thread count it was captured on), the counts taking turns in
    :data:`ROUNDS` rounds of at least ``steps / ROUNDS`` steps each; after each round, where
    ``traces`` is a list and one thread is measured, one more step on one thread is traced
    into it, after two untraced ones. ``ways``: where to count, per thread count, its
    steps' runs by the way the runner chose (:func:`runner_ways`), warm-ups too."""
    runs = {}
    for n in threads:
        runs[n] = _on_threads(n, make(), None if ways is None else ways.setdefault(n, Counter()))
        scaling.median_step(runs[n], 1, 20, scaling.WARM_SECONDS)

    def trace() -> None:
        # the two steps after a switch from another thread count pay for it (as in_rounds'
        # warm-up): untraced, so that the trace meets the step as the measurements do
        runs[1]()
        runs[1]()
        traces.append(_traced(runs[1]))

    after_round = trace if traces is not None and 1 in runs else None
    timings = harness.in_rounds(runs, ROUNDS, -(-steps // ROUNDS), warmup=1,
                                seconds=scaling.TIMED_SECONDS / 2, after_round=after_round)
    return {n: timing.median for n, timing in timings.items()}


def _traced(step: Callable[[], None]) -> pargraph.Trace:
    with dask.config.set(scheduler="threads", num_workers=1), pargraph.trace() as tr:
        step()
    return tr


def _on_threads(n: int, step: Callable, ways: Counter | None = None) -> Callable[[], None]:
    def run() -> None:
        with dask.config.set(scheduler="threads", num_workers=n):
            step()

    def counted() -> None:
        before = runner_ways()
        run()
        ways.update(runner_ways() - before)

    return run if ways is None else counted


def measure_workers(make: Callable, workers: tuple, steps: int) -> dict[int, float]:
    """Each worker count's median step on a ``dask scheduler`` and ``count`` one-thread
    ``dask worker`` processes on 127.0.0.1: the cluster the loopback's costs are measured
    on (a ``LocalCluster`` would run its scheduler in this process, beside the client).
    The counts take turns in :data:`WORKER_ROUNDS` rounds, each on a cluster of its own
    (an idle cluster beside the one measured would take a share of a core), of at least
    ``steps / WORKER_ROUNDS`` steps and :data:`WORKER_SECONDS` of them."""
    samples: dict[int, list[float]] = {count: [] for count in workers}
    for _ in range(WORKER_ROUNDS):
        for count in workers:
            with worker_processes(count) as client, dask.config.set(scheduler=client):
                timing = harness.in_rounds({count: make()}, 1, -(-steps // WORKER_ROUNDS),
                                           warmup=5, seconds=WORKER_SECONDS)
            samples[count] += timing[count].samples
    return {count: statistics.median(times) for count, times in samples.items()}


def compare(makers: dict[str, Callable], threads: tuple, workers: tuple, steps: int,
            repeats: int = 1) -> list[dict]:
    """Each workload's forecast and measured speed-ups, the workload's measurements one
    right after the other: a machine whose speed drifts within minutes (a shared virtual
    one) then moves the two sides of a speed-up alike. With ``repeats``, the workload is
    traced, forecast and measured that many times in a row, and each row holds the medians
    of the forecast and of the measured speed-ups (``offs``: each repetition's own)."""
    on_threads, on_workers = [], []
    networks: list[Network] = []
    for name, make in makers.items():
        passes = [_one_pass(name, make, threads, workers, steps, networks)
                  for _ in range(repeats)]
        for k, row in enumerate(passes[0]):
            rows = [rows[k] for rows in passes]
            merged = {**row, "offs": [r["forecast"] / r["measured"] - 1 for r in rows],
                      "cores": [r["cores"] for r in rows],
                      "stolen": [r["stolen"] for r in rows],
                      "calls": [r["calls"] for r in rows], "ways": [r["ways"] for r in rows],
                      "network": [r["network"] for r in rows],
                      "away": [r["away"] for r in rows]}
            for field in ("measured", "forecast", "step", "forecast_step"):
                merged[field] = statistics.median(r[field] for r in rows)
            (on_threads if row["where"] == "threads" else on_workers).append(merged)
    return on_threads + on_workers


def _one_pass(name: str, make: Callable, threads: tuple, workers: tuple, steps: int,
              networks: list[Network]) -> list[dict]:
    """One workload's trace, forecast and measurements, as rows of :func:`compare`;
    ``networks``: the loopbacks measured before, to which this pass adds its own."""
    seconds_before = cpu_seconds()
    before, calls_before = cores_delivered(), calls_delivered()
    # the loopback drifts within minutes too: measured again for each workload's forecast,
    # which takes the median of the latest few
    network = None
    if workers:
        networks.append(measure_loopback())
        network = median_network(networks[-LOOPBACK_LATEST:])
    # and so does how much the host slows the caller's Python after a wait
    away = measure_away()
    traces: list = []
    ways: dict[int, Counter] = {}
    on_threads = measure_threads(make, threads, steps, traces, ways)
    forecast = traced_forecast(None if traces else make(), threads, workers, network, traces,
                               away)
    measured_on = (on_threads, measure_workers(make, workers, steps))
    cores = (before, cores_delivered())
    calls = (calls_before, calls_delivered())
    stolen = stolen_share(seconds_before, cpu_seconds())
    most = max(threads)
    rows = []
    for where, counts, measured in (("threads", threads, measured_on[0]),
                                    ("workers", workers, measured_on[1])):
        for n in counts:
            rows.append({"workload": name, "where": where, "count": n,
                         "measured": measured[1] / measured[n],
                         "forecast": forecast.speedup(**{where: n}), "step": measured[n],
                         "forecast_step": forecast.step_time(**{where: n}),
                         "cores": cores, "calls": calls, "ways": ways.get(most, Counter()),
                         "stolen": stolen, "threads": most, "network": forecast.network,
                         "away": away})
    return rows


def cores_table(rows: list[dict]) -> str:
    """Per workload, what the machine's two cores gave two threads of numpy products right
    before its measurements and right after (:func:`cores_delivered`), and two threads of
    small calls (:func:`calls_delivered`); the share of the machine's CPU time its host took
    for other machines meanwhile (:func:`stolen_share`); how many of its steps' runs on its
    most threads the runner made on threads (the rest in the calling thread,
    ``engine.modes``); the loopback's latencies its forecast used; and how much longer the
    caller's Python took after waits of 15 and 250 ms than right after a run
    (``caller_costs.measure_away``): one line per repetition."""
    lines = ["| workload | two threads' speed-up before (rounds under 1.5x) | after "
             "| small calls before, after | taken by the host | runs on threads "
             "| loopback: a task, a run, a transfer | the caller after 15, 250 ms |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in {row["workload"]: row for row in rows}.items():
        for cores, calls, taken, ways, network, away in zip(
                row["cores"], row["calls"], row["stolen"], row["ways"], row["network"],
                row["away"]):
            on_threads = (f"{ways['threads']} of {sum(ways.values())} ({row['threads']})"
                          if ways else "-")
            lines.append(f"| {name} | " + " | ".join(f"{median:.2f}x ({low:.0%})"
                                                     for median, low in cores)
                         + f" | {calls[0]:.2f}x, {calls[1]:.2f}x"
                         + f" | {taken:.0%}"
                         + f" | {on_threads}"
                         + f" | {network.task_latency * 1e3:.2f}, "
                           f"{network.run_latency * 1e3:.2f}, "
                           f"{network.transfer_latency * 1e3:.2f} ms"
                         + f" | +{away.extra(0.015) * 1e3:.2f}, "
                           f"+{away.extra(0.25) * 1e3:.2f} ms |")
    return "\n".join(lines)


def _configuration(row: dict) -> str:
    return f"{row['count']} {row['where'][:-1] if row['count'] == 1 else row['where']}"


def table(rows: list[dict], before: dict[tuple[str, str], tuple[float, float]] | None = None
          ) -> str:
    """The rows as a markdown table; where a workload was repeated, each repetition's own
    distance too; and where ``before`` (:func:`steps_before`) has the row, how much longer
    its measured and its forecast step took than in that run, so that a miss whose measured
    step moved while its forecast held reads as the machine's."""
    each = any(len(row["offs"]) > 1 for row in rows)
    before = before or {}
    lines = ["| workload | configuration | measured step | forecast step | measured speed-up "
             "| forecast speed-up | off by |" + (" each repetition |" if each else "")
             + (" steps against the run before: measured, forecast |" if before else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if each else "")
             + ("---|" if before else "")]
    for row in rows:
        where = _configuration(row)
        off = row["forecast"] / row["measured"] - 1
        moved = ""
        if before:
            was = before.get((row["workload"], where))
            moved = (f" {row['step'] / was[0] - 1:+.1%}, {row['forecast_step'] / was[1] - 1:+.1%} |"
                     if was else " - |")
        lines.append(f"| {row['workload']} | {where} | {row['step'] * 1e3:.1f} ms | "
                     f"{row['forecast_step'] * 1e3:.1f} ms | {row['measured']:.2f}x | "
                     f"{row['forecast']:.2f}x | {off:+.1%} |"
                     + (f" {', '.join(f'{o:+.1%}' for o in row['offs'])} |" if each else "")
                     + moved)
    return "\n".join(lines)


def steps_before(text: str) -> dict[tuple[str, str], tuple[float, float]]:
    """The measured and forecast step (seconds) of each row of a ``FORECAST.md`` this
    benchmark wrote before, by workload and configuration."""
    found = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[2].endswith(" ms") and cells[3].endswith(" ms"):
            try:
                found[cells[0], cells[1]] = (float(cells[2][:-3]) / 1e3,
                                             float(cells[3][:-3]) / 1e3)
            except ValueError:
                continue
    return found


def targets(sleeping: list[dict], real: list[dict]) -> list[str]:
    found = []
    for rows, limit, what in ((sleeping, SLEEPING_LIMIT, "sleeping graphs, 1-16 threads and "
                               "1-4 workers"), (real, REAL_LIMIT, "numpy workloads, 1-2 "
                                                "threads and 1-2 workers")):
        worst = max(rows, key=lambda r: abs(r["forecast"] / r["measured"] - 1))
        off = abs(worst["forecast"] / worst["measured"] - 1)
        within = sum(abs(r["forecast"] / r["measured"] - 1) <= limit for r in rows)
        found.append(f"- target: {what}: every forecast speed-up within {limit:.0%} of the "
                     f"measured one: {within} of {len(rows)}, the farthest {off:.1%} off "
                     f"({worst['workload']}, {worst['count']} {worst['where']}) — "
                     f"**{'met' if within == len(rows) else 'NOT met'}**")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per setting")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--only", choices=["sleeping", "real"], default=None)
    parser.add_argument("--repeats", type=int, default=5,
                        help="times each numpy workload is traced, forecast and measured")
    parser.add_argument("--sleeping-repeats", type=int, default=5,
                        help="times each sleeping graph is traced, forecast and measured")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    network = loopback(measure=True)  # this machine's loopback now
    sleeping = [] if args.only == "real" else compare(
        sleeping_workloads(), scaling.THREADS, scaling.WORKERS, args.steps,
        args.sleeping_repeats)
    real = [] if args.only == "sleeping" else compare(
        real_workloads(), REAL_THREADS, REAL_WORKERS, args.steps, args.repeats)
    path = os.path.join(HERE, "FORECAST.md")
    before = {}
    if os.path.exists(path):
        with open(path) as file:
            before = steps_before(file.read())
    parts = []
    if sleeping:
        parts += ["## Sleeping graphs (benchmarks.scaling)", "", table(sleeping, before), ""]
    if real:
        parts += ["## numpy workloads", "", table(real, before), ""]
    if sleeping and real:
        parts += targets(sleeping, real)
    parts += ["", "## The machine during each workload", "",
              "Two threads of numpy products against the same products one after the other "
              "(`cores_delivered`, 2 s of rounds of about 25 ms): the median speed-up, and "
              "the share of rounds under 1.5x, right before each workload's trace and right "
              "after its last measurement; two threads of small elementwise calls against "
              "the same calls one after the other (`calls_delivered`, 1 s of rounds), before "
              "and after; the share of the machine's CPU time that its host took for other "
              "virtual machines over the workload's measurements (the kernel's steal time); "
              "of the runs of the workload's steps on its most threads (sleeping "
              "graphs: 16, numpy workloads: 2), how many the runner made on threads rather "
              "than in the calling thread (warm-ups too); the loopback's latencies, "
              "measured right before the trace, that its forecast used; and how much longer "
              "a small step's Python took after waits of 15 and 250 ms than right after "
              "another (`measure_away`), measured then too; a line per repetition.", "",
              cores_table(sleeping + real)]
    text = "\n".join(parts)
    print(text)
    if args.no_write:
        return
    from benchmarks.run import machine

    with open(path, "w") as file:
        file.write(f"# Forecasts against measurements\n\n- machine: {machine()}\n- command: "
                   f"`python -m benchmarks.forecast` ({time.perf_counter() - start:.0f} s)\n"
                   f"- this machine's loopback at the start, as `pargraph.forecast` measured it "
                   f"(again before each workload, below): {network}\n"
                   f"\n{text}\n")


if __name__ == "__main__":
    main()
