"""``torch.nn.modules.fold``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Fold,
    Unfold,
)
