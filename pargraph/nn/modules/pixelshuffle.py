"""``torch.nn.modules.pixelshuffle``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    PixelShuffle,
    PixelUnshuffle,
)
