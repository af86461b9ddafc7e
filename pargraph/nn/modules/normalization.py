"""``torch.nn.modules.normalization``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    GroupNorm,
    LayerNorm,
    LocalResponseNorm,
    RMSNorm,
)
