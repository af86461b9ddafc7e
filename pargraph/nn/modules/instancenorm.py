"""``torch.nn.modules.instancenorm``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
)
from pargraph.nn.normalization import _InstanceNorm  # noqa: F401
