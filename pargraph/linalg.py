"""``pargraph.linalg``: the norms that training code uses (vector norms, Frobenius)."""

from __future__ import annotations

from typing import Any

from pargraph._tensor import Tensor
from pargraph.factories import as_tensor


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (all elements by default).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.vector_norm(pargraph.tensor([3.0, 4.0]))
    tensor(5.)
    """
    return as_tensor(x).norm(ord, dim, keepdim)


def norm(x: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``ord=None``: the 2-norm of a vector, the Frobenius norm of a matrix (of all elements
    when ``dim`` is ``None``); a number: a vector norm (1-D input or one ``dim``). Matrix norms
    other than Frobenius raise ``NotImplementedError``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.linalg.norm(pargraph.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(5.)
    """
    x = as_tensor(x)
    if ord is None or ord == "fro":
        return x.norm(2, dim, keepdim)
    if x.ndim == 1 or isinstance(dim, int):
        return x.norm(ord, dim, keepdim)
    raise NotImplementedError(f"linalg.norm: ord={ord!r} over a matrix (a matrix norm) is not "
                              "supported; pass dim= for a vector norm")
