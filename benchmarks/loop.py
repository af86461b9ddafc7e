"""Steady-state training loops, one framework and setting per process.

What users run: ``zero_grad``, forward, ``backward``, ``step``, ``loss.item()``, again and
again, with no pause between timed steps. Each call of this module times one variant in a
fresh process and prints one JSON line; :func:`compare` runs every variant several times,
interleaved, so the machine's noise spreads over all of them.

    python -m benchmarks.loop --workload branchy --variant "pargraph threads"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = {
    "wide": dict(towers=8, sizes=(256, 512, 512, 10), batch=512),
    "branchy": dict(towers=32, sizes=(64, 128, 128, 10), batch=128),
    "small": dict(towers=1, sizes=(32, 64, 64, 4), batch=32),
    # benchmarks/layer_models.py: the same program on pargraph and on PyTorch
    "conv": dict(layers=True), "cnn": dict(layers=True), "attention": dict(layers=True),
    "lstm": dict(layers=True), "charrnn": dict(layers=True),
}
#: Steps run before the timed ones, in every framework, and seconds at least. A steady state
#: takes a while: CPython specializes a function's bytecode only after it ran several times,
#: and most of pargraph's functions run once or a few times per step, and pargraph's runner
#: tries each way of running a structure over its first runs, each for a while (the figures:
#: docs/performance.md).
WARMUP, WARMUP_SECONDS = 20, 1.0
PARGRAPH = ["pargraph threads", "pargraph sync", "pargraph sync, 1 BLAS thread"]
#: ``pargraph.compile`` of the whole step (captured once, replayed), on threads and on one
#: thread (sync, one BLAS thread), and of the model alone (``model = pargraph.compile(model)``,
#: the rest of the step eager).
PARGRAPH_COMPILED = ["pargraph compiled threads", "pargraph compiled, 1 thread",
                     "pargraph compile(model) threads"]
TORCH = ["PyTorch, 1 thread", "PyTorch, 2 threads"]
#: ``torch.compile`` of the model (the rest of the step eager, as a PyTorch user writes
#: ``model = torch.compile(model)``), with the thread count of PyTorch's faster eager setting
#: on the workload.
COMPILED = {"small": "torch.compile, 1 thread"}
COMPILED_DEFAULT = "torch.compile, 2 threads"
#: The work alone, in plain numpy with one BLAS thread (see ``_numpy_step``).
NUMPY = ["numpy by hand, 1 thread", "numpy by hand, 2 threads"]


def _data(cfg: dict):
    import numpy as np

    rng = np.random.default_rng(1)
    x = rng.standard_normal((cfg["batch"], cfg["sizes"][0])).astype(np.float32)
    return x, rng.integers(0, cfg["sizes"][-1], cfg["batch"])


def pargraph_step(workload: str, package: str = "pargraph", compiled: str | None = None):
    """The workload's pargraph training step (the towers here, the layer models in
    :mod:`benchmarks.layer_models`), built with the pargraph imported as ``package``."""
    import importlib

    cfg = WORKLOADS[workload]
    if cfg.get("layers"):
        from benchmarks.layer_models import step_of

        return step_of(importlib.import_module(package), workload, compiled)
    return _pargraph_step(cfg, package, compiled)


def _pargraph_step(cfg: dict, package: str = "pargraph", compiled: str | None = None):
    """The tower step, built with ``package`` (another version of pargraph imported under
    another name: ``benchmarks.versions``); ``compiled``: ``"step"`` compiles the step,
    ``"model"`` the model (the towers), as a user would."""
    import importlib

    pargraph = importlib.import_module(package)
    nn, optim = pargraph.nn, pargraph.optim
    pargraph.manual_seed(0)

    def tower():
        layers = []
        for k, (a, b) in enumerate(zip(cfg["sizes"], cfg["sizes"][1:])):
            layers.append(nn.Linear(a, b))
            if k < len(cfg["sizes"]) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class Towers(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.towers = nn.ModuleList(tower() for _ in range(cfg["towers"]))

        def forward(self, x):
            towers = self.towers
            return towers[0](x) if len(towers) == 1 else \
                pargraph.stack([t(x) for t in towers]).mean(0)

    model = Towers()
    forward = pargraph.compile(model) if compiled == "model" else model
    x, y = (pargraph.tensor(v) for v in _data(cfg))
    opt = optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def train(x, y):
        opt.zero_grad()
        loss = loss_fn(forward(x), y)
        loss.backward()
        opt.step()
        return loss

    run = pargraph.compile(train) if compiled == "step" else train

    def step() -> float:
        return run(x, y).item()

    step.towers = model.towers  # for tests/test_benchmarks.py: the numpy baseline's start
    step.compiled = run if compiled == "step" else None
    return step


def _torch_step(cfg: dict, threads: int, compiled: bool = False):
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def tower():
        layers = []
        for k, (a, b) in enumerate(zip(cfg["sizes"], cfg["sizes"][1:])):
            layers.append(torch.nn.Linear(a, b))
            if k < len(cfg["sizes"]) - 2:
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers)

    class Towers(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.towers = torch.nn.ModuleList(tower() for _ in range(cfg["towers"]))

        def forward(self, x):
            towers = self.towers
            return towers[0](x) if len(towers) == 1 else \
                torch.stack([t(x) for t in towers]).mean(0)

    model = Towers()
    forward = torch.compile(model) if compiled else model
    x, y = (torch.from_numpy(v) for v in _data(cfg))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> float:
        opt.zero_grad()
        logits = forward(x)
        loss = loss_fn(logits, y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _jax_step(cfg: dict):
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    params = []
    for _ in range(cfg["towers"]):
        layers = []
        for a, b in zip(cfg["sizes"], cfg["sizes"][1:]):
            key, k1 = jax.random.split(key)
            bound = 1 / a ** 0.5
            layers.append((jax.random.uniform(k1, (b, a), minval=-bound, maxval=bound),
                           jnp.zeros(b)))
        params.append(layers)
    x, y = (jnp.asarray(v) for v in _data(cfg))

    def loss_of(params):
        outs = []
        for layers in params:
            h = x
            for k, (w, b) in enumerate(layers):
                h = h @ w.T + b
                h = jax.nn.relu(h) if k < len(layers) - 1 else h
            outs.append(h)
        logits = jnp.mean(jnp.stack(outs), 0)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])

    @jax.jit
    def update(params):
        loss, grads = jax.value_and_grad(loss_of)(params)
        return loss, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    state = {"params": params}

    def step() -> float:
        loss, state["params"] = update(state["params"])
        return float(loss)

    return step


def _numpy_step(cfg: dict, threads: int, towers: list | None = None):
    """The step's work written by hand in numpy, no framework: the same matrix products,
    elementwise ops and reductions, in place where pargraph writes in place, one BLAS thread.
    With two threads each runs half of the towers' forward passes, then half of their backward
    passes and updates: what a scheduler of Python threads could reach at best, with no cost
    of its own and a perfect split. ``towers``: per tower, per layer, (weight, bias) arrays,
    updated in place (default: initialized here)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    if towers is None:
        rng = np.random.default_rng(0)
        towers = [[(rng.uniform(-a ** -0.5, a ** -0.5, (b, a)).astype(np.float32),
                    rng.uniform(-a ** -0.5, a ** -0.5, b).astype(np.float32))
                   for a, b in zip(cfg["sizes"], cfg["sizes"][1:])]
                  for _ in range(cfg["towers"])]
    x, y = _data(cfg)
    rows = np.arange(len(y))

    def forward(layers):
        outs = [x]
        for k, (w, b) in enumerate(layers):
            h = np.matmul(outs[-1], w.T)
            h += b
            if k < len(layers) - 1:
                np.maximum(h, 0, out=h)
            outs.append(h)
        return outs

    def backward_and_update(layers, outs, g):
        for k in reversed(range(len(layers))):
            w, b = layers[k]
            grad_w, grad_b = np.matmul(g.T, outs[k]), g.sum(0)
            if k:
                g = np.matmul(g, w)
                g *= outs[k] > 0
            w -= 0.01 * grad_w
            b -= 0.01 * grad_b

    pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def each(fn, *per_tower):
        """``fn`` on every tower; with threads, tower k on thread k % threads."""
        if pool is None:
            return [fn(*args) for args in zip(*per_tower)]
        parts = [pool.submit(lambda part: [fn(*args) for args in part],
                             list(zip(*[column[k::threads] for column in per_tower])))
                 for k in range(threads)]
        done = [part.result() for part in parts]
        return [done[k % threads][k // threads] for k in range(len(towers))]

    def step() -> float:
        outs = each(forward, towers)
        logits = np.mean(np.stack([o[-1] for o in outs]), 0)
        shifted = logits - logits.max(1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        loss = -log_probs[rows, y].mean()
        g = np.exp(log_probs)  # d loss / d logits of each tower: (softmax - one-hot) / n / T
        g[rows, y] -= 1
        g /= len(y) * len(towers)
        each(backward_and_update, towers, outs, [g] * len(towers))
        return float(loss)

    return step


#: glibc's ``mallopt`` parameters and the values the numpy and PyTorch variants run with,
#: those pargraph's compiled steps set (``pargraph.runtime.Allocator``): freed memory stays in
#: the heap (``M_TRIM_THRESHOLD``) and arrays under 64 MiB come from it
#: (``M_MMAP_THRESHOLD``), so that no step pays for the kernel to map pages again.
KEPT_HEAP = {-1: 256 << 20, -3: 64 << 20}


def keep_heap() -> bool:
    """Keep freed memory in glibc's heap for the rest of the process (``KEPT_HEAP``); False
    where the C library is not glibc. With glibc's adaptive thresholds, some processes of the
    hand-written numpy step gave pages back to the kernel and faulted them in again at every
    step, others did not: the floor pargraph is measured against moved from process to
    process (docs/performance.md has the figures). PyTorch's processes keep it too: its
    best setting, as pargraph's compiled steps keep theirs."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(parameter, value) == 1 for parameter, value in KEPT_HEAP.items())


def run_variant(workload: str, variant: str, steps: int, warmup: int) -> dict:
    """Time ``steps`` consecutive steps after ``warmup`` ones (and :data:`WARMUP_SECONDS`),
    in this process."""
    import dask

    cfg = WORKLOADS[workload]
    settings: dict = {}
    blas = None
    if cfg.get("layers"):
        from benchmarks.layer_models import step_of

        if variant.startswith("JAX") or (variant.startswith("torch.compile")
                                         and workload == "charrnn"):
            raise SystemExit(f"no {variant.split(',')[0]} version of the {workload} workload")
        if variant.startswith(("PyTorch", "torch.compile")):
            import torch

            torch.set_num_threads(1 if "1 thread" in variant else 2)
    if variant.startswith("pargraph"):
        compiled = "model" if "compile(model)" in variant else \
            "step" if "compiled" in variant else None
        step = pargraph_step(workload, compiled=compiled)
        settings["scheduler"] = "threads" if "threads" in variant else "sync"
        if variant.endswith(("1 BLAS thread", "1 thread")):
            blas = 1
    elif variant.startswith("PyTorch"):
        keep_heap()  # the glibc thresholds pargraph's compiled steps set: PyTorch's best too
        step = step_of(torch, workload) if cfg.get("layers") else \
            _torch_step(cfg, 1 if "1 thread" in variant else 2)
    elif variant.startswith("torch.compile"):
        keep_heap()
        step = step_of(torch, workload, "model") if cfg.get("layers") else \
            _torch_step(cfg, 1 if "1 thread" in variant else 2, compiled=True)
    elif variant.startswith("numpy"):
        if cfg.get("layers"):
            raise SystemExit(f"no hand-written numpy version of the {workload} workload")
        keep_heap()
        step = _numpy_step(cfg, 2 if "2 threads" in variant else 1)
        blas = 1
    else:
        step = _jax_step(cfg)
    from threadpoolctl import threadpool_limits

    runs: list = []
    with dask.config.set(settings), threadpool_limits(blas, "blas"):
        started, warmed = time.perf_counter(), 0
        while warmed < warmup or time.perf_counter() - started < WARMUP_SECONDS:
            step()
            warmed += 1
        if variant.startswith("pargraph"):
            from pargraph.engine import execution

            original = execution.execute

            def counting(lowered, keys, get):
                runs.append(lowered.tasks)
                return original(lowered, keys, get)

            execution.execute = counting
        times, losses = [], []
        for _ in range(steps):
            start = time.perf_counter()
            losses.append(step())
            times.append(time.perf_counter() - start)
    tasks = len(runs) and sum(runs) / steps
    if getattr(step, "compiled", None) is not None and step.compiled.programs:
        tasks = len(step.compiled.programs[0].tasks)  # a replay runs the program's tasks
    if variant.startswith("pargraph"):
        from pargraph.engine import execution

        execution.execute = original
    return {"workload": workload, "variant": variant, "times": times, "loss": losses[-1],
            "tasks_per_step": tasks}


def variants_of(workload: str) -> list[str]:
    """Every variant a comparison of ``workload`` runs (those not installed are skipped)."""
    compiled = [] if workload == "charrnn" else [COMPILED.get(workload, COMPILED_DEFAULT)]
    return PARGRAPH + PARGRAPH_COMPILED + TORCH + compiled + ["JAX jit"] + \
        numpy_variants(workload)


def numpy_variants(workload: str) -> list[str]:
    """The hand-written numpy variants of a workload (two threads only where it has towers to
    split)."""
    cfg = WORKLOADS[workload]
    if cfg.get("layers"):
        return []
    return NUMPY if cfg["towers"] > 1 else NUMPY[:1]


def available(variant: str) -> bool:
    module = {"PyTorch": "torch", "torch.compile": "torch",
              "JAX": "jax"}.get(variant.split(",")[0].split()[0])
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


def compare(workload: str, variants: list[str], rounds: int = 3, steps: int = 7,
            warmup: int = WARMUP) -> dict[str, dict]:
    """Each variant ``rounds`` times in its own process, interleaved; medians over all steps
    (``median``) and of each round (``round_medians``)."""
    results: dict[str, dict] = {}
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__))}
    for _ in range(rounds):
        for variant in [v for v in variants if available(v)]:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.loop", "--workload", workload, "--variant",
                 variant, "--steps", str(steps), "--warmup", str(warmup)],
                capture_output=True, text=True, env=env, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            entry = results.setdefault(variant, {"times": [], "tasks_per_step": 0,
                                                 "round_medians": []})
            entry["times"] += row["times"]
            entry["round_medians"].append(statistics.median(row["times"]))
            entry["tasks_per_step"] = row["tasks_per_step"]
            entry["loss"] = row["loss"]
    for entry in results.values():
        entry["median"] = statistics.median(entry["times"])
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--variant", help="one variant (pargraph threads, PyTorch, 1 thread, "
                        "JAX jit, ...); without it, --compare")
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    parser.add_argument("--compare", action="store_true",
                        help="run every variant (interleaved processes) and print a table")
    args = parser.parse_args(argv)
    if args.compare or not args.variant:
        variants = variants_of(args.workload)
        for name, entry in compare(args.workload, variants, steps=args.steps,
                                   warmup=args.warmup).items():
            print(f"{name:32} {entry['median'] * 1000:8.2f} ms  "
                  f"tasks/step {entry['tasks_per_step']:.0f}")
        return
    print(json.dumps(run_variant(args.workload, args.variant, args.steps, args.warmup)))


if __name__ == "__main__":
    main()
