"""What every demo shares: choosing the scheduler, a progress bar, the demo output folder;
and the training loop of the two digit classifiers (cnn.py, attention.py)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator

import dask

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def add_execution_args(parser: argparse.ArgumentParser, scheduler: bool = True) -> None:
    if scheduler:
        parser.add_argument("--scheduler", choices=["threads", "sync"], default="threads",
                            help="dask scheduler to run the graphs on (default: threads)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker threads for the threaded scheduler or the --dashboard "
                             "cluster (default: all cores)")
    parser.add_argument("--address", metavar="tcp://HOST:PORT", default=None,
                        help="run on the dask cluster whose scheduler is at this address")
    parser.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="give up reaching --address after this long (default: 10)")
    parser.add_argument("--dashboard", action="store_true",
                        help="run on an in-process cluster with the dask dashboard on "
                             "http://127.0.0.1:8787/status, kept up after training until "
                             "Enter or Ctrl-C")
    parser.add_argument("--dashboard-linger", type=float, default=None, metavar="SECONDS",
                        help="with --dashboard: keep it up this long after training "
                             "(0: not at all; default: until Enter when run in a terminal)")


#: The configurations ``--forecast`` forecasts.
FORECAST_THREADS, FORECAST_WORKERS = [1, 2, 4, 8, 16], [1, 2, 4]


def add_forecast_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--forecast", action="store_true",
                        help="trace one more step and forecast it on 1-16 threads and 1-4 "
                             "dask worker processes (pargraph.forecast): print the table; "
                             "needs this machine's threads (not --address or --dashboard)")


def print_forecast(tr, args: argparse.Namespace, timeline: str | None = None) -> None:
    """With ``--forecast``: the forecast of the step ``tr`` traced, as a table, and with
    ``timeline`` a PNG of the measured step above its forecast on 8 threads."""
    import pargraph

    if not getattr(args, "forecast", False):
        return
    if on_a_cluster(args):
        print("--forecast forecasts a step traced on this machine's threads; this one ran on "
              "a cluster (run without --address and --dashboard)")
        return
    forecast = pargraph.forecast(tr, threads=FORECAST_THREADS, workers=FORECAST_WORKERS)
    print(forecast)
    if timeline:
        forecast.plot(timeline, threads=8)
        print(f"measured and forecast (8 threads) timelines: {timeline}")
    print()


def on_a_cluster(args: argparse.Namespace) -> bool:
    return bool(args.address or args.dashboard)


@contextlib.contextmanager
def execution(args: argparse.Namespace) -> Iterator[str]:
    """Run the block where the command line asked: a cluster (--address), an in-process
    cluster with a dashboard (--dashboard), or one of dask's local schedulers. Yields a
    description of where that is, for the demo's summary."""
    if args.address:
        import pargraph

        try:
            client = pargraph.connect(args.address, timeout=args.connect_timeout)
        except ConnectionError as error:
            raise SystemExit(f"error: {error}") from None
        workers = len(client.scheduler_info(n_workers=-1)["workers"])
        print(f"running on the dask cluster at {args.address} ({workers} workers); "
              f"dashboard: {client.dashboard_link}")
        try:
            with dask.config.set(scheduler=client):
                yield f"the dask cluster at {args.address} ({workers} workers)"
        finally:
            with contextlib.suppress(Exception):  # a client whose scheduler died may not close
                client.close(timeout=5)
    elif args.dashboard:
        import pargraph
        from pargraph.remote.dashboard import local_link

        threads = args.workers or os.cpu_count() or 1
        with pargraph.dashboard(threads, linger=getattr(args, "dashboard_linger", None)) \
                as client:
            link = local_link(client)
            print(f"dask dashboard: {link} (task stream: {link.replace('/status', '/tasks')})")
            yield f"an in-process dask cluster ({threads} threads; dashboard {link})"
    else:
        scheduler = getattr(args, "scheduler", "threads")
        settings = {"scheduler": scheduler}
        if args.workers:
            settings["num_workers"] = args.workers
        with dask.config.set(settings):
            threads = f" ({args.workers or os.cpu_count()} threads)" if scheduler == "threads" \
                else ""
            yield f"the {scheduler} scheduler{threads}"


def progress(total: int, description: str, quiet: bool = False):
    """One tqdm bar (on stderr) over a whole training run: steps done, steps/s, and whatever
    ``set_postfix`` shows (the running loss). ``update(1)`` after every step."""
    from tqdm import tqdm

    # Piped (not a terminal): a line every 30 s at most instead of a stream of \r updates.
    piped = not sys.stderr.isatty()
    return tqdm(total=total, desc=description, disable=quiet, unit="step", dynamic_ncols=True,
                mininterval=30.0 if piped else 0.1, ascii=piped)


def add_training_args(parser: argparse.ArgumentParser, width: int, width_help: str) -> None:
    """The flags of the demos that train a classifier with Adam on a one-cycle schedule."""
    parser.add_argument("--epochs", type=int, default=12, help="epochs (default: 12)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2,
                        help="peak Adam learning rate of the one-cycle schedule")
    parser.add_argument("--width", type=int, default=width, help=width_help)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_compile_arg(parser)


