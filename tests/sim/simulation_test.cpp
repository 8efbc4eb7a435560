// End-to-end simulator: a hand-derived dense two-rank ring, determinism across contexts, work
// cache reuse across ring orders, ring passes shared by orders whose links time alike, the
// busiest rank's kernel time with and without ring records, relabelling of symmetric ranks,
// hierarchical rings with a one-node outer level, monotonicity in sparsity, NIC sharing across
// ring levels, the dK/dV accumulator routes, the index build phase, the backward's cost per key
// block of the held chunk in every step, and input checks (sim/step/simulation.hpp).
#include "sim/step/simulation.hpp"

#include <gtest/gtest.h>

#include <random>

#include "common/error.hpp"
#include "sim/network/link_model.hpp"
#include "sim/step/layer_shapes.hpp"
#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

using testing::small_cluster;
using testing::small_model;
using testing::small_plan;
using testing::small_trace;

TEST(SimulationTest, DenseTwoRankRingByHand) {
  // Dense, contiguous, W = 2, N = 2048, blocks of 64: nb = 16 local blocks, 4 query heads per
  // launch. Rank 0: own chunk nb(nb+1)/2 = 136 tiles per head, then nothing (later chunk).
  // Rank 1: 136 tiles, then nb^2 = 256 tiles on chunk 0. Calibrated forward: 2 us + 0.01 us/tile:
  // C0 = 2 + 0.04 x 136 = 7.44 us, C1 = 2 + 0.04 x 256 = 12.24 us. K/V chunk: 1024 tokens x 2 KV
  // heads x 64 x (K, V) x 2 bytes = 524288 bytes at 2 us + 100 GB/s = 7.24288 us -> 7243 ns.
  // Rank 1's second step starts at max(C0, T) = 7440 ns and ends 12240 ns later.
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 2);
  const PlanConfig plan = small_plan(2048, 2, "contiguous", 0, false, {{2, "nvlink"}});
  SimulationContext context;
  const SimulationResult r = simulate(context, plan, model, cluster, nullptr);
  ASSERT_EQ(r.layers.size(), 2U);
  EXPECT_TRUE(r.dense);
  EXPECT_TRUE(r.calibrated);
  EXPECT_EQ(r.layers[0].attention_fwd_ns, 7440 + 12240);
  const RingPassResult& fwd = r.rings[0];
  EXPECT_FALSE(fwd.backward);
  EXPECT_EQ(fwd.run.at(0, 0).compute_end_ns, 7440);
  EXPECT_EQ(fwd.run.at(0, 1).compute_end_ns - fwd.run.at(0, 1).compute_start_ns, 0) << "no work on a later chunk";
  EXPECT_EQ(fwd.run.at(1, 1).recv_end_ns, 7243);
  EXPECT_EQ(fwd.run.at(1, 1).compute_start_ns, 7440);
  EXPECT_FALSE(fwd.run.at(1, 1).comm_exposed);
  EXPECT_EQ(r.layers[0].work.tiles, 4 * (136 + 136 + 256));
  EXPECT_GT(r.step.step_ns, r.step.forward_ns + r.step.backward_ns - 1);
  EXPECT_GT(r.step.tokens_per_s, 0.0);
  EXPECT_TRUE(r.memory.fits);
}

