"""numpy's own BLAS product, writing or adding into an existing array.

``numpy.matmul`` always writes a fresh result; a convolution as shifted products needs BLAS's
``C = A @ B + C``. scipy's wrappers have it, but they hold the GIL and call a second OpenBLAS
whose idle threads spin against numpy's. This module calls ``cblas_?gemm`` of the library
numpy itself loaded (found through threadpoolctl), through ctypes, which releases the GIL.
Where that library cannot be found, the same products run through numpy.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Any

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


class NumpyBlas:
    """The ``cblas_sgemm``/``cblas_dgemm`` of numpy's BLAS library, looked up on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._functions: dict | None = None

    def functions(self) -> dict:
        """``{dtype: cblas function}``; empty where numpy's BLAS is not a known one."""
        if self._functions is None:
            with self._lock:
                if self._functions is None:
                    self._functions = _lookup()
        return self._functions


def _lookup() -> dict:
    from threadpoolctl import ThreadpoolController

    libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    if len(libraries) > 1:  # several loaded (numpy's and scipy's wheels): numpy's own
        libraries = [lib for lib in libraries if "numpy" in lib.filepath]
    if len(libraries) != 1 or libraries[0].internal_api not in ("openblas", "mkl"):
        return {}
    dynlib, found = libraries[0].dynlib, {}
    for dtype, scalar, letter in ((np.float32, ctypes.c_float, "s"),
                                  (np.float64, ctypes.c_double, "d")):
        for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
            function = getattr(dynlib, f"{prefix}cblas_{letter}gemm{suffix}", None)
            if function is not None:
                break
        else:
            continue
        # An OpenBLAS built for 64-bit indices marks its symbols with "64".
        index = ctypes.c_int64 if "64" in suffix else ctypes.c_int
        function.restype = None
        function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, index, index, index,
                             scalar, ctypes.c_void_p, index, ctypes.c_void_p, index, scalar,
                             ctypes.c_void_p, index]
        found[np.dtype(dtype)] = function
    return found


#: numpy's BLAS, looked up once per process.
blas = NumpyBlas()


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
    function(_ROW_MAJOR, first[0], second[0], m, n, k, 1.0, a.ctypes.data, first[1],
             b.ctypes.data, second[1], float(accumulate), c.ctypes.data,
             max(c.strides[0] // c.itemsize, 1))


def _fallback(a: Any, b: Any, c: np.ndarray, accumulate: bool) -> None:
    if accumulate:
        c += a @ b
    else:
        np.matmul(a, b, out=c)
