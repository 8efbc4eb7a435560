// Memory per GPU under a plan: weights, gradients and Adam state (fp32 master copy and two
// moments) under the ZeRO/FSDP sharding stage, activations kept for backward (with or without
// recomputation), the ring's K/V and dK/dV buffers, the sparse index kept from forward for
// backward, and the LM head logits. A plan that does not fit says so with the numbers.
// Byte counts (documented in docs/simulator.md): weights and gradients bytes_per_param each, Adam
// 12 bytes per parameter; stage 1 shards Adam over every replica (all GPUs of the plan: without
// tensor or pipeline parallelism each holds the whole model), stage 2 also gradients, stage 3 also
// weights (plus one gathered layer). Tested in tests/sim/memory_model_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/gpu_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/step/layer_shapes.hpp"

namespace sparsering {

struct MemoryItem {
  std::string name;
  int64_t bytes = 0;
};

struct MemoryReport {
  std::vector<MemoryItem> items;  ///< weights, gradients, optimizer, activations, ring_buffers, index, logits
  int64_t peak_bytes = 0;         ///< sum of the items
  int64_t capacity_bytes = 0;     ///< the GPU's memory
  bool fits = true;
  std::string reason;             ///< when !fits: "needs X GiB of Y GiB; largest: ..."

  /// Bytes of the item named `name` (0 if absent).
  int64_t bytes_of(const std::string& name) const;
};

/// Activation bytes one layer keeps per token for backward, without recomputation.
int64_t activation_bytes_per_token(const ModelConfig& model);

/// K/V chunk buffers a rank holds during attention: a ring's double buffer plus one receive
/// buffer per outer level, or every chunk of the group for the all-gather primitive.
int64_t kv_chunk_buffers(const PlanConfig& plan);

/// Estimates the peak memory of one GPU. `index_bytes` is the compressed sparse index of every
/// layer and ring step of the busiest rank (0 for dense attention).
MemoryReport estimate_memory(const PlanConfig& plan, const ModelConfig& model, const GpuConfig& gpu,
                             const LayerShapes& shapes, int64_t index_bytes);

}  // namespace sparsering
