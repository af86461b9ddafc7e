"""Which fused kernels run: numba's compiled ones, or none (the ops' numpy formulas).

An op with a fused kernel calls it here first, with a C-ordered array for the result; a call
answers False (or None) where no kernel takes the arrays (numba absent or not chosen, a dtype
it is not built for, a bias of another shape), and the op then runs its numpy formula, which
agrees within float32 rounding (``tests/test_kernels.py``).

The dask setting ``pargraph.kernels`` (``"auto"``, ``"numba"`` or ``"numpy"``) picks them;
``"auto"`` takes numba's where ``pip install 'pargraph[numba]'`` installed it. It is read at
the first fused op of a process; :meth:`Kernels.reset` reads it again.
"""

from __future__ import annotations

import importlib.util
import math
import threading
import types
from typing import Any

import numpy as np

from pargraph.context import context
from pargraph.ops.gemm import blas

_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


class Kernels:
    """The compiled kernels of this process, loaded on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._module: Any = None
        self._chosen = False
        #: ``"numba"`` where the compiled kernels run, else ``"numpy"``.
        self.name = "numpy"

    def module(self) -> Any:
        """:mod:`pargraph.ops.jit_kernels`' kernels, or None where numpy's formulas run."""
        if not self._chosen:
            with self._lock:
                if not self._chosen:
                    self._module = _choose()
                    self.name = "numpy" if self._module is None else "numba"
                    self._chosen = True
        return self._module

    def reset(self) -> None:
        """Read ``pargraph.kernels`` again at the next fused op."""
        with self._lock:
            self._module, self._chosen, self.name = None, False, "numpy"

    def lstm_forward(self, hw: np.ndarray, gx: np.ndarray, bias: np.ndarray | None,
                     c: np.ndarray, out: np.ndarray) -> bool:
        """``out[:] = [h', c', i, f, o, g]`` of an LSTM cell (``ops.lstm_cell``) in one pass;
        False where no kernel takes these arrays.

        Examples
        --------
        >>> z = np.zeros((2, 4), np.float32); out = np.empty((6, 2, 1), np.float32)
        >>> ran = kernels.lstm_forward(z, z, None, z[:, :1], out)  # gates of 0: i = 0.5
        >>> not ran or out[2].ravel().tolist() == [0.5, 0.5]
        True
        """
        module = self.module()
        n = c.shape[-1] if c.ndim else 0
        if (module is None or not n or not c.size or not out.flags.c_contiguous
                or any(a.dtype != _FLOAT32 for a in (hw, gx, c, out))
                or (bias is not None and (bias.dtype != _FLOAT32 or bias.shape != (4 * n,)))
                or hw.shape != gx.shape or hw.shape[:-1] != c.shape[:-1]):
            return False
        if bias is None:
            bias = np.zeros(4 * n, _FLOAT32)
        module.lstm_forward(hw.reshape(-1, 4 * n), gx.reshape(-1, 4 * n), bias,
                            c.reshape(-1, n), out.reshape(6, -1, n))
        return True

    def lstm_backward(self, grad: np.ndarray, out: np.ndarray, c: np.ndarray,
                      result: np.ndarray) -> bool:
        """``result[:]`` = the gradient of an LSTM cell (``ops.lstm_cell_grads``) in one pass;
        False where no kernel takes these arrays."""
        module = self.module()
        n = c.shape[-1] if c.ndim else 0
        if (module is None or not n or not c.size or not result.flags.c_contiguous
                or any(a.dtype != _FLOAT32 for a in (grad, out, c, result))
                or grad.shape != out.shape):
            return False
        module.lstm_backward(grad.reshape(6, -1, n), out.reshape(6, -1, n), c.reshape(-1, n),
                             result.reshape(-1, 5 * n))
        return True

    def lstm_sequence(self, gates_x: np.ndarray, h0: np.ndarray, c0: np.ndarray,
                      w_hh: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                      reverse: bool) -> bool:
        """``out[:]`` = a whole LSTM direction (``ops.lstm_sequence``), the steps' hidden
        products called from the kernel through BLAS (:mod:`pargraph.ops.gemm`); False where
        no kernel takes these arrays (not all float32, no BLAS to call).

        Examples
        --------
        >>> z = np.zeros((3, 2, 4), np.float32); s = np.zeros((2, 1), np.float32)
        >>> out = np.empty((3, 6, 2, 1), np.float32)
        >>> ran = kernels.lstm_sequence(z, s, s, np.zeros((4, 1), np.float32), None, out, False)
        >>> not ran or out[:, 2].ravel().tolist() == [0.5] * 6  # gates of 0: i = 0.5
        True
        """
        module, gemm = self.module(), _gemm32()
        n = c0.shape[-1] if c0.ndim else 0
        if (module is None or gemm is None or not n or not c0.size or not out.flags.c_contiguous
                or any(a.dtype != _FLOAT32 for a in (gates_x, h0, c0, w_hh, out))
                or (bias is not None and (bias.dtype != _FLOAT32 or bias.shape != (4 * n,)))):
            return False
        rows = c0.size // n
        module.lstm_sequence_forward(
            gemm, gates_x.reshape(gates_x.shape[0], rows, 4 * n),
            np.ascontiguousarray(h0).reshape(rows, n), np.ascontiguousarray(c0).reshape(rows, n),
            np.ascontiguousarray(w_hh), np.zeros(4 * n, _FLOAT32) if bias is None else bias,
            out.reshape(out.shape[0], 6, rows, n), reverse)
        return True

    def lstm_sequence_backward(self, grad: np.ndarray, out: np.ndarray, c0: np.ndarray,
                               w_hh: np.ndarray, result: np.ndarray, reverse: bool) -> bool:
        """``result[:]`` = the gradient of an LSTM direction (``ops.lstm_sequence_grads``) from
        ``grad``, of its outputs h' alone (steps, ..., n) or of every row (steps, 6, ..., n);
        ``result`` starts as zeros. False where no kernel takes these arrays."""
        module, gemm = self.module(), _gemm32()
        n = c0.shape[-1] if c0.ndim else 0
        if (module is None or gemm is None or not n or not c0.size
                or not result.flags.c_contiguous or not out.flags.c_contiguous
                or any(a.dtype != _FLOAT32 for a in (grad, out, c0, w_hh, result))):
            return False
        count, rows = out.shape[0], c0.size // n
        if grad.ndim == out.ndim - 1:
            gh, rest = grad, np.zeros((1, 5, 1, 1), _FLOAT32)
        else:
            gh, rest = grad[:, 0], np.ascontiguousarray(grad[:, 1:]).reshape(count, 5, rows, n)
        module.lstm_sequence_backward(
            gemm, np.ascontiguousarray(gh).reshape(count, rows, n), rest,
            grad.ndim == out.ndim, out.reshape(count, 6, rows, n),
            np.ascontiguousarray(c0).reshape(rows, n), np.ascontiguousarray(w_hh),
            result.reshape(count + 1, rows, 4 * n), reverse)
        return True

    def pool_argmax(self, x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple,
                    dilation: tuple, out: np.ndarray) -> bool:
        """``out[:]`` = 2-d max pooling's indices into each unpadded input plane
        (``ops.pool_argmax``) in one pass; False where no kernel takes these arrays (not 2-d,
        not float32 or float64, a result that is not C-ordered int64).

        Examples
        --------
        >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
        >>> out = np.empty((1, 1, 2, 2), np.int64)
        >>> ran = kernels.pool_argmax(x, (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), out)
        >>> not ran or out.ravel().tolist() == [5, 7, 13, 15]
        True
        """
        module = self.module()
        if (module is None or len(kernel) != 2 or x.ndim != 4 or out.dtype != np.int64
                or x.dtype not in (_FLOAT32, _FLOAT64) or not out.flags.c_contiguous
                or not x.size or not out.size):
            return False
        module.pool_argmax2d(np.ascontiguousarray(x), kernel[0], kernel[1], stride[0],
                             stride[1], padding[0][0], padding[1][0], dilation[0],
                             dilation[1], out)
        return True

    def take_along(self, x: np.ndarray, index: np.ndarray, dim: int) -> np.ndarray | None:
        """``np.take_along_axis(x, index, dim)`` (``ops.take_along_dim``) in one pass, or
        None where no kernel takes these arrays (``dim`` not the last, shapes that broadcast,
        a dtype the kernel is not built for). An index out of range raises numpy's error.

        Examples
        --------
        >>> x = np.array([[1.0, 2.0, 3.0]]); i = np.array([[2, 0]])
        >>> out = kernels.take_along(x, i, 1)
        >>> out is None or out.tolist() == [[3.0, 1.0]]
        True
        """
        module = self.module()
        if (module is None or not _along_last(x.shape, index, dim) or x.dtype not in _GATHERED
                or not index.size or not x.shape[-1]):
            return None
        out = np.empty(index.shape, x.dtype)
        rows = math.prod(index.shape[:-1])
        if not module.take_rows(np.ascontiguousarray(x).reshape(rows, -1),
                                np.ascontiguousarray(index).reshape(rows, -1),
                                out.reshape(rows, -1)):
            raise IndexError(f"index out of bounds for axis {dim} with size {x.shape[dim]}")
        return out

    def put_along(self, g: np.ndarray, index: np.ndarray, shape: tuple,
                  dim: int) -> np.ndarray | None:
        """``g`` added into zeros of ``shape`` at ``index`` along ``dim``, in order
        (``ops.put_along_dim``), or None where no kernel takes these arrays.

        Examples
        --------
        >>> g = np.array([[1.0, 2.0, 4.0]]); i = np.array([[1, 1, 0]])
        >>> out = kernels.put_along(g, i, (1, 2), 1)
        >>> out is None or out.tolist() == [[4.0, 3.0]]
        True
        """
        module = self.module()
        if (module is None or not _along_last(shape, index, dim) or g.shape != index.shape
                or g.dtype not in _GATHERED or not index.size or not shape[-1]):
            return None
        out = np.zeros(shape, g.dtype)
        rows = math.prod(index.shape[:-1])
        if not module.put_rows(np.ascontiguousarray(g).reshape(rows, -1),
                               np.ascontiguousarray(index).reshape(rows, -1),
                               out.reshape(rows, -1)):
            raise IndexError(f"index out of bounds for axis {dim} with size {shape[dim]}")
        return out

    def softmax(self, x: np.ndarray, dim: tuple) -> np.ndarray | None:
        """Softmax over the last dimension (``ops.softmax``): the shift by each row's maximum
        and the scaling by its sum in one pass each, numpy's vectorized ``exp`` between; None
        where no kernel takes the array (another dimension, not float32 or float64, empty).

        Examples
        --------
        >>> out = kernels.softmax(np.zeros((1, 4), np.float32), (1,))
        >>> out is None or out.tolist() == [[0.25, 0.25, 0.25, 0.25]]
        True
        """
        module = self.module()
        if module is None or not _last_rows(x, dim):
            return None
        n = x.shape[-1]
        out = np.empty(x.shape, x.dtype)
        rows = out.reshape(-1, n)
        module.softmax_shift_rows(np.ascontiguousarray(x).reshape(-1, n), rows)
        with np.errstate(over="ignore", invalid="ignore"):
            np.exp(rows, out=rows)
        module.softmax_scale_rows(rows)
        return out

    def softmax_backward(self, g: np.ndarray, y: np.ndarray, dim: tuple) -> np.ndarray | None:
        """Softmax's gradient ``y * (g - sum(g * y))`` over the last dimension
        (``ops.softmax_backward``) in one kernel; None where no kernel takes the arrays.

        Examples
        --------
        >>> y = np.full((1, 2), 0.5, np.float32); g = np.array([[1.0, 0.0]], np.float32)
        >>> out = kernels.softmax_backward(g, y, (1,))
        >>> out is None or out.tolist() == [[0.25, -0.25]]
        True
        """
        module = self.module()
        if module is None or not _last_rows(y, dim) or g.shape != y.shape or \
                g.dtype != y.dtype:
            return None
        n = y.shape[-1]
        out = np.empty(y.shape, y.dtype)
        module.softmax_grad_rows(np.ascontiguousarray(g).reshape(-1, n),
                                 np.ascontiguousarray(y).reshape(-1, n), out.reshape(-1, n))
        return out


#: The dtypes the gather and scatter kernels are compiled for.
_GATHERED = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def _last_rows(x: np.ndarray, dim: tuple) -> bool:
    """Whether ``dim`` is ``x``'s last dimension alone, over float32 or float64 rows that are
    not empty."""
    return (x.ndim >= 1 and tuple(dim) == (x.ndim - 1,) and x.dtype in (_FLOAT32, _FLOAT64)
            and x.size > 0)


def _along_last(shape: tuple, index: np.ndarray, dim: int) -> bool:
    """Whether a gather or scatter along ``dim`` is one along the last dimension of rows that
    match: an int64 index of ``shape``'s other sizes."""
    return (index.dtype == np.int64 and len(shape) == index.ndim >= 1
            and dim in (-1, len(shape) - 1) and tuple(shape[:-1]) == index.shape[:-1])


