"""``torch.nn.modules.conv``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
)
from pargraph.nn.conv import _ConvNd  # noqa: F401
