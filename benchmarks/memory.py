"""Peak resident memory of one training step of the wide model, in a fresh process.

    python -m benchmarks.memory pargraph|torch

The baseline is the resident memory once the model and the data exist, before any step; the
peak is the highest resident memory over three steps (VmHWM, reset by writing "5" to
/proc/self/clear_refs), so memory an allocator keeps cached between steps counts too.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from benchmarks import models


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_of(step) -> int:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = _status("VmRSS")
    for _ in range(3):
        step()
    return _status("VmHWM") - before


def main(framework: str) -> None:
    rng = np.random.default_rng(0)
    cfg = models.WIDE
    towers = [models.init_layers(cfg["sizes"], rng) for _ in range(cfg["towers"])]
    x, y = models.data(cfg["sizes"][0], cfg["batch"], cfg["sizes"][-1])
    if framework == "torch":
        import torch

        torch.set_num_threads(2)
        step = models.torch_step(torch, towers, x, y)
    else:
        import dask

        dask.config.set(scheduler="threads", num_workers=2)
        step = models.pargraph_step(models.pargraph_wide(towers), x, y)
    print(json.dumps({"framework": framework, "peak_bytes": peak_of(step)}))


if __name__ == "__main__":
    main(sys.argv[1])
