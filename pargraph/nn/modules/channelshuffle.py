"""``torch.nn.modules.channelshuffle``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    ChannelShuffle,
)
