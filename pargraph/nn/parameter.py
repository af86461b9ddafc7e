"""``torch.nn.parameter``'s path to ``Parameter`` and the lazy modules' placeholders."""

from pargraph.nn.module import Parameter
from pargraph.nn.modules.lazy import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["Parameter", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]
