"""Training on a real dask cluster: `dask scheduler` and `dask worker` processes on 127.0.0.1,
started with the very commands docker/docker-compose.yml runs (only host and ports differ)."""

import asyncio
import operator
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import warnings

import dask
import numpy as np
import psutil
import pytest
import yaml
from dask.utils import key_split

import pargraph
from pargraph import nn, optim
from pargraph.remote.layout import is_future
from pargraph.remote.loopback import stop_sessions
from pargraph.remote.state import clusters
from tests.conftest import IN_PROCESS_LOOPBACK
from tests.models import MeanOfTowers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE = os.path.join(ROOT, "docker", "docker-compose.yml")


def compose_commands() -> dict[str, str]:
    with open(COMPOSE) as file:
        services = yaml.safe_load(file)["services"]
    return {name: " ".join(service["command"].split()) for name, service in services.items()}


_PORTS = random.SystemRandom()


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now, below the kernel's ephemeral range: ``bind(0)`` would
    hand out a port of that range, which the outgoing connections of the suite's other
    processes also draw from, so one of them could hold it by the time a scheduler binds it.
    Each port stays bound until all are drawn, so no two are the same. The draw is the
    operating system's, so that no test seeding Python's ``random`` makes the ports repeat."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as file:
        ephemeral_low = int(file.read().split()[0])
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", _PORTS.randrange(10_000, ephemeral_low)))
            except OSError:
                s.close()
                continue
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def free_port() -> int:
    """One port as :func:`free_ports` draws them."""
    return free_ports(1)[0]


def local_command(command: str, port: int, dashboard: int, worker_http: int = 0,
                  pages: bool = True) -> list[str]:
    """A compose command made to run on this machine: 127.0.0.1 and its ports, nothing else.
    Without ``pages``, the process serves its HTTP routes (health, metrics) but not the
    dashboard's pages, whose start is a large part of each process's start."""
    command = (command.replace("--host 0.0.0.0", "--host 127.0.0.1")
               .replace("--port 8786", f"--port {port}")
               .replace("0.0.0.0:8787", f"127.0.0.1:{dashboard}")
               .replace("0.0.0.0:8789", f"127.0.0.1:{worker_http}")
               .replace("tcp://scheduler:8786", f"tcp://127.0.0.1:{port}"))
    assert "0.0.0.0" not in command, command
    return shlex.split(command) + ([] if pages else ["--no-dashboard"])


class Cluster:
    """A scheduler and workers as separate processes, stopped at the end; with ``pages``,
    each serves the dashboard's pages as the compose file's do."""

    def __init__(self, workers: int, pages: bool = False) -> None:
        self.pages, self.client = pages, None
        for attempt in range(3):
            # All ports are drawn before any process starts, so none can take another's.
            self.port, self.dashboard, *self.worker_http = free_ports(2 + workers)
            self.address = f"tcp://127.0.0.1:{self.port}"
            self.log = tempfile.TemporaryFile()
            self.scheduler = self.start("scheduler", stderr=self.log)
            self.workers = [self.start("worker", http) for http in self.worker_http]
            try:
                self.connect(timeout=30)
                self.client.wait_for_workers(workers, timeout=60)
                return
            except BaseException as error:  # no process outlives a cluster that never came up
                said = self.scheduler_said()
                self.close()
                if not isinstance(error, Exception):
                    raise
                # Another process can bind a drawn port before the scheduler does: draw again.
                if "Address already in use" in said and attempt < 2:
                    continue
                raise ConnectionError(f"{error}\nthe scheduler's last words:\n{said}") from error

    def connect(self, timeout: float) -> None:
        """A client of the scheduler, once its port listens; a scheduler that exited ends the
        wait. The client gets the whole ``timeout``: it is also how long it tries to reconnect
        after its scheduler went away (the reconnection tests start a new one meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError as error:
                if self.scheduler.poll() is not None or time.monotonic() > deadline:
                    raise ConnectionError(f"nothing listens at {self.address}") from error
                time.sleep(0.05)
        self.client = pargraph.connect(self.address, timeout=timeout)

    def scheduler_said(self) -> str:
        """The errors the scheduler wrote to its stderr, or its log's last lines if none."""
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").splitlines()
        return "\n".join([line for line in lines if "Error" in line] or lines[-5:])

    def start(self, service: str, http: int = 0, stderr=subprocess.DEVNULL) -> subprocess.Popen:
        """The compose ``service``'s command, started on this cluster's ports."""
        args = local_command(compose_commands()[service], self.port, self.dashboard, http,
                             self.pages)
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT,
                                start_new_session=True)

    def kill_worker(self, index: int) -> None:
        os.killpg(self.workers[index].pid, signal.SIGKILL)

    def close(self) -> None:
        try:
            if self.client is not None:
                self.client.close(timeout=5)  # also when its scheduler was killed
        except Exception:
            pass
        stop_sessions(self.workers)
        stop_sessions([self.scheduler])
        self.log.close()


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(workers=2)
    yield running
    running.close()


def train(steps: int, scheduler, shards: int | None = None, on_step=None, width: int = 32):
    """A few Adam steps of an MLP on real digits; returns losses and final parameters."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = pargraph.tensor((digits.data[:256] / 16).astype(np.float32))
    y = pargraph.tensor(digits.target[:256])
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 10))
    if shards:
        model = nn.DataParallel(model, shards=shards)
    opt = optim.Adam(model.parameters(), lr=0.01)
    with dask.config.set(scheduler=scheduler):
        losses = _losses_of_steps(model, opt, x, y, steps, on_step)
    return losses, model, opt


def _losses_of_steps(model, opt, x, y, steps: int, on_step=None, compiled: bool = False,
                     decay: bool = False) -> list[float]:
    """``steps`` cross-entropy steps of ``model`` on ``(x, y)``, each loss read back (unlike
    ``_steps``, whose steps leave theirs on the cluster); returns the losses.
    ``on_step(k)`` runs before step ``k``, when nothing holds the last step's graph.
    ``compiled``: the step compiled (``pargraph.compile``); ``decay``: its learning rate
    divided by the step's number, a new one every step."""
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    schedule = optim.lr_scheduler.LambdaLR(opt, lambda k: 1 / (1 + k)) if decay else None
    losses = []
    for k in range(steps):
        if on_step:
            on_step(k)
        loss = run(x, y)
        losses.append(loss.item())
        del loss
        if schedule is not None:
            schedule.step()
    return losses


