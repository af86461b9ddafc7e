"""``torch.nn.modules.upsampling``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
