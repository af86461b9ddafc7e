"""The benchmark runner: ``python -m benchmarks`` prints a table and rewrites RESULTS.md.

Every comparison is taken in one run, variants interleaved round-robin, because this machine
is shared and noisy: ratios within a run mean more than absolute times across runs.

    python -m benchmarks              # everything (a few minutes)
    python -m benchmarks --quick      # fewer repeats
    python -m benchmarks --only wide small
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import dask
import numpy as np

import pargraph
from benchmarks import loop, models
from benchmarks.harness import in_rounds, interleaved, measure, per_round, torch_or_none

HERE = os.path.dirname(os.path.abspath(__file__))
#: Variables some machines set so that old OpenBLAS builds run (they name kernels for an older
#: CPU); the OpenBLAS of a current numpy picks faster ones itself. A run unsets them, so it
#: measures what a stock numpy runs here, unless ``--machine-blas``.
MACHINE_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: Where the re-run process learns what the machine had set (for the report).
UNSET = "PARGRAPH_BENCHMARK_UNSET"


def _on(scheduler, fn, workers=None):
    settings = {"scheduler": scheduler, **({"num_workers": workers} if workers else {})}

    def run():
        with dask.config.set(settings):
            return fn()

    return run


CHAIN = 10_000


def _pargraph_chain():
    x = pargraph.tensor(np.linspace(0.1, 1.0, 16), requires_grad=True)
    y = x
    for k in range(CHAIN // 2):
        y = y * 1.0001 if k % 2 else y + 0.001
        y = y.tanh() if k % 50 == 0 else y * 0.9999
    y.sum().backward()
    return x.grad.numpy()


def _raw_dask_chain():
    """The same forward and backward chain as hand-written task_spec tasks."""
    from dask.task_spec import DataNode, Task, TaskRef

    graph = {"x": DataNode("x", np.linspace(0.1, 1.0, 16))}
    ops = []
    prev = "x"
    for k in range(CHAIN // 2):
        for op, arg in (((np.multiply, 1.0001) if k % 2 else (np.add, 0.001)),
                        ((np.tanh, None) if k % 50 == 0 else (np.multiply, 0.9999))):
            key = f"f-{len(ops)}"
            graph[key] = Task(key, op, TaskRef(prev)) if arg is None else \
                Task(key, op, TaskRef(prev), arg)
            ops.append((op, arg))
            prev = key
    graph["g-end"] = Task("g-end", np.ones_like, TaskRef(prev))
    g = "g-end"
    for n, (op, arg) in enumerate(reversed(ops)):
        key = f"g-{n}"
        if op is np.tanh:
            graph[key] = Task(key, _tanh_grad, TaskRef(g), TaskRef(f"f-{len(ops) - 1 - n}"))
        elif op is np.multiply:
            graph[key] = Task(key, np.multiply, TaskRef(g), arg)
        else:
            graph[key] = Task(key, _identity, TaskRef(g))
        g = key
    return dask.threaded.get(graph, g)


def _tanh_grad(g, out):
    return g * (1 - out * out)


def _identity(g):
    return g


def overhead(repeats: int) -> dict:
    """Workload 3: a 10,000-node chain of elementwise ops on 16 numbers, forward and backward."""
    np.testing.assert_allclose(_on("threads", _pargraph_chain)(), _raw_dask_chain(), rtol=1e-9)
    times = interleaved({"pargraph (threads)": _on("threads", _pargraph_chain),
                         "raw dask task_spec (threads)": _raw_dask_chain}, repeats, warmup=1)
    nodes = 2 * CHAIN
    pg = times["pargraph (threads)"].median / nodes
    raw = times["raw dask task_spec (threads)"].median / nodes
    return {"times": times, "per": nodes,
            "targets": [("pargraph costs less per node than raw dask",
                         f"{pg * 1e6:.2f} us vs {raw * 1e6:.2f} us", pg < raw)]}


def building(repeats: int) -> dict:
    """Workload 4: recording nodes and lowering them, per op."""
    from pargraph.engine.lowering import lower, plan
    from pargraph.engine.partition import Granularity

    x = pargraph.ones(16, requires_grad=True)

    def record():
        y = x
        for _ in range(CHAIN // 2):
            y = (y * 1.0001) + 0.001
        return y

    record_time = measure(record, repeats)
    chains = [record() for _ in range(repeats + 2)]

    def lowering():
        y = chains.pop()
        order, computed = plan([y._node])
        lower(order, computed, [y._node], Granularity.of(False, 2, True, 0))

    lower_time = measure(lowering, repeats)
    per_op_record = record_time.median / CHAIN
    per_op_lower = lower_time.median / CHAIN
    return {"times": {"record": record_time, "lower (partitioned)": lower_time}, "per": CHAIN,
            "targets": [
                ("recording < 10 us per op", f"{per_op_record * 1e6:.2f} us",
                 per_op_record < 10e-6),
                ("lowering < 5 us per op", f"{per_op_lower * 1e6:.2f} us", per_op_lower < 5e-6),
            ]}


def _memory_run(*arguments: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", *arguments],
                         capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(HERE)).stdout
    return json.loads(out.strip().splitlines()[-1])


def memory(repeats: int) -> dict:
    """Workload 5: peak resident memory of workload 1's step, of a steady Adam step on a
    4096 x 4096 layer beyond what training holds, and of the conv workload's first steps
    (fresh process each)."""
    peaks, adam = {}, {}
    for framework in ("pargraph", "torch"):
        if framework == "torch" and torch_or_none() is None:
            continue
        peaks[framework] = _memory_run(framework)["peak_bytes"]
    for variant in ("pargraph", "pargraph-compiled", "pargraph-compiled-new-arrays", "torch"):
        if variant == "torch" and torch_or_none() is None:
            continue
        done = _memory_run("adam", variant)
        adam[variant] = (done["peak_bytes"], done["step_seconds"])
    conv = {}
    for variant in ("pargraph", "pargraph-compiled", "torch"):
        if variant == "torch" and torch_or_none() is None:
            continue
        conv[variant] = _memory_run("conv", variant)
    targets = []
    if "torch" in peaks:
        ratio = peaks["pargraph"] / peaks["torch"]
        targets.append(("peak memory <= 1.3x PyTorch's",
                        f"{peaks['pargraph'] / 2**20:.1f} MiB vs "
                        f"{peaks['torch'] / 2**20:.1f} MiB ({ratio:.2f}x)", ratio <= 1.3))
    if "torch" in conv:
        allowed = conv["torch"]["peak_bytes"] + conv["torch"]["columns_bytes"]
        worst = max(conv[v]["peak_bytes"] for v in conv if v != "torch")
        targets.append(("conv: pargraph's peak <= PyTorch's plus one layer's columns",
                        f"{worst / 2**20:.1f} MiB vs {conv['torch']['peak_bytes'] / 2**20:.1f}"
                        f" + {conv['torch']['columns_bytes'] / 2**20:.1f} MiB", worst <= allowed))
    return {"peaks": peaks, "adam": adam, "conv_peaks": conv, "targets": targets}


def cluster(repeats: int) -> dict:
    """Workload 6: workload 1 with DataParallel on a local cluster of 2 vs 1 worker processes
    (one thread each), compiled on one worker process with a thread per core (as ``dask
    worker`` starts by default: the cores the threaded step uses), and the same model on
    local threads in this process: steady-state loops of 7 steps, the variants interleaved
    round by round."""
    from distributed import Client, LocalCluster

    from pargraph.engine import execution

    cfg = models.WIDE
    rng = np.random.default_rng(0)
    towers = [models.init_layers(cfg["sizes"], rng) for _ in range(cfg["towers"])]
    x, y = models.data(cfg["sizes"][0], cfg["batch"], cfg["sizes"][-1])
    clusters, variants = [], {}
    try:
        cores = os.cpu_count() or 1
        for workers, threads, compiled in ((1, 1, False), (1, cores, True), (2, 1, False)):
            local = LocalCluster(n_workers=workers, threads_per_worker=threads,
                                 processes=True, dashboard_address=None)
            client = Client(local, set_as_default=False)
            clusters.append((local, client))
            with dask.config.set(scheduler=client):  # shards: one per worker thread
                model = pargraph.nn.DataParallel(models.pargraph_wide(towers))
            name = f"DataParallel compiled, 1 worker process ({threads} threads)" if compiled \
                else f"DataParallel, {workers} worker process(es)"
            variants[name] = _on(client, models.pargraph_step(model, x, y, compiled=compiled))
        variants["threads, no cluster"] = _on(
            "threads", models.pargraph_step(models.pargraph_wide(towers), x, y))
        # The noisiest comparison here (three processes on two cores): three rounds gave 1.05x
        # to 1.19x on the same code; nine give a steadier median.
        times = in_rounds(variants, rounds=max(3, repeats), steps=7)
        tasks = {}
        original = execution.execute
        for name, step in variants.items():
            runs: list[int] = []

            def counting(lowered, keys, get, runs=runs):
                runs.append(lowered.tasks)
                return original(lowered, keys, get)

            execution.execute = counting
            try:
                step()
            finally:
                execution.execute = original
            tasks[name] = sum(runs)
    finally:
        for local, client in clusters:
            client.close()
            local.close()
    one, compiled, two, threads = (t.median for t in times.values())
    rounds_one, rounds_compiled, rounds_two, rounds_threads = (t.round_medians
                                                               for t in times.values())
    compiled_label = f"compiled, 1 worker ({cores} threads)"
    per_worker = tasks["DataParallel, 2 worker process(es)"] / 2
    return {"times": times, "tasks": tasks, "targets": [
        ("2 workers >= 1.2x faster than 1",
         _spread(f"{one / two:.2f}x", per_round(rounds_one, rounds_two)), one / two >= 1.2),
        ("1 worker within 2x of the threaded step",
         _spread(f"{one / threads:.2f}x", per_round(rounds_one, rounds_threads)),
         one <= 2 * threads),
        (f"{compiled_label} within 1.5x of the threaded eager step",
         _spread(f"{compiled / threads:.2f}x", per_round(rounds_compiled, rounds_threads)),
         compiled <= 1.5 * threads),
        ("tasks per step <= 10 per worker", f"{per_worker:g} per worker on 2 workers",
         per_worker <= 10)]}


def loops(repeats: int) -> dict:
    """Steady-state loops: wide (8 towers 256-512-512-10, batch 512), branchy (32 towers
    64-128-128-10, batch 128) and small (32-64-64-4, batch 32), each framework and setting in
    its own process, no pause between timed steps; "numpy by hand" is the step's work written
    in plain numpy (one BLAS thread; two threads: half the towers each), the floor pargraph's
    overhead is measured against; numpy's and PyTorch's processes keep freed memory in glibc's
    heap, as pargraph's compiled steps do"""
    rounds = 3 if repeats < 7 else 5  # whole processes vary by up to ~30% on this machine
    rows, targets, notes = {}, [], []
    for workload in ("wide", "branchy", "small"):
        result = loop.compare(workload, loop.variants_of(workload), rounds=rounds, steps=7,
                              warmup=loop.WARMUP)
        rows[workload] = {name: (entry["median"], entry["tasks_per_step"])
                          for name, entry in result.items()}
        ms = {name: entry["median"] for name, entry in result.items()}
        rounds_of = {name: entry["round_medians"] for name, entry in result.items()}
        threads, threads_rounds = ms["pargraph threads"], rounds_of["pargraph threads"]
        torch_best = min((v for k, v in ms.items() if k.startswith("PyTorch")), default=None)
        torch_rounds = [min(r) for r in zip(*(v for k, v in rounds_of.items()
                                              if k.startswith("PyTorch")))]
        compiled = next((k for k in ms if k.startswith("torch.compile")), None)
        if compiled:
            eager = ms.get("PyTorch, 1 thread" if "1 thread" in compiled else "PyTorch, 2 threads")
            notes.append(f"{workload}: {compiled} takes {_ratio(ms[compiled], eager)} of "
                         f"PyTorch eager's step on the same threads; pargraph threads takes "
                         f"{_ratio(threads, ms[compiled])} of torch.compile's")
        by_hand = ms.get("numpy by hand, 1 thread")
        if by_hand:
            notes.append(f"{workload}: pargraph sync with one BLAS thread takes "
                         f"{ms['pargraph sync, 1 BLAS thread'] / by_hand:.2f}x the time of its "
                         "work written by hand in numpy"
                         + (f"; that numpy split over two threads runs "
                            f"{by_hand / ms['numpy by hand, 2 threads']:.2f}x faster than on one"
                            if "numpy by hand, 2 threads" in ms else ""))
        targets += _compiled_targets(workload, ms, rounds_of, torch_best, torch_rounds)
        if "JAX jit" in ms:
            notes.append(f"{workload}: pargraph compiled threads takes "
                         f"{_ratio(ms['pargraph compiled threads'], ms['JAX jit'])} of JAX "
                         f"jit's step; compile(model) takes "
                         f"{_ratio(ms['pargraph compile(model) threads'], threads)} of the "
                         "eager step")
        if workload == "branchy":
            targets.append(("branchy: threads <= 1.0x PyTorch's best step",
                            _spread(_ratio(threads, torch_best),
                                    per_round(threads_rounds, torch_rounds)),
                            torch_best and threads <= torch_best))
            speedup = ms["pargraph sync, 1 BLAS thread"] / threads
            targets.append(("branchy: threads >= 1.5x pargraph sync with one BLAS thread",
                            _spread(f"{speedup:.2f}x",
                                    per_round(rounds_of["pargraph sync, 1 BLAS thread"],
                                              threads_rounds)),
                            speedup >= 1.5))
        if workload == "wide":
            two = ms.get("PyTorch, 2 threads")
            targets.append(("wide: threads <= 1.0x PyTorch 2 threads",
                            _spread(_ratio(threads, two),
                                    per_round(threads_rounds,
                                              rounds_of.get("PyTorch, 2 threads", []))),
                            two and threads <= two))
            targets.append(("wide: threads <= 1.0x pargraph sync (BLAS threads)",
                            _spread(_ratio(threads, ms["pargraph sync"]),
                                    per_round(threads_rounds, rounds_of["pargraph sync"])),
                            threads <= ms["pargraph sync"]))
        if workload == "small":
            one = ms.get("PyTorch, 1 thread")
            targets.append(("small: <= 1.5x PyTorch 1 thread",
                            _spread(_ratio(threads, one),
                                    per_round(threads_rounds,
                                              rounds_of.get("PyTorch, 1 thread", []))),
                            one and threads <= 1.5 * one))
    return {"rows": rows, "targets": targets, "notes": notes}