TEST(SimulationTest, PerKeyBlockCostAddsTheChunksKeyBlocksToEveryBackwardStep) {
  // The backward's key-block pass launches CTAs for every (K/V head, key block) of the held chunk:
  // with 1 us per key block, every backward step with work costs exactly 1 us x K/V heads of the
  // launch (x micro batch) x key blocks of the chunk more, steps without work and the forward
  // nothing more. Tiny model: 4 query heads over 2 K/V heads, blocks of 64.
  const ModelConfig model = small_model();
  const Trace trace = small_trace(2, 4, 4096, 23);
  struct Case {
    PlanConfig plan;
    bool sparse;
    int64_t key_blocks;  // by hand
    int64_t nodes;
    int64_t gpus_per_node;
  };
  std::vector<Case> cases;
  // Dense, W = 2, N = 2048: chunks of 1024 tokens = 16 key blocks x 2 K/V heads.
  cases.push_back({small_plan(2048, 2, "contiguous", 0, false, {{2, "nvlink"}}), false, 32, 1, 2});
  // Sparse zigzag, W = 2, N = 4096, head parallel 2: one K/V head per group x 32 key blocks.
  cases.push_back({small_plan(4096, 2, "zigzag", 0, true, {{2, "nvlink"}}, 2, 1), true, 32, 2, 2});
  // Sparse striped G = 64, W = 8, N = 4096, micro batch 2: 2 K/V heads x 2 sequences x 8 key blocks.
  cases.push_back({small_plan(4096, 8, "striped", 64, true, {{4, "nvlink"}, {2, "infiniband"}}), true, 32, 2, 4});
  cases.back().plan.micro_batch_sequences = 2;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << to_string(c.plan.layout.kind()) << " W=" << c.plan.context_parallel);
    ClusterConfig cluster = small_cluster(c.nodes, c.gpus_per_node);
    SimulationContext before_context;
    const SimulationResult before = simulate(before_context, c.plan, model, cluster, c.sparse ? &trace : nullptr);
    cluster.gpu_config.calibration->shapes.front().backward.per_key_block_us = 1.0;
    SimulationContext after_context;
    const SimulationResult after = simulate(after_context, c.plan, model, cluster, c.sparse ? &trace : nullptr);
    ASSERT_EQ(before.rings.size(), after.rings.size());
    int64_t steps_with_work = 0;
    for (size_t k = 0; k < before.rings.size(); ++k) {
      const RingPassResult& b = before.rings[k];
      const RingPassResult& a = after.rings[k];
      ASSERT_EQ(b.compute_ns.size(), a.compute_ns.size());
      for (size_t cell = 0; cell < b.compute_ns.size(); ++cell) {
        const SimNs added = b.backward && b.compute_ns[cell] > 0 ? 1000 * c.key_blocks : 0;
        ASSERT_EQ(a.compute_ns[cell], b.compute_ns[cell] + added) << (b.backward ? "backward" : "forward") << " cell " << cell;
        steps_with_work += added > 0 ? 1 : 0;
      }
    }
    EXPECT_GT(steps_with_work, 0);
  }
}

TEST(SimulationTest, TwoSimulationsAgreeAndReuseWork) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(2, 4);
  const Trace trace = small_trace(2, 4, 4096, 11);
  PlanConfig plan = small_plan(4096, 8, "striped", 64, true, {{4, "nvlink"}, {2, "infiniband"}});
  SimulationOptions options;
  options.trace_key = "small";
  SimulationContext shared;
  SimulationContext fresh;
  const SimulationResult a = simulate(shared, plan, model, cluster, &trace, options);
  const SimulationResult b = simulate(fresh, plan, model, cluster, &trace, options);
  EXPECT_EQ(a.step.step_ns, b.step.step_ns);
  ASSERT_EQ(a.rings.size(), b.rings.size());
  for (size_t k = 0; k < a.rings.size(); ++k) {
    EXPECT_EQ(a.rings[k].run.finish_ns, b.rings[k].run.finish_ns);
    EXPECT_EQ(a.rings[k].compute_ns, b.rings[k].compute_ns);
  }
  // Another hierarchy split of the same layout and degree reuses the counted work.
  plan.ring_levels = {{8, LinkKind::infiniband}};
  const SimulationResult c = simulate(shared, plan, model, cluster, &trace, options);
  EXPECT_EQ(shared.work_cache_hits(), 1);
  EXPECT_EQ(c.layers[0].work, a.layers[0].work);
  const SimulationResult again = simulate(shared, plan, model, cluster, &trace, options);
  EXPECT_EQ(again.step.step_ns, c.step.step_ns);
}

