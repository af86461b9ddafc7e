"""Screenshot the dask dashboard's task stream while pargraph trains (for the README).

Trains demos/cnn.py's convnet (``--demo towers``: the towers) on an in-process cluster (or on
``--address``) in a background thread, opens the dashboard in headless Chromium driven over its
DevTools protocol, waits in real time while the live bokeh page draws, and captures a PNG.

    python docs/dashboard_screenshot.py --out docs/dashboard-task-stream.png
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "demos"))

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--hide-scrollbars"]


def train_in_background(client, stop: threading.Event, demo: str) -> threading.Thread:
    """Train ``demo``'s model (``cnn``: demos/cnn.py's convnet on the digits, its inception
    branches side by side; ``towers``: demos/towers.py's towers) on ``client`` until ``stop``."""
    import dask

    import pargraph
    from pargraph import nn, optim

    def loop() -> None:
        pargraph.manual_seed(0)
        if demo == "cnn":
            import cnn
            from digits import load_data

            (train_x, train_y), _ = load_data(0)
            model = cnn.build_model(16)
            x, y = cnn.images(train_x[:256]), pargraph.tensor(train_y[:256])
            opt = optim.Adam(model.parameters(), lr=1e-3)
        else:
            from towers import Towers

            model = Towers(towers=4, width=384)
            x, y = pargraph.randn(384, 64), pargraph.randint(0, 10, (384,))
            opt = optim.SGD(model.parameters(), lr=0.05)
        with dask.config.set(scheduler=client):
            while not stop.is_set():
                opt.zero_grad()
                loss = nn.CrossEntropyLoss()(model(x), y)
                loss.backward()
                opt.step()
                loss.item()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


class DevTools:
    """A minimal Chrome DevTools protocol client over tornado's websocket."""

    def __init__(self, connection) -> None:
        self.connection, self.next_id = connection, 0

    async def call(self, method: str, **params):
        self.next_id += 1
        await self.connection.write_message(json.dumps({"id": self.next_id, "method": method,
                                                        "params": params}))
        while True:
            reply = json.loads(await self.connection.read_message())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})


async def screenshot(url: str, out: str, seconds: float, port: int) -> None:
    from tornado.websocket import websocket_connect

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as response:
        pages = [t for t in json.load(response) if t["type"] == "page"]
    tools = DevTools(await websocket_connect(pages[0]["webSocketDebuggerUrl"],
                                             max_message_size=64 * 2**20))
    await tools.call("Page.enable")
    await tools.call("Emulation.setDeviceMetricsOverride", width=1400, height=820,
                     deviceScaleFactor=1, mobile=False)
    await tools.call("Page.navigate", url=url)
    await asyncio.sleep(seconds)  # the page is live: let it draw in real time
    shot = await tools.call("Page.captureScreenshot", format="png")
    with open(out, "wb") as file:
        file.write(base64.b64decode(shot["data"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "dashboard-task-stream.png"))
    parser.add_argument("--seconds", type=float, default=12.0, help="training before the shot")
    parser.add_argument("--page", default="tasks", help="dashboard page (tasks, status, ...)")
    parser.add_argument("--address", default=None, help="an existing cluster's scheduler")
    parser.add_argument("--demo", choices=["cnn", "towers"], default="cnn",
                        help="what trains while the dashboard is shot")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("error: chromium not found (Debian: apt-get install chromium)")

    from distributed import Client, LocalCluster

    cluster = None
    if args.address:
        client = Client(args.address)
    else:
        cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                               dashboard_address="127.0.0.1:8787",
                               worker_dashboard_address="127.0.0.1:0")
        client = Client(cluster)
    stop = threading.Event()
    trainer = train_in_background(client, stop, args.demo)
    port = 9333
    profile = tempfile.mkdtemp(prefix="chromium-")
    chromium = subprocess.Popen([browser, *CHROMIUM_FLAGS, f"--remote-debugging-port={port}",
                                 f"--user-data-dir={profile}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)
        port_of_dashboard = urllib.parse.urlsplit(client.dashboard_link).port
        host = "127.0.0.1" if cluster is not None else urllib.parse.urlsplit(
            client.dashboard_link).hostname
        url = f"http://{host}:{port_of_dashboard}/{args.page}"
        asyncio.run(screenshot(url, args.out, args.seconds, port))
        print(f"wrote {args.out} ({url})")
    finally:
        stop.set()
        chromium.terminate()
        trainer.join(timeout=30)
        client.close()
        if cluster is not None:
            cluster.close()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
