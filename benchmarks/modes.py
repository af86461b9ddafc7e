"""The ways a threaded run can go, compared in one process, in alternating blocks of steps.

On this machine a whole process can run 30-60% slower than the next (the same code, minutes
apart), so comparing two processes compares their luck. Here one training loop switches the
way its runs go every block of steps, so every way meets the same luck:

- pargraph's threads: the group tasks on ``num_workers`` threads (``run_on_threads``);
- dask's threads: the same group tasks on ``dask.threaded.get``;
- one thread, with BLAS limited to one thread or free.

    python -m benchmarks.modes --workload branchy --blocks 8
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import dask

from benchmarks.harness import in_blocks
from benchmarks.loop import WORKLOADS, _pargraph_step


def _on_dask_threads(calls: dict, keys: list, threads: int, parts: dict | None = None) -> list:
    """``run_on_threads``' group calls as dask tasks on dask's threaded scheduler (which has no
    use for the parts of tuples that can go early, ``parts``)."""
    from pargraph.engine.lowering import _dask_graph

    return dask.threaded.get(_dask_graph({}, calls), keys, num_workers=threads)


def compare(workload: str, blocks: int = 8, steps: int = 8) -> dict[str, list[float]]:
    """Seconds per step of each way, ``blocks`` blocks of ``steps`` steps each, alternating;
    the two steps after each switch are not timed (they pay for it)."""
    from pargraph.engine import modes as engine_modes

    own = engine_modes.run_on_threads
    ways = {"pargraph's threads": ("threads", own),
            "dask's threads": ("threads", _on_dask_threads),
            "one thread, one BLAS thread": ("inline, one BLAS thread", own),
            "one thread, BLAS free": ("inline", own)}
    original_choice = dask.config.get("pargraph.adaptive", True)

    def switch_to(mode: str, runner: Callable) -> Callable[[], None]:
        def switch() -> None:
            dask.config.set({"pargraph.adaptive": mode})  # a mode's name forces it
            engine_modes.run_on_threads = runner
        return switch

    try:
        step = _pargraph_step(WORKLOADS[workload])
        with dask.config.set(scheduler="threads"):
            for _ in range(20):
                step()
            times = in_blocks({name: (switch_to(mode, runner), step)
                               for name, (mode, runner) in ways.items()}, blocks, steps)
    finally:
        dask.config.set({"pargraph.adaptive": original_choice})
        engine_modes.run_on_threads = own
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["wide", "branchy", "small"], required=True)
    parser.add_argument("--blocks", type=int, default=8)
    args = parser.parse_args(argv)
    for name, seconds in compare(args.workload, args.blocks).items():
        low, _, high = statistics.quantiles(seconds, n=4)
        print(f"{name:30} {statistics.median(seconds) * 1000:8.2f} ms median "
              f"({low * 1000:.1f}-{high * 1000:.1f} ms, middle half)")


if __name__ == "__main__":
    main()
