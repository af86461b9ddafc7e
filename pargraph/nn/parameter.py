"""``torch.nn.parameter``'s path to ``Parameter`` and the lazy modules' placeholders."""

from pargraph.nn.lazy import UninitializedBuffer, UninitializedParameter, is_lazy
from pargraph.nn.module import Parameter

__all__ = ["Parameter", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]
