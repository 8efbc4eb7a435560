"""The vertical-slash estimator of docs/algorithm.md section 2, in PyTorch, chunked over the keys.

The last T = last_q queries of a sequence of N tokens (global positions N-T .. N-1) score every
key with the causal mask; softmax over each whole row; the probability of (query t, key m) is
added to vertical[m] and to slash[(N-T+t) - m]. Same semantics as the CUDA estimator
(EstimateParams in kernels/attention_params.hpp) and its CPU oracle
(kernels/reference/estimate_pattern_ref.hpp). Two passes over key chunks of `chunk_keys`, so
memory is O(H T chunk), never O(N^2) and never O(H T N). Tested against a float64 brute force in
tests/capture/capture_test.py.

Scores, softmax and sums are computed in float64 and the masses rounded to float32 once at the
end, so the result does not depend on `chunk_keys`: the chunking changes the order of the row-sum
and slash additions, which moves float64 results by ~1e-16 relative, far below the float32
rounding. In float32 the same masses move by an ulp or two with the chunk size, and near-equal
masses (a head whose queries each attend almost entirely to one key has many masses of ~1.0)
then rank differently, so two captures of one input with different chunk sizes would keep
candidates in different orders. With the float64 pass, masses equal after rounding are exact ties
and the selection breaks them by position (candidates.py).
"""
import torch


def _chunk_scores(q, k_chunk, scale, first_key, seq_len):
    """float64 scores (Hq, T, c) of q (Hq, T, D, float64) against keys k_chunk (Hkv, c, D) at global
    positions first_key.., with -inf where the key lies after the query."""
    hq, t, d = q.shape
    hkv, c, _ = k_chunk.shape
    group = hq // hkv
    scores = torch.matmul(q.reshape(hkv, group * t, d), k_chunk.double().transpose(1, 2)).reshape(hq, t, c)
    scores = scores * scale
    first_query = seq_len - t
    if first_key + c - 1 > first_query:  # the chunk reaches past the first query: causal mask
        query_pos = first_query + torch.arange(t, device=q.device).view(t, 1)
        key_pos = first_key + torch.arange(c, device=q.device).view(1, c)
        scores = scores.masked_fill((key_pos > query_pos).unsqueeze(0), float("-inf"))
    return scores


@torch.no_grad()
def estimate_masses(q_last, k, softmax_scale, chunk_keys=8192):
    """Vertical and slash mass of every query head.

    q_last: (Hq, T, D) the last T queries (post-RoPE), any float dtype; k: (Hkv, N, D) all keys
    (post-RoPE), Hq a multiple of Hkv, 1 <= T <= N. softmax_scale: the model's logit scale
    (usually D^-0.5). Returns (vertical (Hq, N), slash (Hq, N)) fp32 on k's device, computed in
    float64 and rounded once (module docstring): vertical[h, m]
    = sum over the T queries of p(t, m); slash[h, o] = sum over t of p(t, N-T+t-o). Each row of
    p sums to 1, so each vector sums to T.
    """
    if q_last.dim() != 3 or k.dim() != 3:
        raise ValueError(f"q_last must be (Hq, T, D) and k (Hkv, N, D), got {tuple(q_last.shape)} and {tuple(k.shape)}")
    hq, t, d = q_last.shape
    hkv, n, dk = k.shape
    if dk != d or hq % hkv != 0 or not 1 <= t <= n:
        raise ValueError(f"incompatible shapes q_last {tuple(q_last.shape)}, k {tuple(k.shape)}: need equal head_dim, "
                         f"Hq a multiple of Hkv and 1 <= last_q <= N")
    if chunk_keys < 1:
        raise ValueError(f"chunk_keys must be >= 1, got {chunk_keys}")
    device = k.device
    q = q_last.to(device=device, dtype=torch.float64)
    scale = float(softmax_scale)
    # Pass 1: row max and row sum of exp(score - max), online over the chunks.
    row_max = torch.full((hq, t, 1), float("-inf"), device=device, dtype=torch.float64)
    row_sum = torch.zeros((hq, t, 1), device=device, dtype=torch.float64)
    for start in range(0, n, chunk_keys):
        scores = _chunk_scores(q, k[:, start:start + chunk_keys], scale, start, n)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        row_sum = row_sum * torch.exp(row_max - new_max) + torch.exp(scores - new_max).sum(dim=-1, keepdim=True)
        row_max = new_max
    # Pass 2: probabilities, summed per key column and per diagonal offset.
    vertical = torch.zeros((hq, n), device=device, dtype=torch.float64)
    slash = torch.zeros((hq, n), device=device, dtype=torch.float64)
    query_pos = (n - t) + torch.arange(t, device=device).view(t, 1)
    for start in range(0, n, chunk_keys):
        scores = _chunk_scores(q, k[:, start:start + chunk_keys], scale, start, n)
        c = scores.shape[-1]
        p = torch.exp(scores - row_max) / row_sum  # (Hq, T, c); 0 on masked pairs
        vertical[:, start:start + c] = p.sum(dim=1)
        offsets = (query_pos - (start + torch.arange(c, device=device).view(1, c))).clamp_(min=0)  # (T, c)
        slash.scatter_add_(1, offsets.reshape(1, t * c).expand(hq, t * c), p.reshape(hq, t * c))
    return vertical.float(), slash.float()
