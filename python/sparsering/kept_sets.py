"""Kept vertical-slash sets: per index row (batch x query head), the selected vertical keys (global
positions) and slash offsets (global q - k), ascending, in fixed-capacity int32 arrays padded with
-1. The same arrays the C API's sr_estimate_select writes and sr_build_index reads
(kernels/cuda/capi/sparsering_kernels.h), so the CPU and the CUDA paths hand each other the same
object. Covered by tests/python/op_cpu_test.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KeptSets:
    """Selected pattern of every row. Offset 0 (each query sees itself) is implied, never stored."""

    vertical_count: torch.Tensor   # (rows,) int32
    vertical_keys: torch.Tensor    # (rows, capacity) int32, ascending, -1 past the count
    slash_count: torch.Tensor      # (rows,) int32
    slash_offsets: torch.Tensor    # (rows, capacity) int32, ascending, -1 past the count
    seq_len_tokens: int            # N: keys and offsets lie in [0, N)

    @property
    def rows(self) -> int:
        return int(self.vertical_count.shape[0])

    @property
    def capacity(self) -> int:
        return int(self.vertical_keys.shape[1])

    def to(self, device) -> "KeptSets":
        return KeptSets(*(t.to(device) for t in self.tensors()), self.seq_len_tokens)

    def tensors(self) -> tuple:
        return self.vertical_count, self.vertical_keys, self.slash_count, self.slash_offsets

    def indicators(self) -> tuple:
        """(verticals, slashes): (rows, N) bool over global key positions / offsets; offset 0 is
        included in the slashes."""
        rows, n = self.rows, self.seq_len_tokens
        device = self.vertical_keys.device
        result = []
        for count, values, add_zero in ((self.vertical_count, self.vertical_keys, False),
                                        (self.slash_count, self.slash_offsets, True)):
            mark = torch.zeros(rows, n + 1, dtype=torch.bool, device=device)
            slot = torch.arange(values.shape[1], device=device).view(1, -1)
            where = torch.where(slot < count.view(-1, 1).to(torch.int64), values.to(torch.int64),
                                torch.full_like(values, n, dtype=torch.int64))
            mark.scatter_(1, where, True)
            mark = mark[:, :n]
            if add_zero:
                mark[:, 0] = True
            result.append(mark)
        return tuple(result)

    def row_lists(self) -> list:
        """[(vertical keys, slash offsets)] per row as Python lists (tests and debugging)."""
        out = []
        for r in range(self.rows):
            v = self.vertical_keys[r, : int(self.vertical_count[r])].tolist()
            s = self.slash_offsets[r, : int(self.slash_count[r])].tolist()
            out.append((v, s))
        return out

    def equal(self, other: "KeptSets") -> bool:
        return self.row_lists() == other.row_lists()