def train_towers(client, steps: int, settings: dict, on_step=None, norm: bool = False,
                 compiled: bool = False, decay: bool = False
                 ) -> tuple[list[float], nn.ModuleList]:
    """SGD steps of four 256-512-512-10 towers in a 2-shard DataParallel on ``client``, with
    ``pargraph.replicas: 1`` (so who_has says where a value was computed) and ``settings``
    (which may override it); returns the losses and the towers. ``on_step(k)`` runs before
    step ``k``, when nothing holds the last step's graph (its loss tensor is gone). ``norm``:
    a batch norm after each tower's first layer; ``compiled`` and ``decay`` as
    :func:`_losses_of_steps` takes them."""
    pargraph.manual_seed(0)
    towers = nn.ModuleList(nn.Sequential(
        nn.Linear(256, 512), *([nn.BatchNorm1d(512)] if norm else []), nn.ReLU(),
        nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)) for _ in range(4))
    model = nn.DataParallel(MeanOfTowers(towers), shards=2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = pargraph.randn(512, 256), pargraph.randint(0, 10, (512,))
    with dask.config.set({"scheduler": client, "pargraph.replicas": 1, **settings}):
        losses = _losses_of_steps(model, opt, x, y, steps, on_step, compiled, decay)
    return losses, towers


def test_a_cluster_whose_port_was_taken_draws_again_and_says_why_when_it_cannot(monkeypatch):
    """Between the draw and the scheduler's bind, another process can take the port: the
    cluster starts on new ports; a scheduler that fails for good shows its own error."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    draws, draw = [], free_ports

    def first_taken(count):
        draws.append(count)
        ports = draw(count)
        return [taken.getsockname()[1], *ports[1:]] if len(draws) == 1 else ports

    monkeypatch.setattr(sys.modules[__name__], "free_ports", first_taken)
    with taken:
        running = Cluster(workers=1)
        try:
            assert len(draws) == 2 and running.port != taken.getsockname()[1]
            assert running.client.submit(operator.add, 1, 2).result(timeout=30) == 3
        finally:
            running.close()
        monkeypatch.setattr(sys.modules[__name__], "free_ports",
                            lambda count: [taken.getsockname()[1], *draw(count)[1:]])
        with pytest.raises(ConnectionError, match="Address already in use"):
            Cluster(workers=1)


def test_stopping_sessions_kills_what_ignores_sigterm_and_spares_reaped_ids(monkeypatch):
    """stop_sessions ends a session whose leader and child ignore SIGTERM, reaps its leader,
    and sends nothing to a process already reaped: its pid may belong to another by then."""
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, subprocess, sys, time; "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); "
         "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert stubborn.stdout.readline().strip() == "ready"
    child = psutil.Process(stubborn.pid).children()[0]
    done = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    done.wait()
    signalled = []
    killpg = os.killpg
    monkeypatch.setattr(os, "killpg", lambda pid, sent: (signalled.append(pid),
                                                         killpg(pid, sent)))
    stop_sessions([stubborn, done])
    assert stubborn.returncode == -signal.SIGKILL
    # the session's SIGKILL reached the child too; its death follows the signal's delivery
    # (and a dead orphan may wait as a zombie for whoever adopted it)
    def dead() -> bool:
        try:
            return child.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 10
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dead()
    assert done.pid not in signalled and signalled.count(stubborn.pid) == 2


def test_compose_commands_are_the_ones_tests_run():
    commands = compose_commands()
    assert commands["scheduler"].startswith("dask scheduler ")
    assert commands["worker"].startswith("dask worker tcp://scheduler:8786")
    assert "demos/digits.py --address tcp://scheduler:8786" in commands["trainer"]
    with open(COMPOSE) as file:
        services = yaml.safe_load(file)["services"]
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published)
    assert "container_name" not in services["worker"]  # `--scale worker=N` needs this


def test_training_on_the_cluster_equals_the_threaded_run(cluster):
    cluster_losses, model, _ = train(4, cluster.client)
    threaded_losses, threaded_model, _ = train(4, "threads")
    # Workers run BLAS on one thread, this process on all cores: sums may round differently.
    np.testing.assert_allclose(cluster_losses, threaded_losses, rtol=1e-6)
    for a, b in zip(model.parameters(), threaded_model.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


def test_state_stays_on_the_workers_between_steps(cluster, record_runs):
    _, model, opt = train(2, cluster.client)
    params = list(model.parameters())
    assert all(is_future(p._node.value) for p in params)
    assert all(is_future(v._node.value) for state in opt.state.values()
               for v in state.values() if isinstance(v, pargraph.Tensor))
    last_run = record_runs[-1]
    uploaded = [k for k, task in last_run.items() if type(task).__name__ == "DataNode"]
    param_keys = {p._node.key for p in params}
    assert not param_keys & set(uploaded)  # parameters were not sent again
    state = model.state_dict()  # gathered only when asked for
    assert all(isinstance(v.numpy(), np.ndarray) for v in state.values())


def _carries(graph: dict, nbytes: int) -> bool:
    """Whether ``graph`` sends an array of ``nbytes`` bytes: as a data key, or riding in a
    task that reads it."""
    return any(getattr(value, "nbytes", None) == nbytes for task in graph.values()
               for value in ([task.value] if type(task).__name__ == "DataNode"
                             else getattr(task, "args", ())))


def test_data_read_by_every_step_is_sent_once_then_read_from_the_cluster(cluster, record_runs):
    losses, _, _ = train(4, cluster.client)
    batch = 256 * 64 * 4  # the digits batch, float32
    assert _carries(record_runs[0], batch)  # the first step sends the batch in its graph
    assert not any(_carries(run, batch) for run in record_runs[2:])  # then reads the copy
    threaded, _, _ = train(4, "threads")
    np.testing.assert_allclose(losses, threaded, rtol=1e-6)


def test_values_sent_in_a_runs_graph_raise_no_large_graph_warning(cluster):
    """A value rides in the first run that reads it, then stays on the cluster: dask's
    warning about large graphs (advising just that) only worried the user. With the
    threshold at 1 kB the digits batch (64 KiB) crosses it on the first and second steps."""
    threshold = "distributed.admin.large-graph-warning-threshold"
    with dask.config.set({threshold: "1 kB"}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, _, _ = train(2, cluster.client)
        # dask's warning itself still works: an 80 kB array in the user's own graph
        cluster.client.compute(dask.delayed(np.sum)(np.ones(10_000))).result()
    large = [str(w.message) for w in caught if "Sending large graph" in str(w.message)]
    assert len(large) == 1, large  # the user's own graph, not pargraph's
    assert np.isfinite(losses).all()


def test_small_values_ride_inside_the_tasks_that_read_them(cluster, record_runs):
    from pargraph.remote.layout import INLINE_BYTES

    losses, _, _ = train(2, cluster.client, shards=2)  # the loss makes an index every step
    small = [k for run in record_runs for k, task in run.items()
             if type(task).__name__ == "DataNode" and task.value.nbytes <= INLINE_BYTES]
    assert not small  # a data key would cost the scheduler a task each
    threaded, _, _ = train(2, "threads", shards=2)
    np.testing.assert_allclose(losses, threaded, rtol=1e-6)


def test_a_value_one_task_reads_rides_in_it_whatever_its_size(cluster, record_runs):
    """A dropout mask the step makes here (64 KiB) is read by one task: it rides in that task,
    since a data key would cost the scheduler a task of its own (the eager attention step's
    16 masks took about 20 ms of its one-worker step). Only a value several tasks read is a
    data key, sent once for all of them; the steps train as on threads."""
    def dropout_steps(scheduler) -> list[float]:
        pargraph.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.Dropout(0.5), nn.ReLU(), nn.Linear(256, 10))
        model = nn.DataParallel(model, shards=2)
        opt = optim.SGD(model.parameters(), lr=0.1)
        x = pargraph.tensor(np.random.default_rng(0).random((128, 64), dtype=np.float32))
        y = pargraph.tensor(np.arange(128) % 10)
        with dask.config.set(scheduler=scheduler):
            return _losses_of_steps(model, opt, x, y, 3)

    losses = dropout_steps(cluster.client)
    for graph in record_runs:
        for key, task in graph.items():
            if type(task).__name__ == "DataNode":
                readers = [t for t in graph.values() if key in getattr(t, "dependencies", ())]
                assert len(readers) >= 2, key
    masks = sum(_carries(graph, 64 * 256 * 4) for graph in record_runs)
    assert masks >= 3  # one mask per shard a step, riding in the task that reads it
    np.testing.assert_allclose(losses, dropout_steps("threads"), rtol=1e-6)


def test_workers_keep_freed_arrays_for_reuse_after_their_first_task(cluster):
    """distributed starts workers with MALLOC_TRIM_THRESHOLD_ set; pargraph's first task in a
    worker process resets glibc's thresholds there."""
    from pargraph import runtime

    train(1, cluster.client)
    states = cluster.client.run(runtime.allocator_state).values()  # (ran a task, tuned)
    assert any(tuned for _, tuned in states)
    assert all(tuned or not ran for ran, tuned in states)


def test_a_cancelled_copy_of_held_data_is_sent_again(cluster):

    x = pargraph.arange(6.0)
    with dask.config.set(scheduler=cluster.client):
        for _ in range(2):
            assert (x * 2).sum().item() == 30.0
        copy = clusters.shipped[x._node]
        assert copy.status == "finished"
        cluster.client.cancel(copy)  # as if its scheduler had lost it
        assert (x * 3).sum().item() == 45.0
    assert clusters.shipped[x._node] is not copy


def test_a_copy_of_held_data_is_not_read_for_a_value_a_replay_gave_its_node(cluster):
    """A compiled replay on local threads gives a parameter's node a new value and key
    (graph.renew_all); a cluster run after it sends the new value, not the old copy."""
    from pargraph.graph import renew_all

    x = pargraph.arange(6.0)
    with dask.config.set(scheduler=cluster.client):
        for _ in range(2):
            assert (x * 2).sum().item() == 30.0
        assert is_future(clusters.shipped[x._node])
        renew_all([x._node], [np.arange(6.0) * 10])
        for _ in range(3):  # sent in the graph, then persisted anew
            assert (x * 2).sum().item() == 300.0


def test_a_compiled_step_sends_an_input_it_reads_every_step_once(cluster, monkeypatch):
    """A batch passed to every compiled step travels in the first runs' graphs only: later
    runs read the copy persisted on the cluster, as eager runs do."""
    from pargraph.remote import submit

    graphs = []
    original = submit.untokenized

    def recording(graph, *args, **kwargs):
        graphs.append(graph)
        return original(graph, *args, **kwargs)

    monkeypatch.setattr(submit, "untokenized", recording)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((64, 64)).astype(np.float32)  # 16 KiB: above INLINE_BYTES

    def losses(compiled: bool) -> list[float]:
        pargraph.manual_seed(0)
        model = nn.Linear(64, 3)
        opt = optim.SGD(model.parameters(), lr=0.1)
        x = pargraph.tensor(data)

        def step(x):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            return loss

        run = pargraph.compile(step) if compiled else step
        with dask.config.set(scheduler=cluster.client):
            found = [run(x).item() for _ in range(6)]
        if compiled:
            assert run.replays == 4
        return found

    eager = losses(False)
    graphs.clear()
    compiled = losses(True)

    def carries_data(graph: dict) -> bool:
        return any(getattr(task, "value", None) is not None and
                   getattr(task.value, "nbytes", 0) == data.nbytes for task in graph.values())

    assert [carries_data(graph) for graph in graphs][-3:] == [False] * 3
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)


