"""Matrix products through BLAS's ``cblas_?gemm``, writing or adding into an existing array.

``numpy.matmul`` always writes a fresh result; a convolution as shifted products needs BLAS's
``C = A @ B + C``. scipy's wrappers have it, but they hold the GIL and call a second OpenBLAS
whose idle threads spin against numpy's. This module calls ``cblas_?gemm`` through ctypes,
which releases the GIL, of two libraries:

- the OpenBLAS numpy itself loaded (found through threadpoolctl);
- Intel's MKL, where its wheel is installed (``pip install pargraph[mkl]``), with its
  sequential kernels. Its single-thread products are faster than OpenBLAS's at the shapes
  convolutions and recurrent cells make, and no faster at square ones of a few million
  multiply-adds (measured in docs/performance.md): :func:`gemm` (the
  convolutions' accumulating products) runs every product on MKL, :func:`product` only those
  of the shapes where it pays (:data:`LARGE`). Either runs a product on numpy's OpenBLAS
  when numpy's BLAS has more than one thread and the product is one OpenBLAS splits across
  them (more than :data:`ONE_THREAD`): a product's library then follows BLAS's thread count,
  which ``lowering.blas_threads_of`` sets from the graph alone, so a step's bits never
  depend on timing.

The dask setting ``pargraph.blas`` (``"auto"``, ``"mkl"`` or ``"numpy"``) picks whether MKL
is used; it is read once per process (``blas.reset()`` reads it again). Where no library can
be called, the same products run through numpy.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import itertools
import re
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from pargraph.context import context

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
#: MKL's ``MKL_Set_Threading_Layer`` value for its sequential kernels.
_MKL_SEQUENTIAL = 1
#: OpenBLAS runs a matrix product on one thread, whatever its count, up to this m·n·k
#: (interface/gemm.c: 65536 times GEMM_MULTITHREAD_THRESHOLD, 4), and a product with a
#: single row or column (a matrix-vector product or a dot) up to this many elements.
ONE_THREAD, ONE_THREAD_VECTOR = 262_144, 8_192
#: Where :func:`product` runs MKL: products of at least :data:`LARGE` multiply-adds, and
#: those of at least :data:`SMALL` with at most :data:`THIN` rows or columns (a recurrent
#: cell's ``h @ W.T``): below them the ctypes call costs more than MKL gains, and at square
#: shapes of a few million multiply-adds OpenBLAS is as fast (docs/performance.md).
SMALL, LARGE, THIN = 1 << 20, 1 << 23, 32


class Blas:
    """The libraries products run through, looked up on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._functions: dict | None = None
        self.numpys: dict = {}
        #: ``"mkl"`` where MKL runs the products one thread runs, else ``"numpy"``.
        self.name = "numpy"
        #: numpy's OpenBLAS's ``openblas_get_num_threads``, or None.
        self.numpys_threads: Any = None
        #: How many times libraries were chosen: threadpoolctl's users scan the process's
        #: libraries again when it changes (MKL loads without an import).
        self.loads = 0
        #: Per thread: ``one`` is True inside a part of a split op (``ops.intra_op``), whose
        #: products then stay on one thread.
        self.local = threading.local()

    def functions(self) -> dict:
        """``{dtype: cblas function}`` for the products one thread runs; empty where no
        known BLAS can be called."""
        if self._functions is None:
            with self._lock:
                if self._functions is None:
                    self.numpys, self.numpys_threads = _lookup()
                    self.name, self._functions = _choose(self.numpys)
                    self.loads += 1
        return self._functions

    @contextlib.contextmanager
    def one_thread(self) -> Iterator[None]:
        """Within it, this thread's products (:func:`gemm`, :func:`product`) run on MKL's
        one-thread kernels where MKL is loaded, whatever numpy's BLAS thread count: for a
        split op's parts (``ops.intra_op``) and for a chain of small products whose branches
        run side by side (a recurrence per direction)."""
        before = getattr(self.local, "one", False)
        self.local.one = True
        try:
            yield
        finally:
            self.local.one = before

    def reset(self) -> None:
        """Read ``pargraph.blas`` again at the next product."""
        with self._lock:
            self._functions, self.name = None, "numpy"


def _choose(numpys: dict) -> tuple[str, dict]:
    import dask

    wanted = dask.config.get("pargraph.blas", "auto")
    if wanted not in ("auto", "mkl", "numpy"):
        raise ValueError(f"pargraph.blas is {wanted!r}; expected 'auto', 'mkl' or 'numpy'")
    if wanted != "numpy":
        found = _mkl()
        if found:
            return "mkl", found
        if wanted == "mkl":
            raise RuntimeError("pargraph.blas is 'mkl' but MKL's library cannot be loaded: "
                               "pip install 'pargraph[mkl]'")
    return "numpy", numpys


