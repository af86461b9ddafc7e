"""A cluster's workers: their addresses and threads, as last asked, and how many keep state."""

from __future__ import annotations

import time
from typing import Any

import dask

from pargraph.remote.state import clusters
from pargraph.remote.waiting import asked


def placement_on() -> bool:
    """Whether pargraph places a run's tasks on a cluster's workers itself
    (``pargraph.placement``, default True)."""
    return bool(dask.config.get("pargraph.placement", True))


def wanted_replicas() -> int:
    """How many workers training state is to be kept on (``pargraph.replicas``, default 2)."""
    return int(dask.config.get("pargraph.replicas", 2))


def hosts(client: Any) -> tuple[tuple[str, int], ...]:
    """(address, threads) of the worker processes pargraph places a run's tasks on: a
    cluster's, when it has several and ``pargraph.placement`` is on; else none."""
    if client is None or not placement_on():
        return ()
    nthreads = threads_by_worker(client)
    return tuple(sorted(nthreads.items())) if len(nthreads) > 1 else ()


#: Seconds for which a cluster's workers, as last asked, are taken to be current: a training
#: step asked up to three times (its partition, DataParallel's shards, replication), a
#: scheduler round trip each.
MEMBERSHIP_SECONDS = 1.0




def threads_by_worker(client: Any) -> dict[str, int]:
    """The cluster's worker addresses and their thread counts, asked at most once every
    ``MEMBERSHIP_SECONDS`` (a worker that joined is used from then on; one that left is
    annotated on loosely, so its tasks go elsewhere)."""
    now = time.monotonic()
    clusters.used = True
    known = clusters.membership.get(client)
    if known is None or now - known[0] > MEMBERSHIP_SECONDS:
        known = clusters.membership[client] = (now, dict(asked(client.nthreads)))
    return known[1]


def replicas(client: Any) -> int:
    """How many workers a run on ``client`` keeps parameters and optimizer state on: 0 when
    that is one (``pargraph.replicas`` is 1, or the cluster has one worker)."""
    wanted = wanted_replicas()
    return wanted if wanted > 1 and len(threads_by_worker(client)) > 1 else 0


def on_every_worker(client: Any, function: Any) -> dict[str, Any]:
    """``function()`` run in every worker process of ``client``'s cluster: its result by
    worker address."""
    return asked(lambda: client.run(function))
