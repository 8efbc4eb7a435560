"""Shared helpers of the Python package tests: torch import with the skip code, the seed, inputs
with a vertical-slash structure, and a brute-force fp64 attention over the kept-set definition."""
import math
import os
import random
import sys
import time

SKIP = 77


def import_torch():
    try:
        import torch  # noqa: F401
    except Exception as error:  # pylint: disable=broad-except
        print(f"SKIPPED: torch cannot be imported by {sys.executable} ({error}); "
              "install it (Debian: apt-get install python3-torch)", flush=True)
        sys.exit(SKIP)
    return torch


def test_seed(name):
    """SPARSERING_TEST_SEED or a fresh seed; printed so a failure can be replayed."""
    seed = int(os.environ.get("SPARSERING_TEST_SEED", random.SystemRandom().randrange(1 << 31)))
    print(f"{name}: seed {seed} (replay with SPARSERING_TEST_SEED={seed})", flush=True)
    return seed


def structured_qkv(torch, gen, batch, q_heads, kv_heads, n, dim, dtype, offsets=(0, 3, 17), verticals=3,
                   contrast=10.0):
    """bf16-representable q, k, v (B, H, N, D) whose attention concentrates on a few slash offsets
    and vertical keys (a sink at 0 plus random ones), so the recall rule keeps sparse sets."""
    pos = torch.randn(n + max(offsets) + 1, dim, generator=gen, dtype=torch.float64)
    pos = pos / pos.norm(dim=-1, keepdim=True)
    sink = torch.randn(dim, generator=gen, dtype=torch.float64)
    sink = sink / sink.norm()
    amp = math.sqrt(contrast * math.sqrt(dim))
    q = 0.3 * torch.randn(batch, q_heads, n, dim, generator=gen, dtype=torch.float64) + amp * (pos[:n] + 0.8 * sink)
    k = 0.3 * torch.randn(batch, kv_heads, n, dim, generator=gen, dtype=torch.float64)
    for d in offsets:
        k = k + amp / len(offsets) ** 0.5 * pos[d:n + d]
    chosen = torch.cat([torch.zeros(1, dtype=torch.int64), torch.randint(1, n, (verticals - 1,), generator=gen)])
    k[:, :, chosen] += amp * 1.2 * sink
    v = torch.randn(batch, kv_heads, n, dim, generator=gen, dtype=torch.float64)
    dout = torch.randn(batch, q_heads, n, dim, generator=gen, dtype=torch.float64)
    return [t.to(torch.bfloat16).to(dtype) for t in (q, k, v, dout)]


def kept_pair_mask(torch, kept_lists, n, block_q, block_k):
    """(rows, N, N) pairs of one rank holding the sequence, straight from the definition: causal
    and (some offset in the kept slashes or 0 has a pair in the (q block, k block) tile, or k is a
    kept vertical key). Independent of the package's index builder."""
    q = torch.arange(n).view(n, 1)
    k = torch.arange(n).view(1, n)
    masks = []
    for verticals, slashes in kept_lists:
        offsets = torch.tensor(sorted(set(slashes) | {0}), dtype=torch.int64)
        qb, kb = q // block_q, k // block_k
        lo = (qb * block_q) - torch.clamp((kb + 1) * block_k, max=n) + 1   # smallest q - k of the tile
        hi = torch.clamp((qb + 1) * block_q, max=n) - 1 - kb * block_k     # largest
        tile = torch.searchsorted(offsets, hi, right=True) > torch.searchsorted(offsets, lo, right=False)
        vertical = torch.zeros(n, dtype=torch.bool)
        vertical[torch.tensor(verticals, dtype=torch.int64)] = True
        masks.append((q >= k) & (tile | vertical.view(1, n)))
    return torch.stack(masks)


def dense_attention_f64(torch, q, k, v, mask, scale):
    """Softmax attention in fp64 over a (B*Hq, N, N) or broadcastable mask; differentiable."""
    b, hq, n, d = q.shape
    group = hq // k.shape[1]
    s = (q @ k.repeat_interleave(group, 1).transpose(-1, -2)) * scale
    s = s.masked_fill(~mask.view(b, hq, n, n), -math.inf)
    return torch.softmax(s, -1) @ v.repeat_interleave(group, 1)


def rel(torch, a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


class Checks:
    """Collects named comparisons against bounds and prints them."""

    def __init__(self, name):
        self.name, self.failures, self.count, self.start = name, [], 0, time.time()

    def bound(self, what, value, limit):
        self.count += 1
        ok = value <= limit
        print(f"  {what}: {value:.3e} (bound {limit:.0e}) {'ok' if ok else 'FAIL'}", flush=True)
        if not ok:
            self.failures.append(what)

    def true(self, what, condition, detail=""):
        self.count += 1
        print(f"  {what}: {'ok' if condition else 'FAIL ' + detail}", flush=True)
        if not condition:
            self.failures.append(what)

    def finish(self):
        took = time.time() - self.start
        if self.failures:
            print(f"{self.name}: FAILED {len(self.failures)}/{self.count}: {', '.join(self.failures)} ({took:.1f} s)")
            return 1
        print(f"{self.name}: all {self.count} checks passed ({took:.1f} s)")
        return 0
