"""From estimated masses to a trace's candidate slots (docs/formats.md section 1), exactly as the C++
select_pattern_candidates (kernels/reference/pattern_candidates.hpp) does: the `slots` positions
of largest mass, ties broken by the smaller position, zero masses never kept; each kept position
carries its share = mass / (sum of the whole vector, in float64); -1 / 0 pad the rest. Tested in
tests/capture/capture_test.py.
"""
import numpy as np
import torch


@torch.no_grad()
def select_candidates(mass, slots):
    """mass: (H, N) non-negative float tensor (vertical by key position or slash by offset).
    Returns (positions int32 (H, slots), shares float32 (H, slots)) as numpy arrays."""
    if mass.dim() != 2:
        raise ValueError(f"mass must be (H, N), got {tuple(mass.shape)}")
    if slots < 0:
        raise ValueError(f"slots must be >= 0, got {slots}")
    heads, n = mass.shape
    mass = mass.float()
    if not bool(torch.isfinite(mass).all()) or bool((mass < 0).any()):
        raise ValueError("masses must be finite and non-negative")
    total = mass.double().sum(dim=1, keepdim=True)
    kept = min(slots, n)
    # A stable descending sort keeps equal masses in ascending position order.
    values, order = torch.sort(mass, dim=1, descending=True, stable=True)
    values, order = values[:, :kept], order[:, :kept]
    positive = values > 0
    shares = torch.where(positive, (values.double() / torch.where(total > 0, total, torch.ones_like(total))),
                         torch.zeros_like(values, dtype=torch.float64)).float()
    positions = torch.where(positive, order, torch.full_like(order, -1)).to(torch.int32)
    out_positions = np.full((heads, slots), -1, dtype=np.int32)
    out_shares = np.zeros((heads, slots), dtype=np.float32)
    out_positions[:, :kept] = positions.cpu().numpy()
    out_shares[:, :kept] = shares.cpu().numpy()
    return out_positions, out_shares
