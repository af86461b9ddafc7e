"""Scaling past this machine, by simulation: ops that sleep (the GIL released, no core used)
on graphs shaped like real models, run on 1 to 16 threads and on 1 to 4 worker processes.

    python -m benchmarks.scaling            # writes benchmarks/SCALING.md and the README table

Each op is a custom op (``pargraph.library.custom_op``) that sleeps for a set time in its
forward and again in its backward, so a step's work is known exactly and needs no core:
what is measured is how much of it the scheduler runs at once. For each graph and thread
count, the speed-up is the one-thread step's time over this one's (medians of steady-state
steps: the first steps of a structure measure its ops' costs, see ``pargraph.costs``, and
the next ones try each way of running it, see ``modes.run_adaptively``), and
the ideal is the smaller of the thread count and the graph's available parallelism (work /
critical path, from a trace). The per-task overhead is what the step took beyond the ideal,
per task.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import dask

import pargraph

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THREADS = (1, 2, 4, 8, 16)
#: Seconds of steps, at least, before timing a setting and timed in it.
WARM_SECONDS, TIMED_SECONDS = 1.0, 0.5
WORKERS = (1, 2, 4)
_ops: dict = {}


def sleeper(seconds: float, declared: bool) -> Callable:
    """A custom op that sleeps ``seconds`` forward and backward (cost declared or not)."""
    key = (seconds, declared)
    if key not in _ops:
        name = f"sim::sleep_{seconds * 1e3:g}ms{'_declared' if declared else ''}"

        def forward(x):
            time.sleep(seconds)
            return x + 1.0

        op = pargraph.library.custom_op(name, mutates_args=(),
                                        cost=seconds if declared else None)(forward)
        op.register_fake(lambda x: pargraph.empty_like(x))

        def backward(ctx, grad):
            return op(grad) - 1.0  # sleeps again: the backward is work too

        op.register_autograd(backward)
        _ops[key] = op
    return _ops[key]


def branches(n: int, seconds: float, declared: bool = True):
    """``n`` independent branches of one op each, summed."""
    op = sleeper(seconds, declared)

    def model(x):
        return pargraph.stack([op(x * (k + 1)) for k in range(n)]).sum()
    return model


def towers(n: int = 8, depth: int = 3, seconds: float = 0.005):
    """``n`` towers of ``depth`` ops in a chain, averaged."""
    op = sleeper(seconds, True)

    def model(x):
        outs = []
        for k in range(n):
            h = x * (k + 1)
            for _ in range(depth):
                h = op(h)
            outs.append(h)
        return pargraph.stack(outs).mean()
    return model


def inception(blocks: int = 3, seconds: float = 0.005):
    """Blocks in a chain, each four branches (1, 2, 2 and 3 ops deep) summed."""
    op = sleeper(seconds, True)

    def model(x):
        h = x
        for _ in range(blocks):
            paths = []
            for depth in (1, 2, 2, 3):
                p = h
                for _ in range(depth):
                    p = op(p)
                paths.append(p)
            h = pargraph.stack(paths).mean(0)
        return h.sum()
    return model


def rnn(steps: int = 12, layers: int = 2, seconds: float = 0.002):
    """A bidirectional RNN unrolled over ``steps``: each direction's cell at step t waits for
    step t-1; layer 2 reads layer 1's two directions (a wavefront)."""
    op = sleeper(seconds, True)

    def model(x):
        inputs = [x * (t + 1) for t in range(steps)]
        for _ in range(layers):
            forward, backward = [], []
            h = x
            for t in range(steps):
                h = op(h + inputs[t])
                forward.append(h)
            h = x
            for t in reversed(range(steps)):
                h = op(h + inputs[t])
                backward.insert(0, h)
            inputs = [f + b for f, b in zip(forward, backward)]
        return pargraph.stack(inputs).sum()
    return model


def shards(n: int = 8, depth: int = 3, seconds: float = 0.004):
    """DataParallel: ``n`` shards of a batch through the same chain of ops, concatenated."""
    op = sleeper(seconds, True)

    def model(x):
        outs = []
        for piece in x.repeat(n).chunk(n):
            for _ in range(depth):
                piece = op(piece)
            outs.append(piece)
        return pargraph.cat(outs).sum()
    return model


GRAPHS = {
    "16 branches x 10 ms, cost declared": lambda: branches(16, 0.010, True),
    "16 branches x 10 ms, cost measured": lambda: branches(16, 0.010, False),
    "64 branches x 1 ms": lambda: branches(64, 0.001, True),
    "towers (8 x 3 ops of 5 ms)": towers,
    "inception (3 blocks of 4 branches, 5 ms ops)": inception,
    "bidirectional 2-layer RNN, 12 steps of 2 ms": rnn,
    "DataParallel (8 shards x 3 ops of 4 ms)": shards,
}


