"""Training state on two workers: parameters and optimizer state are copied to a second
worker (``pargraph.replicas``) as soon as each task holding them ends; the next run waits for
the copies before it is submitted, so a worker dying loses nothing that cannot be recomputed.
Once copied, the state becomes pure data on the scheduler and on the workers, as if scattered
(:func:`forget_provenance`, :func:`forget_provenance_on_worker`), and what it was computed
from is forgotten; nor do distributed's spans grow with every step (:func:`prune_spans`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import dask

from pargraph.remote.layout import is_future
from pargraph.remote.state import clusters
from pargraph.remote.waiting import settled
from pargraph.remote.workers import replicas, threads_by_worker


def start_replication(client: Any, state: list) -> None:
    """Start copying the ``state`` futures to more than one worker (``pargraph.replicas``,
    default 2), each as soon as it exists, so that a worker dying loses no state that cannot
    be recomputed; then make the scheduler and the workers forget how they were computed.

    A worker's update tasks are copied while the other worker still computes, and the caller
    records its next step meanwhile; the next run on the cluster waits for the copies
    before it starts (:func:`settle_replication`), so every run starts with the state on two
    workers (copied once the whole run had returned, they added their transfer to every
    step)."""
    wanted = replicas(client)
    workers = len(threads_by_worker(client)) if wanted else 0
    futures = state if wanted else []  # with copies, they hold nothing else (the _keep tasks)

    async def copy_each() -> None:
        await asyncio.gather(*(client._replicate([future], n=min(wanted, workers))
                               for future in futures), return_exceptions=True)
        # then the forgetting, which the next run need not wait for
        forgetting = asyncio.ensure_future(_forget_history(client, list(state)))
        clusters.forgetting.add(forgetting)  # asyncio keeps only a weak reference to a task
        forgetting.add_done_callback(clusters.forgetting.discard)

    copying = copy_each()
    try:
        if futures:
            _keep_replicas(client)
        clusters.replicating[client] = asyncio.run_coroutine_threadsafe(copying,
                                                                client.loop.asyncio_loop)
    except Exception:  # the client is closing: nothing to copy to
        copying.close()




async def _forget_history(client: Any, futures: list) -> None:
    """Once ``futures`` exist, make the scheduler forget how they were computed
    (:func:`forget_provenance`): what a training step keeps (parameters, optimizer state) is
    computed from the last step's, so otherwise the scheduler keeps every step's tasks, the
    first step's parameter values with them."""
    from distributed.client import _wait

    kept_spans = int(dask.config.get("pargraph.kept-spans", KEPT_SPANS))
    try:
        await _wait(futures)
        keys = [f.key for f in futures if f.status == "finished"]
        await client._run_on_scheduler(forget_on_scheduler, keys=keys, kept_spans=kept_spans)
        await client._run(forget_provenance_on_worker, keys=keys, on_error="ignore")
    except Exception:  # a worker or the scheduler left: the next run reports what matters
        return


#: How many finished "default" spans a training loop leaves on the scheduler
#: (``pargraph.kept-spans``): see :func:`prune_spans`.
KEPT_SPANS = 100


def forget_on_scheduler(keys: list, kept_spans: int, dask_scheduler: Any = None) -> None:
    """(Runs on the scheduler after each step's copies.) :func:`forget_provenance` of the
    training state, then :func:`prune_spans`."""
    forget_provenance(keys, dask_scheduler)
    prune_spans(kept_spans, dask_scheduler)


def prune_spans(kept: int, dask_scheduler: Any = None) -> int:
    """(Runs on the scheduler.) Empty the finished "default" spans older than the newest
    ``kept``: distributed opens one for a graph whenever the last one finished, one per
    training step, and each keeps its task groups forever (dask/distributed#7977). A span
    itself stays (a worker's heartbeat reports metrics by span and fails on one the scheduler
    no longer knows), without the task groups the scheduler forgot: those were most of a
    span's objects, which every full garbage collection of the scheduler's process walks (a
    LocalCluster's: the client's). The dashboard's span views then cover the last ``kept``
    steps. Spans a user opened (``distributed.span``) stay whole. Returns how many spans were
    emptied (0 on a distributed whose spans differ)."""
    spans = getattr(dask_scheduler, "extensions", {}).get("spans")
    if spans is None or not hasattr(spans, "spans_search_by_name"):
        return 0
    defaults = spans.spans_search_by_name.get(("default",), [])
    groups = dask_scheduler.task_groups
    emptied = 0
    # Only the spans that just left the kept window: older ones were emptied when they did
    # (one whose groups were still alive then is retried for 50 steps), so a step's cost
    # does not grow with the training's length.
    end = max(len(defaults) - kept, 0)
    for span in defaults[max(end - 50, 0):end]:
        members = getattr(span, "groups", None)
        if members and not span.children and span.done and not any(
                groups.get(group.name) is group for group in members):
            members.clear()
            emptied += 1
    return emptied