def test_a_compiled_step_on_several_workers_sends_its_program_to_each_once(
        cluster, monkeypatch):
    """Each worker holds a copy of a compiled step's program from its first run there: later
    steps' graphs carry the call's numbers and arguments, no nodes, their tasks read the copy
    on their worker, and a learning rate that changes every step reaches every copy."""
    from pargraph.compiler.tasks import HeldProgram, run_held_group
    from pargraph.remote import submit

    graphs = []
    original = submit.untokenized

    def recording(graph, *args, **kwargs):
        graphs.append((graph, args[0] if args else kwargs.get("workers")))
        return original(graph, *args, **kwargs)

    monkeypatch.setattr(submit, "untokenized", recording)
    settings = {"pargraph.replicas": 2}
    compiled, _ = train_towers(cluster.client, 6, settings, compiled=True, decay=True)
    steps = [(graph, workers) for graph, workers in graphs
             if any(getattr(t, "func", None) is run_held_group for t in graph.values())]
    assert len(steps) == 6  # every call runs a program (the first two capture one each)
    placed = {key: workers[key] for graph, workers in graphs for key, task in graph.items()
              if isinstance(getattr(task, "value", None), HeldProgram)}
    read = []
    for graph, workers in steps:
        assert not any(type(getattr(task, "func", None)).__name__ == "FusedTask"
                       for task in graph.values())
        groups = {key: task for key, task in graph.items()
                  if getattr(task, "func", None) is run_held_group}
        # each group reads the copy on its worker
        copies = {key: task.dependencies & set(placed) for key, task in groups.items()}
        assert all(len(found) == 1 and workers[key] == placed[next(iter(found))]
                   for key, found in copies.items())
        read.append(set().union(*copies.values()))
    # the second program's four runs read the same copy on each of the two workers
    assert all(found == read[-1] for found in read[-4:])
    assert {placed[key] for key in read[-1]} == set(cluster.client.nthreads())
    assert len(placed) == 4  # each program's two copies, sent once
    eager, _ = train_towers(cluster.client, 6, settings, decay=True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)


@pytest.mark.parametrize("single_task_below", [None, 0.0])  # one task; a task per group
def test_kept_values_are_parts_of_group_results_not_tasks_of_their_own(
        cluster, record_runs, single_task_below):
    from pargraph.remote.layout import HeldPart

    with dask.config.set({"pargraph.single-task-below": single_task_below}):
        _, model, opt = train(2, cluster.client, width=64)
    last_run = record_runs[-1]
    tasks = [t for t in last_run.values() if type(t).__name__ == "Task"]
    picked = [t for t in tasks if t.func is operator.getitem]
    assert len(picked) <= 1  # no task per kept value; only the 0-d loss comes back (below)
    # ... and a task per update group that picks what is copied to the second worker
    keeping = [t for t in tasks if key_split(t.key).endswith("_keep")]
    assert all(type(t.func).__name__ == "Selection" for t in keeping)
    assert all(type(t.func).__name__ == "FusedTask" for t in tasks
               if t not in picked and t not in keeping)
    params = list(model.parameters())
    assert all(type(p._node.value) is HeldPart for p in params)
    reference, threaded_model, _ = train(2, "threads", width=64)
    for p, q in zip(params, threaded_model.parameters()):  # a part alone is fetched
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


@pytest.mark.parametrize("single_task_below", [None, 0.0])  # one task; a task per group
def test_a_scalar_loss_comes_back_with_the_run(cluster, single_task_below):
    """item() after a step costs no second round trip: 0-d results are gathered with the run,
    larger ones stay on the workers."""
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = pargraph.randn(256, 64), pargraph.randint(0, 10, (256,))
    with dask.config.set({"scheduler": cluster.client,
                          "pargraph.single-task-below": single_task_below}):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        assert type(loss._node.value) is np.ndarray and loss._node.value.shape == ()
        assert all(is_future(p._node.value) for p in model.parameters())
        held = loss.item()
    with dask.config.set(scheduler="threads"):
        pargraph.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
        x, y = pargraph.randn(256, 64), pargraph.randint(0, 10, (256,))
        assert held == pytest.approx(nn.functional.cross_entropy(model(x), y).item(), rel=1e-6)


