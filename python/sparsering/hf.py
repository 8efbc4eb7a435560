"""Hugging Face drop-in: registers the sparse attention under `attn_implementation="sparsering"`
through transformers' AttentionInterface (transformers >= 4.48), so any model whose attention
goes through that interface (Qwen2, Llama, ...) runs vs_sparse_attention on one device, or
sparse_ring_attention after set_ring_context(ctx) with every rank feeding its tokens
(ctx.local_tokens) and their position ids (ctx.position_ids()). Sequences must be unpadded: the
attention is causal over the whole sequence and a padding mask raises ValueError. The matching
mask function (when transformers has AttentionMaskInterface) builds no mask for unpadded input.
Covered by tests/python/hf_test.py (skipped without transformers) and tests/python/gpu_test.py.
"""
from __future__ import annotations

from .ring_attention import sparse_ring_attention
from .vs_attention import vs_sparse_attention

NAME = "sparsering"
_state = {"ring": None, "settings": {}}


def set_ring_context(ring_context) -> None:
    """Runs the registered attention as a ring over this plan (None: back to one device)."""
    _state["ring"] = ring_context


def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The AttentionInterface function: query (B, Hq, S, D), key / value (B, Hkv, S, D) ->
    ((B, S, Hq, D), None)."""
    if attention_mask is not None:
        raise ValueError("sparsering attention is causal over unpadded sequences; got an attention mask "
                         "(padding); pass unpadded batches without attention_mask")
    if dropout:
        raise ValueError(f"sparsering attention has no dropout, got dropout={dropout}")
    q, k, v = query.contiguous(), key.contiguous(), value.contiguous()
    if _state["ring"] is not None:
        out = sparse_ring_attention(q, k, v, _state["ring"], softmax_scale=scaling)
    else:
        out = vs_sparse_attention(q, k, v, softmax_scale=scaling, **_state["settings"])
    return out.transpose(1, 2).contiguous(), None


def _no_mask(*args, **kwargs):
    padding = kwargs.get("attention_mask")
    if padding is not None and not bool(padding.all()):
        raise ValueError("sparsering attention does not support padded sequences")
    return None


def register(**settings) -> bool:
    """Registers `attn_implementation="sparsering"`; `settings` go to vs_sparse_attention (recall,
    block_q, block_k, last_q, capacity). Returns False when transformers is not importable."""
    try:
        from transformers import AttentionInterface
    except ImportError:
        return False
    _state["settings"] = dict(settings)
    AttentionInterface.register(NAME, attention_forward)
    try:
        from transformers.masking_utils import AttentionMaskInterface
        AttentionMaskInterface.register(NAME, _no_mask)
    except ImportError:
        pass
    return True
