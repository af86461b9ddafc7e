"""``torch.nn.modules.flatten``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Flatten,
    Unflatten,
)
