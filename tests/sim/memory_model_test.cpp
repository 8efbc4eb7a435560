// Memory model and layer shapes: hand-computed byte counts for a small model under each sharding
// stage and recomputation mode (sim/memory/memory_model.hpp, sim/step/layer_shapes.hpp).
#include "sim/memory/memory_model.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

TEST(LayerShapesTest, TinyModel) {
  const ModelConfig model = testing::small_model();
  PlanConfig plan = testing::small_plan(4096, 2, "zigzag", 0, true, {{2, "nvlink"}});
  const LayerShapes s = layer_shapes(plan, model);
  EXPECT_EQ(s.dense_tokens, 2048);
  EXPECT_EQ(s.attention_tokens, 2048);
  EXPECT_EQ(s.q_heads_local, 4);
  EXPECT_EQ(s.kv_heads_local, 2);
  EXPECT_DOUBLE_EQ(s.qkv_flops, 2.0 * 2048 * 256 * (4 + 4) * 64);
  EXPECT_DOUBLE_EQ(s.out_proj_flops, 2.0 * 2048 * 256 * 256);
  EXPECT_DOUBLE_EQ(s.mlp_flops, 2.0 * 2048 * 256 * 512 * 3);
  EXPECT_EQ(s.kv_chunk_bytes, 2048 * 2 * 64 * 2 * 2);
  EXPECT_EQ(s.dkv_chunk_bytes, 2048 * 2 * 64 * 2 * 4);
  plan.head_parallel = 3;
  EXPECT_THROW(layer_shapes(plan, model), InputError);
}

TEST(MemoryModelTest, ItemsByHand) {
  const ModelConfig model = testing::small_model();
  const GpuConfig gpu = testing::small_gpu();
  PlanConfig plan = testing::small_plan(4096, 2, "zigzag", 0, true, {{2, "nvlink"}});
  const LayerShapes s = layer_shapes(plan, model);
  const int64_t params = model.parameter_count();
  // Per token per layer: 2 x (4 x 256 + (4 + 2 x 2) x 64 + 4 x 64 + 3 x 512) + 4 x 4 bytes.
  EXPECT_EQ(activation_bytes_per_token(model), 2 * (1024 + 512 + 256 + 1536) + 16);

  plan.zero_stage = 0;
  plan.recompute = RecomputeMode::none;
  MemoryReport r = estimate_memory(plan, model, gpu, s, 1000);
  EXPECT_EQ(r.bytes_of("weights"), 2 * params);
  EXPECT_EQ(r.bytes_of("gradients"), 2 * params);
  EXPECT_EQ(r.bytes_of("optimizer"), 12 * params);
  EXPECT_EQ(r.bytes_of("activations"), 2 * 2048 * activation_bytes_per_token(model));
  EXPECT_EQ(r.bytes_of("index"), 1000);
  EXPECT_EQ(r.bytes_of("logits"), 2048 * 1000 * 4);
  // Backward ring: two K/V buffers + three dK/dV accumulators + fp32 dQ.
  EXPECT_EQ(r.bytes_of("ring_buffers"), 2 * s.kv_chunk_bytes + 3 * s.dkv_chunk_bytes + 2048 * 4 * 64 * 4);
  int64_t sum = 0;
  for (const MemoryItem& item : r.items) sum += item.bytes;
  EXPECT_EQ(r.peak_bytes, sum);
  EXPECT_TRUE(r.fits);

  plan.zero_stage = 3;  // two replicas (context parallel 2): everything sharded in two
  plan.recompute = RecomputeMode::full;
  plan.ring_levels = {{2, LinkKind::nvlink}, {1, LinkKind::nvlink}, {1, LinkKind::nvlink}};
  EXPECT_EQ(kv_chunk_buffers(plan), 2) << "outer levels of size 1 need no buffer";
  plan.ring_levels = {{1, LinkKind::nvlink}, {2, LinkKind::nvlink}};
  EXPECT_EQ(kv_chunk_buffers(plan), 3);
  r = estimate_memory(plan, model, gpu, s, 0);
  EXPECT_EQ(r.bytes_of("optimizer"), (12 * params + 1) / 2);
  EXPECT_EQ(r.bytes_of("gradients"), (2 * params + 1) / 2);
  EXPECT_EQ(r.bytes_of("weights"), (2 * params + 1) / 2 + 2 * model.block_parameter_count());
  EXPECT_EQ(r.bytes_of("activations"), 2 * 2048 * 256 * 2 + 2048 * activation_bytes_per_token(model));
  EXPECT_EQ(r.bytes_of("ring_buffers"), 3 * s.kv_chunk_bytes + 3 * s.dkv_chunk_bytes + 2048 * 4 * 64 * 4);

  GpuConfig small = gpu;
  small.memory_gib = 0.0001;
  r = estimate_memory(plan, model, small, s, 0);
  EXPECT_FALSE(r.fits);
  plan.comm = CommPrimitive::all_gather;
  EXPECT_EQ(kv_chunk_buffers(plan), 2) << "all-gather holds every chunk of the group";
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.reason.find("largest"), std::string::npos);
}

}  // namespace
}  // namespace sparsering
