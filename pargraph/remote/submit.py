"""Submitting a run to a cluster: the graph goes to the scheduler untokenized, placed tasks
in one layer per worker; the results stay on the workers as Futures, but for the few fetched
with the run (a loss). A value held here that a second run reads as well is persisted on the
cluster (:func:`held_on_cluster`) and read by key from then on."""

from __future__ import annotations

import asyncio
import warnings
from concurrent.futures import CancelledError
from typing import Any

import dask
from dask.utils import parse_timedelta

from pargraph.graph import Node
from pargraph.remote.layout import is_future
from pargraph.remote.recovery import cluster_lost
from pargraph.remote.replication import settle_replication, start_replication
from pargraph.remote.state import clusters
from pargraph.remote.waiting import asked, settled


def run_on_cluster(client: Any, graph: dict, keys: list, workers: dict | None = None,
                   fetched: int = 0, urgent: frozenset = frozenset(),
                   state: frozenset = frozenset(), progress: bool = False) -> list:
    """Run on the cluster and keep the results there: returns Futures, and the values of the
    last ``fetched`` keys (small: a loss). ``workers`` maps task keys to the worker address
    pargraph placed them on; ``urgent`` tasks run on their worker as soon as they can; the
    results at positions ``state`` (training state) are copied to a second worker as each is
    ready, then lose their history on the scheduler and the workers."""
    if client.status != "running":  # reconnecting or closed: every value it held is gone
        raise cluster_lost(client, f"the client's connection is {client.status}")
    clusters.used = True  # values may be held there from now on
    graph = untokenized(graph, workers, keys, urgent)
    settle_replication(client)
    send_promptly(client)
    futures = submit(client, graph, keys)
    clusters.replaced.pop(client, None)  # the copies of what replaced it exist
    if state:
        start_replication(client, [futures[k] for k in sorted(state)])
    # The fetched values (a loss) are often ready before the rest (a worker's backward pass):
    # they travel meanwhile.
    if fetched:
        wait_for(client, futures[-fetched:], bar=False)
        try:
            values = asked(lambda: client.gather(futures[-fetched:]))  # finished: quick
        except (OSError, CancelledError, asyncio.CancelledError) as error:
            # The scheduler went away after the run (CommClosedError is an OSError).
            raise cluster_lost(client, f"gathering the run's results: {error!r}",
                               isinstance(error, OSError)) from None
    wait_for(client, futures, bar=progress)
    if fetched:
        futures[-fetched:] = values
    return futures


