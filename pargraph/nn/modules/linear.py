"""``torch.nn.modules.linear``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Bilinear,
    Identity,
    LazyLinear,
    Linear,
)
