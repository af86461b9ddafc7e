"""distributed plugins that pargraph registers on a cluster it runs on: its batched comms
and its logs.

distributed batches the messages between its scheduler and each worker (and each client) in a
``BatchedSend``, which pargraph tunes for training loops in two ways, and logs a line for each
call pargraph makes after every step, which pargraph drops:

Prompt messages
    distributed waits up to 5 ms from the scheduler to a worker and 2 ms back before a message
    goes, so that messages sent meanwhile go with it. That suits graphs of thousands of tasks;
    a pargraph step is a handful of coarse tasks whose critical path crosses these links
    several times (a worker's forward pass ends, the scheduler tells the other worker to fetch
    its logits and start its backward pass; a step's first tasks often follow the last step's
    releases of old values by a few ms). With 1 ms (``pargraph.send-interval``) a 2-worker
    DataParallel step's critical path waits less at each crossing.

Short message logs
    Each BatchedSend keeps its last ``distributed.admin.low-level-log-length`` (1000) payloads
    for debugging. A training loop sends its graph every step, so the scheduler's comm to each
    worker held the task specs of the last hundred or more steps, and the client's comm the
    pickled graphs: hundreds of thousands of objects that every full garbage collection of a
    LocalCluster's process walks. pargraph keeps ``pargraph.message-log-length`` (10)
    payloads.

Quiet logs
    distributed logs every out-of-band call at INFO ("Run out-of-band function ..."), and
    pargraph's forgetting of a step's history runs on the scheduler and on every worker each
    step: a line a step in each process's log (``docker compose logs``). The plugins drop
    those lines, for pargraph's per-step functions only.

The plugins apply both on the scheduler (to every worker's and client's comm, present and
future) and on every worker. Imported by :mod:`pargraph.engine.execution` only when a run goes to a
cluster; the scheduler and the workers import it by name to unpickle the plugins (they need
pargraph installed, as for every pargraph task).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin


def tune_comm(comm: Any, interval: float, log_length: int) -> None:
    """Shorten a ``BatchedSend``'s batching to ``interval`` seconds and its log of recent
    payloads to ``log_length`` (never lengthen either)."""
    if comm is None:
        return
    if getattr(comm, "interval", 0) > interval:
        comm.interval = interval
    log = getattr(comm, "recent_message_log", None)
    if log is not None and (log.maxlen is None or log.maxlen > log_length):
        comm.recent_message_log = deque(log, maxlen=log_length)


#: pargraph's functions that run on the scheduler and on the workers after every step
#: (:func:`pargraph.remote.replication.forget_on_scheduler` and ``forget_provenance_on_worker``).
EVERY_STEP = frozenset({"forget_on_scheduler", "forget_provenance_on_worker"})
_RUN_MESSAGE = "Run out-of-band function %r"  # distributed.worker.run's


class QuietEveryStepCalls(logging.Filter):
    """Drops distributed's log line for each call of pargraph's per-step functions."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == _RUN_MESSAGE and record.args
                    and record.args[0] in EVERY_STEP)


def quiet_every_step_calls() -> None:
    """Install :class:`QuietEveryStepCalls` in this process (once)."""
    logger = logging.getLogger("distributed.worker")  # the scheduler runs them there too
    if not any(isinstance(f, QuietEveryStepCalls) for f in logger.filters):
        logger.addFilter(QuietEveryStepCalls())


class SchedulerComms(SchedulerPlugin):
    """The scheduler's comms to its workers and clients (see the module)."""

    name = "pargraph-scheduler-comms"

    def __init__(self, interval: float, log_length: int) -> None:
        self.interval, self.log_length = interval, log_length

    async def start(self, scheduler: Any) -> None:
        quiet_every_step_calls()
        for comm in [*scheduler.stream_comms.values(), *scheduler.client_comms.values()]:
            tune_comm(comm, self.interval, self.log_length)

    def add_worker(self, scheduler: Any, worker: str) -> None:
        tune_comm(scheduler.stream_comms.get(worker), self.interval, self.log_length)

    def add_client(self, scheduler: Any, client: str) -> None:
        tune_comm(scheduler.client_comms.get(client), self.interval, self.log_length)


class WorkerComms(WorkerPlugin):
    """A worker's comm to the scheduler (see the module)."""

    name = "pargraph-worker-comms"

    def __init__(self, interval: float, log_length: int) -> None:
        self.interval, self.log_length = interval, log_length

    def setup(self, worker: Any) -> None:
        quiet_every_step_calls()
        tune_comm(getattr(worker, "batched_stream", None), self.interval, self.log_length)
