"""``torch.nn.modules.pooling``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from pargraph.nn.conv import _AvgPoolNd, _MaxPoolNd  # noqa: F401
