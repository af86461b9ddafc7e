"""``torch.nn.functional``'s attention: scaled dot products and the multi-head forward."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import amp, ops
from pargraph._tensor import Tensor
from pargraph.factories import as_tensor
from pargraph.functions import cat
from pargraph.functions import where as pargraph_where
from pargraph.nn.functional.dropout import dropout
from pargraph.nn.functional.linear import linear


def _masked_scores(scores: Tensor, mask: Tensor | None, allowed_when: bool) -> Tensor:
    """``scores`` with a bool mask applied (-inf where not allowed) or a float mask added."""
    if mask is None:
        return scores
    mask = as_tensor(mask)
    if mask.dtype == bool:
        return scores.masked_fill(mask if not allowed_when else ~mask, float("-inf"))
    return scores + mask


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False, *, _batch_first: bool = False
        ) -> tuple[Tensor, Tensor | None]:
    """``MultiheadAttention``'s computation with its weights passed in: inputs ``(L, N, E)``
    (or unbatched ``(L, E)``), PyTorch's masks (bool True is not attended, float is added).
    Each head is its own branch of the graph (its slice of the projections, its scores,
    softmax and weighted sum), joined before the output projection. Returns the output and
    the attention weights (averaged over the heads unless ``average_attn_weights=False``).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> x, w = pargraph.randn(5, 2, 8), pargraph.randn(24, 8)
    >>> out, weights = F.multi_head_attention_forward(
    ...     x, x, x, 8, 2, w, None, None, None, False, 0.0, pargraph.randn(8, 8), None)
    >>> out.shape, weights.shape
    (pargraph.Size([5, 2, 8]), pargraph.Size([2, 5, 5]))
    """
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k and static_v are not "
                                  "supported")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint")
    unbatched = query.ndim == 2
    q, k, v = (t.unsqueeze(0) if unbatched else t if _batch_first else t.transpose(0, 1)
               for t in (query, key, value))  # (N, L, E); MultiheadAttention's batch first
    e = q.shape[-1]
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {e}")
    if e % num_heads:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        weights = [q_proj_weight, k_proj_weight, v_proj_weight]
    else:
        weights = [in_proj_weight[i * e:(i + 1) * e] for i in range(3)]
    projected = [linear(t, weight, None if in_proj_bias is None
                        else in_proj_bias[i * e:(i + 1) * e])
                 for i, (t, weight) in enumerate(zip((q, k, v), weights))]
    # Extra keys and values after the sequence, attended by every query: the learned
    # ``bias_k``/``bias_v``, then zeros (``add_zero_attn``); the masks let them through.
    extra = [(bias_k, bias_v)] if bias_k is not None else []
    if add_zero_attn:
        nothing = projected[1].new_zeros((1, 1, e))
        extra.append((nothing, nothing))
    for added_k, added_v in extra:
        batch = projected[1].shape[0]
        projected[1] = cat([projected[1], added_k.reshape(1, 1, e).expand(batch, 1, e)], 1)
        projected[2] = cat([projected[2], added_v.reshape(1, 1, e).expand(batch, 1, e)], 1)
        attn_mask, key_padding_mask = (None if m is None else _one_more_key(as_tensor(m))
                                       for m in (attn_mask, key_padding_mask))
    mask = _joint_mask(attn_mask, key_padding_mask, num_heads, q.shape[0], q.shape[1],
                       projected[1].shape[1])
    head_dim = e // num_heads
    heads, attentions = [], []
    for h in range(num_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        qh, kh, vh = (t[..., part] for t in projected)
        scores = (qh @ kh.transpose(-2, -1)) * (1 / math.sqrt(head_dim))
        head_mask = mask[:, h] if mask is not None and mask.ndim == 4 else mask
        attention = _masked_scores(scores, head_mask, allowed_when=False).softmax(-1)
        attentions.append(attention)
        heads.append(dropout(attention, dropout_p, training) @ vh)
    out = linear(cat(heads, -1), out_proj_weight, out_proj_bias)
    out = out.squeeze(0) if unbatched else out if _batch_first else out.transpose(0, 1)
    if not need_weights:
        return out, None
    stacked = cat([a.unsqueeze(1) for a in attentions], 1)
    result = stacked.mean(1) if average_attn_weights else stacked
    return out, result.squeeze(0) if unbatched else result


def _joint_mask(attn_mask: Tensor | None, key_padding_mask: Tensor | None, heads: int,
                batch: int, target: int, source: int) -> Tensor | None:
    """One mask of shape (L, S), (N, L, S) or (N, H, L, S): True or -inf is not attended."""
    masks = []
    if attn_mask is not None:
        attn_mask = _bool_or_float(attn_mask, "attn_mask")
        if attn_mask.ndim == 3:
            attn_mask = attn_mask.reshape(batch, heads, target, source)
        elif tuple(attn_mask.shape) != (target, source):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                               f"should be {(target, source)}.")
        masks.append(attn_mask)
    if key_padding_mask is not None:
        padding = _bool_or_float(key_padding_mask, "key_padding_mask")
        if tuple(padding.shape[-1:]) != (source,):
            raise RuntimeError(f"key_padding_mask of shape {padding.shape} does not match "
                               f"{source} keys")
        masks.append(padding.reshape(batch, 1, source))
    if len(masks) < 2:
        return masks[0] if masks else None
    as_float = [m.float().masked_fill(m, float("-inf")) if m.dtype == bool else m
                for m in masks]
    return as_float[0] + (as_float[1].unsqueeze(1) if as_float[0].ndim == 4 else as_float[1])


def _bool_or_float(mask: Any, name: str) -> Tensor:
    """An attention mask as a tensor, refused as PyTorch's MultiheadAttention refuses it when
    it is neither bool nor floating (an integer mask would be added as a float one)."""
    mask = as_tensor(mask)
    if mask.dtype != bool and not ops.is_floating(mask.dtype):
        raise AssertionError(f"only bool and floating types of {name} are supported, got "
                             f"{ops.torch_name(mask.dtype)}")
    return mask


def _one_more_key(mask: Tensor) -> Tensor:
    """``mask`` with a last column that lets every query attend one more key."""
    return cat([mask, mask.new_zeros((*mask.shape[:-1], 1))], -1)


@amp.autocasts("lower")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key.T * scale + mask) @ value`` over the last two dimensions
    (``attn_mask``: bool, True takes part; or float, added; ``is_causal``: a lower-triangular
    mask).

    Examples
    --------
    >>> import pargraph; from pargraph.nn import functional as F
    >>> q = k = v = pargraph.ones(2, 4, 3, 8)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    pargraph.Size([2, 4, 3, 8])
    """
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: _scaled_dot_product_attention: "
                           "Explicit attn_mask should not be set when is_causal=True")
    query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: query {list(query.shape)}, key "
                           f"{list(key.shape)} and value {list(value.shape)} do not fit "
                           f"(expected query and key to share the last dimension, key and "
                           f"value the sequence dimension)")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        # Grouped-query attention: each key/value head serves a group of query heads.
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads or value.shape[-3] != kv_heads:
            raise RuntimeError(f"scaled_dot_product_attention: the number of heads in key "
                               f"and value ({kv_heads}, {value.shape[-3]}) must divide the "
                               f"number of heads in query ({heads})")
        key, value = (t.repeat_interleave(heads // kv_heads, -3) for t in (key, value))
    if attn_mask is not None:
        attn_mask = as_tensor(attn_mask)
        if attn_mask.dtype != bool and not ops.is_floating(attn_mask.dtype):
            raise RuntimeError("scaled_dot_product_attention: expected attn_mask dtype to be "
                               "bool or float or to match query dtype, but got "
                               f"{ops.torch_name(attn_mask.dtype)}")
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        causal = np.tril(np.ones((query.shape[-2], key.shape[-2]), dtype=bool))
        attn_mask = as_tensor(causal)
    if attn_mask is None:
        weights = scores.softmax(-1)
    else:
        # A query that may attend no key gets zeros, as PyTorch's kernels give (the softmax of
        # a row of -inf is NaN): its row is computed as zeros and its weights set to 0.
        masked = _masked_scores(scores, attn_mask, allowed_when=True)
        dead = (masked == float("-inf")).all(-1, keepdim=True)
        weights = pargraph_where(dead, 0.0, pargraph_where(dead, 0.0, masked).softmax(-1))
    return dropout(weights, dropout_p, training=dropout_p > 0) @ value