def _compiled_targets(workload: str, ms: dict, rounds_of: dict, torch_best: float | None,
                      torch_rounds: list) -> list:
    """#30's targets for the compiled step of ``workload``."""
    compiled, rounds = ms["pargraph compiled threads"], rounds_of["pargraph compiled threads"]
    targets = []
    if workload == "branchy":
        targets.append(("branchy: compiled threads <= 0.8x PyTorch's best eager step",
                        _spread(_ratio(compiled, torch_best), per_round(rounds, torch_rounds)),
                        bool(torch_best) and compiled <= 0.8 * torch_best))
        ours = ms["pargraph compiled, 1 thread"] / compiled
        by_hand = ms["numpy by hand, 1 thread"] / ms["numpy by hand, 2 threads"]
        targets.append(("branchy: compiled's speed-up from threads >= 0.8x numpy by hand's",
                        f"{ours:.2f}x vs {by_hand:.2f}x ({ours / by_hand:.2f})",
                        ours >= 0.8 * by_hand))
        jax = ms.get("JAX jit")
        if jax:
            targets.append(("branchy: compiled within 1.5x of JAX jit (a goal)",
                            _ratio(compiled, jax), compiled <= 1.5 * jax))
    limit, reference = {"small": (0.8, "PyTorch, 1 thread"),
                        "wide": (0.9, "PyTorch, 2 threads")}.get(workload, (None, None))
    if limit and reference in ms:
        targets.append((f"{workload}: compiled <= {limit}x {reference}",
                        _spread(_ratio(compiled, ms[reference]),
                                per_round(rounds, rounds_of[reference])),
                        compiled <= limit * ms[reference]))
    return targets