def test_data_parallel_gradients_equal_the_single_branch_gradients(cluster):
    for scheduler in ("threads", cluster.client):
        pargraph.manual_seed(1)
        single = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        parallel = nn.DataParallel(single, shards=4)
        x = pargraph.randn(32, 8)
        y = pargraph.randint(0, 3, (32,))
        with dask.config.set(scheduler=scheduler):
            nn.functional.cross_entropy(single(x), y).backward()
            expected = [p.grad.numpy().copy() for p in single.parameters()]
            single.zero_grad()
            nn.functional.cross_entropy(parallel(x), y).backward()
            for p, g in zip(single.parameters(), expected):
                np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)
    assert pargraph.nn.DataParallel(single)(x).shape == (32, 3)  # default: one shard a thread


def test_task_stream_groups_are_named_after_ops(cluster):
    from distributed import get_task_stream

    with get_task_stream(client=cluster.client) as stream, \
            dask.config.set({"pargraph.fuse": False}):  # one node, one task: the per-op view
        train(2, cluster.client, shards=2)
    groups = {key_split(task["key"]) for task in stream.data}
    backward = {g for g in groups if g.endswith("_backward")}
    assert backward and "accumulate_grad" in groups and "adam_update" in groups
    forward = groups - backward - {"accumulate_grad", "adam_update", "leaf"}
    assert forward & {"matmul", "add", "relu", "cat", "amax", "sum", "log", "neg", "div"}


def test_coarse_tasks_have_readable_names(cluster):
    from distributed import get_task_stream

    from pargraph.ops import REGISTRY

    with get_task_stream(client=cluster.client) as stream:
        train(3, cluster.client, shards=2, width=256)
    groups = {key_split(task["key"]) for task in stream.data}
    ops = set(REGISTRY)
    for group in groups:  # "<module>_<phase>", or the op prefix of a group's heaviest node
        group = group.removesuffix("_keep")  # what goes to a second worker
        head = group.split("-")[0].removesuffix("_backward").removesuffix("_update")
        assert "pargraph_run" not in group, group  # never a generic run name
        assert head in ops | {"accumulate_grad", "adam", "fetch"} or \
            group.rsplit("_", 1)[-1] in ("forward", "backward", "update", "accumulate",
                                         "step"), group


def test_each_tower_runs_on_the_worker_that_holds_its_parameters(cluster):
    """pargraph places a DataParallel step's tasks itself (dask alone kept the whole step on the
    worker holding the parameters): each tower's parameters are updated on one worker, both
    workers hold towers, and the results equal those of dask's own placement."""
    placed, towers = train_towers(cluster.client, 3, {"pargraph.placement": True})
    unplaced, _ = train_towers(cluster.client, 3, {"pargraph.placement": False})
    np.testing.assert_allclose(placed, unplaced, rtol=1e-6)
    holders = []
    for tower in towers:
        futures = [p._node.value.future for p in tower.parameters()]
        who_has = cluster.client.who_has(futures)
        holders.append({w for f in futures for w in who_has[f.key]})
    assert all(len(found) == 1 for found in holders), holders
    assert len(set.union(*holders)) == 2


def test_what_a_step_keeps_on_the_workers_is_what_it_returns(cluster):
    """A kept value is a part of a group task's tuple, which stays on its worker whole: a group
    that also exports values for the step's other tasks (activations, masks) would pin them
    too. Such groups hand their kept parts to a reader on the same worker that returns them."""
    from dask.sizeof import sizeof

    from pargraph.remote.layout import futures_of

    losses, towers = train_towers(cluster.client, 2, {})
    assert np.isfinite(losses).all()
    kept = [p._node for p in towers.parameters()] + [p.grad._node for p in towers.parameters()]
    keys = [f.key for f in futures_of([n.value for n in kept])]

    def exact_size(value):  # dask's sizeof samples 10 items of a longer tuple, and scales up
        return sum(map(sizeof, value)) if isinstance(value, tuple) else sizeof(value)

    held = sum(cluster.client.run(lambda dask_worker: sum(
        exact_size(dask_worker.data[k]) for k in keys if k in dask_worker.data)).values())
    needed = sum(n.dtype.itemsize * int(np.prod(n.shape)) for n in kept)
    assert held <= 1.05 * needed, f"{held / 2**20:.1f} MiB held for {needed / 2**20:.1f} MiB"


def test_a_worker_fetches_only_the_parts_another_workers_tasks_read(cluster):
    """A group's result is one tuple, and a worker fetches it whole: the loss reads a few KiB
    of logits from towers whose tuples on the other worker also hold MiBs of activations for
    their backward. A task on the towers' worker picks the parts the loss reads, and only
    they travel."""
    from distributed import get_task_stream

    def clear_transfer_logs(dask_worker):
        dask_worker.transfer_incoming_log.clear()

    def bytes_received(dask_worker):
        return sum(entry["total"] for entry in dask_worker.transfer_incoming_log)

    def measure_the_third_step(step):
        # The first step moves parameters to the workers that own their towers; by the third
        # every value is where it was made.
        if step == 2:
            cluster.client.run(clear_transfer_logs)

    with get_task_stream(client=cluster.client) as stream:
        losses, _ = train_towers(cluster.client, 3, {}, on_step=measure_the_third_step)
    assert np.isfinite(losses).all()
    moved = sum(cluster.client.run(bytes_received).values())
    activations = 2 * 256 * 512 * 4  # what one tower keeps of one shard: 2 (256, 512) float32
    assert moved < activations, f"{moved / 2**20:.2f} MiB moved between the workers"
    assert any(key_split(task["key"]).endswith("_send") for task in stream.data)


def test_replicas_outlive_dasks_memory_manager(cluster):
    """dask's Active Memory Manager drops every replica beyond one every 2 s: pargraph stops
    it on a cluster it replicates on, so the copies are still there when a worker dies."""
    import time

    _, model, opt = train(2, cluster.client)
    futures = [p._node.value.future for p in model.parameters()]
    assert not cluster.client.amm.running()
    time.sleep(2.5)  # longer than the manager's default interval
    assert all(len(holders) == 2 for holders in cluster.client.who_has(futures).values())


def test_only_parameters_and_optimizer_state_are_copied(cluster):
    """An update group's tuple holds the gradients beside the new parameters: a task picks
    the parameters and Adam's state, and only they go to the second worker."""
    _, model, opt = train(2, cluster.client)
    from pargraph.remote.replication import settle_replication

    settle_replication(cluster.client)  # the last step's copies exist
    kept = [p._node.value for p in model.parameters()]
    kept += [v._node.value for state in opt.state.values() for v in state.values()
             if isinstance(v, pargraph.Tensor)]
    grads = [p.grad._node.value for p in model.parameters()]
    kept_futures = {part.future.key: part.future for part in kept}
    grad_futures = {part.future.key: part.future for part in grads}
    assert not set(kept_futures) & set(grad_futures)
    who_has = cluster.client.who_has(list(kept_futures.values()) + list(grad_futures.values()))
    assert all(len(who_has[key]) == 2 for key in kept_futures)
    assert all(len(who_has[key]) == 1 for key in grad_futures)
    held = cluster.client.gather(list(kept_futures.values()))
    assert sum(len(values) for values in held) == len(kept)  # nothing else travelled


