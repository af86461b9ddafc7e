"""Rebuild the README's sample outputs and pictures from the code, and say where they were made.

    python docs/make_figures.py                # trace and forecast samples, timeline PNGs,
                                               # digits figures
    python docs/make_figures.py --dashboard    # also the dashboard screenshots (needs chromium)
    python docs/make_figures.py --check        # exit 1 if the README's samples are stale

Each generated part of README.md sits between ``<!-- generated:NAME -->`` and
``<!-- /generated:NAME -->``; everything else in the README is left alone. ``--check`` re-runs
what has a deterministic shape (the traced step's node count and its ops) and compares it
with the README, so a change to the engine that makes the samples stale fails the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
README = os.path.join(ROOT, "README.md")
sys.path.insert(0, os.path.join(ROOT, "demos"))

#: The towers configuration the README's trace shows (the demo's defaults).
TOWERS_ARGS = ["--quiet", "--steps", "2"]


def machine() -> str:
    """One line naming the machine and the versions the figures were made with."""
    import dask
    import numpy

    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as file:
            names = re.findall(r"^model name\s*:\s*(.+)$", file.read(), re.MULTILINE)
            cpu = names[0] if names else cpu
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {numpy.__version__}, dask {dask.__version__}, "
            f"{time.strftime('%Y-%m-%d')}")


def towers_trace(trace_path: str, forecast: bool = False) -> str | tuple[str, str]:
    """Trace one towers step (writing the Chrome trace and its PNG); return the summary, and
    with ``forecast`` its forecast too (writing the measured and forecast timelines)."""
    import towers

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        towers.main(TOWERS_ARGS + ["--trace", trace_path] + (["--forecast"] if forecast else []))
    text = out.getvalue()
    start = text.index("nodes ")
    summary = text[start:text.index("\n\n", start)].rstrip()
    if not forecast:
        return summary
    start = text.index("forecast of one traced step")
    end = text.index("measured and forecast", start)  # the line naming the timelines' PNG
    return summary, text[start:end].rstrip()


def forecast_labels(table: str) -> list[str]:
    """The configurations a forecast's table lists, in order."""
    rows = table.split("configuration", 1)[1].splitlines()[1:]
    return [re.split(r"\s{2,}", row.strip())[0] for row in rows
            if row.strip() and not row.startswith("```")]


def fresh_forecast_labels() -> list[str]:
    """The configurations the towers demo's ``--forecast`` lists, from the code: a forecast
    of a small step for the same configurations (nothing measured)."""
    import common

    import pargraph
    from pargraph.machine_costs import Network

    x = pargraph.ones(4, requires_grad=True)
    with pargraph.trace() as tr:
        (x * 2).sum().backward()
        x.grad.numpy()
    network = Network(1e-3, 1e-4, 1e-3, 0.0, 1e-3, 1e9, 1e-3, 2e-4, 1e-3)
    table = str(pargraph.forecast(tr, threads=common.FORECAST_THREADS,
                                  workers=common.FORECAST_WORKERS, network=network,
                                  measure_gil=False))
    return forecast_labels(table)


def digits_figures() -> str:
    import digits

    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
        result = digits.main(["--quiet", "--plot", "", "--checkpoint",
                              os.path.join(folder, "d.npz")])
    return (f"`python demos/digits.py` reached {result['test_accuracy']:.2%} test accuracy "
            f"after 20 epochs in {result['seconds']:.1f} s of training, on {result['where']}, "
            "on the machine named below with nothing else running. The accuracy comes from the "
            "demo's seed, not from the machine's speed; the time grows with the machine's load "
            "(a busy 2-core machine took 2-6 s) and with fewer cores.")


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)",
                         re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no generated:{name} block")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def read_block(text: str, name: str) -> str:
    match = re.search(rf"<!-- generated:{name} -->\n(.*?)<!-- /generated:{name} -->", text,
                      re.DOTALL)
    if match is None:
        raise SystemExit(f"README.md has no generated:{name} block")
    return match.group(1)


def shape_of_summary(summary: str) -> tuple[str, set[str]]:
    """What does not vary between runs: the node count and which ops did work."""
    nodes = re.search(r"^nodes (\d+)", summary, re.MULTILINE).group(1)
    block = summary.split("work by op (top 8):")[1].split("critical path, longest")[0]
    ops = {line.split()[0] for line in block.strip().splitlines()}
    return nodes, ops


def check() -> int:
    with open(README) as file:
        text = file.read()
    with tempfile.TemporaryDirectory() as folder:
        fresh = towers_trace(os.path.join(folder, "trace.json"))
        with open(os.path.join(folder, "trace.json")) as file:
            events = json.load(file)["traceEvents"]
    documented = read_block(text, "towers-summary")
    nodes, _ = shape_of_summary(fresh)
    # every op of the run, not only its top 8: which small op comes 8th is noise
    ops = {e["name"] for e in events if e["ph"] == "X"}
    documented_nodes, documented_ops = shape_of_summary(documented)
    if nodes != documented_nodes or not documented_ops <= ops:
        print(f"README.md's towers trace is stale: it shows {documented_nodes} nodes and ops "
              f"{sorted(documented_ops - ops)} that a run no longer has ({nodes} nodes now); "
              "run python docs/make_figures.py")
        return 1
    documented_labels = forecast_labels(read_block(text, "towers-forecast"))
    if documented_labels != fresh_forecast_labels():
        print(f"README.md's forecast is stale: it lists {documented_labels}, the demo now "
              f"{fresh_forecast_labels()}; run python docs/make_figures.py")
        return 1
    print(f"README.md's samples match the code ({nodes} nodes in the traced step)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare the README's samples with a fresh run; change nothing")
    parser.add_argument("--dashboard", action="store_true",
                        help="also retake the dashboard screenshots (headless chromium)")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    with open(README) as file:
        text = file.read()
    summary, forecast = towers_trace(os.path.join(HERE, "towers-trace.json"), forecast=True)
    os.remove(os.path.join(HERE, "towers-trace.json"))  # the PNGs are what the README shows
    text = replace_block(text, "towers-summary", f"```\n{summary}\n```")
    text = replace_block(text, "towers-forecast", f"```\n{forecast}\n```")
    text = replace_block(text, "digits", digits_figures())
    text = replace_block(text, "machine", f"Samples and pictures made by "
                                          f"`python docs/make_figures.py` on: {machine()}.")
    with open(README, "w") as file:
        file.write(text)
    if args.dashboard:
        for page, name in (("status", "dashboard-status.png"),
                           ("tasks", "dashboard-task-stream.png")):
            subprocess.run([sys.executable, os.path.join(HERE, "dashboard_screenshot.py"),
                            "--page", page, "--out", os.path.join(HERE, name)], check=True)
    print("README.md, docs/towers-trace.png, docs/towers-trace-forecast.png"
          + (" and the dashboard screenshots"
                                                 if args.dashboard else "") + " rebuilt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
