"""The cluster API: ``connect`` to a dask scheduler, and how many tasks run at once."""

from __future__ import annotations

from pargraph import execution


def connect(address: str, timeout: float = 10.0, security=None,
            mirror_every: int | None = None):
    """Connect to a dask cluster: a ``distributed.Client`` that becomes the default scheduler
    for every realization, or a ``ConnectionError`` naming the address within ``timeout`` s
    (whatever listens there). ``security`` is distributed's ``Security`` (needed for
    ``tls://``). With ``mirror_every=N``, optimizers copy parameters and state off the cluster
    every N steps (in the background), so losing the scheduler costs at most N steps.

    Examples
    --------
    >>> import pargraph
    >>> try:
    ...     pargraph.connect("tcp://127.0.0.1:1", timeout=1)
    ... except ConnectionError as error:
    ...     print(str(error)[:58])
    could not reach the dask scheduler at tcp://127.0.0.1:1 wi
    """
    return execution.connect(address, timeout, security, mirror_every)


def worker_threads() -> int:
    """How many tasks can run at once where the next run goes: the cluster's worker threads
    with an active Client, else the threaded scheduler's ``num_workers`` (default: all cores).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.worker_threads() >= 1
    True
    """
    return execution.worker_threads()