TEST(SimulationTest, BusiestKernelTimeWithAndWithoutRingRecords) {
  // The busiest rank's summed kernel time of each layer and direction is what the ring records
  // show, and a simulation without records (its ring passes from the cache) reports the same.
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(2, 4);
  const Trace trace = small_trace(2, 4, 4096, 17);
  const PlanConfig plan = small_plan(4096, 4, "zigzag", 0, true, {{4, "nvlink"}}, 2, 1);
  SimulationOptions options;
  options.trace_key = "busiest";
  SimulationContext context;
  const SimulationResult with_records = simulate(context, plan, model, cluster, &trace, options);
  for (const LayerResult& layer : with_records.layers) {
    SimNs fwd = 0;
    SimNs bwd = 0;
    for (const RingPassResult& pass : with_records.rings) {
      if (pass.layer != layer.layer) continue;
      const int32_t w = pass.run.ranks;
      for (int32_t p = 0; p < w; ++p) {
        SimNs sum = 0;
        for (int32_t t = 0; t < w; ++t) sum += pass.compute_ns[static_cast<size_t>(p * w + t)];
        (pass.backward ? bwd : fwd) = std::max(pass.backward ? bwd : fwd, sum);
      }
    }
    EXPECT_GT(fwd, 0);
    EXPECT_EQ(layer.busiest_kernel_fwd_ns, fwd);
    EXPECT_EQ(layer.busiest_kernel_bwd_ns, bwd);
    EXPECT_LE(layer.busiest_kernel_fwd_ns, layer.attention_fwd_ns);
  }
  options.keep_ring_records = false;
  for (int run = 0; run < 2; ++run) {  // the second one reads the cached ring passes
    const SimulationResult bare = simulate(context, plan, model, cluster, &trace, options);
    EXPECT_TRUE(bare.rings.empty());
    for (size_t l = 0; l < bare.layers.size(); ++l) {
      EXPECT_EQ(bare.layers[l].busiest_kernel_fwd_ns, with_records.layers[l].busiest_kernel_fwd_ns);
      EXPECT_EQ(bare.layers[l].busiest_kernel_bwd_ns, with_records.layers[l].busiest_kernel_bwd_ns);
    }
  }
}

TEST(SimulationTest, RelabellingSymmetricRanksChangesNothing) {
  // One node, identical NVLink between every pair: any ring order times the same.
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 4);
  const Trace trace = small_trace(2, 4, 4096, 5);
  PlanConfig plan = small_plan(4096, 4, "zigzag", 0, true, {{4, "nvlink"}});
  SimulationContext context;
  const SimulationResult a = simulate(context, plan, model, cluster, &trace);
  plan.ring_order = {2, 0, 3, 1};
  const SimulationResult b = simulate(context, plan, model, cluster, &trace);
  EXPECT_EQ(a.step.step_ns, b.step.step_ns);
  for (size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].attention_fwd_ns, b.layers[l].attention_fwd_ns);
    EXPECT_EQ(a.layers[l].attention_bwd_ns, b.layers[l].attention_bwd_ns);
  }
}

TEST(SimulationTest, RingOrdersWhoseLinksTimeAlikeShareTheirRingPasses) {
  // Two nodes of four: the ring that starts on the other node crosses the same fabric at the
  // same positions, so its passes come from the cache; an order that crosses nodes at every hop
  // does not.
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(2, 4);
  const Trace trace = small_trace(2, 4, 4096, 19);
  PlanConfig plan = small_plan(4096, 8, "striped", 64, true, {{8, "infiniband"}});
  SimulationOptions options;
  options.trace_key = "orders";
  options.keep_ring_records = false;
  SimulationContext context;
  const SimulationResult a = simulate(context, plan, model, cluster, &trace, options);
  EXPECT_EQ(context.ring_pass_hits(), 0);
  plan.ring_order = {4, 5, 6, 7, 0, 1, 2, 3};
  const SimulationResult b = simulate(context, plan, model, cluster, &trace, options);
  EXPECT_EQ(context.ring_pass_hits(), 1);
  EXPECT_EQ(b.step.step_ns, a.step.step_ns);
  plan.ring_order = {0, 4, 1, 5, 2, 6, 3, 7};
  const SimulationResult c = simulate(context, plan, model, cluster, &trace, options);
  EXPECT_EQ(context.ring_pass_hits(), 1);
  EXPECT_GT(c.layers[0].attention_fwd_ns, a.layers[0].attention_fwd_ns);
  // The same orders simulated apart, without the cache, agree with the cached ones.
  SimulationContext fresh;
  plan.ring_order = {4, 5, 6, 7, 0, 1, 2, 3};
  const SimulationResult alone = simulate(fresh, plan, model, cluster, &trace, options);
  EXPECT_EQ(alone.step.step_ns, b.step.step_ns);
  for (size_t l = 0; l < alone.layers.size(); ++l) {
    EXPECT_EQ(alone.layers[l].attention_bwd_ns, b.layers[l].attention_bwd_ns);
    EXPECT_EQ(alone.layers[l].busiest_kernel_fwd_ns, b.layers[l].busiest_kernel_fwd_ns);
  }
  EXPECT_EQ(alone.step_imbalance, b.step_imbalance);
  EXPECT_EQ(alone.exposed_share, b.exposed_share);
}