def submit(client: Any, graph: Any, keys: list) -> list:
    """``client.get(graph, keys, sync=False)``, without distributed's warning about a graph
    above ``distributed.admin.large-graph-warning-threshold`` (10 MB): its advice, keep data
    on the cluster instead of in every graph, is what pargraph does already (a value rides in
    the first run that reads it, a second run persists it and reads it by key from then on),
    so nothing in the user's code could act on it. The first step of a model with more than
    10 MB of parameters warned."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        return client.get(graph, keys, sync=False)


#: Seconds a client batches its messages to the scheduler for (distributed's is 10 ms). A run
#: sent less than that after the last batch waits for the rest: a training step's first
#: message often follows the last step's releases of old values by a few ms.
CLIENT_SEND_INTERVAL = 2e-3


#: Seconds the scheduler and the workers batch their messages to each other for
#: (``pargraph.send-interval``; distributed's are 5 and 2 ms), and how many payloads each of
#: these comms keeps in its debugging log (``pargraph.message-log-length``; distributed's
#: 1000 held the task specs of a hundred steps and more): see :mod:`pargraph.plugins`.
SEND_INTERVAL = 1e-3


MESSAGE_LOG_LENGTH = 10




def send_promptly(client: Any) -> None:
    """Shorten the client's batching of messages to the scheduler and its log of them, and,
    once per scheduler connection, the scheduler's and the workers' with plugins
    (:mod:`pargraph.plugins`)."""
    from pargraph.remote.plugins import SchedulerComms, WorkerComms, tune_comm

    comm = getattr(client, "scheduler_comm", None)
    log_length = int(dask.config.get("pargraph.message-log-length", MESSAGE_LOG_LENGTH))
    tune_comm(comm, CLIENT_SEND_INTERVAL, log_length)
    if comm is None or comm in clusters.tuned_comms:
        return
    interval = parse_timedelta(dask.config.get("pargraph.send-interval", SEND_INTERVAL),
                               default="s")
    try:
        asked(lambda: client.register_plugin(SchedulerComms(interval, log_length)))
        asked(lambda: client.register_plugin(WorkerComms(interval, log_length)))
    except Exception as error:  # a speed-up only: the run itself reports a lost cluster
        if client.status != "running":
            return
        warnings.warn(f"pargraph could not tune the cluster's message batching ({error!r}): "
                      "runs work, a few ms slower each", stacklevel=2)
    clusters.tuned_comms.add(comm)


def wait_for(client: Any, futures: list, bar: bool = False) -> None:
    """Wait until ``futures`` finished (``bar``: with distributed's progress bar); raise the
    first one's error, or ClusterLostError."""
    from distributed import progress

    try:
        with client.as_current():
            if bar:
                progress(futures)
            settled(futures)
    except CancelledError as error:
        raise cluster_lost(client, f"the run was cancelled: {str(error).splitlines()[0]}"
                           ) from None
    for future in futures:
        if future.status == "error":
            raise future.exception()
        if future.status != "finished":  # cancelled: the scheduler went away
            raise cluster_lost(client, f"the run's results were cancelled "
                                       f"({future.key} and {len(futures) - 1} more)")


def untokenized(graph: dict, workers: dict | None = None, keys: list | None = None,
                 urgent: frozenset = frozenset()) -> Any:
    """The graph as the expression ``Client.get`` builds from a dict, but named by a unique
    token instead of one computed by hashing every task and array in it (longer than a small
    training step): pargraph's keys are already unique. The token goes to the constructor,
    which names the expression at once (set afterwards, it came after the hashing). Tasks
    placed on a worker (``workers``) go in one layer per worker, annotated as
    ``dask.annotate(workers=..., allow_other_workers=True)`` would: loose, so a worker that
    left blocks nothing; ``urgent`` ones in a layer of their own with a higher priority."""
    try:
        from dask._expr import HLGExpr, LLGExpr
    except ImportError:  # an older or newer dask: let it tokenize
        return graph
    token = f"pargraph-{next(clusters.graphs)}-{clusters.session}"
    if workers:
        return HLGExpr(dsk=_placed_layers(graph, workers, urgent), output_keys=keys,
                       _determ_token=token)
    return LLGExpr(graph, _determ_token=token)


def _placed_layers(graph: dict, workers: dict, urgent: frozenset = frozenset()) -> Any:
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    by_worker: dict[tuple[str, bool], dict] = {}
    for key, task in graph.items():
        by_worker.setdefault((workers.get(key, ""), key in urgent), {})[key] = task
    layers = {}
    for (address, first), tasks in by_worker.items():
        annotations = {"workers": [address], "allow_other_workers": True} if address else {}
        if first:
            annotations["priority"] = 1
        name = f"pargraph-{address or 'anywhere'}{'-first' if first else ''}"
        layers[name] = MaterializedLayer(tasks, annotations=annotations or None)
    return HighLevelGraph(layers, {name: set() for name in layers})




def held_on_cluster(order: list[Node], client: Any) -> dict[str, Any]:
    """For the realized values held here that an earlier run on ``client`` read too, a
    reference to their copy on the cluster (sent now if this is the second run reading them),
    by node key. The copy is a persisted data task, not scattered data: a worker that dies
    with it loses nothing, the scheduler runs the task again (and a copy a lost scheduler
    took along is sent again)."""
    from dask.task_spec import TaskRef

    held: dict[str, Any] = {}
    for node in order:
        if node.value is None or is_future(node.value):
            continue
        copy = clusters.shipped.get(node)
        # A compiled replay gives a leaf a new value and key (graph.renew_all): a copy of its
        # old value is not one of it.
        if copy is None or copy != node.key and (
                type(copy) is str or not copy.key.startswith(f"{node.key}-held-")):
            clusters.shipped[node] = node.key  # sent in this run's graph, kept if it comes back
            continue
        if type(copy) is str or lost(copy, client):
            key = f"{node.key}-held-{next(clusters.graphs)}"  # groups with its op in the dashboard
            copy = clusters.shipped[node] = persisted(client, key, node.value)
        held[node.key] = TaskRef(copy.key)
    return held


def persisted(client: Any, key: str, value: Any, worker: str = "") -> Any:
    """A Future of ``value`` kept on ``client``'s cluster as a persisted data task named
    ``key`` (placed loosely on ``worker``, where given), not as scattered data: a worker that
    dies with it loses nothing, the scheduler runs the task again."""
    from dask.task_spec import DataNode

    graph = untokenized({key: DataNode(key, value)}, {key: worker} if worker else None, [key])
    return submit(client, graph, [key])[0]


def lost(copy: Any, client: Any) -> bool:
    """Whether a :func:`persisted` copy can no longer be read on ``client``'s cluster: it
    belongs to another client, or was cancelled or failed (a lost scheduler)."""
    return copy.client is not client or copy.status in ("cancelled", "error")