@pytest.mark.parametrize("replicas", [2, 1])
@pytest.mark.parametrize("batch_norm", [False, True])
def test_the_scheduler_forgets_the_steps_behind_the_training_state(
        cluster, replicas, batch_norm):
    """Each step's parameters, optimizer state and running statistics are computed from the
    last step's: the scheduler and the workers kept every step's tasks (and the first step's
    parameter values) until pargraph made the state it keeps pure data."""
    from pargraph.remote.replication import settle_replication

    def scheduler_tasks(dask_scheduler) -> int:  # nested: it travels by value
        # with the task groups the live ones depend on (a kept value's group lives on)
        groups = set().union(*(g.dependencies for g in dask_scheduler.task_groups.values()))
        return len(dask_scheduler.tasks) + len(groups)

    def worker_tasks(dask_worker) -> int:
        return len(dask_worker.state.tasks)

    pargraph.manual_seed(0)
    layers = [nn.Linear(64, 32), nn.BatchNorm1d(32)] if batch_norm else [nn.Linear(64, 32)]
    model = nn.Sequential(*layers, nn.ReLU(), nn.Linear(32, 10))
    opt = optim.Adam(model.parameters(), lr=0.01)
    x, y = pargraph.randn(128, 64), pargraph.randint(0, 10, (128,))
    counts = []
    with dask.config.set({"scheduler": cluster.client, "pargraph.replicas": replicas}):
        for step in range(16):
            if step in (4, 15):
                settle_replication(cluster.client)
                # The forgetting follows the copies, asynchronously: at step 15, give it up to
                # 5 s (a loaded machine) to come down to step 4's count; growing, it never does.
                deadline = time.monotonic() + (5.0 if counts else 0.2)
                while True:
                    time.sleep(0.1 if counts else 0.2)
                    now = (cluster.client.run_on_scheduler(scheduler_tasks),
                           sum(cluster.client.run(worker_tasks).values()))
                    if not counts or now[0] <= counts[0][0] and now[1] <= counts[0][1] or \
                            time.monotonic() > deadline:
                        break
                counts.append(now)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
    # 11 steps more, no task more on the scheduler nor on the workers
    assert counts[1][0] <= counts[0][0] and counts[1][1] <= counts[0][1], counts
    if batch_norm and replicas == 2:  # the statistics are kept as parameters are
        settle_replication(cluster.client)  # the last step's copies exist
        norm = model[1]
        futures = [t._node.value.future for t in (norm.running_mean, norm.running_var)]
        assert all(len(h) == 2 for h in cluster.client.who_has(futures).values())


def test_a_run_is_sent_to_the_scheduler_without_waiting_out_the_clients_batching(cluster):
    """distributed's client batches its messages for 10 ms: a step sent within that of the
    last step's releases of old values waited for the rest. pargraph's runs shorten it."""
    from pargraph.remote.submit import CLIENT_SEND_INTERVAL

    cluster.client.scheduler_comm.interval = 0.01
    with dask.config.set(scheduler=cluster.client):
        assert (pargraph.ones(3) * 2).sum().item() == 6.0
    assert cluster.client.scheduler_comm.interval == CLIENT_SEND_INTERVAL


# Lambdas: cloudpickle ships them by value (the scheduler cannot import the tests).
_scheduler_comms = lambda dask_scheduler=None: [  # noqa: E731
    (comm.interval, comm.recent_message_log.maxlen)
    for comm in [*dask_scheduler.stream_comms.values(), *dask_scheduler.client_comms.values()]]
_worker_comm = lambda dask_worker=None: (  # noqa: E731
    dask_worker.batched_stream.interval, dask_worker.batched_stream.recent_message_log.maxlen)


def test_the_scheduler_and_the_workers_batch_their_messages_briefly(cluster):
    """distributed batches the scheduler's messages to a worker for 5 ms, a worker's to the
    scheduler for 2 ms; a step's critical path crosses them several times. pargraph's plugins
    shorten both to ``pargraph.send-interval``, and the comms' logs of recent payloads."""
    from pargraph.remote.submit import MESSAGE_LOG_LENGTH, SEND_INTERVAL

    with dask.config.set(scheduler=cluster.client):
        assert (pargraph.ones(3) * 2).sum().item() == 6.0
    on_scheduler = cluster.client.run_on_scheduler(_scheduler_comms)
    on_workers = list(cluster.client.run(_worker_comm).values())
    assert len(on_scheduler) >= 3 and len(on_workers) == 2  # 2 workers, 1 client or more
    assert all(interval <= SEND_INTERVAL and log == MESSAGE_LOG_LENGTH
               for interval, log in on_scheduler + on_workers)
    assert cluster.client.scheduler_comm.recent_message_log.maxlen == MESSAGE_LOG_LENGTH


def test_the_per_step_forgetting_leaves_no_line_in_the_cluster_logs(cluster):
    """distributed logs every out-of-band call at INFO: pargraph's forgetting, after every
    step on the scheduler and on each worker, made a line a step in each process's log."""
    from pargraph.remote.replication import settle_replication

    train(4, cluster.client)
    settle_replication(cluster.client)
    time.sleep(0.2)  # the forgetting follows the copies
    cluster.client.run(lambda: 1)  # another function's call is still logged
    on_workers = [message for log in cluster.client.get_worker_logs().values()
                  for _, message in log]
    on_scheduler = [message for _, message in cluster.client.get_scheduler_logs()]
    assert any("out-of-band function 'lambda'" in message for message in on_workers)
    assert not any("forget_" in message for message in on_workers + on_scheduler)


def test_a_client_that_reconnects_to_a_new_scheduler_tunes_it_too():
    from pargraph.remote.submit import SEND_INTERVAL

    running = Cluster(workers=1)
    try:
        with dask.config.set(scheduler=running.client):
            assert (pargraph.ones(3) * 2).sum().item() == 6.0
        os.killpg(running.scheduler.pid, signal.SIGKILL)
        for worker in running.workers:
            os.killpg(worker.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while running.client.status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)  # until the client noticed
        running.scheduler = running.start("scheduler")
        running.workers = [running.start("worker")]
        while time.monotonic() < deadline:
            try:  # the client's pooled connections to the old scheduler fail once each
                if running.client.status == "running":
                    running.client.wait_for_workers(1, timeout=10)
                    break
            except OSError:
                pass
            time.sleep(0.1)
        with dask.config.set(scheduler=running.client):
            assert (pargraph.ones(3) * 3).sum().item() == 9.0
        on_scheduler = running.client.run_on_scheduler(_scheduler_comms)
    finally:
        running.close()
    assert on_scheduler and all(interval <= SEND_INTERVAL for interval, _ in on_scheduler)


def test_a_worker_that_joins_later_batches_briefly_too():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, **IN_PROCESS_LOOPBACK) as local, \
            Client(local, set_as_default=False) as client:
        assert max(i for i, _ in client.run_on_scheduler(_scheduler_comms)) > 0.0005
        settings = {"scheduler": client, "pargraph.send-interval": "0.5ms",
                    "pargraph.message-log-length": 3}
        with dask.config.set(settings):
            assert (pargraph.ones(3) * 2).sum().item() == 6.0
        local.scale(2)
        client.wait_for_workers(2, timeout=30)
        on_scheduler = client.run_on_scheduler(_scheduler_comms)
        on_workers = list(client.run(_worker_comm).values())
    assert len(on_scheduler) == 3 and len(on_workers) == 2
    assert all(comm == (0.0005, 3) for comm in on_scheduler + on_workers)


