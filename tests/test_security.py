"""Loopback by default, and a connect that returns or raises in time whatever is at the address.

A dask scheduler or worker reachable from the network runs anyone's code: every command the
READMEs and the demos show must listen on 127.0.0.1 / ::1 only."""

import argparse
import http.server
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

import pargraph
from pargraph.remote.loopback import stop_sessions
from tests.test_remote import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOPBACK = {"127.0.0.1", "::1"}


def documented_cluster_commands(tls: bool = False) -> list[str]:
    """Every ``dask scheduler`` / ``dask worker`` command in the READMEs (lines continued with
    a backslash joined): those of the local instructions, or those of the TLS example."""
    commands = []
    for name in ("README.md", os.path.join("docker", "README.md")):
        with open(os.path.join(ROOT, name)) as file:
            text = file.read().replace("\\\n", " ")
        for line in text.splitlines():
            line = " ".join(line.strip().rstrip("&").split())
            if re.match(r"dask (scheduler|worker)\b", line) and ("tls" in line) == tls:
                commands.append(line)
    return commands




def listening_addresses(pids: list[int]) -> set[tuple[str, int]]:
    found = set()
    for pid in pids:
        process = psutil.Process(pid)
        for member in [process, *process.children(recursive=True)]:
            for connection in member.net_connections("inet"):
                if connection.status == psutil.CONN_LISTEN:
                    found.add((connection.laddr.ip, connection.laddr.port))
    return found


def test_documented_commands_listen_on_loopback_only():
    commands = documented_cluster_commands()
    assert any(c.startswith("dask scheduler") for c in commands)
    assert any(c.startswith("dask worker") for c in commands)
    port, dashboard = free_port(), free_port()
    processes = []
    try:
        for command in sorted(commands, key=lambda c: not c.startswith("dask scheduler")):
            local = command.replace(":8786", f":{port}").replace("--port 8786", f"--port {port}")
            local = local.replace(":8787", f":{dashboard}")
            processes.append(subprocess.Popen(shlex.split(local), stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, cwd=ROOT,
                                              start_new_session=True))
            if command.startswith("dask scheduler"):
                pargraph.connect(f"tcp://127.0.0.1:{port}", timeout=30).close()
        workers = sum(c.startswith("dask worker") for c in commands)
        with pargraph.connect(f"tcp://127.0.0.1:{port}", timeout=30) as client:
            client.wait_for_workers(workers, timeout=60)
        time.sleep(1)  # workers start their HTTP servers right after registering
        addresses = listening_addresses([p.pid for p in processes])
        assert len(addresses) >= 2 + 2 * workers  # scheduler, dashboard, workers, nannies
        exposed = {a for a in addresses if a[0] not in LOOPBACK}
        assert not exposed, f"listening beyond loopback: {sorted(exposed)}"
    finally:
        stop_sessions(processes)


def test_the_documented_tls_commands_keep_their_http_servers_on_loopback(tmp_path):
    # Their dashboards and /health answer unauthenticated, so they stay on loopback. The TLS
    # ports themselves face the network by design: they refuse a client without a
    # certificate the CA signed.
    import ssl

    from distributed.security import Security

    commands = documented_cluster_commands(tls=True)
    assert [c.split()[1] for c in commands] == ["scheduler", "worker"]
    made = Security.temporary()  # one self-signed certificate serves every role here
    for name in ("ca", "scheduler", "worker", "client"):
        (tmp_path / f"{name}.pem").write_text(made.tls_ca_file)
        (tmp_path / f"{name}-key.pem").write_text(made.tls_scheduler_key)
    port, dashboard = free_port(), free_port()
    processes = []
    try:
        for command in commands:
            local = command.replace("tls://scheduler:8786", f"tls://127.0.0.1:{port}")
            local = local.replace("--port 8786", f"--port {port}").replace(":8787",
                                                                          f":{dashboard}")
            processes.append(subprocess.Popen(shlex.split(local), stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, cwd=tmp_path,
                                              start_new_session=True))
        security = Security(tls_ca_file=str(tmp_path / "ca.pem"),
                            tls_client_cert=str(tmp_path / "client.pem"),
                            tls_client_key=str(tmp_path / "client-key.pem"),
                            require_encryption=True)
        with pargraph.connect(f"tls://127.0.0.1:{port}", timeout=30,
                              security=security) as client:
            client.wait_for_workers(1, timeout=60)
            tls_ports = {port} | {int(address.rsplit(":", 1)[1])
                                  for worker, info in client.scheduler_info()["workers"].items()
                                  for address in (worker, info.get("nanny")) if address}
        time.sleep(1)  # a worker starts its HTTP server right after registering
        addresses = listening_addresses([p.pid for p in processes])
        exposed = {a for a in addresses if a[0] not in LOOPBACK}
        assert len(addresses) >= 4 and exposed, sorted(addresses)
        assert {p for _, p in exposed} <= tls_ports, (sorted(exposed), tls_ports)
        for _, exposed_port in exposed:  # TLS only, and not without a certificate
            context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
            context.check_hostname = False
            with socket.create_connection(("127.0.0.1", exposed_port), timeout=10) as raw, \
                    pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with context.wrap_socket(raw) as tls:
                    tls.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                    if not tls.recv(100):
                        raise ConnectionError("closed without a word")
    finally:
        stop_sessions(processes)


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")
def test_the_demos_dashboard_cluster_listens_on_loopback_only():
    sys.path.insert(0, os.path.join(ROOT, "demos"))
    try:
        import common
    finally:
        sys.path.pop(0)
    before = listening_addresses([os.getpid()])
    args = argparse.Namespace(address=None, dashboard=True, workers=1, scheduler="threads",
                              connect_timeout=10.0)
    with common.execution(args):
        during = listening_addresses([os.getpid()]) - before
        assert (pargraph.ones(3) * 2).sum().item() == 6.0
    assert during, "the dashboard cluster opened no socket"
    assert all(ip in LOOPBACK for ip, _ in during), sorted(during)


