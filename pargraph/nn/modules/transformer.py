"""``torch.nn.modules.transformer``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
