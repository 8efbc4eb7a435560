"""The peers the benchmark compares against, on the same tensors: torch SDPA (flash and cuDNN
backends, dense causal) and FlexAttention (compiled) with a BlockMask of exactly the pairs our
index computes. Also the dense-mask tensors the FlexAttention mask_mod reads."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def sdpa_causal(backend: str):
    """A callable (q, k, v) -> out running dense causal SDPA on one backend ('flash' or 'cudnn')."""
    chosen = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    def run(q, k, v):
        with sdpa_kernel(chosen):
            if k.shape[1] != q.shape[1]:
                try:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                except RuntimeError:
                    group = q.shape[1] // k.shape[1]
                    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return run


class FlexPeer:
    """FlexAttention over the same pairs as a sparse index (W = 1, block_q == block_k == B)."""

    def __init__(self, index, heads: int, n: int, device="cuda"):
        from torch.nn.attention.flex_attention import BlockMask, flex_attention

        block, qb = index.block, index.q_blocks
        rows = heads
        offsets = torch.as_tensor(index.tile_offsets, dtype=torch.int64, device=device)
        counts = offsets[1:] - offsets[:-1]
        list_id = torch.repeat_interleave(torch.arange(rows * qb, device=device), counts)
        j = torch.as_tensor(index.tile_block, dtype=torch.int64, device=device)
        masked = torch.as_tensor(index.tile_masked, dtype=torch.bool, device=device)
        tiles = torch.zeros(rows * qb * qb, dtype=torch.bool, device=device)
        tiles[list_id * qb + j] = True
        full = torch.zeros_like(tiles)
        full[(list_id * qb + j)[~masked]] = True
        partial = tiles & ~full
        vertical = torch.zeros(rows, n, dtype=torch.bool, device=device)
        column_offsets = torch.as_tensor(index.column_offsets, dtype=torch.int64, device=device)
        if index.column_index.size > 0:
            col_counts = column_offsets[1:] - column_offsets[:-1]
            col_list = torch.repeat_interleave(torch.arange(rows * qb, device=device), col_counts)
            cols = torch.as_tensor(index.column_index, dtype=torch.int64, device=device)
            partial[col_list * qb + cols // block] = True
            vertical[col_list // qb, cols] = True
        tiles = tiles.view(1, rows, qb, qb)
        full = full.view(1, rows, qb, qb)
        partial = partial.view(1, rows, qb, qb)
        self.computed_blocks = int(full.sum().item() + partial.sum().item())
        self.tile_map = tiles[0]
        self.vertical = vertical

        tile_map, vert = self.tile_map, self.vertical

        def mask_mod(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (tile_map[h, q_idx // block, kv_idx // block] | vert[h, kv_idx])

        def dense_to_indices(mask):
            num = mask.sum(-1).to(torch.int32)
            idx = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True).to(torch.int32)
            return num, idx

        kv_num, kv_idx = dense_to_indices(partial)
        full_num, full_idx = dense_to_indices(full)
        try:
            self.block_mask = BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block,
                                                       mask_mod=mask_mod, seq_lengths=(n, n))
        except TypeError:  # older torch: no seq_lengths argument
            self.block_mask = BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block,
                                                       mask_mod=mask_mod)
        self._flex = torch.compile(flex_attention, dynamic=False)

    def __call__(self, q, k, v):
        return self._flex(q, k, v, block_mask=self.block_mask, enable_gqa=k.shape[1] != q.shape[1])
