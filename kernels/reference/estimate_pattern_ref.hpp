// CPU reference of the vertical-slash pattern estimation (docs/algorithm.md section 2; the oracle of the
// estimate_pattern kernels): the last `last_q` queries of the sequence score one key shard with
// the causal mask; pass 1 gives per-query row statistics, the shards' statistics are combined
// (max, then rescaled sums: what the max- and sum-allreduce do across GPUs), and pass 2 adds each
// softmax probability to its key's vertical mass and its offset's slash mass. fp64 inside, fp32
// in the params' arrays. Tested in tests/kernels/estimate_pattern_ref_test.cpp (sharded ==
// unsharded for every layout, masses sum to last_q, equal to an fp64 softmax brute force).
#pragma once

#include <cstdint>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Pass 1 on this shard: row_max[b, h, t] = max over visible keys of scale q_t.k, row_sum = sum of
/// exp(score - row_max); a query that sees no key of the shard gets (-inf, 0). Query t sits at
/// global position N - last_q + t; key k at layout.global_token(kv_rank, k).
/// Preconditions (checked, InputError): valid shape, 1 <= q_len (= last_q) <= N,
/// kv_len == the layout's local length, kv_rank in range, row_max / row_sum / q_last / k non-null.
void estimate_pattern_pass1_ref(const EstimateParams& params);

/// Folds another shard's pass-1 statistics into (row_max, row_sum), element-wise over `rows`
/// entries: m = max(m_a, m_b), s = s_a e^(m_a - m) + s_b e^(m_b - m), with (-inf, 0) the identity.
void estimate_pattern_combine_ref(int64_t rows, const float* shard_max, const float* shard_sum, float* row_max,
                                  float* row_sum);

/// Pass 2 on this shard, with row_max / row_sum holding the combined statistics:
/// vertical_mass[b, h, k] = sum over queries of p(t, k) (written), slash_mass[b, h, q_global -
/// k_global] += p(t, k) (added). Preconditions as pass 1, plus the two mass arrays non-null.
void estimate_pattern_pass2_ref(const EstimateParams& params);

}  // namespace sparsering
