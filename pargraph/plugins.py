"""distributed plugins that pargraph registers on a cluster it runs on.

distributed batches the messages between its scheduler and each worker: 5 ms from the
scheduler to a worker, 2 ms back. A message sent within that time of the previous one waits
for the rest of it. That suits graphs of thousands of tasks; a pargraph step is a handful of
coarse tasks whose critical path crosses these links several times (a worker's forward pass
ends, the scheduler tells the other worker to fetch its logits and start its backward pass;
a step's first tasks are often sent a few ms after the last step's releases of old values).
With shorter batching a 2-worker wide DataParallel step took 2-4 ms less (~85 ms; 1 worker
unchanged). The plugins shorten the batching to ``pargraph.send-interval`` on the scheduler
and on every worker, present and future.

Imported by :mod:`pargraph.execution` only when a run goes to a cluster; the scheduler and
the workers import it by name to unpickle the plugins (they need pargraph installed, as for
every pargraph task).
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin


def _shorten(comm: Any, interval: float) -> None:
    if comm is not None and getattr(comm, "interval", 0) > interval:
        comm.interval = interval


class PromptScheduler(SchedulerPlugin):
    """The scheduler's messages to each worker wait at most ``interval`` seconds."""

    name = "pargraph-prompt-scheduler"

    def __init__(self, interval: float) -> None:
        self.interval = interval

    async def start(self, scheduler: Any) -> None:
        for comm in list(scheduler.stream_comms.values()):
            _shorten(comm, self.interval)

    def add_worker(self, scheduler: Any, worker: str) -> None:
        _shorten(scheduler.stream_comms.get(worker), self.interval)


class PromptWorker(WorkerPlugin):
    """A worker's messages to the scheduler wait at most ``interval`` seconds."""

    name = "pargraph-prompt-worker"

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def setup(self, worker: Any) -> None:
        _shorten(getattr(worker, "batched_stream", None), self.interval)
