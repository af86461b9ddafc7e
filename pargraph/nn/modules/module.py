"""``torch.nn.modules.module``: ``Module``, from pargraph."""

from pargraph.nn.module import Module  # noqa: F401