def replay(repeats: int) -> dict:
    """Workload 8: a compiled branchy step in this process (sync, one BLAS thread): what its
    capture costs against an eager step, and how much of a replay is pargraph's own Python
    (the replay's time less the time inside the ops' numpy forwards)"""
    from threadpoolctl import threadpool_limits

    from pargraph import ops

    cfg = loop.WORKLOADS["branchy"]
    with dask.config.set(scheduler="sync"), threadpool_limits(1, "blas"):
        eager = loop._pargraph_step(cfg)
        for _ in range(loop.WARMUP):
            eager()
        eager_times = []
        for _ in range(5 * repeats):
            start = time.perf_counter()
            eager()
            eager_times.append(time.perf_counter() - start)
        captures = []
        for _ in range(3):  # each a new model and compiled step: its first call captures
            step = loop._pargraph_step(cfg, compiled="step")
            start = time.perf_counter()
            step()
            captures.append(time.perf_counter() - start)
        capture = float(np.median(captures))
        inside = [0.0]  # seconds inside the forwards in this step
        originals = {name: prim.forward for name, prim in ops.REGISTRY.items()
                     if prim.forward is not None}

        def timed(forward):
            def run(*args, **kwargs):
                begin = time.perf_counter()
                try:
                    return forward(*args, **kwargs)
                finally:
                    inside[0] += time.perf_counter() - begin
            return run

        # Two compiled steps of the same model, one whose tasks call timed forwards (their
        # straight-line code binds the forwards when it is made, at the second call), in
        # blocks in turn: a timed step says how long the forwards take, an untimed one how
        # long the whole step takes, and own Python is the difference of their medians.
        # (Subtracting a timer's cost measured apart undercounts it: in a real step the timer
        # runs with the ops' data in the caches, several times slower than in a tight loop.)
        try:
            for name, forward in originals.items():
                ops.REGISTRY[name].forward = timed(forward)
            timed_step = loop._pargraph_step(cfg, compiled="step")
            for _ in range(loop.WARMUP):
                timed_step()
        finally:
            for name, forward in originals.items():
                ops.REGISTRY[name].forward = forward
        plain_step = loop._pargraph_step(cfg, compiled="step")
        for _ in range(loop.WARMUP):
            plain_step()
        totals, insides = [], []
        for _ in range(4 * repeats):
            for _ in range(5):
                inside[0] = 0.0
                timed_step()
                insides.append(inside[0])
            for _ in range(5):
                start = time.perf_counter()
                plain_step()
                totals.append(time.perf_counter() - start)
    eager_step = float(np.median(eager_times))
    replayed, forwards = float(np.median(totals)), float(np.median(insides))
    own_python = replayed - forwards
    return {"notes": [f"capture (the first compiled call, median of 3): {capture * 1e3:.1f} ms, "
                      f"{capture / eager_step:.2f}x an eager step ({eager_step * 1e3:.2f} ms)",
                      f"a replayed step's own Python: {own_python * 1e3:.2f} ms (the step "
                      f"{replayed * 1e3:.2f} ms, its ops' forwards {forwards * 1e3:.2f} ms, "
                      f"medians of {len(totals)} steps each, interleaved)"],
            "targets": [("capture within 3x of an eager step", f"{capture / eager_step:.2f}x",
                         capture <= 3 * eager_step),
                        ("a replayed branchy step's own Python <= 1 ms",
                         f"{own_python * 1e3:.2f} ms", own_python <= 1e-3)]}


