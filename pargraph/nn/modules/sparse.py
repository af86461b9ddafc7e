"""``torch.nn.modules.sparse``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Embedding,
    EmbeddingBag,
)
