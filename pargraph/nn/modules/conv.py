"""``torch.nn.modules.conv``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from pargraph.nn.conv import _ConvNd  # noqa: F401
