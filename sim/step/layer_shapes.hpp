// Per-rank sizes of one transformer layer under a plan: tokens each rank holds in the dense parts
// and inside the ring, heads per rank, the FLOPs of the dense GEMMs and the bytes each collective
// and each ring hop moves. Shared by the step model and the memory model. With head parallelism
// (Ulysses, degree U) and context parallelism (ring, degree W) a rank holds N/(W U) tokens of
// every head in the dense parts and N/W tokens of H/U heads in attention.
// Tested in tests/sim/memory_model_test.cpp (LayerShapesTest) and tests/sim/simulation_test.cpp.
#pragma once

#include <cstdint>

#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"

namespace sparsering {

struct LayerShapes {
  int64_t dense_tokens = 0;     ///< micro_batch x N / (W x U): tokens per rank in projections and MLP
  int64_t attention_tokens = 0; ///< micro_batch x N / W: tokens per rank inside the ring
  int64_t q_heads_local = 0;    ///< H / U
  int64_t kv_heads_local = 0;   ///< max(1, Hkv / U) (K/V heads replicated when U > Hkv)
  int64_t head_dim = 0;
  int64_t bytes_per_value = 2;  ///< activations and weights (bf16)

  double qkv_flops = 0.0;       ///< forward FLOPs of the Q, K, V projections on this rank
  double out_proj_flops = 0.0;  ///< forward FLOPs of the output projection
  double mlp_flops = 0.0;       ///< forward FLOPs of the MLP
  double lm_head_flops = 0.0;   ///< forward FLOPs of the LM head (once per model)

  int64_t kv_chunk_bytes = 0;   ///< K and V of one ring chunk (bf16)
  int64_t dkv_chunk_bytes = 0;  ///< dK and dV accumulators of one chunk (fp32)
  int64_t qkv_local_bytes = 0;  ///< Q, K, V of this rank in the attention view
  int64_t out_local_bytes = 0;  ///< attention output of this rank
};

/// Throws InputError when the plan and model do not fit (heads not divisible, tokens not divisible).
LayerShapes layer_shapes(const PlanConfig& plan, const ModelConfig& model);

}  // namespace sparsering
