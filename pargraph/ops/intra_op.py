"""One big op's samples split across the cores a narrow run leaves idle (intra-op threads).

A run whose graph is narrower than the machine keeps all of BLAS's threads
(``lowering.blas_threads_of``), so its products use every core but the copies, paddings and
layout changes between them run on one. An op that knows its samples are independent (a
convolution and its two gradients) asks :meth:`IntraOp.parts` how to split its batch and runs
the parts with :meth:`IntraOp.run`: the calling thread takes the first, a small pool the rest,
and inside a part ``ops.gemm`` calls MKL's one-thread products, so the parts never fight
BLAS's own threads.

The split follows numpy's BLAS thread count, which the run sets from its graph alone, and the
op's work, from its shapes: a step's bits never depend on timing. Parts run only where MKL's
sequential products are loaded (``pip install 'pargraph[mkl]'``): OpenBLAS called from two
threads at once would spin its own threads against them. The dask setting
``pargraph.intra-op`` (default True) turns the split off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pargraph.context import context
from pargraph.ops.gemm import blas

#: An op splits its samples only where one thread would take at least this long on it: a
#: part handed to the pool costs tens of microseconds.
SPLIT_SECONDS = 1e-3


class IntraOp:
    """The pool that runs the parts of split ops, started at the first split."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        #: How many ops were split (for tests and profiles).
        self.splits = 0

    def parts(self, samples: int, seconds: float) -> list[tuple[int, int]]:
        """``[(start, stop), ...]`` ranges of ``samples`` to run side by side: one per BLAS
        thread of this run when the op takes ``seconds`` of :data:`SPLIT_SECONDS` or more
        on one thread, else the whole range.

        Examples
        --------
        >>> IntraOp().parts(1, 1.0), IntraOp().parts(0, 1.0)
        ([(0, 1)], [(0, 0)])
        """
        threads = self._threads() if seconds >= SPLIT_SECONDS and samples > 1 else 1
        threads = max(1, min(threads, samples))  # an empty batch: one empty part
        bounds = [samples * k // threads for k in range(threads + 1)]
        return list(zip(bounds[:-1], bounds[1:]))

    def run(self, part: Callable[[int, int], Any], ranges: list[tuple[int, int]]) -> list:
        """``[part(start, stop) for each range]``, the first on this thread and the others on
        the pool, all finished before it returns; a part's exception is raised here."""
        if len(ranges) == 1:
            return [part(*ranges[0])]
        pool = self._started()
        self.splits += 1
        futures = [pool.submit(_one_thread, part, *bounds) for bounds in ranges[1:]]
        try:
            first = _one_thread(part, *ranges[0])
        finally:
            rest = [future.result() for future in futures]
        return [first, *rest]

    def _threads(self) -> int:
        import dask

        if not dask.config.get("pargraph.intra-op", True) or getattr(blas.local, "one", False):
            return 1
        blas.functions()
        if blas.name != "mkl" or blas.numpys_threads is None:
            return 1
        return max(1, min(blas.numpys_threads(), os.cpu_count() or 1))

    def _started(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max(1, (os.cpu_count() or 2) - 1),
                                                thread_name_prefix="pargraph-intra-op")
            return self._pool


def _one_thread(part: Callable[[int, int], Any], start: int, stop: int) -> Any:
    """``part(start, stop)`` with this thread's products on one BLAS thread."""
    with blas.one_thread():
        return part(start, stop)


#: The process's intra-op pool.
intra_op = context.register("intra_op", IntraOp())
