"""Peak resident memory of training steps, in a fresh process.

    python -m benchmarks.memory pargraph|torch
    python -m benchmarks.memory adam pargraph|pargraph-compiled|pargraph-compiled-new-arrays|torch
    python -m benchmarks.memory conv pargraph|pargraph-compiled|torch

The first form steps the wide model; the baseline is the resident memory once the model and
the data exist, before any step. The second steps Adam on a 4096 x 4096 layer (64 MiB of
weight), eager, compiled (its replays update the weight and moments in their own arrays), or
compiled with that turned off (``pargraph.in-place-bytes`` None); its baseline is the resident
memory after three steps, so it is what a steady step needs beyond what training holds, and it
also reports the median of ten steps' times. The third steps the conv workload from a fresh
model; its baseline is the memory before the first step. The peak is the highest resident
memory over the steps (VmHWM, reset by writing "5" to /proc/self/clear_refs), so memory an
allocator keeps cached between steps counts too.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

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


#: Adam's layer: a weight of SIZE x SIZE float32, a batch of BATCH.
SIZE, BATCH = 4096, 64


def adam(variant: str) -> None:
    if variant == "torch":
        import torch

        torch.set_num_threads(2)
    else:
        import dask

        import pargraph as torch

        dask.config.set({"pargraph.in-place-bytes": None} if variant.endswith("new-arrays")
                        else {}, scheduler="threads", num_workers=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(SIZE, SIZE), torch.nn.ReLU(),
                                torch.nn.Linear(SIZE, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(BATCH, SIZE), torch.randint(0, 10, (BATCH,))

    def train(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = torch.compile(train) if "compiled" in variant else train

    def step():
        return run(x, y).item()

    for _ in range(3):  # Adam's state exists, and a compiled step has captured
        step()
    times = []
    for _ in range(10):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"variant": variant, "peak_bytes": peak_of(step),
                      "step_seconds": statistics.median(times)}))


def conv(variant: str) -> None:
    """The conv workload's steps (``benchmarks.layer_models``) from a fresh model: peak beyond
    the memory before the first step (so what training holds between steps counts), and the
    bytes of its layer's columns (positions x channels x kernel)."""
    from benchmarks import layer_models

    if variant == "torch":
        import torch as lib

        lib.set_num_threads(2)
    else:
        import dask

        import pargraph as lib

        dask.config.set(scheduler="threads", num_workers=2)
    step = layer_models.step_of(lib, "conv", "step" if variant.endswith("compiled") else None)

    def steps() -> None:
        for _ in range(2):
            step()

    (batch, channels, height, width), _ = layer_models.SHAPES["conv"]
    columns = batch * height * width * channels * 9 * 4  # its 3 x 3 kernel, float32
    print(json.dumps({"variant": variant, "peak_bytes": peak_of(steps),
                      "columns_bytes": columns}))


if __name__ == "__main__":
    if sys.argv[1] == "adam":
        adam(sys.argv[2])
    elif sys.argv[1] == "conv":
        conv(sys.argv[2])
    else:
        main(sys.argv[1])