def _gemm32() -> Any:
    """The ``cblas_sgemm`` the process's one-thread products run (:mod:`pargraph.ops.gemm`),
    or None where no BLAS can be called."""
    return blas.functions().get(_FLOAT32)


def _choose() -> Any:
    import dask

    wanted = dask.config.get("pargraph.kernels", "auto")
    if wanted not in ("auto", "numba", "numpy"):
        raise ValueError(f"pargraph.kernels is {wanted!r}; expected 'auto', 'numba' or 'numpy'")
    if wanted == "numpy":
        return None
    if importlib.util.find_spec("numba") is None:
        if wanted == "numba":
            raise RuntimeError("pargraph.kernels is 'numba' but numba is not installed: "
                               "pip install 'pargraph[numba]'")
        return None
    from pargraph.ops.jit_kernels import (
        lstm_backward,
        lstm_forward,
        lstm_sequence_backward,
        lstm_sequence_forward,
        pool_argmax2d,
        put_rows,
        softmax_grad_rows,
        softmax_scale_rows,
        softmax_shift_rows,
        take_rows,
    )

    return types.SimpleNamespace(lstm_forward=lstm_forward, lstm_backward=lstm_backward,
                                 lstm_sequence_forward=lstm_sequence_forward,
                                 lstm_sequence_backward=lstm_sequence_backward,
                                 pool_argmax2d=pool_argmax2d, take_rows=take_rows,
                                 put_rows=put_rows, softmax_shift_rows=softmax_shift_rows,
                                 softmax_scale_rows=softmax_scale_rows,
                                 softmax_grad_rows=softmax_grad_rows)


#: The fused kernels of this process, chosen once.
kernels = context.register("kernels", Kernels())
