// CPU reference of the sparse attention forward pass for one ring step (the oracle of
// sparse_attn_fwd_kernel / launch_sparse_attn_fwd): attention of the local queries over the keys
// the index lists, merged into the running fp32 output and LSE as SparseAttnFwdParams states.
// Plain loops written to be read: online softmax per query row in fp64, bf16 inputs read through
// kernels/bf16.hpp. Tested in tests/kernels/sparse_attn_fwd_ref_test.cpp against fp64 dense
// masked attention over the union of the index pairs of all ring steps.
#pragma once

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Runs one ring step: for every query row, (out, lse) <- merge((out, lse), attention over the
/// pairs the index lists at this step). Rows with no pair this step are left unchanged.
/// Preconditions (checked, InputError): valid shape, q_len == kv_len == the layout's local
/// length, index rows == batch x q_heads, finite softmax_scale, non-null tensors.
void sparse_attn_fwd_ref(const SparseAttnFwdParams& params);

}  // namespace sparsering