TEST(SimulationTest, OneNodeOuterLevelEqualsFlatRing) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 4);
  const Trace trace = small_trace(2, 4, 4096, 3);
  SimulationContext context;
  const SimulationResult flat =
      simulate(context, small_plan(4096, 4, "striped", 64, true, {{4, "nvlink"}}), model, cluster, &trace);
  const SimulationResult nested =
      simulate(context, small_plan(4096, 4, "striped", 64, true, {{4, "nvlink"}, {1, "nvlink"}}), model, cluster, &trace);
  EXPECT_EQ(flat.step.step_ns, nested.step.step_ns);
  EXPECT_EQ(flat.layers[1].attention_bwd_ns, nested.layers[1].attention_bwd_ns);
}

TEST(SimulationTest, MoreSparsityNeverSlower) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(2, 2);
  const Trace trace = small_trace(2, 4, 4096, 17);
  SimulationContext context;
  // A higher recall keeps a superset (recall selection keeps a prefix of the mass-sorted
  // candidates), so it is never faster.
  SimNs previous = 0;
  int64_t previous_tiles = 0;
  for (const double recall : {0.3, 0.6, 0.9, 1.0}) {
    PlanConfig plan = small_plan(4096, 4, "striped", 64, true, {{2, "nvlink"}, {2, "infiniband"}});
    plan.sparse.recall = recall;
    const SimulationResult r = simulate(context, plan, model, cluster, &trace);
    EXPECT_GE(r.step.step_ns, previous) << "recall " << recall;
    EXPECT_GE(r.layers[0].work.tiles, previous_tiles);
    previous = r.step.step_ns;
    previous_tiles = r.layers[0].work.tiles;
  }
  // Dense computes every tile a sparse plan could (it skips estimation and vertical gathers, so
  // its step time is not bounded by the sparse one).
  const SimulationResult dense =
      simulate(context, small_plan(4096, 4, "striped", 64, false, {{2, "nvlink"}, {2, "infiniband"}}), model, cluster, nullptr);
  EXPECT_GE(dense.layers[0].work.tiles, previous_tiles);
}

TEST(SimulationTest, HeadParallelGroupsAndDataParallelReplicas) {
  const ModelConfig model = small_model();
  const Trace trace = small_trace(2, 4, 4096, 8);
  SimulationContext context;
  // 2 nodes x 2: ring 0 = ranks 0, 1 (head group 0), ring 1 = ranks 2, 3 (head group 1); the
  // Ulysses groups {0, 2} and {1, 3} cross the nodes.
  const SimulationResult u = simulate(context, small_plan(4096, 2, "striped", 64, true, {{2, "nvlink"}}, 2, 1), model,
                                      small_cluster(2, 2), &trace);
  ASSERT_EQ(u.ring_classes.size(), 2U);
  EXPECT_EQ(u.heads_per_group, 2);
  SimNs slowest = 0;
  for (const RingPassResult& pass : u.rings) {
    if (pass.layer == 0 && !pass.backward) slowest = std::max(slowest, pass.run.end_ns);
  }
  EXPECT_EQ(u.layers[0].attention_fwd_ns, slowest);
  bool has_ulysses = false;
  for (const LayerPhase& phase : u.layers[0].forward) has_ulysses = has_ulysses || phase.name == "ulysses_a2a_in";
  EXPECT_TRUE(has_ulysses);
  // Two data-parallel replicas on one node time alike: one ring class for both rings.
  const SimulationResult d = simulate(context, small_plan(4096, 2, "striped", 64, true, {{2, "nvlink"}}, 1, 2), model,
                                      small_cluster(1, 4), &trace);
  ASSERT_EQ(d.ring_classes.size(), 1U);
  EXPECT_EQ(d.ring_classes[0].rings, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(d.step.tokens_per_step, 2 * 4096);
}

TEST(SimulationTest, AllGatherPrimitive) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 4);
  const Trace trace = small_trace(2, 4, 4096, 6);
  PlanConfig plan = small_plan(4096, 4, "striped", 64, true, {{4, "nvlink"}});
  plan.comm = CommPrimitive::all_gather;
  SimulationContext context;
  const SimulationResult r = simulate(context, plan, model, cluster, &trace);
  // Forward: every rank computes its chunks back to back once the gather is done.
  const RingPassResult& fwd = r.rings[0];
  for (int32_t p = 0; p < 4; ++p) {
    for (int32_t t = 1; t < 4; ++t) EXPECT_GE(fwd.run.at(p, t).compute_start_ns, fwd.run.at(p, 1).recv_end_ns);
  }
  EXPECT_TRUE(fwd.run.transfers.empty());
  EXPECT_EQ(r.memory.bytes_of("ring_buffers"),
            estimate_memory(plan, model, cluster.gpu_config, layer_shapes(plan, model), 0).bytes_of("ring_buffers"));
}

