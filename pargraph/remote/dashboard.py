"""``pargraph.dashboard()``: an in-process dask cluster with its dashboard on 127.0.0.1, as
the scheduler of the block, kept up after it until Enter or Ctrl-C (or for ``linger``
seconds), so that its task stream can still be looked at."""

from __future__ import annotations

import contextlib
import sys
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import dask


@contextlib.contextmanager
def dashboard(threads: int | None = None, port: int = 8787,
              linger: float | None = None) -> Iterator[Any]:
    """Run the block on an in-process cluster whose dashboard listens on
    ``http://127.0.0.1:<port>/status`` (``port=0``: any free port); yields its Client. After
    the block the dashboard stays up: until Enter or Ctrl-C when this is an interactive
    terminal, or ``linger`` seconds (0: not at all).

    Examples
    --------
    >>> import pargraph
    >>> with pargraph.dashboard(threads=1, port=0, linger=0) as client:
    ...     float((pargraph.ones(3) * 2).sum())
    6.0
    """
    import os

    from distributed import Client, LocalCluster

    threads = threads or os.cpu_count() or 1
    # Loopback only: the dashboard and the workers' HTTP servers run code for whoever
    # reaches them.
    with LocalCluster(n_workers=1, threads_per_worker=threads, processes=False,
                      dashboard_address=f"127.0.0.1:{port}",
                      worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster) as client, dask.config.set(scheduler=client):
        link = local_link(client)
        try:
            yield client
        finally:
            wait_for_a_look(link, linger)


def local_link(client: Any) -> str:
    """The dashboard's URL on 127.0.0.1 (dask's link names this machine's address)."""
    port = urllib.parse.urlsplit(client.dashboard_link).port
    return f"http://127.0.0.1:{port}/status"


def wait_for_a_look(link: str, linger: float | None) -> None:
    """Keep the caller's cluster (and its dashboard) up: ``linger`` seconds, or, when it is
    None and stdin is a terminal, until Enter or Ctrl-C; says so in one line."""
    interactive = linger is None and sys.stdin is not None and sys.stdin.isatty()
    if not interactive and not linger:
        return
    try:
        if interactive:
            print(f"the dashboard stays up at {link}: press Enter (or Ctrl-C) to stop",
                  flush=True)
            sys.stdin.readline()
        else:
            print(f"the dashboard stays up at {link} for {linger:g} s (Ctrl-C stops)",
                  flush=True)
            time.sleep(linger)
    except KeyboardInterrupt:
        pass