def test_the_forecasts_loopback_cluster_listens_on_loopback_only():
    """The scheduler and workers a forecast measures the loopback on serve nothing beyond
    127.0.0.1: without the dashboard, distributed still opens its HTTP routes on every
    interface unless told where."""
    from pargraph.remote.loopback import worker_processes

    before = listening_addresses([os.getpid()])
    with worker_processes(2) as client:
        assert client.submit(sum, [1, 2]).result() == 3
        during = listening_addresses([os.getpid()]) - before
    # the scheduler's and the two workers' HTTP servers, beside their TCP ones
    assert len(during) >= 6, sorted(during)
    assert all(ip in LOOPBACK for ip, _ in during), sorted(during)


def test_the_tests_in_process_clusters_listen_on_loopback_only():
    """The suite's in-process clusters (scaled up, as a test does) open HTTP servers on
    127.0.0.1 only: with no TCP host, distributed binds them to every interface."""
    from distributed import Client, LocalCluster

    from tests.conftest import IN_PROCESS_LOOPBACK

    before = listening_addresses([os.getpid()])
    with LocalCluster(n_workers=1, threads_per_worker=1, **IN_PROCESS_LOOPBACK) as local, \
            Client(local, set_as_default=False) as client:
        local.scale(2)
        client.wait_for_workers(2, timeout=30)
        during = listening_addresses([os.getpid()]) - before
    assert len(during) >= 3, sorted(during)  # the scheduler's and two workers' HTTP servers
    assert all(ip in LOOPBACK for ip, _ in during), sorted(during)


@pytest.fixture
def silent_server():
    """A port that accepts TCP connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


@pytest.fixture
def http_server():
    """A web server: it answers dask's handshake with an HTTP error page."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             http.server.BaseHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *args: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("server", ["silent_server", "http_server"])
def test_connect_returns_or_raises_within_its_timeout(server, request):
    import distributed.comm.addressing  # noqa: F401  (a first import is no part of the wait)

    address = request.getfixturevalue(server)
    start = time.perf_counter()
    with pytest.raises(ConnectionError, match=re.escape(address)):
        pargraph.connect(address, timeout=2)
    # the bound catches a hang (or a wait far past the timeout), not a slow machine
    assert time.perf_counter() - start < 2 + 8


def test_a_tls_address_without_security_says_what_to_pass():
    with pytest.raises(ValueError, match=r"TLS address, so pass security=.*Security\("):
        pargraph.connect("tls://127.0.0.1:8786", timeout=1)


class _Planted:
    """Unpickling this creates a file: the proof that a server's answer ran code here."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture
def hostile_server(tmp_path):
    """A server that speaks dask's protocol and answers with pickles: its handshake and its
    identity reply both carry an object whose unpickling creates a file."""
    import asyncio

    from distributed.comm import listen
    from distributed.protocol.serialize import ToPickle

    planted = tmp_path / "planted"
    ready, stop = threading.Event(), threading.Event()
    address = {}

    async def serve():
        async def handle(comm):
            try:
                await comm.read()
                await comm.write({"type": "Scheduler", "id": ToPickle(_Planted(str(planted)))})
            except Exception:  # the client hung up: nothing more to plant
                pass

        listener = listen("tcp://127.0.0.1:0", handle,
                          handshake_overrides={"extra": ToPickle(_Planted(str(planted)))})
        await listener.start()
        address["value"] = listener.contact_address
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        listener.stop()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield address["value"], planted
    stop.set()
    thread.join(5)


def test_connect_deserializes_no_pickle_from_the_server(hostile_server):
    address, planted = hostile_server
    # Through dask's own reader, the answer runs the server's code:
    from distributed.comm import connect as open_comm

    async def dask_reads():
        comm = await open_comm(address, timeout=5)
        await comm.write({"op": "identity"})
        await comm.read()
        comm.abort()

    import asyncio

    asyncio.run(dask_reads())
    assert planted.exists()
    planted.unlink()
    # pargraph's probe reads the same answers as plain data, and connects to nothing.
    with pytest.raises(ConnectionError):
        pargraph.connect(address, timeout=5).close()
    assert not planted.exists()


def test_connect_over_tls_probes_the_scheduler_and_trains():
    from distributed import LocalCluster
    from distributed.security import Security

    security = Security.temporary()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://",
                      security=security, dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                      worker_dashboard_address="127.0.0.1:0") as cluster:
        with pargraph.connect(cluster.scheduler_address, timeout=10,
                              security=security) as client:
            assert client.scheduler.address.startswith("tls://")
            import dask

            with dask.config.set(scheduler=client):
                assert (pargraph.ones(3) * 2).sum().item() == 6.0
