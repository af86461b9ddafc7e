"""``torch.nn.modules.container``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
