"""Token layouts of a context-parallel ring in torch: which ring rank holds which global token, in
local order. The same closed forms as core/token_layout.hpp (contiguous, zigzag, striped with a
stripe granularity in tokens), so position ids, causal masks and index geometry agree with the
C++ kernels. Covered by tests/python/op_cpu_test.py (against the C++ oracle, every layout) and
tests/python/ring_test.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

LAYOUT_KINDS = ("contiguous", "zigzag", "striped")


@dataclass(frozen=True)
class TokenLayout:
    """A checked layout: `seq_len_tokens` N over `ranks` W; `granularity_tokens` G (striped only).

    Raises ValueError unless N > 0, W >= 1 and N is divisible by W (contiguous), 2W (zigzag) or
    G x W (striped, G >= 1), as make_token_layout does."""

    kind: str = "contiguous"
    seq_len_tokens: int = 1
    ranks: int = 1
    granularity_tokens: int = 0

    def __post_init__(self):
        if self.kind not in LAYOUT_KINDS:
            raise ValueError(f"layout kind {self.kind!r} is not one of {', '.join(LAYOUT_KINDS)}")
        n, w, g = self.seq_len_tokens, self.ranks, self.granularity_tokens
        if not (isinstance(n, int) and n > 0 and isinstance(w, int) and w >= 1):
            raise ValueError(f"layout needs seq_len_tokens > 0 and ranks >= 1, got {n!r} and {w!r}")
        if self.kind == "contiguous" and n % w:
            raise ValueError(f"contiguous layout: {n} tokens do not divide over {w} ranks")
        if self.kind == "zigzag" and n % (2 * w):
            raise ValueError(f"zigzag layout: {n} tokens are not divisible by 2 x ranks = {2 * w}")
        if self.kind == "striped":
            if not (isinstance(g, int) and g >= 1):
                raise ValueError(f"striped layout needs granularity_tokens >= 1, got {g!r}")
            if n % (g * w):
                raise ValueError(f"striped layout: {n} tokens are not divisible by granularity x ranks = {g} x {w}")
        elif g:
            object.__setattr__(self, "granularity_tokens", 0)

    @property
    def local_len(self) -> int:
        """Tokens each rank holds (N / W)."""
        return self.seq_len_tokens // self.ranks

    def global_positions(self, ring_rank: int, device=None) -> torch.Tensor:
        """Global positions (int64, (N/W,)) of `ring_rank`'s local tokens, ascending."""
        if not 0 <= ring_rank < self.ranks:
            raise ValueError(f"ring rank {ring_rank} is outside [0, {self.ranks})")
        local = torch.arange(self.local_len, dtype=torch.int64, device=device)
        if self.kind == "zigzag":
            half = self.seq_len_tokens // (2 * self.ranks)
            return torch.where(local < half, ring_rank * half + local,
                               (2 * self.ranks - 1 - ring_rank) * half + (local - half))
        if self.kind == "striped":
            g = self.granularity_tokens
            return ((local // g) * self.ranks + ring_rank) * g + local % g
        return ring_rank * self.local_len + local

    def permutation(self, device=None) -> torch.Tensor:
        """(W, N/W) int64: row r holds the global tokens of rank r in local order."""
        return torch.stack([self.global_positions(r, device) for r in range(self.ranks)])


def single_rank(seq_len_tokens: int) -> TokenLayout:
    """One rank holding the whole sequence in order."""
    return TokenLayout("contiguous", seq_len_tokens, 1, 0)
