"""Two versions of pargraph compared in one process, in alternating blocks of training steps.

On this machine a whole process can run 30-60% slower than the next, so timing a change as
"before" in one process and "after" in another compares the processes' luck more than the
code. Here the other version is imported beside this one under another name
(``pargraph_<rev>``, its own imports rewritten to it), each version builds the same model
from the same seed, and one loop switches between them every block of steps, so both meet the
same luck. A git revision is extracted with ``git archive``; a directory is copied.

    python -m benchmarks.versions --against HEAD~3 --workload branchy
    python -m benchmarks.versions --against ../other/pargraph --workload small --mode threads
    python -m benchmarks.versions --against HEAD~1 --workload attention --compiled step
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile

import dask

from benchmarks.harness import in_blocks
from benchmarks.loop import WORKLOADS, pargraph_step

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORTS = re.compile(r"^(\s*)(from|import) pargraph(?=[.\s]|$)", re.MULTILINE)


def import_other(against: str, into: str) -> str:
    """Import the pargraph of ``against`` (a git revision of this repository, or a directory
    holding a ``pargraph`` package) as a package of another name, from files under ``into``;
    returns that name."""
    name = "pargraph_" + re.sub(r"\W", "_", os.path.basename(os.path.normpath(against)))
    target = os.path.join(into, name)
    if os.path.isdir(against):
        source = against if os.path.basename(os.path.normpath(against)) == "pargraph" \
            else os.path.join(against, "pargraph")
        shutil.copytree(source, target)
    else:
        archive = subprocess.run(["git", "archive", against, "pargraph"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            # the "data" filter exists from Python 3.10.12 and 3.11.4 on
            tar.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter")
                                    else {}))
        os.rename(os.path.join(into, "pargraph"), target)
    for folder, _, files in os.walk(target):
        for file in files:
            if file.endswith(".py"):
                path = os.path.join(folder, file)
                with open(path) as f:
                    text = f.read()
                with open(path, "w") as f:
                    f.write(_IMPORTS.sub(rf"\1\2 {name}", text))
    sys.path.insert(0, into)
    importlib.import_module(name)
    return name


def compare(against: str, workload: str, blocks: int = 8, steps: int = 8,
            mode: str | None = None, scheduler: str = "threads",
            compiled: str | None = None) -> dict[str, list[float]]:
    """Seconds per step of this pargraph and of ``against``'s, ``blocks`` alternating blocks
    of ``steps`` steps; the two steps after each switch are not timed. ``mode`` forces how
    threaded runs go (``threads``, ``inline``, ``inline, one BLAS thread``), for both;
    ``compiled`` (``"step"`` or ``"model"``) is what each version compiles."""
    with tempfile.TemporaryDirectory() as into:
        packages = {"this": "pargraph", against: import_other(against, into)}
        # Versions before pargraph.adaptive could name a mode chose it in GroupPlan.
        plans = [plan for plan in (_lowering(package).GroupPlan for package in packages.values())
                 if hasattr(plan, "choose_mode")]
        chosen = [plan.choose_mode for plan in plans]
        if mode is not None:
            for plan in plans:
                plan.choose_mode = lambda plan: mode
        settings = {"scheduler": scheduler}
        if mode is not None:
            settings["pargraph.adaptive"] = mode
        runs = {label: pargraph_step(workload, package, compiled)
                for label, package in packages.items()}
        try:
            with dask.config.set(settings):
                for step in runs.values():
                    for _ in range(20):
                        step()
                return in_blocks({label: (_nothing, step) for label, step in runs.items()},
                                 blocks, steps)
        finally:
            for plan, choose in zip(plans, chosen):
                plan.choose_mode = choose


def _lowering(package: str):
    """The lowering module of a version: under ``engine`` since the engine had a package."""
    try:
        return importlib.import_module(package + ".engine.lowering")
    except ModuleNotFoundError:
        return importlib.import_module(package + ".lowering")


def _nothing() -> None:
    pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True,
                        help="a git revision of this repository, or a directory")
    parser.add_argument("--workload", choices=list(WORKLOADS), required=True)
    parser.add_argument("--compiled", choices=["step", "model"],
                        help="what each version compiles (default: nothing, eager)")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--mode", choices=["threads", "inline", "inline, one BLAS thread"])
    parser.add_argument("--scheduler", default="threads")
    args = parser.parse_args(argv)
    times = compare(args.against, args.workload, args.blocks, args.steps, args.mode,
                    args.scheduler, args.compiled)
    medians = {label: statistics.median(seconds) for label, seconds in times.items()}
    for label, median in medians.items():
        print(f"{label:30} {median * 1000:8.3f} ms median step")
    this, other = medians.values()
    print(f"this / {args.against}: {this / other:.3f}")


if __name__ == "__main__":
    main()