def layers(repeats: int) -> dict:
    """Convolution, attention and recurrence: one conv layer, demos/cnn.py's convnet,
    demos/attention.py's transformer, a 2-layer bidirectional LSTM and PyTorch's char-RNN
    tutorial (benchmarks/layer_models.py), the same program on pargraph and PyTorch, each in
    its own process; one thread means pargraph on the sync scheduler with one BLAS thread
    against PyTorch with ``set_num_threads(1)``; PyTorch keeps freed memory in glibc's heap,
    as pargraph's compiled steps do (``benchmarks.loop.KEPT_HEAP``); the targets are #56's"""
    rounds = 2 if repeats < 7 else 3
    rows, costs, targets = {}, [], []
    for workload in ("conv", "cnn", "attention", "lstm", "charrnn"):
        compiled = [] if workload == "charrnn" else \
            ["pargraph compiled threads", "pargraph compiled, 1 thread"]
        # torch.compile(model), where it runs: the fastest a PyTorch user could pick.
        theirs = [] if workload == "charrnn" or not loop.available(loop.COMPILED_DEFAULT) \
            else [loop.COMPILED_DEFAULT]
        result = loop.compare(workload, ["pargraph threads", "pargraph sync",
                                         "pargraph sync, 1 BLAS thread"] + compiled +
                              loop.TORCH + theirs, rounds=rounds, steps=7, warmup=loop.WARMUP)
        rows[workload] = {name: (entry["median"], entry["tasks_per_step"])
                          for name, entry in result.items()}
        ms = {name: entry["median"] for name, entry in result.items()}
        rounds_of = {name: entry["round_medians"] for name, entry in result.items()}
        best_name = min((k for k in ms if k.startswith("PyTorch")), key=ms.get, default=None)
        torch_best = ms.get(best_name)
        if workload == "charrnn":
            eager = min(ms["pargraph threads"], ms["pargraph sync"])
            per_op = char_rnn_cost_per_op()
            costs.append(f"charrnn: {per_op[0]} ops a step, {per_op[1] * 1e6:.1f} us each "
                         f"(recording, backward and running, in this process, sync)")
            targets.append(("charrnn: pargraph's best eager step <= 2x PyTorch's best",
                            _ratio(eager, torch_best), eager <= 2 * torch_best))
            continue
        costs.append(f"{workload}: pargraph threads {_ratio(ms['pargraph threads'], torch_best)}"
                     f" of PyTorch's best step, compiled "
                     f"{_ratio(ms['pargraph compiled threads'], torch_best)}"
                     + (f"; torch.compile(model) {_ratio(ms[theirs[0]], torch_best)}"
                        if theirs and theirs[0] in ms else ""))
        targets += _layer_targets(workload, ms, rounds_of, best_name)
    return {"rows": rows, "notes": costs, "targets": targets}


