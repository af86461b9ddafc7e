"""``Flatten`` and ``Unflatten``."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.nn.module import Module


class Flatten(Module):
    """Flatten dimensions ``start_dim`` to ``end_dim`` (the batch dimension stays).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Flatten()(pargraph.zeros(2, 3, 4)).shape
    pargraph.Size([2, 12])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dimension ``dim`` unflattened into ``unflattened_size``.

    Examples
    --------
    >>> import pargraph
    >>> tuple(pargraph.nn.Unflatten(1, (2, 3))(pargraph.ones(4, 6)).shape)
    (4, 2, 3)
    """

    def __init__(self, dim: int, unflattened_size: tuple) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        shape = tuple(input.shape)
        d = self.dim % len(shape)
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