def test_a_long_run_keeps_no_old_steps_graph_in_the_comms_logs():
    """distributed's comms keep their last 1000 payloads for debugging: a training loop's
    scheduler held the task specs of a hundred steps and more (LocalCluster: in this
    process, where every full garbage collection walked them)."""
    import gc

    from distributed import Client, LocalCluster

    from pargraph.runtime import FusedTask

    def graphs_alive() -> int:
        gc.collect()
        return sum(type(o) is FusedTask for o in gc.get_objects())

    with LocalCluster(n_workers=2, threads_per_worker=1, **IN_PROCESS_LOOPBACK) as local, \
            Client(local, set_as_default=False) as client:
        alive = []
        for steps in (10, 40):
            train(steps, client, shards=2)
            alive.append(graphs_alive())
    assert alive[1] <= alive[0] + 10, alive


def test_a_long_runs_finished_spans_let_go_of_their_task_groups():
    """distributed opens a "default" span for a graph whenever the last one finished (one a
    step in a training loop) and keeps each with its task groups (dask/distributed#7977);
    pargraph's steps empty finished ones beyond ``pargraph.kept-spans`` of the groups the
    scheduler forgot (the spans stay: workers report metrics by span)."""
    from distributed import Client, LocalCluster

    from pargraph.remote.replication import settle_replication

    with LocalCluster(n_workers=2, threads_per_worker=1, **IN_PROCESS_LOOPBACK) as local, \
            Client(local, set_as_default=False) as client:
        spans = local.scheduler.extensions["spans"]
        for i in range(12):  # a graph after the last one finished: a new span each
            assert client.submit(operator.add, i, 1, key=f"add{chr(97 + i)}").result() == i + 1
        defaults = list(spans.spans_search_by_name["default",])
        assert len(defaults) >= 12 and all(span.groups for span in defaults)
        with dask.config.set({"pargraph.kept-spans": 3}):
            losses, _, _ = train(2, client, shards=2)
        settle_replication(client)
        time.sleep(0.2)  # the pruning follows the copies
        assert not any(span.groups for span in defaults[:9])
        assert set(spans.spans_search_by_name["default",]) >= set(defaults)
        assert np.isfinite(losses).all()


def test_replication_overlaps_the_next_step_which_runs_only_on_copied_state(
        cluster, monkeypatch):
    """``optimizer.step()`` returns while its new parameters are being copied to the other
    worker; the next run is submitted only once the copies exist."""
    import asyncio

    from pargraph.remote.layout import futures_of

    client, events, copied = cluster.client, [], threading.Event()
    replicate, get = client._replicate, client.get

    async def slow_replicate(*args, **kwargs):
        for _ in range(500):  # until the test lets it go, or 5 s if the step waits for it
            if copied.is_set():
                break
            await asyncio.sleep(0.01)
        await replicate(*args, **kwargs)
        events.append("copied")

    def recording_get(self, graph, keys, **kwargs):
        events.append(("submitted", [len(holders) for holders in client.who_has(
            futures_of([p._node.value for p in model.parameters() if is_future(p._node.value)])
        ).values()]))
        return get(graph, keys, **kwargs)

    monkeypatch.setattr(client, "_replicate", slow_replicate)
    monkeypatch.setattr(client, "get", types.MethodType(recording_get, client))
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = pargraph.randn(32, 8)
    with dask.config.set({"scheduler": client, "pargraph.replicas": 2,
                          "pargraph.single-task-below": 0}):
        for step in range(2):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            if step == 0:
                assert "copied" not in events  # the step did not wait for the copies
                threading.Timer(0.3, copied.set).start()
    # The second step's run went once the first step's parameters were on both workers (its
    # own copying started with it, each group's result copied as soon as it existed).
    last = max(k for k, event in enumerate(events) if event != "copied")
    assert events[last - 1] == "copied" and events[last][1] and set(events[last][1]) == {2}


def killing_a_worker_at(running: Cluster, step: int):
    """An ``on_step`` that kills worker 0 as soon as step ``step``'s graph is submitted (the
    last step's state is on the workers then); its ``armed`` is empty once it has."""
    get, armed = running.client.get, []

    def killing_get(self, graph, keys, **kwargs):
        futures = get(graph, keys, **kwargs)
        if armed:
            armed.clear()
            running.kill_worker(0)
        return futures

    running.client.get = types.MethodType(killing_get, running.client)

    def on_step(k: int) -> None:
        if k == step:
            armed.append(True)

    on_step.armed = armed
    return on_step


@pytest.mark.parametrize("model", ["mlp", "placed towers", "compiled towers"])
def test_a_worker_killed_mid_training_loses_nothing(model):
    """Also with DataParallel towers placed on both workers, whose steps send parts of their
    results from one worker to the other (the `_send` tasks), and with their step compiled
    (each worker holds a copy of the program, which dies with it)."""
    def losses(scheduler, on_step=None):
        if model == "mlp":
            return train(8, scheduler, on_step=on_step, width=256)[0]
        return train_towers(scheduler, 8, {"pargraph.replicas": 2}, on_step=on_step,
                            compiled=model == "compiled towers")[0]

    reference = losses("threads")
    running = Cluster(workers=2)
    client = running.client
    try:
        kill_during = killing_a_worker_at(running, 4)
        np.testing.assert_allclose(losses(client, kill_during), reference, rtol=1e-6)
        assert not kill_during.armed
        deadline = time.monotonic() + 10
        while len(client.scheduler_info(n_workers=-1)["workers"]) > 1:
            assert time.monotonic() < deadline, "the scheduler still lists the killed worker"
            time.sleep(0.1)
    finally:
        running.close()


@pytest.mark.parametrize("norm", [False, True])
def test_a_worker_killed_between_steps_before_the_copies_exist_loses_nothing(norm):
    """The state a step replaced stays until the copies of the new state exist: a worker dying
    in between makes dask rerun that step from it, not lose the new state (batch norm's
    running statistics too)."""
    reference, reference_towers = train_towers("threads", 6, {"pargraph.replicas": 2},
                                               norm=norm)
    running = Cluster(workers=2)
    client = running.client
    replicate = client._replicate

    async def slow_replicate(*args, **kwargs):
        await asyncio.sleep(0.5)  # the copies of step 2's state are late
        return await replicate(*args, **kwargs)

    client._replicate = slow_replicate

    def kill_before_step(step):
        if step == 3:  # step 2's run has returned, its copies have not been made
            running.kill_worker(0)
            deadline = time.monotonic() + 10
            while len(client.scheduler_info(n_workers=-1)["workers"]) > 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)

    try:
        losses, towers = train_towers(client, 6, {"pargraph.replicas": 2},
                                      on_step=kill_before_step, norm=norm)
        np.testing.assert_allclose(losses, reference, rtol=1e-6)
        for mine, theirs in zip(towers.buffers(), reference_towers.buffers()):
            np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    finally:
        running.close()


def test_with_one_copy_a_worker_dying_loses_its_state_with_a_clear_error():
    """``pargraph.replicas: 1``: training state lives on one worker, and the scheduler keeps
    no history to recompute it from (it would have rerun every step since the first)."""
    running = Cluster(workers=2)
    try:
        kill_during = killing_a_worker_at(running, 4)  # the towers' state is on both workers
        with pytest.raises(pargraph.ClusterLostError) as error:
            train_towers(running.client, 8, {"pargraph.replicas": 1}, on_step=kill_during)
        message = str(error.value)
        assert "a worker that left had the only copy" in message, message
        assert "pargraph.replicas" in message
    finally:
        running.close()


