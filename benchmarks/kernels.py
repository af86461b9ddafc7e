"""The fused kernels' costs: numba's first run (compiling) and later processes' (loading the
kernels cached on disk), and one LSTM cell's and one whole direction's forward and gradient on
numba's kernels against numpy's formulas, each in a fresh process.

    python -m benchmarks.kernels              # prints the figures as JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

#: One cell of benchmarks/layer_models.py's LSTM: batch 32, hidden 128; a direction of 64 steps.
BATCH, HIDDEN, STEPS = 32, 128, 64


def _first_call(calls: int = 2000) -> dict:
    """In this process: seconds of the first float32 LSTM cell, direction and their gradients
    (numba compiles or loads them then), and microseconds per call after (``calls`` of a
    cell, a fortieth as many of a direction)."""
    import numpy as np

    start = time.perf_counter()
    from pargraph import ops

    rng = np.random.default_rng(0)
    gx = rng.standard_normal((BATCH, 4 * HIDDEN)).astype(np.float32)
    h, c = (rng.standard_normal((BATCH, HIDDEN)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((4 * HIDDEN, HIDDEN)).astype(np.float32)
    b = rng.standard_normal(4 * HIDDEN).astype(np.float32)
    grad = rng.standard_normal((6, BATCH, HIDDEN)).astype(np.float32)
    gates = rng.standard_normal((STEPS, BATCH, 4 * HIDDEN)).astype(np.float32)
    d_h = rng.standard_normal((STEPS, BATCH, HIDDEN)).astype(np.float32)
    imported = time.perf_counter()
    out = ops.lstm_cell.forward(gx, h, c, w, b)
    ops.lstm_cell_grads.forward(grad, out, c)
    rows = ops.lstm_sequence.forward(gates, h, c, w, b, reverse=False)
    ops.lstm_sequence_grads.forward(d_h, rows, h, c, w, reverse=False)
    first = time.perf_counter() - imported

    def per_call(function, calls=calls) -> float:
        function()
        started = time.perf_counter()
        for _ in range(calls):
            function()
        return (time.perf_counter() - started) / calls * 1e6

    from pargraph.ops.kernels import kernels

    return {"kernels": kernels.name, "import_seconds": imported - start, "first_seconds": first,
            "forward_us": per_call(lambda: ops.lstm_cell.forward(gx, h, c, w, b)),
            "gradient_us": per_call(lambda: ops.lstm_cell_grads.forward(grad, out, c)),
            "sequence_forward_us": per_call(
                lambda: ops.lstm_sequence.forward(gates, h, c, w, b, reverse=False),
                max(calls // 40, 1)),
            "sequence_gradient_us": per_call(
                lambda: ops.lstm_sequence_grads.forward(d_h, rows, h, c, w, reverse=False),
                max(calls // 40, 1))}


def _fresh(cache: str, kernels: str, calls: int) -> dict:
    environ = dict(os.environ, NUMBA_CACHE_DIR=cache, DASK_PARGRAPH__KERNELS=kernels)
    done = subprocess.run([sys.executable, "-m", "benchmarks.kernels", "--first-call",
                           str(calls)],
                          capture_output=True, text=True, env=environ, check=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return json.loads(done.stdout.splitlines()[-1])


def measure(calls: int = 2000) -> dict:
    """``{"compiling": ..., "cached": ..., "numpy": ...}``: one fresh process each, the first
    with an empty numba cache, the second with the cache the first wrote."""
    with tempfile.TemporaryDirectory() as cache:
        return {"compiling": _fresh(cache, "numba", calls),
                "cached": _fresh(cache, "numba", calls), "numpy": _fresh(cache, "numpy", calls)}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--first-call"]:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, "blas"):
            print(json.dumps(_first_call(int(sys.argv[2]) if len(sys.argv) > 2 else 2000)))
    else:
        print(json.dumps(measure(), indent=1))
