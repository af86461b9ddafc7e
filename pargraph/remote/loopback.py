"""What a dask cluster's messages cost on this machine's loopback, measured on real processes:
a ``dask scheduler`` and two one-thread ``dask worker`` processes on 127.0.0.1 (the cluster
:func:`worker_processes` starts).
:func:`pargraph.machine_costs.measure_loopback` turns the figures into a forecast's
``Network``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pargraph.remote.replication import settle_replication, start_replication
from pargraph.remote.state import clusters
from pargraph.remote.submit import send_promptly

#: No dashboard pages, and the HTTP routes distributed serves without them on 127.0.0.1 (by
#: default they listen on every interface).
_NO_PAGES = ("--no-dashboard", "--dashboard-address", "127.0.0.1:0")


@contextlib.contextmanager
def worker_processes(workers: int = 2) -> Iterator[Any]:
    """A Client of a ``dask scheduler`` and ``workers`` one-thread ``dask worker`` processes on
    127.0.0.1 (their HTTP servers too: without the dashboard, they still serve its routes on
    every interface unless told where), started as commands (a ``LocalCluster`` of processes
    would import the caller's ``__main__`` again, and runs its scheduler in the caller's
    process), stopped at the end."""
    from distributed import Client

    with tempfile.TemporaryDirectory() as folder:
        address_file = os.path.join(folder, "scheduler.json")
        processes = [subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", *_NO_PAGES, "--scheduler-file", address_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(address_file):
                if time.monotonic() > deadline or processes[0].poll() is not None:
                    raise RuntimeError("pargraph.forecast: a dask scheduler on 127.0.0.1 did "
                                       "not start, so the loopback's costs cannot be measured;"
                                       " pass network=pargraph.forecast.Network(...)")
                time.sleep(0.05)
            processes += [subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                 address_file, "--host", "127.0.0.1", "--nthreads", "1", *_NO_PAGES],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                for _ in range(workers)]
            with Client(scheduler_file=address_file, set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=60)
                yield client
        finally:
            # The workers first, each nanny with its worker process (its own session): a
            # nanny stopped alone can wait 8 s for its worker, then kills it.
            stop_sessions(processes[1:])
            stop_sessions(processes[:1])


def stop_sessions(processes: list[subprocess.Popen]) -> None:
    """Stops processes started in sessions of their own (``start_new_session=True``), and what
    they started: SIGTERM to each session, then SIGKILL to those still running 10 s later.

    A session is signalled by its leader's pid, so each leader stays unreaped (a zombie holds
    its pid) until no signal will follow: once reaped, its pid, and so its session's id, can
    go to another process (pids wrap at ``/proc/sys/kernel/pid_max``, often 32768). Processes
    already reaped are left alone for that reason."""
    live = [process for process in processes if process.returncode is None]
    exited: set[int] = set()
    for sent in (signal.SIGTERM, signal.SIGKILL):
        for process in live:
            if process.pid not in exited:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sent)
        deadline = time.monotonic() + 10
        for process in live:
            while process.pid not in exited and time.monotonic() < deadline:
                try:
                    found = os.waitid(os.P_PID, process.pid,
                                      os.WEXITED | os.WNOWAIT | os.WNOHANG)
                except ChildProcessError:  # reaped by another waiter after all
                    found = True
                if found is not None:
                    exited.add(process.pid)  # exited, not reaped: its pid is still its own
                else:
                    time.sleep(0.02)
        if len(exited) == len(live):
            break
    for process in live:
        with contextlib.suppress(ChildProcessError):
            process.wait()


#: How many more nodes (or values) the long runs of :func:`measure_messages` have.
LONG = 1200


def measure_messages(run_nodes: Callable[[Any, int, int], float],
                     read_back: Callable[[Any], float], repeats: int = 5) -> tuple:
    """``(task latency, scheduler time per task, run latency, time per node, transfer
    latency, bandwidth, replication latency, a worker's time on a core per task, compiled
    run latency and time per node and per value, the workers' and the scheduler's time on a
    core per transfer and per copy of training state, the workers' per array moved, the
    latency of a value read back, the workers' and the scheduler's time on a core per
    transfer beside another, the workers' per byte moved, and the shares of a core a worker
    and the scheduler keep busy between tasks (:func:`idle_cores`))`` in
    seconds (bytes per second for the bandwidth), each the median of about ``repeats``
    measurements (see :func:`pargraph.machine_costs.measure_loopback`);
    ``run_nodes(client, n, values)`` times a pargraph run of a chain of ``n`` tiny nodes on
    the client's cluster, the second of two; with ``values``, the third call of a compiled
    step that also updates ``values`` tiny tensors in place; ``read_back(client)`` times the
    caller's read of a value a pargraph run kept on the client's cluster."""
    def make(size: int) -> np.ndarray:
        return np.ones(size, np.uint8)

    def make_tuple(arrays: int) -> tuple:
        return tuple(np.ones(1 << 10, np.uint8) for _ in range(arrays))

    def touch(*values: Any) -> int:
        return len(values)

    def chain(previous: int) -> int:
        return previous + 1

    def runs(measure: Any, more: int = 0) -> list:
        return [measure() for _ in range(max(repeats + more, 1))]

    def median_of(measure: Any, more: int = 0) -> float:
        return float(np.median(runs(measure, more)))

    with worker_processes(2) as client:
        send_promptly(client)  # batched messages as prompt as on a cluster pargraph runs on
        a, b = sorted(client.scheduler_info()["workers"])
        client.submit(chain, 0, workers=[a], pure=False).result()  # warm both ends

        def on_cores(action: Callable[[], Any], count: int) -> tuple[float, float, float]:
            """Per one of ``count`` things ``action()`` does: its seconds, and the workers'
            (added up) and the scheduler's time on a core meanwhile."""
            workers_before = sum(client.run(time.process_time).values())
            scheduler_before = client.run_on_scheduler(time.process_time)
            start = time.perf_counter()
            action()
            took = time.perf_counter() - start
            workers = sum(client.run(time.process_time).values()) - workers_before
            scheduler = client.run_on_scheduler(time.process_time) - scheduler_before
            return took / count, workers / count, scheduler / count

        def task_chain(hosts: tuple[str, ...], length: int = 20) -> tuple[float, float, float]:
            """Per task of a chain whose tasks take turns on ``hosts``: seconds, and the
            workers' and the scheduler's time on a core."""
            def run() -> None:
                future = client.submit(chain, 0, workers=[hosts[0]], pure=False)
                for k in range(1, length):
                    future = client.submit(chain, future, workers=[hosts[k % len(hosts)]],
                                           pure=False)
                future.result()

            return on_cores(run, length)

        def two_chains(across: bool, length: int = 10) -> tuple[float, float, float]:
            """As :func:`task_chain`, two chains side by side, one starting on each worker:
            across, each takes turns on the two, so two transfers move at once."""
            def run() -> None:
                ends = [client.submit(chain, 0, workers=[w], pure=False) for w in (a, b)]
                for k in range(1, length):
                    ends = [client.submit(chain, end, workers=[(a, b)[(j + k * across) % 2]],
                                          pure=False) for j, end in enumerate(ends)]
                client.gather(ends)

            return on_cores(run, 2 * length)

        worker_cpu: list[float] = []

        def burst(tasks: int = 200) -> float:
            took, workers, _ = on_cores(
                lambda: client.gather(client.map(chain, range(tasks), pure=False)), tasks)
            worker_cpu.append(workers)
            return took

        def moved(size: int) -> tuple[float, float]:
            """How much longer a task on ``b`` that reads ``size`` bytes made on ``a`` takes
            than one on ``a``, and the workers' time on a core for the read across."""
            made = client.submit(make, size, workers=[a], pure=False)
            client.submit(touch, made, workers=[a], pure=False).result()  # made, and on a
            across, workers, _ = on_cores(
                lambda: client.submit(touch, made, workers=[b], pure=False).result(), 1)
            start = time.perf_counter()
            client.submit(touch, made, workers=[a], pure=False).result()
            return max(across - (time.perf_counter() - start), 1e-6), workers

        def replicated() -> float:
            made = client.submit(make, 1 << 10, workers=[a], pure=False)
            client.submit(touch, made, workers=[a], pure=False).result()
            start = time.perf_counter()
            client.replicate([made], n=2)
            return time.perf_counter() - start

        def copied(arrays: int, count: int = 4) -> tuple[float, float]:
            """The workers' and the scheduler's time on a core per copy of training state
            as a step makes them (``remote.replication``: the copies, then the scheduler
            and the workers forget the values' history), of ``count`` tuples of ``arrays``
            arrays of 1 KiB at once."""
            made = [client.submit(make_tuple, arrays, workers=[a], pure=False)
                    for _ in range(count)]
            client.submit(touch, *made, workers=[a], pure=False).result()

            def copy() -> None:
                start_replication(client, made)
                settle_replication(client)
                deadline = time.monotonic() + 10
                while clusters.forgetting and time.monotonic() < deadline:
                    time.sleep(1e-3)

            return on_cores(copy, count)[1:]

        # A task that reads another worker's result waits for a transfer, which costs both
        # workers and the scheduler time on a core: a chain that takes turns on the two
        # workers, against one on a single worker.
        def excess(more: list, base: list) -> list[float]:
            """Per figure of :func:`on_cores`, the median of ``more`` beyond the median of
            ``base`` (none below zero)."""
            return [max(float(np.median([m[k] for m in more]) - np.median([b[k] for b in base])),
                        0.0) for k in range(3)]

        # The two chains in turn, a few more times than the other figures: on a busy machine a
        # chain's time moves by more than a transfer's latency from one run to the next.
        pairs = runs(lambda: (task_chain((a,)), task_chain((a, b))), 2)
        same, across = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        task_latency = float(np.median([s[0] for s in same]))
        transfer_latency, worker_transfer, scheduler_transfer = excess(across, same)
        # Two transfers at once cost each less than one alone (the processes are awake)
        _, worker_overlap, scheduler_overlap = excess(
            runs(lambda: two_chains(True)), runs(lambda: two_chains(False)))
        scheduler_task = median_of(burst, -2)
        # Costs per node and per value are differences of whole runs: a long run keeps the
        # runs' own noise (a millisecond or so) small beside them.
        one, many = (median_of(lambda: run_nodes(client, 2)),
                     median_of(lambda: run_nodes(client, 2 + LONG)))
        per_node = max((many - one) / LONG, 0.0)
        run_latency = max(one - task_latency - 2 * per_node, 0.0)
        compiled = median_of(lambda: run_nodes(client, 2, 2))
        compiled_latency = max(compiled - task_latency, 0.0)
        compiled_node = max((median_of(lambda: run_nodes(client, 2 + LONG, 2)) - compiled)
                            / LONG, 0.0)
        # each value written is one node more
        compiled_value = max((median_of(lambda: run_nodes(client, 2, 2 + LONG)) - compiled)
                             / LONG - compiled_node, 0.0)
        small, big = 1 << 10, 64 << 20
        # the bytes of a big value cost the two workers time on a core too (copies into
        # and out of the sockets): the difference of the two reads' time on a core
        (small_time, small_cpu), (big_time, big_cpu) = (
            np.median(runs(lambda size=size: moved(size), 2), axis=0) for size in (small, big))
        replicate_latency = median_of(replicated)
        copied(1)  # the first copies also stop the scheduler's memory manager
        copies = runs(lambda: copied(1))
        worker_replicate, scheduler_replicate = (float(np.median([c[k] for c in copies]))
                                                 for k in range(2))
        # each array of a tuple is (de)serialized on its own: its share of the workers' time
        worker_value = max((median_of(lambda: copied(101)[0]) - worker_replicate) / 100, 0.0)
        read_latency = median_of(lambda: read_back(client))
        worker_idle, scheduler_idle = idle_cores(client)
    bandwidth = (big - small) / max(float(big_time - small_time), 1e-6)
    worker_byte = max(float(big_cpu - small_cpu), 0.0) / (big - small)
    return (task_latency, min(scheduler_task, task_latency), run_latency, per_node,
            transfer_latency, bandwidth, replicate_latency,
            min(float(np.median(worker_cpu)), task_latency), compiled_latency, compiled_node,
            compiled_value,
            worker_transfer, scheduler_transfer, worker_replicate, scheduler_replicate,
            worker_value, read_latency, worker_overlap, scheduler_overlap, worker_byte,
            worker_idle, scheduler_idle)


#: Seconds over which the cluster's own loops are timed between tasks.
IDLE_SECONDS = 2.0


def idle_cores(client: Any, seconds: float = IDLE_SECONDS) -> tuple[float, float]:
    """The shares of a core a worker (its process and its nanny's, the mean over the
    client's workers) and the scheduler keep busy with their own loops while no task runs:
    heartbeats, the workers' profilers, the nannies' watch of their workers."""
    def process_times() -> tuple[float, float]:
        workers = sum(client.run(time.process_time).values())
        nannies = sum(client.run(time.process_time, nanny=True).values())
        return workers + nannies, client.run_on_scheduler(time.process_time)

    count = len(client.scheduler_info()["workers"])
    (workers_before, scheduler_before), start = process_times(), time.perf_counter()
    time.sleep(seconds)
    (workers_after, scheduler_after), took = process_times(), time.perf_counter() - start
    return ((workers_after - workers_before) / max(count, 1) / took,
            (scheduler_after - scheduler_before) / took)