def test_a_tls_cluster_trains():
    from distributed import Client, LocalCluster
    from distributed.security import Security

    security = Security.temporary()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tls://",
                      security=security, dashboard_address=None) as tls_cluster, \
            Client(tls_cluster, security=security, set_as_default=False) as client:
        assert client.scheduler.address.startswith("tls://")
        losses, _, _ = train(3, client)
    np.testing.assert_allclose(losses, train(3, "sync")[0], rtol=1e-6)


def test_an_unreachable_scheduler_is_a_clear_error_and_the_checkpoint_survives(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    start = time.perf_counter()
    with pytest.raises(ConnectionError, match=f"could not reach the dask scheduler at {address}"):
        pargraph.connect(address, timeout=2)
    assert time.perf_counter() - start < 15
    checkpoint = tmp_path / "digits.npz"
    subprocess.run([sys.executable, "demos/digits.py", "--quiet", "--epochs", "1", "--plot", "",
                    "--hidden", "16", "--checkpoint", str(checkpoint)], cwd=ROOT, check=True)
    before = checkpoint.read_bytes()
    done = subprocess.run([sys.executable, "demos/digits.py", "--quiet", "--epochs", "2",
                           "--plot", "", "--hidden", "16", "--resume", "--checkpoint",
                           str(checkpoint), "--address", address, "--connect-timeout", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f"could not reach the dask scheduler at {address}" in done.stderr
    assert checkpoint.read_bytes() == before
    assert pargraph.load(checkpoint)["epoch"] == 0


def _steps(model, opt, x, y, count):
    for _ in range(count):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _kill_scheduler(running: Cluster, held) -> None:
    os.killpg(running.scheduler.pid, signal.SIGKILL)
    running.scheduler.wait()
    deadline = time.monotonic() + 20
    while held.status != "cancelled" and time.monotonic() < deadline:
        time.sleep(0.05)  # the client notices the closed connection


def _mirrored_training(running: Cluster, every: int) -> tuple:
    """A model, its Adam and a batch, set to mirror every ``every`` steps off ``running``
    (call inside a ``dask.config.set`` block, which takes back the setting)."""
    pargraph.connect(running.address, timeout=10, mirror_every=every).close()
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = optim.Adam(model.parameters(), lr=0.01)
    return model, opt, pargraph.randn(32, 8), pargraph.randint(0, 2, (32,))


def test_a_lost_scheduler_rolls_back_to_the_mirror_and_state_dict_answers():
    running = Cluster(workers=1)
    try:
        with dask.config.set({"pargraph.mirror-every": 0}, scheduler=running.client):
            model, opt, x, y = _mirrored_training(running, every=3)
            _steps(model, opt, x, y, 6)
            opt._mirror.in_flight.result(timeout=30)  # step 6's copy has arrived
            at_step_6 = {k: v.numpy().copy() for k, v in model.state_dict().items()}
            _steps(model, opt, x, y, 1)  # step 7 lives on the cluster only
            assert all(is_future(p._node.value) for p in model.parameters())
            _kill_scheduler(running, model[0].weight._node.value)

            state = model.state_dict()  # answers: the mirror's copy of step 6
            for name, value in state.items():
                np.testing.assert_array_equal(value.numpy(), at_step_6[name])
            assert int(opt.state_dict()["state"][0]["step"]) == 6
            start = time.perf_counter()
            with pytest.raises(pargraph.ClusterLostError, match="as of its step 6"):
                _steps(model, opt, x, y, 1)
            assert time.perf_counter() - start < 5
        # Rolled back, the same objects train on: locally here, on a new cluster just as well.
        with dask.config.set(scheduler="sync"):
            _steps(model, opt, x, y, 1)
        assert int(opt.state_dict()["state"][0]["step"]) == 7
    finally:
        running.close()


def test_a_scheduler_lost_before_the_first_mirrored_step_rolls_back_to_the_start():
    running = Cluster(workers=1)
    try:
        with dask.config.set({"pargraph.mirror-every": 0}, scheduler=running.client):
            model, opt, x, y = _mirrored_training(running, every=4)
            at_start = {k: v.numpy().copy() for k, v in model.state_dict().items()}
            _steps(model, opt, x, y, 2)
            assert all(is_future(p._node.value) for p in model.parameters())
            _kill_scheduler(running, model[0].weight._node.value)

            state = model.state_dict()  # answers with the starting values
            for name, value in state.items():
                np.testing.assert_array_equal(value.numpy(), at_start[name])
            assert opt.state_dict()["state"] == {}
            with pytest.raises(pargraph.ClusterLostError, match="as of its step 0"):
                _steps(model, opt, x, y, 1)
        with dask.config.set(scheduler="sync"):
            _steps(model, opt, x, y, 1)
        assert int(opt.state_dict()["state"][0]["step"]) == 1
    finally:
        running.close()


def test_a_lost_scheduler_without_mirror_is_a_clear_error_naming_the_checkpoint(tmp_path):
    running = Cluster(workers=1)
    try:
        with dask.config.set(scheduler=running.client):
            model = nn.Linear(4, 2)
            opt = optim.SGD(model.parameters(), lr=0.1)
            x, y = pargraph.randn(8, 4), pargraph.randint(0, 2, (8,))
            _steps(model, opt, x, y, 2)
            pargraph.save(model.state_dict(), tmp_path / "last.npz")
            _steps(model, opt, x, y, 1)
            _kill_scheduler(running, model.weight._node.value)
            start = time.perf_counter()
            with pytest.raises(pargraph.ClusterLostError) as error:
                _steps(model, opt, x, y, 1)
            assert time.perf_counter() - start < 5  # dask alone waits ~30 s for a reconnect
            message = str(error.value)
            assert "lost values it held: its scheduler went away" in message
            assert "mirror_every=N" in message
            assert str(tmp_path / "last.npz") in message
            with pytest.raises(pargraph.ClusterLostError):
                model.state_dict()["weight"].numpy()
    finally:
        running.close()


def test_the_digits_demo_resumes_after_a_scheduler_restart(tmp_path):
    running = Cluster(workers=1)
    checkpoint = tmp_path / "digits.npz"
    command = [sys.executable, "demos/digits.py", "--quiet", "--plot", "", "--hidden", "16",
               "--epochs", "40", "--checkpoint", str(checkpoint), "--address", running.address]
    try:
        demo = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not checkpoint.exists() and time.monotonic() < deadline and demo.poll() is None:
            time.sleep(0.05)
        os.killpg(running.scheduler.pid, signal.SIGKILL)  # mid-training
        out, err = demo.communicate(timeout=90)
        assert demo.returncode != 0, out
        assert "lost values it held" in err and "--resume" in err, err[-4000:]
        finished = pargraph.load(checkpoint)["epoch"]
        assert finished < 39

        running.scheduler = running.start("scheduler")
        for worker in running.workers:
            os.killpg(worker.pid, signal.SIGKILL)  # workers of the old scheduler
        running.workers = [running.start("worker")]
        done = subprocess.run(command + ["--resume", "--epochs", str(finished + 3)], cwd=ROOT,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert f"resumed from {checkpoint}: {finished + 1} epochs done" in done.stdout
        assert pargraph.load(checkpoint)["epoch"] == finished + 2
    finally:
        running.close()


def test_demos_run_on_the_cluster_at_address(cluster, tmp_path):
    demos = os.path.join(ROOT, "demos")
    runs = {
        "digits.py": ["--epochs", "1", "--hidden", "8", "--plot", "", "--checkpoint",
                      str(tmp_path / "d.npz")],
        "fit_line.py": ["--steps", "5"],
        "towers.py": ["--towers", "2", "--width", "8", "--batch-size", "8", "--steps", "1"],
        "cnn.py": ["--epochs", "1", "--width", "4", "--batch-size", "512"],
        "attention.py": ["--epochs", "1", "--width", "8", "--heads", "2", "--layers", "1",
                         "--batch-size", "512"],
    }
    for demo, flags in runs.items():
        done = subprocess.run([sys.executable, os.path.join(demos, demo), "--quiet", *flags,
                               "--address", cluster.address], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"on the dask cluster at {cluster.address}" in done.stdout, demo
        if demo in ("digits.py", "cnn.py", "attention.py"):
            assert "a step on the cluster: " in done.stdout and " threads: " in done.stdout, \
                demo


def test_the_cluster_comparison_times_both_and_leaves_the_trained_state(cluster):
    """``--address``'s comparison runs steps on the cluster and on threads, then puts the
    parameters and Adam's moments back as training left them."""
    import argparse

    from demos import common

    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = pargraph.optim.Adam(model.parameters(), lr=0.1)
    step = common.training_step(model, opt, nn.CrossEntropyLoss())
    batch = (pargraph.randn(32, 8), pargraph.randint(0, 3, (32,)))
    with dask.config.set(scheduler=cluster.client):
        step(*batch).item()
        before = [p.detach().numpy().copy() for p in model.parameters()]
        moments = [opt.state[p]["exp_avg"].numpy().copy() for p in model.parameters()]
        found = common.compare_with_threads(step, model, opt, batch,
                                            argparse.Namespace(address=cluster.address))
    assert set(found) == {"cluster", "threads", "work"} and min(found.values()) > 0
    for p, value, moment in zip(model.parameters(), before, moments):
        np.testing.assert_array_equal(p.detach().numpy(), value)
        np.testing.assert_array_equal(opt.state[p]["exp_avg"].numpy(), moment)
    assert common.compare_with_threads(step, model, opt, batch,
                                       argparse.Namespace(address=None)) is None


def test_a_scheduler_gone_when_asked_for_its_workers_is_a_lost_cluster(cluster, monkeypatch):
    """The scheduler can die between two runs, just before a run asks it for its workers."""
    from distributed.comm.core import CommClosedError

    def gone(*args, **kwargs):
        raise CommClosedError("in <TCP (closed) ConnectionPool.ncores>: Connection reset")

    clusters.membership.pop(cluster.client, None)  # not asked within the last second
    monkeypatch.setattr(cluster.client, "nthreads", gone)
    x = pargraph.ones(4) * 2
    with dask.config.set(scheduler=cluster.client), \
            pytest.raises(pargraph.ClusterLostError,
                          match="its scheduler went away .asking the scheduler"):
        x.sum().item()


def test_a_scheduler_gone_while_a_held_value_is_read_is_a_lost_cluster(cluster, monkeypatch):
    """The scheduler can die while the caller reads a value the cluster holds (a checkpoint's
    parameters): a connection closed before the value's Future is cancelled is a lost
    cluster too, not a comm error from inside dask."""
    from distributed.comm.core import CommClosedError

    from pargraph.remote.layout import HeldPart

    def gone(self):
        raise CommClosedError("in <TCP (closed) Client->Scheduler>: ConnectionResetError")

    model = nn.Linear(4, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    with dask.config.set(scheduler=cluster.client):
        _steps(model, opt, pargraph.randn(8, 4), pargraph.randint(0, 2, (8,)), 1)
    assert type(model.weight._node.value) is HeldPart
    monkeypatch.setattr(HeldPart, "result", gone)
    # the client may not know yet: the closed connection says the scheduler went away
    with pytest.raises(pargraph.ClusterLostError,
                       match="lost values it held: its scheduler went away"):
        model.weight.detach().numpy()


def test_a_one_task_step_is_named_after_its_model(cluster):
    """A step too small to split is one task; the task stream names it after the model and
    what it does (``Sequential_step``), and its state stays on one worker."""
    from distributed import get_task_stream

    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = pargraph.randn(16, 8), pargraph.randint(0, 2, (16,))
    with dask.config.set(scheduler=cluster.client), \
            get_task_stream(client=cluster.client) as stream:
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        model(x).sum().item()
    groups = {key_split(task["key"]) for task in stream.data}
    assert "Sequential_step" in groups and "Sequential_forward" in groups, groups
    runs = {task["worker"] for task in stream.data if key_split(task["key"]) ==
            "Sequential_step"}
    assert len(runs) == 1, runs  # placed on one worker, step after step


def test_values_held_on_a_client_that_is_not_the_default_are_fetched():
    # distributed's wait() asks for the default client; pargraph waits on the futures' own.
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, **IN_PROCESS_LOOPBACK) as local, \
            Client(local, set_as_default=False) as client, \
            dask.config.set(scheduler=client):
        losses, model, _ = train(2, client, shards=2)
        params = [p.detach().numpy() for p in model.parameters()]
        w = pargraph.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        parts = [(w * 2).sum(0), (w + 1).sum(1)]
        (parts[0].sum() + parts[1].sum()).backward()
        assert parts[0].detach().numpy().tolist() == [6.0, 10.0, 14.0]
        assert parts[1].detach().numpy().tolist() == [6.0, 15.0]
        assert w.grad.numpy().tolist() == [[3.0, 3.0, 3.0]] * 2
    expected_losses, expected, _ = train(2, "threads", shards=2)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    for got, want in zip(params, expected.parameters()):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-7)


def test_a_ctrl_c_while_waiting_for_the_cluster_is_raised_between_waits_and_harms_nothing():
    # Raised inside distributed's Event.wait, a KeyboardInterrupt can leave the event's lock
    # held and the client's event loop blocked on it: pargraph waits with Ctrl-C held.
    import signal
    import threading
    import time

    from distributed import Client, LocalCluster

    from pargraph.interrupts import interrupts
    from pargraph.remote.waiting import settled

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with LocalCluster(n_workers=1, threads_per_worker=1, **IN_PROCESS_LOOPBACK) as local, \
                Client(local, set_as_default=False) as client:
            slow = client.submit(lambda: time.sleep(4) or 42, pure=False)
            main = threading.main_thread().ident
            threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT)).start()
            start = time.perf_counter()
            with pytest.raises(KeyboardInterrupt):
                settled([slow], slow.result)
            assert time.perf_counter() - start < 3.0  # at the end of a slice, not the run's
            assert settled([slow], slow.result) == 42
            assert client.submit(sum, [1, 2]).result(timeout=10) == 3
            # Inside another deferred block (a commit), the wait goes on to its result, and
            # the Ctrl-C comes at that block's end.
            slow = client.submit(lambda: time.sleep(0.3) or 7, pure=False)
            threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()
            got = []
            with pytest.raises(KeyboardInterrupt):
                with interrupts.deferred():
                    got.append(settled([slow], slow.result))
            assert got == [7]
    finally:
        signal.signal(signal.SIGINT, previous)
