"""Recall (top-p) selection of verticals or slashes from estimated masses, the rule of
traces/recall.hpp as the GPU selection applies it (kernels/cuda/recall_select.hpp): every entry of
a row is a candidate; candidates sorted by mass descending, ties by smaller index; the kept prefix
is the smallest one whose fp64 sum reaches p x total x (1 - 1e-6), never a zero-mass entry, at
most `capacity` entries; the kept indices are returned ascending. Masses are rounded to fp32
first, as the kernels store them. Covered by tests/python/op_cpu_test.py (against the C++ oracle).
"""
from __future__ import annotations

import torch

RELATIVE_SLACK = 1e-6


def select_recall(mass: torch.Tensor, recall: float, capacity: int) -> tuple:
    """mass: (rows, n) >= 0. Returns (count (rows,) int32, kept (rows, capacity) int32 ascending,
    -1 past the count). Raises ValueError for recall outside (0, 1] or capacity < 1."""
    if not (0.0 < recall <= 1.0):
        raise ValueError(f"recall must be in (0, 1], got {recall}")
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    rows, n = mass.shape
    m32 = mass.to(torch.float32)
    ordered, order = torch.sort(m32, dim=1, descending=True, stable=True)
    ordered64 = ordered.to(torch.float64)
    total = ordered64.sum(dim=1, keepdim=True)
    goal = recall * total * (1.0 - RELATIVE_SLACK)
    before = torch.cumsum(ordered64, dim=1) - ordered64  # exclusive prefix sums
    keep = (before < goal) & (ordered > 0)
    count = keep.sum(dim=1).clamp(max=capacity)
    width = min(capacity, n)
    slot = torch.arange(width, device=mass.device).view(1, -1)
    chosen = torch.where(slot < count.view(-1, 1), order[:, :width], torch.full_like(order[:, :width], n))
    chosen, _ = torch.sort(chosen, dim=1)
    chosen = torch.where(chosen == n, torch.full_like(chosen, -1), chosen)
    kept = torch.full((rows, capacity), -1, dtype=torch.int32, device=mass.device)
    kept[:, :width] = chosen.to(torch.int32)
    return count.to(torch.int32), kept