TEST(SimulationTest, RejectsMismatchedInputs) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 2);
  SimulationContext context;
  const PlanConfig sparse_plan = small_plan(2048, 2, "contiguous", 0, true, {{2, "nvlink"}});
  EXPECT_THROW(simulate(context, sparse_plan, model, cluster, nullptr), InputError) << "sparse needs a trace";
  const Trace wrong_len = small_trace(2, 4, 4096, 1);
  EXPECT_THROW(simulate(context, sparse_plan, model, cluster, &wrong_len), InputError) << "trace length";
  const Trace wrong_layers = small_trace(3, 4, 2048, 1);
  EXPECT_THROW(simulate(context, sparse_plan, model, cluster, &wrong_layers), InputError) << "trace layers";
  SimulationOptions options;
  options.trace_sample = 5;
  const Trace ok = small_trace(2, 4, 2048, 1);
  EXPECT_THROW(simulate(context, sparse_plan, model, cluster, &ok, options), InputError) << "sample";
}

TEST(SimulationTest, NicSharingCountsEveryRingLevel) {
  // 4 nodes of 1 GPU with one NIC each, ring levels {2, 2}: both levels cross nodes, so every node
  // sends an inner and an outer K/V hop through its NIC at once and each gets half of it.
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(4, 1);
  const PlanConfig plan = small_plan(4096, 4, "striped", 64, false, {{2, "infiniband"}, {2, "infiniband"}});
  SimulationContext context;
  const SimulationResult r = simulate(context, plan, model, cluster, nullptr);
  const LinkModel ib = make_link_model(*cluster.inter_node);
  const int64_t kv_bytes = layer_shapes(plan, model).kv_chunk_bytes;
  const SimNs half = transfer_time_ns(ib, kv_bytes, 0.5);
  ASSERT_GT(half, transfer_time_ns(ib, kv_bytes, 1.0));
  int checked = 0;
  for (const RingTransfer& t : r.rings[0].run.transfers) {
    if (t.kind != TransferKind::kv) continue;
    EXPECT_EQ(t.end_ns - t.start_ns, half) << "level " << t.level;
    ++checked;
  }
  EXPECT_GT(checked, 0);
  // One ring level crossing nodes with one flow per node: the full NIC.
  const PlanConfig flat = small_plan(4096, 4, "striped", 64, false, {{4, "infiniband"}});
  const SimulationResult f = simulate(context, flat, model, cluster, nullptr);
  for (const RingTransfer& t : f.rings[0].run.transfers) {
    if (t.kind == TransferKind::kv) {
      EXPECT_EQ(t.end_ns - t.start_ns, transfer_time_ns(ib, kv_bytes, 1.0));
    }
  }
}