def step_of(model: Callable, compiled: bool = False) -> Callable:
    """One training step of ``model``: forward, backward into the input, every value run."""
    x = pargraph.ones(4, requires_grad=True)

    def train(x):
        x.grad = None
        loss = model(x)
        loss.backward()
        return loss

    run = pargraph.compile(train) if compiled else train

    def step() -> None:
        run(x).item()
        x.grad.numpy()
    return step


def median_step(step: Callable, steps: int, warmup: int, warm_seconds: float = 0.0,
                timed_seconds: float = 0.0) -> float:
    """The median of ``steps`` timed steps (more, until ``timed_seconds`` have passed), after
    ``warmup`` steps (more, until ``warm_seconds`` have passed)."""
    begin = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - begin < warm_seconds:
        step()
        done += 1
    times: list[float] = []
    while len(times) < steps or sum(times) < timed_seconds:
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def available_parallelism(step: Callable) -> tuple[float, int]:
    """The step's work / critical path, from a trace, and its nodes."""
    with dask.config.set(scheduler="threads", num_workers=16), pargraph.trace() as tr:
        step()
    summary = tr.summary(print_it=False)
    return summary.available_parallelism, summary.nodes


def threads_table(steps: int, warmup: int) -> list[dict]:
    rows = []
    for name, make in GRAPHS.items():
        for compiled in ((False, True) if name.startswith("64") else (False,)):
            model = make()
            step = step_of(model, compiled)
            times = {}
            for n in THREADS:
                with dask.config.set(scheduler="threads", num_workers=n):
                    # Warm for a second at least: the runner times each way of running a
                    # structure only after its first 0.15 s of runs (modes.ModeChoice),
                    # so a fast step is still trying the slower ways after 20 steps.
                    times[n] = median_step(step, steps, warmup, WARM_SECONDS, TIMED_SECONDS)
            available, nodes = available_parallelism(step_of(model))
            rows.append({"graph": name + (", compiled" if compiled else ""),
                         "available": available, "nodes": nodes, "times": times})
    return rows


def cluster_table(steps: int, warmup: int) -> dict:
    from distributed import Client, LocalCluster

    times = {}
    for workers in WORKERS:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None,
                          worker_dashboard_address="127.0.0.1:0") as cluster, \
                Client(cluster) as client, \
                dask.config.set(scheduler=client):
            step = step_of(branches(16, 0.050, True))
            times[workers] = median_step(step, steps, warmup)
    return times


#: The graphs of independent branches, as (branches, seconds): each sleeps twice per branch.
BRANCHES = {"16 branches x 10 ms": (16, 0.010), "64 branches x 1 ms": (64, 0.001)}


def pool_floor(branches: int, seconds: float, threads: int = 16, repeats: int = 15) -> float:
    """What CPython's own threads give the same sleeps, with no framework: a
    ``ThreadPoolExecutor`` of ``threads`` running ``2 * branches`` sleeps of ``seconds`` (one
    step's forward and backward ops), against one thread running them in turn; the speed-up
    (medians of ``repeats``). Each sleep overshoots and each thread's start waits for the GIL:
    the ceiling any scheduler on these threads can reach."""
    from concurrent.futures import ThreadPoolExecutor

    def one_after_another() -> None:
        for _ in range(2 * branches):
            time.sleep(seconds)

    with ThreadPoolExecutor(threads) as pool:
        def together() -> None:
            for future in [pool.submit(time.sleep, seconds) for _ in range(2 * branches)]:
                future.result()

        together()  # the pool's threads exist before timing
        return median_step(one_after_another, repeats, 1) / median_step(together, repeats, 3)


def overhead_per_call(calls: int = 500, repeats: int = 5) -> float:
    """Seconds a custom op that does nothing costs per call, recording and running included:
    a chain of ``calls`` of them realized on threads (best of ``repeats``)."""
    @pargraph.library.custom_op("sim::nothing", mutates_args=())
    def nothing(x):
        return x

    nothing.register_fake(lambda x: pargraph.empty_like(x))
    best = float("inf")
    with dask.config.set(scheduler="threads"):
        for _ in range(repeats):
            start = time.perf_counter()
            h = pargraph.ones(4)
            for _ in range(calls):
                h = nothing(h)
            h.numpy()
            best = min(best, (time.perf_counter() - start) / calls)
    return best


