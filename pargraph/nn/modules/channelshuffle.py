"""``ChannelShuffle``."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module


class ChannelShuffle(Module):
    """Interleave ``groups`` groups of channels of ``(N, C, ...)`` input (ShuffleNet): channel
    ``g * C/groups + k`` goes to ``k * groups + g``.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.arange(6.0).reshape(1, 6, 1)
    >>> pargraph.nn.ChannelShuffle(2)(x).flatten().tolist()
    [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