#: #56's targets per layer workload: (which pargraph variants, against PyTorch's one thread or
#: best step, the largest ratio).
LAYER_TARGETS = {
    "conv": [("one thread", "one", 1.25), ("best", "best", 1.5)],
    "lstm": [("compiled, 1 thread", "one", 1.2), ("compiled threads", "best", 1.5)],
    "cnn": [("compiled threads", "best", 1.6)],
    "attention": [("compiled threads", "best", 1.0)],
}


def _layer_targets(workload: str, ms: dict, rounds_of: dict, best_name: str | None) -> list:
    """The targets of one layer workload, each with its spread over the rounds."""
    one_thread = ["pargraph sync, 1 BLAS thread", "pargraph compiled, 1 thread"]
    ours_of = {"one thread": one_thread, "best": [k for k in ms if k.startswith("pargraph")],
               "compiled, 1 thread": ["pargraph compiled, 1 thread"],
               "compiled threads": ["pargraph compiled threads"]}
    found = []
    for ours, against, limit in LAYER_TARGETS.get(workload, []):
        mine = min(ours_of[ours], key=lambda k: ms.get(k, float("inf")))
        theirs = "PyTorch, 1 thread" if against == "one" else best_name
        if mine not in ms or theirs not in ms:
            continue
        title = (f"{workload}: pargraph {ours} ({mine}) <= {limit}x PyTorch's "
                 f"{'one thread' if against == 'one' else 'best step'} ({theirs})")
        found.append((title, _spread(_ratio(ms[mine], ms[theirs]),
                                     per_round(rounds_of[mine], rounds_of[theirs])),
                      ms[mine] <= limit * ms[theirs]))
    return found