def report(rows: list[dict], cluster: dict | None, floors: dict | None = None) -> str:
    lines = ["| graph | available | " + " | ".join(f"{n} thread{'s' * (n > 1)}"
                                                    for n in THREADS) + " |",
             "|---|---|" + "---|" * len(THREADS)]
    for row in rows:
        one = row["times"][1]
        cells = []
        for n in THREADS:
            speedup = one / row["times"][n]
            ideal = min(n, row["available"])
            cells.append(f"{speedup:.2f}x ({speedup / ideal:.0%})")
        lines.append(f"| {row['graph']} | {row['available']:.1f}x | " + " | ".join(cells) + " |")
    lines += ["", "Speed-up over one thread (share of the ideal: the smaller of the threads "
              "and the available parallelism); steady-state steps, forward and backward."]
    if floors:
        lines += ["", "The same sleeps on a plain `ThreadPoolExecutor` of 16 threads, no "
                  "framework (CPython's own ceiling here): " + ", ".join(
                      f"{name}: {speedup:.2f}x ({speedup / 16:.0%})"
                      for name, speedup in floors.items()) + "."]
    if cluster:
        one = cluster[1]
        lines += ["", "| 16 branches x 50 ms on a cluster | " + " | ".join(
            f"{w} worker{'s' * (w > 1)}" for w in cluster) + " |",
            "|---|" + "---|" * len(cluster),
            "| speed-up over 1 worker (share of ideal) | " + " | ".join(
                f"{one / t:.2f}x ({one / t / min(w, 16):.0%})" for w, t in cluster.items())
            + " |"]
    return "\n".join(lines)


def targets(rows: list[dict], cluster: dict | None, overhead: float | None = None) -> list[str]:
    """#34's targets, met or not."""
    by = {row["graph"]: row for row in rows}

    def share(graph: str, n: int = 16) -> float:
        row = by[graph]
        return row["times"][1] / row["times"][n] / min(n, row["available"])

    found = []
    for graph, limit in (("16 branches x 10 ms, cost declared", 0.9),
                         ("16 branches x 10 ms, cost measured", 0.9),
                         ("64 branches x 1 ms", 0.75), ("64 branches x 1 ms, compiled", 0.9),
                         ("towers (8 x 3 ops of 5 ms)", 0.8),
                         ("inception (3 blocks of 4 branches, 5 ms ops)", 0.8),
                         ("bidirectional 2-layer RNN, 12 steps of 2 ms", 0.8)):
        value = share(graph)
        found.append(f"- target: {graph}: >= {limit:.0%} of ideal at 16 threads: {value:.0%} — "
                     f"**{'met' if value >= limit else 'NOT met'}**")
    if overhead is not None:
        found.append(f"- target: a custom op's own cost per call (recording and task) <= 50 us "
                     f"on threads: {overhead * 1e6:.1f} us — "
                     f"**{'met' if overhead <= 50e-6 else 'NOT met'}**")
    if cluster:
        for workers, limit in ((4, 3.7), (2, 1.9)):
            value = cluster[1] / cluster[workers]
            found.append(f"- target: cluster, {workers} workers >= {limit}x of 1: {value:.2f}x — "
                         f"**{'met' if value >= limit else 'NOT met'}**")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per setting")
    parser.add_argument("--warmup", type=int, default=20,
                        help="steps before timing: the first ones measure the ops' costs, "
                             "the next ones let the runner try threads and one thread")
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = threads_table(args.steps, args.warmup)
    floors = {name: pool_floor(*shape) for name, shape in BRANCHES.items()}
    cluster = None if args.no_cluster else cluster_table(args.steps, 2)
    table = report(rows, cluster, floors)
    overhead = overhead_per_call()
    text = "\n".join([table, "", *targets(rows, cluster, overhead)])
    print(text)
    if args.no_write:
        return
    from benchmarks.run import machine

    with open(os.path.join(HERE, "SCALING.md"), "w") as file:
        file.write(f"# Scaling by simulation\n\n- machine: {machine()}\n- command: `python -m "
                   f"benchmarks.scaling` ({time.perf_counter() - start:.0f} s)\n\n{text}\n")
    readme = os.path.join(ROOT, "README.md")
    with open(readme) as file:
        content = file.read()
    marker, end = "<!-- generated:scaling -->\n", "<!-- /generated:scaling -->"
    if marker in content:
        head, rest = content.split(marker, 1)
        content = head + marker + table + "\n" + end + rest.split(end, 1)[1]
        with open(readme, "w") as file:
            file.write(content)


if __name__ == "__main__":
    main()
