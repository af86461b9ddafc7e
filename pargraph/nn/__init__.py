"""``pargraph.nn``: modules, layers, losses, ``functional`` and ``init``, with PyTorch's names."""

from pargraph.nn import functional, init, modules, utils
from pargraph.nn.module import Buffer, Module, Parameter
from pargraph.nn.modules import *  # noqa: F403  (every layer: modules.__all__)
from pargraph.nn.parallel import DataParallel

#: The layers (``modules.__all__``), the base types, and the submodules PyTorch's nn has.
__all__ = ["Module", "Parameter", "Buffer", "DataParallel", "functional", "init", "utils",
           *(name for name in modules.__all__ if name != "Module")]
