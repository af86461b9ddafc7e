"""What every demo shares: choosing the scheduler, a progress bar, the demo output folder."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterable, Iterator

import dask

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def add_execution_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduler", choices=["threads", "sync"], default="threads",
                        help="dask scheduler to run the graphs on (default: threads)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker threads for the threaded scheduler (default: all cores)")


@contextlib.contextmanager
def execution(args: argparse.Namespace) -> Iterator[None]:
    """Run the block on the scheduler the command line asked for (dask's own config)."""
    settings = {"scheduler": args.scheduler}
    if args.workers:
        settings["num_workers"] = args.workers
    with dask.config.set(settings):
        yield


def progress(iterable: Iterable, description: str, quiet: bool = False, total: int | None = None):
    """A tqdm bar (on stderr); ``set_postfix`` shows the running loss."""
    from tqdm import tqdm

    return tqdm(iterable, desc=description, total=total, disable=quiet, leave=False,
                dynamic_ncols=True)
