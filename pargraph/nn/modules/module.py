"""``torch.nn.modules.module``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Module,
)
