"""``torch.nn.modules.distance``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    CosineSimilarity,
    PairwiseDistance,
)
