"""Losing the cluster: values held on a cluster die with its scheduler.

dask cancels every Future at once. A run or a :func:`fetch` that meets a cancelled Future
raises :class:`ClusterLostError` right away (dask itself would wait for a reconnect and then
report "cancelled for reason: unknown"). Objects registered with :func:`register_recovery`
(optimizers, when ``pargraph.mirror-every`` is set, e.g. by ``connect(..., mirror_every=N)``)
first put back the copies they gathered, so ``state_dict()`` still answers, at most N steps
old.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import CancelledError
from typing import Any

import dask
import numpy as np

from pargraph.graph import Node
from pargraph.remote.layout import HeldPart, futures_of, is_future
from pargraph.remote.state import clusters
from pargraph.remote.waiting import settled


class ClusterLostError(RuntimeError):
    """The cluster that held tensor values lost them: its scheduler went away, or a worker
    that had the only copy of some (``pargraph.replicas: 1``) left."""








def register_recovery(source: Any) -> None:
    """Call ``source.recover(client)`` when ``client``'s cluster is lost. It puts back the
    values it kept a copy of and returns ``(description, {lost Future key: value})``."""
    clusters.recovery_sources.append(weakref.ref(source))


def mirror_every() -> int:
    """Every how many optimizer steps parameters and state are copied off the cluster (0:
    never); ``pargraph.connect(..., mirror_every=N)`` or the ``pargraph.mirror-every`` key."""
    return int(dask.config.get("pargraph.mirror-every", 0) or 0)


def is_lost(value: Any) -> bool:
    # "cancelled": the client lost its scheduler. ("lost" is a worker's death: dask
    # recomputes those values, so it is not a loss of the cluster.)
    return is_future(value) and value.status == "cancelled"


def check_held_values(order: list[Node]) -> None:
    """Before a run: values that died with their cluster are put back from a recovery copy,
    or the run stops with :class:`ClusterLostError` (instead of hanging on a reconnect)."""
    for node in order:
        value = node.value
        if value is None or type(value) is np.ndarray or not is_lost(value):
            continue
        if value.key not in clusters.recovered:
            raise cluster_lost(value.client, f"{value.key} was cancelled")
        node.value = clusters.recovered[value.key]


def fetch(node: Node) -> np.ndarray:
    """A realized node's value as a local numpy array (gathered from the cluster if needed)."""
    value = node.value
    if not is_future(value):
        return value
    if value.key in clusters.recovered:
        node.value = clusters.recovered[value.key]
        return node.value
    if not is_lost(value):
        try:
            return np.asarray(value.result() if isinstance(value, HeldPart)
                              else settled([value], value.result))
        except (Exception, asyncio.CancelledError) as error:
            # Fetching a part runs a task: its cancellation can come before the part's own,
            # and a scheduler that died can close the connection before either.
            from distributed.comm.core import CommClosedError  # loaded: a Future is here

            closed = isinstance(error, CommClosedError)
            cancelled = isinstance(error, (asyncio.CancelledError, CancelledError))
            if not is_lost(value) and not (closed or cancelled):
                raise
            cause = f"{value.key}: {error or type(error).__name__}"
    else:
        cause, closed = f"{value.key} was cancelled", False
    error = cluster_lost(value.client, cause, closed)
    if value.key in clusters.recovered:
        node.value = clusters.recovered[value.key]
        return node.value
    raise error


def local_copies(values: list, futures: list) -> list:
    """``values`` (arrays, Futures, parts of a group's Future) as arrays here, copied: every
    Future among ``futures`` (those of ``values``) gathered in one round trip."""
    distinct = futures_of(futures)  # a group's Future once, however many parts it holds
    gathered = dict(zip((f.key for f in distinct), distinct[0].client.gather(distinct))) \
        if distinct else {}

    def local(value: Any) -> Any:
        if isinstance(value, HeldPart):
            return np.array(gathered[value.future.key][value.index])
        if is_future(value):
            return np.array(gathered[value.key])
        return np.array(value) if isinstance(value, np.ndarray) else value

    return [local(value) for value in values]


def ensure_running(client: Any) -> None:
    """Raise ``ClusterLostError`` if ``client``'s connection is closed: every value the
    cluster held for this process is gone with it."""
    if client.status != "running":
        raise cluster_lost(client, f"the client's connection is {client.status}")


def cluster_lost(client: Any, cause: str, closed: bool = False) -> ClusterLostError:
    """Put back what recovery sources kept and describe the loss (to be raised); ``closed``:
    the connection to the scheduler closed (the client may not know it yet)."""
    restored = []
    for reference in list(clusters.recovery_sources):
        source = reference()
        if source is None:
            clusters.recovery_sources.remove(reference)
            continue
        description, values = source.recover(client)
        if description:
            restored.append(description)
            clusters.recovered.update(values)
    address = getattr(getattr(client, "scheduler", None), "address", None) or "the cluster"
    # The scheduler answers still: data was lost with a worker, pure data (training state,
    # see forget_provenance) that no other worker had a copy of.
    how = ("a worker that left had the only copy of some of them (pargraph.replicas sets on "
           "how many workers training state is kept)" if not closed and getattr(
               client, "status", None) == "running" else "its scheduler went away")
    saved = clusters.last_checkpoint
    message = f"the dask cluster at {address} lost values it held: {how} ({cause})."
    if restored:
        message += (" Rolled back to the copies gathered off the cluster: "
                    + "; ".join(restored) + ". state_dict() answers with them: save them, "
                    "then connect to a running cluster and continue, or resume later.")
    else:
        message += (" Parameters and optimizer state that lived there are gone. Resume from "
                    "your last checkpoint (pargraph.load, then load_state_dict"
                    + (f"; this process last saved {saved}" if saved else "")
                    + "). To lose at most N steps next time, connect with "
                    "pargraph.connect(address, mirror_every=N).")
    return ClusterLostError(message)