def forget_provenance(keys: list, dask_scheduler: Any = None) -> int:
    """(Runs on the scheduler.) Make the tasks of ``keys`` that are in memory pure data, as if
    scattered: no run spec, no dependencies; the tasks they depended on that nothing else
    needs are forgotten, and so on up the history. What is lost: recomputing them if every
    worker holding them dies (pargraph keeps training state on two workers, and recomputing
    it meant rerunning every step since the first). dask/distributed#809 asks for this as an
    API; until one exists, this edits the scheduler's task states the way its own transitions
    do. Returns how many tasks were forgotten (0 on a scheduler whose task states differ)."""
    tasks = dask_scheduler.tasks
    before = len(tasks)
    found = [tasks[key] for key in keys if key in tasks]
    fields = ("state", "run_spec", "dependencies", "dependents", "waiters", "who_wants")
    if not all(hasattr(ts, name) for ts in found for name in fields):
        return 0  # another version of distributed: leave its state alone
    forget: dict = {}
    for ts in found:
        if ts.state != "memory" or not ts.dependencies:
            continue
        for dts in ts.dependencies:
            dts.dependents.discard(ts)
            if dts.waiters:
                dts.waiters.discard(ts)
            if not dts.dependents and not dts.who_wants and dts.state == "released":
                forget[dts.key] = "forgotten"
        ts.dependencies.clear()
        ts.run_spec = None
    if forget:
        dask_scheduler.transitions(forget, stimulus_id=f"pargraph-forget-{time.time()}")
    # A kept value's task group lives as long as the training (it always holds some state)
    # and its dependencies would collect every step's forgotten task groups.
    groups = dask_scheduler.task_groups
    for ts in found:
        group = getattr(ts, "group", None)
        dependencies = getattr(group, "dependencies", None)
        if isinstance(dependencies, set):
            dependencies -= {dep for dep in dependencies if groups.get(dep.name) is not dep}
    return before - len(tasks)


def forget_provenance_on_worker(keys: list, dask_worker: Any = None) -> int:
    """(Runs on each worker.) What :func:`forget_provenance` does on the scheduler, in the
    worker's own task states: a worker keeps a released task while a task that depended on it
    is known to it, so it too kept every step's tasks, their run specs with them. Returns how
    many tasks were forgotten."""
    state = dask_worker.state
    found = [state.tasks[key] for key in keys if key in state.tasks]
    if not all(hasattr(ts, name) for ts in found for name in ("state", "dependencies",
                                                                "dependents")):
        return 0  # another version of distributed: leave its state alone
    forget: dict = {}
    for ts in found:
        if ts.state != "memory":
            continue
        for dep in ts.dependencies:
            dep.dependents.discard(ts)
            if dep.state == "released" and not dep.dependents:
                forget[dep] = "forgotten"
        ts.dependencies.clear()
    before = len(state.tasks)
    if forget:
        state._transitions(forget, stimulus_id=f"pargraph-forget-{time.time()}")
    return before - len(state.tasks)


def keep_until_copied(values: Sequence[Any]) -> None:
    """Hold ``values``, the training state a step replaced, until the copies of the state
    that replaced it exist: a worker that dies before then takes the only copy of some new
    state with it, and dask recomputes that from these (released, they were forgotten: see
    :func:`forget_provenance`). They go once the next run is submitted, which waits for the
    copies: released as soon as the copies existed, the scheduler's messages freeing them
    delayed the next run's first tasks by the scheduler's batching."""
    held = [value for value in values if is_future(value)]
    if held:
        clusters.replaced.setdefault(held[0].client, []).extend(held)






def settle_replication(client: Any) -> None:
    """Wait until the copies the last :func:`start_replication` started on ``client``
    exist."""
    copying = clusters.replicating.pop(client, None)
    if copying is None:
        return
    try:
        settled([copying], copying.result)
    except Exception:
        # A worker that leaves during the copying makes the scheduler fail it (whatever the
        # error). The values are intact on their first worker; the next step copies again.
        return




def _keep_replicas(client: Any) -> None:
    """Once per client: stop the scheduler's Active Memory Manager, whose one default policy
    (ReduceReplicas) drops every copy of a key beyond the first every 2 s, also those
    ``Client.replicate`` made: the replicas would be gone by the time a worker dies.
    (``retire_workers`` still works: it runs its own policy when the manager is stopped.)"""
    if client not in clusters.replicas_kept:
        clusters.replicas_kept[client] = True
        if client.amm.running():
            client.amm.stop()
