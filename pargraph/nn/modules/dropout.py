"""``torch.nn.modules.dropout``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
)
from pargraph.nn.containers import _DropoutNd  # noqa: F401