TEST(SimulationTest, AccumulatorRoutes) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(2, 4);
  const Trace trace = small_trace(2, 4, 4096, 12);
  SimulationContext context;
  SimulationOptions mirror;
  SimulationOptions direct;
  direct.accumulator_route = AccumulatorRoute::direct_return;
  // Hierarchical: the mirrored accumulators cross nodes only over the outer level, between
  // outer neighbours; direct returns go from the last position of each inner cycle to the owner.
  const PlanConfig hier = small_plan(4096, 8, "striped", 64, true, {{4, "nvlink"}, {2, "infiniband"}});
  const SimulationResult m = simulate(context, hier, model, cluster, &trace, mirror);
  const SimulationResult d = simulate(context, hier, model, cluster, &trace, direct);
  EXPECT_EQ(m.layers[0].attention_fwd_ns, d.layers[0].attention_fwd_ns) << "the forward pass does not change";
  int64_t outer_hops = 0;
  int64_t returns = 0;
  for (const RingTransfer& t : m.rings[1].run.transfers) {
    ASSERT_TRUE(m.rings[1].backward);
    if (t.kind == TransferKind::kv) continue;
    if (t.level == 1) ++outer_hops;
    if (t.kind == TransferKind::dkv_return) {
      ++returns;
      EXPECT_EQ(t.level, 1);
    }
  }
  EXPECT_EQ(outer_hops, 8 * 2);  // every position, once per outer step
  EXPECT_EQ(returns, 8);
  int64_t direct_returns = 0;
  for (const RingTransfer& t : d.rings[1].run.transfers) direct_returns += t.kind == TransferKind::dkv_return ? 1 : 0;
  EXPECT_EQ(direct_returns, 8 * 2);  // every position, once per inner cycle
  // A flat ring has one route.
  const PlanConfig flat = small_plan(4096, 8, "striped", 64, true, {{8, "infiniband"}});
  EXPECT_EQ(simulate(context, flat, model, cluster, &trace, mirror).step.step_ns,
            simulate(context, flat, model, cluster, &trace, direct).step.step_ns);
}

TEST(SimulationTest, IndexPreparationPhases) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 2);
  const Trace trace = small_trace(2, 4, 2048, 2);
  SimulationContext context;
  SimulationOptions options;
  options.roofline.estimate_launch_us = 10.0;
  options.roofline.estimate_per_head_ktoken_us = 1.0;
  options.roofline.select_launch_us = 5.0;
  options.roofline.select_per_head_ktoken_us = 0.5;
  options.roofline.index_build_launch_us = 50.0;
  options.roofline.index_build_per_head_ktoken_us = 2.0;
  const SimulationResult sparse =
      simulate(context, small_plan(2048, 2, "striped", 64, true, {{2, "nvlink"}}), model, cluster, &trace, options);
  const auto phase_ns = [](const LayerResult& layer, const std::string& name) {
    SimNs ns = 0;
    for (const LayerPhase& phase : layer.forward) ns += phase.name == name ? phase.duration_ns : 0;
    return ns;
  };
  // 4 heads, 1024 local of 2048 tokens, last_q 64, blocks 64 x 64 (twice the lists of 128 x 128):
  // estimation 10 + 1 x 4 = 14 us, selection 5 + 0.5 x 8 = 9 us, build 50 + 2 x 4 x 2 = 66 us.
  EXPECT_EQ(phase_ns(sparse.layers[0], "estimate_scores"), 23000);
  EXPECT_EQ(phase_ns(sparse.layers[0], "index_build"), 66000);
  const SimulationResult dense =
      simulate(context, small_plan(2048, 2, "striped", 64, false, {{2, "nvlink"}}), model, cluster, nullptr, options);
  for (const LayerPhase& phase : dense.layers[0].forward) {
    EXPECT_NE(phase.name, "index_build");
    EXPECT_NE(phase.name, "estimate_scores");
  }
}

TEST(SimulationTest, TraceOfAnotherModelWithTheSameShapeIsNoted) {
  const ModelConfig model = small_model();
  const ClusterConfig cluster = small_cluster(1, 2);
  Trace trace = small_trace(2, 4, 2048, 2);
  trace.metadata.model = "other";
  SimulationContext context;
  const SimulationResult r =
      simulate(context, small_plan(2048, 2, "zigzag", 0, true, {{2, "nvlink"}}), model, cluster, &trace);
  bool noted = false;
  for (const std::string& note : r.notes) noted = noted || note.find("made for model 'other'") != std::string::npos;
  EXPECT_TRUE(noted);
  SimulationOptions bad;
  bad.threads = 0;
  EXPECT_THROW(simulate(context, small_plan(2048, 2, "zigzag", 0, true, {{2, "nvlink"}}), model, cluster, &trace, bad),
               InputError);
}

TEST(SimulationTest, MemoryDoesNotFitSaysWhy) {
  const ModelConfig model = small_model();
  ClusterConfig cluster = small_cluster(1, 2);
  cluster.gpu_config.memory_gib = 0.001;
  SimulationContext context;
  const SimulationResult r = simulate(context, small_plan(2048, 2, "zigzag", 0, false, {{2, "nvlink"}}), model, cluster, nullptr);
  EXPECT_FALSE(r.memory.fits);
  EXPECT_NE(r.memory.reason.find("GiB"), std::string::npos);
}

}  // namespace
}  // namespace sparsering