def add_compile_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compile", action="store_true",
                        help="capture the training step once with pargraph.compile and "
                             "replay it (no Python per step of its own)")


def training_step(model, opt, loss_fn, compiled: bool = False):
    """``step(x, y)``: zero_grad, forward, loss, backward, optimizer step; returns the loss.
    ``compiled``: captured by ``pargraph.compile`` on its first call, replayed after."""
    import pargraph

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return pargraph.compile(step) if compiled else step


def compiled_summary(step) -> str:
    """`` (compiled: 2 captures, 224 replays)`` for a compiled step, else nothing."""
    if not hasattr(step, "captures"):
        return ""
    if step.eager:
        return f" (compile fell back to eager: {step.eager})"
    return f" (compiled: {step.captures} captures, {step.replays} replays)"


def accuracy(model, x, y, prepare) -> float:
    """The share of ``x`` (numpy rows, made model input by ``prepare``) classified as ``y``."""
    import pargraph

    model.eval()
    with pargraph.no_grad():
        correct = (model(prepare(x)).argmax(1) == pargraph.tensor(y)).float().mean().item()
    model.train()
    return correct


def train_classifier(model, data: tuple, prepare, args: argparse.Namespace, where: str) -> dict:
    """Train ``model`` on ``data`` ((train_x, train_y), (test_x, test_y)) with Adam on a
    one-cycle schedule, report each epoch's test accuracy, and trace one more step."""
    import pargraph
    from pargraph import nn, optim
    from pargraph.utils.data import DataLoader, TensorDataset

    (train_x, train_y), (test_x, test_y) = data
    loader = DataLoader(TensorDataset(prepare(train_x), pargraph.tensor(train_y)),
                        batch_size=args.batch_size, shuffle=True)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    schedule = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr,
                                             total_steps=args.epochs * len(loader))
    loss_fn = nn.CrossEntropyLoss()
    step = training_step(model, opt, loss_fn, args.compile)
    bar = progress(args.epochs * len(loader), "training", args.quiet)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            loss = step(x, y)
            schedule.step()  # a new learning rate every step: an input of a compiled step
            total += loss.item()
            bar.update(1)
        bar.write(f"epoch {epoch + 1:3d}  loss {total / len(loader):.4f}  test accuracy "
                  f"{accuracy(model, test_x, test_y, prepare):.2%}", file=sys.stdout)
    bar.close()
    seconds = time.perf_counter() - start
    result = {"model": model, "test_accuracy": accuracy(model, test_x, test_y, prepare),
              "seconds": seconds, "where": where, "step": step}
    result["cluster_comparison"] = compare_with_threads(step, model, opt, next(iter(loader)),
                                                        args)
    result["trace"] = trace_one_step(model, opt, loss_fn, next(iter(loader)))
    print_forecast(result["trace"], args)
    return result


def compare_with_threads(step, model, opt, batch, args: argparse.Namespace,
                         repeats: int = 5) -> dict | None:
    """With ``--address``: time ``repeats`` steps of ``step(*batch)`` on the cluster and on
    this machine's threads (after two of each), print both with the step's work (traced on
    the threads), then put the model's and optimizer's state back as training left them.
    Returns ``{"cluster": s, "threads": s, "work": s}`` a step, or None without
    ``--address``."""
    if not args.address:
        return None
    import io

    import pargraph

    saved = io.BytesIO()
    pargraph.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, saved)

    def seconds_per_step() -> float:
        for _ in range(2):
            step(*batch).item()
        start = time.perf_counter()
        for _ in range(repeats):
            step(*batch).item()
        return (time.perf_counter() - start) / repeats

    cluster = seconds_per_step()
    with dask.config.set(scheduler="threads"):
        threads = seconds_per_step()
        with pargraph.trace() as tr:
            step(*batch).item()
    work = tr.summary(print_it=False).work
    saved.seek(0)
    state = pargraph.load(saved)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    cores = os.cpu_count() or 1
    verdict = ("the cluster's step is faster" if cluster < threads else
               f"the cluster's step costs {(cluster - threads) * 1e3:.1f} ms more: its "
               "transfers and scheduling outweigh what its cores add to this one's")
    print(f"a step on the cluster: {cluster * 1e3:.1f} ms; on this machine's {cores} threads: "
          f"{threads * 1e3:.1f} ms (the cluster's takes {cluster / threads:.2f}x); the step's "
          f"work: {work * 1e3:.1f} ms. So {verdict}. A cluster pays once each worker has more "
          "work per step than its share of the step's transfers and scheduling, and more "
          "cores than this machine: docs/cluster.md, 'When does a cluster pay?'")
    return {"cluster": cluster, "threads": threads, "work": work}


def trace_one_step(model, opt, loss_fn, batch):
    """One more training step under ``pargraph.trace()``; prints its summary and returns the
    trace."""
    import pargraph

    x, y = batch
    with pargraph.trace() as tr:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    summary = tr.summary(print_it=False)
    print(f"one traced step: {summary.nodes} nodes, available parallelism "
          f"{summary.available_parallelism:.2f}x, achieved {summary.achieved_parallelism:.2f}x")
    return tr
