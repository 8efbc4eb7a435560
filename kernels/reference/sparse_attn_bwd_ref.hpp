// CPU reference of the sparse attention backward pass for one ring step (the oracle of
// sparse_attn_bwd_kernel / launch_sparse_attn_bwd) and of its pre-pass delta = rowsum(dout * out)
// (attn_bwd_delta_kernel / launch_attn_bwd_delta). The backward recomputes the probabilities
// from Q, K and the final LSE over the same pairs as the forward (kernels/reference/indexed_keys.hpp)
// and accumulates dQ, dK, dV (+=) so ring steps sum in fp32; within a step it sums in fp64.
// Tested in tests/kernels/sparse_attn_bwd_ref_test.cpp against fp64 dense gradients.
#pragma once

#include "kernels/attention_params.hpp"

namespace sparsering {

/// delta[b, h, q] = sum_d dout[b, h, q, d] * out[b, h, q, d], summed in fp64, stored fp32.
/// Uses shape.batch, q_heads, head_dim, q_len. Throws InputError on a bad shape or null tensor.
void attn_bwd_delta_ref(const AttnBwdDeltaParams& params);

/// One ring step of the backward pass: for every pair (q, k) the index lists, with
/// P = exp(scale q.k - lse_q), dP = dout_q . v_k, dS = P (dP - delta_q):
///   dv_k += P dout_q,  dq_q += scale dS k_k,  dk_k += scale dS q_q
/// (dk and dv sum over the query heads sharing a K/V head). Rows whose final LSE is -inf (no pair
/// at any step) contribute nothing. Preconditions as sparse_attn_fwd_ref (checked, InputError).
void sparse_attn_bwd_ref(const SparseAttnBwdParams& params);

}  // namespace sparsering