def _mkl() -> dict:
    """MKL's products, sequential, from the ``mkl`` wheel's ``libmkl_rt``; empty if absent."""
    try:
        files = importlib.metadata.files("mkl") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    path = next((f.locate() for f in files if re.fullmatch(r"libmkl_rt\.so\.\d+", f.name)),
                None)
    if path is None:
        return {}
    try:
        library = ctypes.CDLL(str(path))
    except OSError:
        return {}
    library.MKL_Set_Threading_Layer(_MKL_SEQUENTIAL)  # before any other MKL call
    return {np.dtype(dtype): _declare(getattr(library, f"cblas_{letter}gemm"), scalar,
                                      ctypes.c_int)  # libmkl_rt's default: 32-bit ints
            for dtype, scalar, letter in ((np.float32, ctypes.c_float, "s"),
                                          (np.float64, ctypes.c_double, "d"))}


def _declare(function: Any, scalar: type, index: type) -> Any:
    function.restype = None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, index, index, index,
                         scalar, ctypes.c_void_p, index, ctypes.c_void_p, index, scalar,
                         ctypes.c_void_p, index]
    return function


def _lookup() -> tuple[dict, Any]:
    """numpy's OpenBLAS's products and its thread count's getter."""
    from threadpoolctl import ThreadpoolController

    libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    if len(libraries) > 1:  # several loaded (numpy's, scipy's, MKL): numpy's own
        libraries = [lib for lib in libraries if "numpy" in lib.filepath]
    if len(libraries) != 1 or libraries[0].internal_api not in ("openblas", "mkl"):
        return {}, None
    dynlib, found, threads = libraries[0].dynlib, {}, None
    for dtype, scalar, letter in ((np.float32, ctypes.c_float, "s"),
                                  (np.float64, ctypes.c_double, "d")):
        for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
            function = getattr(dynlib, f"{prefix}cblas_{letter}gemm{suffix}", None)
            if function is not None:
                break
        else:
            continue
        # An OpenBLAS built for 64-bit indices marks its symbols with "64".
        found[np.dtype(dtype)] = _declare(
            function, scalar, ctypes.c_int64 if "64" in suffix else ctypes.c_int)
        threads = getattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}", None)
    if threads is not None:
        threads.restype, threads.argtypes = ctypes.c_int, []
    return found, threads


#: The BLAS of this process's products, chosen once.
blas = context.register("blas", Blas())


def _operand(a: np.ndarray) -> tuple[int, int] | None:
    """BLAS's (transpose flag, leading dimension) for a 2-d array, or None when neither of
    its dimensions is contiguous."""
    step = a.itemsize
    if a.strides[1] == step and a.strides[0] % step == 0 and a.strides[0] >= step * a.shape[1]:
        return _NO_TRANS, max(a.strides[0] // step, 1)
    if a.strides[0] == step and a.strides[1] % step == 0 and a.strides[1] >= step * a.shape[0]:
        return _TRANS, max(a.strides[1] // step, 1)
    return None


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, accumulate: bool) -> None:
    """``c = a @ b``, or ``c += a @ b`` with ``accumulate``, in place: 2-d arrays of one
    dtype, each with one contiguous dimension, ``c`` row-major.

    Examples
    --------
    >>> a = np.ones((2, 3), np.float32); c = np.ones((2, 2), np.float32)
    >>> gemm(a, a.T, c, accumulate=True); c.tolist()
    [[4.0, 4.0], [4.0, 4.0]]
    """
    function = blas.functions().get(c.dtype)
    first, second = _operand(a), _operand(b)
    if (function is None or first is None or second is None or a.dtype != c.dtype
            or b.dtype != c.dtype or c.strides[1] != c.itemsize
            or c.strides[0] < c.itemsize * c.shape[1] or 0 in a.shape + b.shape):
        _fallback(a, b, c, accumulate)
        return
    (m, k), n = a.shape, b.shape[1]
    if (blas.name != "numpy" and blas.numpys_threads is not None
            and not getattr(blas.local, "one", False)
            and m * n * k > (ONE_THREAD_VECTOR if min(m, n) == 1 else ONE_THREAD)
            and blas.numpys_threads() > 1):
        function = blas.numpys.get(c.dtype, function)  # OpenBLAS's threads split it
    function(_ROW_MAJOR, first[0], second[0], m, n, k, 1.0, a.ctypes.data, first[1],
             b.ctypes.data, second[1], float(accumulate), c.ctypes.data,
             max(c.strides[0] // c.itemsize, 1))


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of two 2-d arrays as a fresh array, through MKL where :data:`blas` runs it
    (one dtype, float32 or float64, at shapes where MKL is faster: :data:`LARGE`), else
    numpy's matmul.

    Examples
    --------
    >>> product(np.ones((2, 3)), np.ones((3, 4))).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    found = blas.functions()
    if blas.name != "mkl" or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] \
            or a.dtype != b.dtype:
        return np.matmul(a, b)
    size = a.shape[0] * a.shape[1] * b.shape[1]
    kept = getattr(blas.local, "one", False) and size > ONE_THREAD  # OpenBLAS would split it
    if (not kept and (size < SMALL or (size < LARGE and min(a.shape[0], b.shape[1]) > THIN))
            or a.dtype not in found):
        return np.matmul(a, b)
    c = np.empty((a.shape[0], b.shape[1]), a.dtype)
    gemm(a, b, c, accumulate=False)
    return c


def _fallback(a: Any, b: Any, c: np.ndarray, accumulate: bool) -> None:
    if accumulate:
        c += a @ b
    else:
        np.matmul(a, b, out=c)
