"""A wide model of independent towers (an ensemble) trained on real digits, on local threads.

Each tower is its own MLP; their logits are averaged. The towers share no parameters, so their
forward and backward passes are independent branches of one graph, which the threaded scheduler
runs at the same time. The demo times the same training step on the threaded and on the sync
scheduler, in one run, so you see what running branches in parallel buys on your cores:

- ``threads``: branches run at the same time, BLAS limited to one thread per task;
- ``sync``: one task at a time, BLAS free to use every core inside each matmul;
- ``sync, 1 BLAS thread``: one task at a time on one core, the baseline for graph parallelism.

With ``--compile`` it also times the step captured once by ``pargraph.compile`` and replayed
(``threads, compiled``), beside the same step run eagerly. With ``--address`` or
``--dashboard`` it times the step on that cluster instead.

    python demos/towers.py --towers 8 --steps 20
    python demos/towers.py --compile      # eager and compiled steps side by side
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import dask

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from digits import load_data  # noqa: E402

import pargraph  # noqa: E402
from pargraph import nn, optim  # noqa: E402


class Towers(nn.Module):
    """``towers`` independent MLPs whose logits are averaged."""

    def __init__(self, towers: int, width: int, inputs: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.towers = nn.ModuleList(
            nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width),
                          nn.ReLU(), nn.Linear(width, classes))
            for _ in range(towers)
        )

    def forward(self, x: pargraph.Tensor) -> pargraph.Tensor:
        return pargraph.stack([tower(x) for tower in self.towers]).mean(0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--towers", type=int, default=8)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per mode")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--trace", metavar="OUT.json", default=None,
                        help="trace one step (on threads, or on the cluster): write a Chrome "
                             "trace (and a PNG timeline beside it) and print the parallelism "
                             "summary")
    common.add_execution_args(parser, scheduler=False)  # it compares the local schedulers
    common.add_forecast_arg(parser)
    common.add_compile_arg(parser)
    return parser.parse_args(argv)


def timed_steps(model, opt, batches, mode: str, workers: int | None, quiet: bool,
                step=None):
    """Time one training step per batch in ``mode``: a local scheduler mode (see the module
    docstring), or ``"cluster"``: wherever ``common.execution`` pointed dask. ``step``: the
    step to run (default: an eager one)."""
    from threadpoolctl import threadpool_limits

    settings = {}
    if mode != "cluster":
        settings["scheduler"] = mode.split(",")[0]
        if workers and settings["scheduler"] == "threads":
            settings["num_workers"] = workers
    one_blas_thread = mode.endswith("1 BLAS thread")
    step = step or common.training_step(model, opt, nn.CrossEntropyLoss())
    times, losses = [], []
    with dask.config.set(settings), threadpool_limits(1 if one_blas_thread else None, "blas"), \
            common.progress(len(batches), f"{mode:>20}", quiet) as bar:
        for images, labels in batches:
            start = time.perf_counter()
            losses.append(step(images, labels).item())
            times.append(time.perf_counter() - start)
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
    return times, losses


def trace_one_step(model, opt, batch, args: argparse.Namespace, where: str) -> None:
    """Record one training step where the demo runs (threads locally) and report how it ran
    (``--trace``: its files too; ``--forecast``: its forecast on other threads and workers)."""
    settings = {}
    if not common.on_a_cluster(args):
        settings = {"scheduler": "threads",
                    **({"num_workers": args.workers} if args.workers else {})}
    with dask.config.set(settings), pargraph.trace() as tr:
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(batch[0]), batch[1])
        loss.backward()
        opt.step()
    forecast_picture = None
    if args.trace:
        tr.to_chrome(args.trace)
        picture = os.path.splitext(args.trace)[0] + ".png"
        forecast_picture = os.path.splitext(args.trace)[0] + "-forecast.png"
        tr.plot(picture, title=f"one training step of {args.towers} towers on {where}")
        print(f"trace of one step on {where}: {args.trace} (open in https://ui.perfetto.dev), "
              f"timeline: {picture}")
    tr.summary()
    print()
    common.print_forecast(tr, args, forecast_picture)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    (train_x, train_y), _ = load_data(args.seed)
    pargraph.manual_seed(args.seed)
    model = Towers(args.towers, args.width)
    opt = optim.SGD(model.parameters(), lr=args.lr)
    index = pargraph.randint(0, len(train_x), (args.steps + 1, args.batch_size)).numpy()
    batches = [(pargraph.tensor(train_x[i]), pargraph.tensor(train_y[i])) for i in index]
    with common.execution(args) as where:
        # On a cluster the step runs there; locally the demo compares three ways to run it.
        modes = ["cluster"] if common.on_a_cluster(args) else \
            ["threads", "sync", "sync, 1 BLAS thread"]
        timed_steps(model, opt, batches[:1], modes[0], args.workers, True)  # warm up
        # The modes take turns in rounds, so that the machine's state changing meanwhile
        # shows as a spread of the ratios instead of skewing one mode.
        results = {mode: ([], []) for mode in modes}
        rounds = _rounds(batches[1:], ROUNDS)
        per_round: list[dict] = []
        for chunk in rounds:
            medians_now = {}
            for mode in modes:
                times, losses = timed_steps(model, opt, chunk, mode, args.workers, args.quiet)
                results[mode][0].extend(times)
                results[mode][1].extend(losses)
                medians_now[mode] = statistics.median(times)
            per_round.append(medians_now)
        if args.compile:
            compiled = common.training_step(model, opt, nn.CrossEntropyLoss(), compiled=True)
            mode = modes[0]
            # The first calls capture (the first one, and the one with .grad set): untimed.
            timed_steps(model, opt, batches[:2], mode, args.workers, True, compiled)
            results[f"{mode}, compiled"] = timed_steps(model, opt, batches[1:], mode,
                                                       args.workers, args.quiet, compiled)
        params = sum(p.numel() for p in model.parameters())
        print(f"{args.towers} towers of width {args.width} ({params:,} parameters), "
              f"batch {args.batch_size}, {args.steps} steps per mode, on {where}")
        if args.trace or args.forecast:
            trace_one_step(model, opt, batches[1], args, where)
    medians = {mode: statistics.median(times) for mode, (times, _) in results.items()}
    for mode, (times, losses) in results.items():
        print(f"  {mode:>20}: median step {medians[mode] * 1000:7.1f} ms   "
              f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})   "
              f"last loss {losses[-1]:.4f}")
    summary = {"results": results, "where": where, "speedup": None, "model": model,
               "batch_shape": batches[0][0].shape}
    compiled = next((mode for mode in medians if mode.endswith(", compiled")), None)
    if compiled:
        eager = compiled.removesuffix(", compiled")
        summary["compiled_speedup"] = medians[eager] / medians[compiled]
        print(f"  compiled vs eager ({eager}): {summary['compiled_speedup']:.2f}x")
    if "threads" in medians:
        for against, label in (("sync, 1 BLAS thread", "sync on one core"),
                               ("sync", "sync with multithreaded BLAS")):
            ratios = [r[against] / r["threads"] for r in per_round]
            ratio = statistics.median(ratios)  # the ratio of each round, then their median
            if against == "sync, 1 BLAS thread":
                summary["speedup"] = ratio
            print(f"  threads vs {label}: {ratio:.2f}x, {_words(ratio)} "
                  f"(median of {len(ratios)} rounds, {min(ratios):.2f}x-{max(ratios):.2f}x)")
    return summary


#: How many rounds the modes take turns in.
ROUNDS = 3


def _rounds(batches: list, rounds: int) -> list[list]:
    """``batches`` cut into ``rounds`` consecutive runs of near-equal length, every batch in
    one (fewer runs if there are fewer batches)."""
    count = max(1, min(rounds, len(batches)))
    edges = [len(batches) * k // count for k in range(count + 1)]
    return [batches[a:b] for a, b in zip(edges, edges[1:])]


def _words(ratio: float) -> str:
    """What a ratio of the other mode's time over the threads' time says."""
    if ratio >= 1.05:
        return "faster on threads"
    if ratio <= 0.95:
        return "slower on threads"
    return "about the same on threads"


if __name__ == "__main__":
    main()