def char_rnn_cost_per_op() -> tuple[int, float]:
    """The char-RNN step's nodes and seconds per node, all of a step's Python included."""
    from benchmarks.layer_models import step_of
    from pargraph.graph import uid_mark

    with dask.config.set(scheduler="sync"):
        step = step_of(pargraph, "charrnn")
        for _ in range(loop.WARMUP):
            step()
        first, start = uid_mark(), time.perf_counter()
        for _ in range(20):
            step()
        seconds, nodes = time.perf_counter() - start, (uid_mark() - first) / 20
    return round(nodes), seconds / 20 / nodes


def _spread(value: str, spread: str) -> str:
    """A target's value with its spread over the rounds, when there is one."""
    return f"{value}; {spread}" if spread else value


def _ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}x ({a * 1000:.2f} vs {b * 1000:.2f} ms)" if b else "no reference"


#: Graph sizes of the scaling workload: nodes of a chain, branches of a fan-in.
DEEP = (12_500, 25_000, 50_000, 100_000)
WIDE = (2_500, 5_000, 10_000, 20_000)


def deep_graph(nodes: int) -> float:
    """Record a chain of ``nodes`` elementwise ops, realize it, backpropagate: seconds."""
    start = time.perf_counter()
    x = pargraph.tensor(np.linspace(0.1, 1.0, 4), requires_grad=True)
    y = x
    for k in range(nodes):
        y = y * 1.0001 if k % 2 else y + 0.0001
    total = y.sum()
    total.item()
    total.backward()
    x.grad.numpy()
    return time.perf_counter() - start


def wide_graph(branches: int) -> float:
    """``stack`` of ``branches`` results computed separately (two ops each), summed, realized
    and backpropagated: seconds."""
    start = time.perf_counter()
    x = pargraph.tensor(np.linspace(0.1, 1.0, 4), requires_grad=True)
    total = pargraph.stack([(x * (k % 7 + 1)).sum() for k in range(branches)]).sum()
    total.item()
    total.backward()
    x.grad.numpy()
    return time.perf_counter() - start


def scaling(repeats: int) -> dict:
    """Workload 7: how recording, lowering, running and backpropagating grow with the graph:
    a chain of up to 100,000 nodes, and a fan-in of up to 20,000 branches (``stack``), each
    realized and backpropagated once per size (best of a few, each with empty structure
    caches: the first time a structure is seen), with the exponent of a power-law fit of time
    against size (1.0: linear)"""
    from pargraph.autograd.backward_graph import BackwardTemplate
    from pargraph.engine.lowering import PlanCache

    def cold(graph, size: int) -> float:
        PlanCache.clear()
        BackwardTemplate.cache.clear()
        return graph(size)

    rows, targets = {}, []
    for name, sizes, graph, unit in (("deep", DEEP, deep_graph, "nodes"),
                                     ("wide", WIDE, wide_graph, "branches")):
        seconds = [min(cold(graph, size) for _ in range(max(1, min(repeats, 3))))
                   for size in sizes]
        exponent = float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])
        rows[name] = {"sizes": sizes, "seconds": seconds, "exponent": exponent, "unit": unit}
        targets.append((f"{name}: {sizes[-1]:,} {unit} realized and backpropagated < 10 s",
                        f"{seconds[-1]:.2f} s", seconds[-1] < 10))
        targets.append((f"{name}: near-linear (fit exponent < 1.2)", f"{exponent:.2f}",
                        exponent < 1.2))
    return {"scaling": rows, "targets": targets}


