"""Transformer encoder and decoder layers and stacks."""

from __future__ import annotations

import copy
from typing import Any

from pargraph._tensor import Tensor
from pargraph.devices import check_device
from pargraph.factories import full
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn.module import Module
from pargraph.nn.modules.activation import MultiheadAttention
from pargraph.nn.modules.container import ModuleList
from pargraph.nn.modules.dropout import Dropout
from pargraph.nn.modules.linear import Linear
from pargraph.nn.modules.normalization import LayerNorm


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and layer
    normalization (after the block, or before it with ``norm_first``), as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    >>> layer(pargraph.randn(2, 5, 16)).shape
    pargraph.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Any = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "TransformerEncoderLayer")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                            batch_first=batch_first)
        _feed_forward_parts(self, d_model, dim_feedforward, dropout, activation,
                            layer_norm_eps, norm_first, bias, norms=2)
        if dtype is not None:
            self.to(dtype)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._attend(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attend(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))

    def _attend(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False,
                                attn_mask=mask, is_causal=is_causal)
        return self.dropout1(out)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer applied in turn, then an optional norm.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    >>> pargraph.nn.TransformerEncoder(layer, 2)(pargraph.randn(3, 4, 8)).shape
    pargraph.Size([3, 4, 8])
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList(copy.deepcopy(encoder_layer) for _ in range(num_layers))
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=is_causal)
        return out if self.norm is None else self.norm(out)


def _feed_forward_parts(layer: Module, d_model: int, dim_feedforward: int, dropout: float,
                        activation: Any, eps: float, norm_first: bool, bias: bool,
                        norms: int) -> None:
    """The feed-forward block, the norms and the dropouts an encoder or decoder layer has,
    under PyTorch's attribute names (so that their ``state_dict`` keys match)."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias)
    layer.norm_first = norm_first
    for k in range(1, norms + 1):
        setattr(layer, f"norm{k}", LayerNorm(d_model, eps=eps, bias=bias))
    for k in range(1, norms + 1):
        setattr(layer, f"dropout{k}", Dropout(dropout))
    if isinstance(activation, str):
        if activation not in ("relu", "gelu"):
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        activation = F.relu if activation == "relu" else F.gelu
    layer.activation = activation


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (``memory``), then a feed-forward
    block, each with a residual connection and layer normalization, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.TransformerDecoderLayer(16, 4, 32, batch_first=True)
    >>> layer(pargraph.randn(2, 5, 16), pargraph.randn(2, 7, 16)).shape
    pargraph.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Any = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "TransformerDecoderLayer")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                            batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                                 batch_first=batch_first)
        _feed_forward_parts(self, d_model, dim_feedforward, dropout, activation,
                            layer_norm_eps, norm_first, bias, norms=3)
        if dtype is not None:
            self.to(dtype)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._self_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                     tgt_is_causal)
            x = x + self._memory_block(self.norm2(x), memory, memory_mask,
                                       memory_key_padding_mask, memory_is_causal)
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._self_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._memory_block(x, memory, memory_mask, memory_key_padding_mask,
                                              memory_is_causal))
        return self.norm3(x + self._feed_forward(x))

    def _self_block(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding,
                                is_causal=is_causal, need_weights=False)
        return self.dropout1(out)

    def _memory_block(self, x: Tensor, memory: Tensor, mask: Any, padding: Any,
                      is_causal: bool) -> Tensor:
        out, _ = self.multihead_attn(x, memory, memory, attn_mask=mask, key_padding_mask=padding,
                                     is_causal=is_causal, need_weights=False)
        return self.dropout2(out)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer applied in turn, then an optional norm.

    Examples
    --------
    >>> import pargraph
    >>> layer = pargraph.nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)
    >>> decoder = pargraph.nn.TransformerDecoder(layer, 2)
    >>> decoder(pargraph.randn(3, 4, 8), pargraph.randn(3, 6, 8)).shape
    pargraph.Size([3, 4, 8])
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList(copy.deepcopy(decoder_layer) for _ in range(num_layers))
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                        memory_key_padding_mask, bool(tgt_is_causal), memory_is_causal)
        return out if self.norm is None else self.norm(out)


def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
    """A causal attention mask: ``-inf`` above the diagonal (a position may not attend to
    later ones), 0 elsewhere.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.Transformer.generate_square_subsequent_mask(3)
    tensor([[0., -inf, -inf],
            [0., 0., -inf],
            [0., 0., 0.]])
    """
    check_device(device, "generate_square_subsequent_mask")
    return full((sz, sz), float("-inf"), dtype=dtype).triu(diagonal=1)


class Transformer(Module):
    """An encoder-decoder transformer (Vaswani et al.), as ``torch.nn.Transformer``: encoder
    and decoder stacks with final layer norms, parameters of two or more dimensions
    initialized Xavier-uniform.

    Examples
    --------
    >>> import pargraph
    >>> model = pargraph.nn.Transformer(16, 2, 1, 1, 32, batch_first=True)
    >>> model(pargraph.randn(2, 5, 16), pargraph.randn(2, 3, 16)).shape
    pargraph.Size([2, 3, 16])
    """

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_device(device, "Transformer")
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout,
                       activation=activation, layer_norm_eps=layer_norm_eps,
                       batch_first=batch_first, norm_first=norm_first, bias=bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
        if dtype is not None:
            self.to(dtype)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        batch = 0 if self.batch_first else 1
        if src.dim() == 3 and tgt.dim() == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=bool(src_is_causal))
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
