"""``torch.nn.modules.batchnorm``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    SyncBatchNorm,
)
from pargraph.nn.normalization import _BatchNorm  # noqa: F401