def fused_kernels(repeats: int) -> dict:
    """Fused kernels: numba's LSTM cell and direction (benchmarks/kernels.py), their first run
    in a fresh environment (compiling), in a later process (loading numba's disk cache), and
    one cell's and one direction's forward (with the hidden products) and gradient against
    numpy's formulas, one BLAS thread, a fresh process each"""
    from benchmarks import kernels

    found = kernels.measure()
    if found["compiling"]["kernels"] != "numba":
        return {"skipped": "numba is not installed (pip install 'pargraph[numba]')"}
    first, cached, plain = found["compiling"], found["cached"], found["numpy"]
    notes = [f"first run in a fresh environment: {first['first_seconds']:.2f} s (numba "
             f"compiles the four kernels and writes them to its disk cache)",
             f"first run in a later process: {cached['first_seconds']:.2f} s (loading numba "
             f"and the cached kernels); numpy's formulas: {plain['first_seconds']:.3f} s"]
    for part in ("forward", "gradient"):
        ours, theirs = cached[f"{part}_us"], plain[f"{part}_us"]
        notes.append(f"LSTM cell {part} ({kernels.BATCH} x {kernels.HIDDEN}): {ours:.1f} us on "
                     f"numba's kernel, {theirs:.1f} us on numpy's formula "
                     f"({theirs / ours:.2f}x faster)")
    for part in ("forward", "gradient"):
        ours, theirs = cached[f"sequence_{part}_us"], plain[f"sequence_{part}_us"]
        notes.append(f"LSTM direction {part} ({kernels.STEPS} steps of {kernels.BATCH} x "
                     f"{kernels.HIDDEN}): {ours / 1e3:.2f} ms on numba's kernel, "
                     f"{theirs / 1e3:.2f} ms on numpy's steps ({theirs / ours:.2f}x faster)")
    return {"notes": notes}


WORKLOADS = {"loops": loops, "replay": replay, "layers": layers, "kernels": fused_kernels,
             "overhead": overhead, "building": building, "memory": memory, "cluster": cluster,
             "scaling": scaling}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    torch = torch_or_none()
    versions = (f"Python {platform.python_version()}, numpy {np.__version__}, dask "
                f"{dask.__version__}, pargraph {pargraph.version.release}"
                + (f", torch {torch.__version__}" if torch else ", torch not installed"))
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()}; {versions}"


def blas() -> str:
    """Which BLAS numpy runs, with which kernels, and what the run changed to get them."""
    from threadpoolctl import threadpool_info

    from pargraph.ops.gemm import blas as products

    found = [f"{lib['internal_api']} {lib['version']} running its {lib['architecture']} "
             "kernels" if lib.get("architecture") else f"{lib['internal_api']} {lib['version']}"
             for lib in threadpool_info()
             if lib.get("user_api") == "blas" and "numpy" in lib["filepath"]]
    text = "numpy's BLAS: " + (", ".join(found) or "none found")
    products.functions()
    if products.name == "mkl":
        mkl = [lib["version"] for lib in threadpool_info() if lib.get("internal_api") == "mkl"]
        text += (f"; pargraph's products through MKL {mkl[0] if mkl else ''} "
                 "(sequential, pargraph.ops.gemm)")
    if os.environ.get(UNSET):
        text += (f" (the machine sets {os.environ[UNSET]} for older OpenBLAS builds; this run "
                 "unset them in every process, as a stock numpy runs; `--machine-blas` keeps "
                 "them)")
    kept = [f"{name}={os.environ[name]}" for name in MACHINE_BLAS if name in os.environ]
    if kept:
        text += f" (kept: {', '.join(kept)})"
    return text


def stock_environment(environ: dict) -> dict | None:
    """``environ`` without the machine's OpenBLAS variables, saying which it had in
    ``UNSET``; None when it has none."""
    unset = [f"{name}={environ[name]}" for name in MACHINE_BLAS if name in environ]
    if not unset:
        return None
    env = {k: v for k, v in environ.items() if k not in MACHINE_BLAS}
    env[UNSET] = ", ".join(unset)
    return env


def _without_machine_blas(argv: list[str]) -> None:
    """Run ``python -m benchmarks`` again with the machine's OpenBLAS variables unset (they
    take effect when numpy loads, so only a new process sees their absence)."""
    env = stock_environment(dict(os.environ))
    if env is not None:
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "benchmarks", *argv], env)


def report(results: dict, repeats: int, elapsed: float) -> str:
    lines = [
        "# Benchmark results", "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: {machine()}",
        f"- {blas()}",
        f"- command: `python -m benchmarks{' --quick' if repeats < 7 else ''}` "
        f"({repeats} timed repeats per variant, interleaved; {elapsed:.0f} s)",
        "- times: median (min-max) per step or per node; every ratio is taken within this run",
        "",
    ]
    for name, result in results.items():
        lines += [f"## {name}: {WORKLOADS[name].__doc__.split(':', 1)[1].strip()}", ""]
        if "skipped" in result:
            lines += [f"Not run: {result['skipped']}.", ""]
            continue
        for workload, rows in result.get("rows", {}).items():
            lines += [f"### {workload}", "", "| variant | median step | tasks per step |",
                      "|---|---|---|"]
            lines += [f"| {name} | {median * 1000:.2f} ms | {tasks:.0f} |"
                      for name, (median, tasks) in rows.items()]
            lines.append("")
        if "times" in result:
            per = result.get("per")
            lines += ["| variant | time |", "|---|---|"]
            for variant, timing in result["times"].items():
                value = timing.us(per) + " per node/op" if per else timing.ms()
                lines.append(f"| {variant} | {value} |")
            lines.append("")
        if "tasks" in result:
            lines += ["Tasks per step: " + ", ".join(f"{k} {v}"
                                                    for k, v in result["tasks"].items()), ""]
        for shape, row in result.get("scaling", {}).items():
            lines += [f"### {shape}", "", f"| {row['unit']} | seconds | nodes or branches per "
                      "second |", "|---|---|---|"]
            lines += [f"| {size:,} | {seconds:.2f} | {size / seconds:,.0f} |"
                      for size, seconds in zip(row["sizes"], row["seconds"])]
            lines += ["", f"Power-law fit: time ~ size^{row['exponent']:.2f}", ""]
        if "peaks" in result:
            lines += ["| framework | peak RSS during one step |", "|---|---|"]
            lines += [f"| {k} | {v / 2**20:.1f} MiB |" for k, v in result["peaks"].items()]
            lines.append("")
        if result.get("adam"):
            lines += ["Adam on one 4096 x 4096 layer (64 MiB of weight), batch 64: peak RSS of "
                      "a steady step beyond what training holds, and the step's time",
                      "(`compiled`: replays write the weight and moments into their own arrays; "
                      "`new-arrays`: `pargraph.in-place-bytes` None).", "",
                      "| variant | peak above held | median step |", "|---|---|---|"]
            lines += [f"| {k} | {peak / 2**20:.0f} MiB | {seconds * 1e3:.1f} ms |"
                      for k, (peak, seconds) in result["adam"].items()]
            lines.append("")
        if result.get("conv_peaks"):
            lines += ["The conv workload's first steps from a fresh model: peak RSS beyond the "
                      "memory before them.", "", "| variant | peak above the start |",
                      "|---|---|"]
            lines += [f"| {k} | {v['peak_bytes'] / 2**20:.1f} MiB |"
                      for k, v in result["conv_peaks"].items()]
            lines.append("")
        if "pargraph_speedup" in result:
            lines += [f"pargraph's own speedup, sync (1 core) -> threads: "
                      f"{result['pargraph_speedup']:.2f}x", ""]
        if "first_losses" in result:
            losses = ", ".join(f"{v:.6f}" for v in result["first_losses"].values())
            lines += [f"First-step losses of the variants (same model and data): {losses}", ""]
        lines += [f"- cost: {note}" for note in result.get("notes", [])]
        for target, value, met in result.get("targets", []):
            lines.append(f"- target: {target}: {value} — **{'met' if met else 'NOT met'}**")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 9")
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), default=None)
    parser.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    parser.add_argument("--machine-blas", action="store_true",
                        help=f"keep the machine's {' and '.join(MACHINE_BLAS)}")
    args = parser.parse_args(argv)
    if not args.machine_blas:
        _without_machine_blas(sys.argv[1:] if argv is None else argv)
    repeats = 3 if args.quick else 9
    start = time.perf_counter()
    results = {}
    for name in args.only or WORKLOADS:
        print(f"running {name} ...", flush=True)
        results[name] = WORKLOADS[name](repeats)
    text = report(results, repeats, time.perf_counter() - start)
    print("\n" + text)
    if not args.no_write:
        with open(os.path.join(HERE, "RESULTS.md"), "w") as file:
            file.write(text)
        from benchmarks import readme

        readme.main([])  # the README's comparison table, from what was just written


if __name__ == "__main__":
    main()
