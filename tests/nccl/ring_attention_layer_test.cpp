// The distributed ring layer (kernels/nccl/ring_attention_layer.hpp) against the single-GPU
// kernels over the whole sequence (tests/nccl/ring_reference.hpp) on fresh random inputs and
// kept sets: output, LSE, dQ, dK, dV for contiguous, zigzag and striped (two granularities)
// layouts, flat rings in two ring orders, hierarchical 2 x 2 rings with both level orders (4
// GPUs), dense mode against dense attention (and an fp64 host check of sampled rows), estimate
// mode against the single-GPU estimator. Bounds: those of the kernels' own GPU tests (the ring
// only changes the fp32 merge / accumulation order). Label nccl; skips below 2 GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "kernels/cuda/pattern_pipeline.hpp"
#include "kernels/nccl/ring_attention_layer.hpp"
#include "ring_reference.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

using ring_testing::compare;
using ring_testing::describe;
using ring_testing::gpu_count;

constexpr double kOutMaxAbs = 1e-2;
constexpr double kOutRelL2 = 5e-3;
constexpr double kLseAbs = 2e-3;
constexpr double kGradRelL2 = 1e-2;
constexpr double kGradMaxRel = 3e-2;

uint64_t fresh_seed() { return sparsering::testing_support::test_seed(); }

KeptSet random_kept(std::mt19937_64& rng, int32_t rows, int64_t n) {
  std::vector<KeptRow> kept;
  std::uniform_int_distribution<int64_t> any(0, n - 1);
  for (int32_t r = 0; r < rows; ++r) {
    std::set<int32_t> v{0, 1, 2};
    std::set<int32_t> s;
    for (int64_t i = 0; i < n / 40; ++i) v.insert(static_cast<int32_t>(any(rng)));
    for (int32_t d = 1; d <= 8; ++d) {
      if (rng() % 2 == 0) s.insert(d);
    }
    for (int64_t i = 0; i < n / 50; ++i) s.insert(static_cast<int32_t>(any(rng)));
    kept.push_back(KeptRow{std::vector<int32_t>(v.begin(), v.end()), std::vector<int32_t>(s.begin(), s.end())});
  }
  return KeptSet(n, std::move(kept));
}

RingLayerProblem make_problem(LayoutKind kind, int64_t granularity, int32_t ranks, int64_t n, uint64_t seed) {
  RingLayerProblem p;
  p.layout = make_token_layout(kind, n, ranks, granularity);
  p.shape = AttentionShape{1, 4, 2, 128, p.layout.local_len(), p.layout.local_len()};
  p.pattern = PatternSource::kept_sets;
  p.backward = true;
  p.seed = seed;
  return p;
}

std::string label(const RingLayerProblem& p) {
  std::string s = std::string(to_string(p.layout.kind())) + " G=" + std::to_string(p.layout.granularity_tokens()) +
                  " W=" + std::to_string(p.layout.ranks()) + " levels";
  for (const auto l : p.level_sizes) s += " " + std::to_string(l);
  s += " order";
  for (const auto g : p.ring_order) s += " " + std::to_string(g);
  s += " seed " + std::to_string(p.seed);
  return s;
}

/// Runs the layer and checks every output against the single-GPU kernels.
void expect_matches_single_gpu(const RingLayerProblem& problem) {
  SCOPED_TRACE(label(problem));
  RingRuntimeOptions options;
  options.return_outputs = true;
  options.timeout_s = 30.0;  // a hang fails the test quickly
  const RingLayerMeasurement m = run_ring_attention_layer(problem, options);
  const KeptSet kept = problem.pattern == PatternSource::dense
                                ? ring_testing::dense_kept(problem.shape.batch * problem.shape.q_heads,
                                                           problem.layout.seq_len_tokens())
                                : problem.kept;
  const ring_testing::ReferenceOutputs ref = ring_testing::single_gpu_reference(problem, kept);
  const int32_t d = problem.shape.head_dim;
  const auto out = compare(problem, m, problem.shape.q_heads, d, &RingRankOutputs::out, ref.out);
  EXPECT_EQ(out.non_finite, 0u) << describe(out);
  EXPECT_LE(out.max_abs, kOutMaxAbs) << "out " << describe(out);
  EXPECT_LE(out.rel_l2, kOutRelL2) << "out " << describe(out);
  const auto lse = compare(problem, m, problem.shape.q_heads, 1, &RingRankOutputs::lse, ref.lse);
  EXPECT_EQ(lse.non_finite, 0u) << describe(lse);
  EXPECT_LE(lse.max_abs, kLseAbs) << "lse " << describe(lse);
  if (!problem.backward) return;
  const auto dq = compare(problem, m, problem.shape.q_heads, d, &RingRankOutputs::dq, ref.dq);
  const auto dk = compare(problem, m, problem.shape.kv_heads, d, &RingRankOutputs::dk, ref.dk);
  const auto dv = compare(problem, m, problem.shape.kv_heads, d, &RingRankOutputs::dv, ref.dv);
  for (const auto& [name, c] : {std::pair{"dq", dq}, std::pair{"dk", dk}, std::pair{"dv", dv}}) {
    EXPECT_EQ(c.non_finite, 0u) << name << " " << describe(c);
    EXPECT_LE(c.rel_l2, kGradRelL2) << name << " " << describe(c);
    EXPECT_LE(c.max_abs, kGradMaxRel * c.max_ref + 1e-6) << name << " " << describe(c);
  }
  // Timings are filled for every (rank, step).
  const auto cells = static_cast<size_t>(problem.layout.ranks()) * static_cast<size_t>(problem.layout.ranks());
  EXPECT_EQ(m.forward.compute_ms.size(), cells);
  EXPECT_EQ(m.backward.step_ms.size(), cells);
  EXPECT_GT(m.forward.wall_ms, 0.0);
}

TEST(RingAttentionLayer, FlatRingsMatchSingleGpuOnEveryLayout) {
  const int gpus = gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  const int32_t w = gpus >= 4 ? 4 : 2;
  const int64_t n = 4096;
  std::mt19937_64 rng(fresh_seed());
  const std::vector<std::pair<LayoutKind, int64_t>> layouts = {
      {LayoutKind::contiguous, 0}, {LayoutKind::zigzag, 0}, {LayoutKind::striped, 64}, {LayoutKind::striped, 128}};
  std::vector<int32_t> shuffled(static_cast<size_t>(w));
  for (int32_t i = 0; i < w; ++i) shuffled[static_cast<size_t>(i)] = (i * 3 + 1) % w;  // 1,0 or 1,0,3,2 ... a permutation
  if (w == 4) shuffled = {2, 0, 3, 1};
  for (const auto& [kind, granularity] : layouts) {
    for (const auto& order : {std::vector<int32_t>{}, shuffled}) {
      RingLayerProblem p = make_problem(kind, granularity, w, n, rng());
      p.ring_order = order;
      p.kept = random_kept(rng, p.shape.batch * p.shape.q_heads, n);
      expect_matches_single_gpu(p);
    }
  }
}

TEST(RingAttentionLayer, HeadDim64BatchTwoAndForwardOnly) {
  const int gpus = gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  std::mt19937_64 rng(fresh_seed());
  RingLayerProblem p = make_problem(LayoutKind::striped, 64, 2, 2048, rng());
  p.shape = AttentionShape{2, 4, 1, 64, p.layout.local_len(), p.layout.local_len()};
  p.kept = random_kept(rng, 8, 2048);
  p.ring_order = {1, 0};
  expect_matches_single_gpu(p);
  p.backward = false;
  p.warmup = 1;
  p.iterations = 2;
  expect_matches_single_gpu(p);
}

TEST(RingAttentionLayer, HierarchicalTwoByTwoMatchesSingleGpuInBothLevelOrders) {
  const int gpus = gpu_count();
  if (gpus < 4) GTEST_SKIP() << "needs 4 GPUs, found " << gpus;
  std::mt19937_64 rng(fresh_seed());
  // Inner rings {0,1},{2,3} and {0,2},{1,3}: both ways to split 4 GPUs into 2 x 2.
  for (const auto& order : {std::vector<int32_t>{0, 1, 2, 3}, std::vector<int32_t>{0, 2, 1, 3}}) {
    for (const auto& [kind, granularity] : {std::pair{LayoutKind::striped, int64_t{64}}, std::pair{LayoutKind::zigzag, int64_t{0}}}) {
      RingLayerProblem p = make_problem(kind, granularity, 4, 4096, rng());
      p.level_sizes = {2, 2};
      p.ring_order = order;
      p.kept = random_kept(rng, p.shape.batch * p.shape.q_heads, 4096);
      expect_matches_single_gpu(p);
    }
  }
}

TEST(RingAttentionLayer, DenseModeEqualsDenseAttention) {
  const int gpus = gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  const int32_t w = gpus >= 4 ? 4 : 2;
  std::mt19937_64 rng(fresh_seed());
  RingLayerProblem p = make_problem(LayoutKind::zigzag, 0, w, 2048, rng());
  p.pattern = PatternSource::dense;
  p.shape = AttentionShape{1, 2, 1, 64, p.layout.local_len(), p.layout.local_len()};
  expect_matches_single_gpu(p);
  // fp64 host attention over every causal pair for sampled rows.
  RingRuntimeOptions options;
  options.return_outputs = true;
  const RingLayerMeasurement m = run_ring_attention_layer(p, options);
  const int64_t n = p.layout.seq_len_tokens();
  const int32_t d = p.shape.head_dim;
  const auto q = ring_testing::host_inputs(p.seed, 0, 1, 2, n, d);
  const auto k = ring_testing::host_inputs(p.seed, 1, 1, 1, n, d);
  const auto v = ring_testing::host_inputs(p.seed, 2, 1, 1, n, d);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  double worst = 0.0;
  for (int sample = 0; sample < 24; ++sample) {
    const int32_t g = static_cast<int32_t>(rng() % static_cast<uint64_t>(w));
    const int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(p.layout.local_len()));
    const int32_t head = static_cast<int32_t>(rng() % 2);
    const int64_t t = p.layout.global_token(g, i);  // identity ring order: position == rank
    std::vector<double> scores(static_cast<size_t>(t + 1));
    double mx = -1e300;
    for (int64_t j = 0; j <= t; ++j) {
      double s = 0.0;
      for (int32_t e = 0; e < d; ++e) {
        s += static_cast<double>(bf16_to_float(q[static_cast<size_t>((head * n + t) * d + e)])) *
             static_cast<double>(bf16_to_float(k[static_cast<size_t>(j * d + e)]));
      }
      scores[static_cast<size_t>(j)] = s * scale;
      mx = std::max(mx, s * scale);
    }
    double sum = 0.0;
    for (auto& s : scores) sum += (s = std::exp(s - mx));
    const auto& got = m.outputs[static_cast<size_t>(g)].out;
    for (int32_t e = 0; e < d; ++e) {
      double o = 0.0;
      for (int64_t j = 0; j <= t; ++j) {
        o += scores[static_cast<size_t>(j)] * static_cast<double>(bf16_to_float(v[static_cast<size_t>(j * d + e)]));
      }
      o /= sum;
      const double a = got[static_cast<size_t>((head * p.layout.local_len() + i) * d + e)];
      worst = std::max(worst, std::abs(a - o));
    }
    const double lse_ref = mx + std::log(sum);
    EXPECT_NEAR(m.outputs[static_cast<size_t>(g)].lse[static_cast<size_t>(head * p.layout.local_len() + i)], lse_ref,
                kLseAbs);
  }
  EXPECT_LE(worst, kOutMaxAbs);
}

TEST(RingAttentionLayer, EstimateModeSelectsTheSingleGpuKeptSets) {
  const int gpus = gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  const int32_t w = gpus >= 4 ? 4 : 2;
  std::mt19937_64 rng(fresh_seed());
  RingLayerProblem p = make_problem(LayoutKind::striped, 64, w, 4096, rng());
  p.pattern = PatternSource::estimate;
  p.recall = 0.9;
  p.last_q = 64;
  p.capacity = 512;
  RingRuntimeOptions options;
  options.return_outputs = true;
  const RingLayerMeasurement m = run_ring_attention_layer(p, options);

  // Single-GPU estimator over the whole sequence on the same inputs.
  SPARSERING_CUDA_CHECK(cudaSetDevice(0));
  const int64_t n = p.layout.seq_len_tokens();
  const int32_t rows = p.shape.batch * p.shape.q_heads;
  const auto q_all = ring_testing::host_inputs(p.seed, 0, 1, p.shape.q_heads, n, p.shape.head_dim);
  std::vector<bf16_bits> q_last;
  for (int32_t h = 0; h < p.shape.q_heads; ++h) {
    const auto begin = q_all.begin() + static_cast<std::ptrdiff_t>((h * n + n - p.last_q) * p.shape.head_dim);
    q_last.insert(q_last.end(), begin, begin + static_cast<std::ptrdiff_t>(p.last_q * p.shape.head_dim));
  }
  DeviceBuffer<bf16_bits> q_last_d(q_last);
  DeviceBuffer<bf16_bits> k_d(ring_testing::host_inputs(p.seed, 1, 1, p.shape.kv_heads, n, p.shape.head_dim));
  PatternPipelineParams pp;
  pp.shape = p.shape;
  pp.shape.q_len = p.last_q;
  pp.shape.kv_len = n;
  pp.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.shape.head_dim));
  pp.q_last = q_last_d.data();
  pp.k = k_d.data();
  pp.recall = p.recall;
  pp.capacity = p.capacity;
  DeviceBuffer<int32_t> vc(static_cast<size_t>(rows)), sc(static_cast<size_t>(rows));
  DeviceBuffer<int32_t> vk(static_cast<size_t>(rows * p.capacity)), so(static_cast<size_t>(rows * p.capacity));
  CudaStream stream;
  launch_single_rank_estimate_select(pp, KeptSetsOutput{vc.data(), vk.data(), sc.data(), so.data()}, stream.get());
  stream.synchronize();
  const auto vch = vc.download(), vkh = vk.download(), sch = sc.download(), soh = so.download();
  // Equal up to entries whose mass ties within fp32 summation order: bound the difference.
  int64_t kept_total = 0;
  int64_t differing = 0;
  for (int32_t r = 0; r < rows; ++r) {
    const auto base = static_cast<size_t>(r * p.capacity);
    const std::set<int32_t> ref_v(vkh.begin() + static_cast<std::ptrdiff_t>(base),
                                  vkh.begin() + static_cast<std::ptrdiff_t>(base + static_cast<size_t>(vch[static_cast<size_t>(r)])));
    const std::set<int32_t> ref_s(soh.begin() + static_cast<std::ptrdiff_t>(base),
                                  soh.begin() + static_cast<std::ptrdiff_t>(base + static_cast<size_t>(sch[static_cast<size_t>(r)])));
    const std::set<int32_t> got_v(m.kept.row(r).vertical_keys.begin(), m.kept.row(r).vertical_keys.end());
    const std::set<int32_t> got_s(m.kept.row(r).slash_offsets.begin(), m.kept.row(r).slash_offsets.end());
    kept_total += static_cast<int64_t>(ref_v.size() + ref_s.size());
    for (const auto& [a, b] : {std::pair{&ref_v, &got_v}, std::pair{&ref_s, &got_s}}) {
      for (const int32_t x : *a) differing += b->count(x) == 0 ? 1 : 0;
      for (const int32_t x : *b) differing += a->count(x) == 0 ? 1 : 0;
    }
  }
  RecordProperty("kept_entries", std::to_string(kept_total));
  RecordProperty("differing_entries", std::to_string(differing));
  std::printf("estimate: %lld of %lld kept entries differ from the single-GPU estimator\n",
              static_cast<long long>(differing), static_cast<long long>(kept_total));
  EXPECT_GT(kept_total, 0);
  EXPECT_LE(differing, std::max<int64_t>(2, kept_total / 200)) << differing << " of " << kept_total << " differ";
  // The layer ran over the selected sets: check it against the single-GPU kernels on them.
  RingLayerProblem fixed = p;
  fixed.pattern = PatternSource::kept_sets;
  fixed.kept = m.kept;
  expect_matches_single_gpu(fixed);
}

TEST(RingAttentionLayer, RejectsBadProblemsBeforeTouchingAGpu) {
  RingLayerProblem p = make_problem(LayoutKind::contiguous, 0, 2, 1024, 1);
  p.kept = ring_testing::dense_kept(4, 1024);
  EXPECT_NO_THROW(validate_ring_layer_problem(p));
  RingLayerProblem bad = p;
  bad.shape.q_len = 100;
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  bad = p;
  bad.ring_order = {0, 0};
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  bad = p;
  bad.level_sizes = {3};
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  // Kept sets: a row short, a row not ascending, a key outside [0, N). A KeptSet checks its
  // entries when it is made, so the last two are rejected there, before any problem holds them;
  // the problem rejects a set made for another sequence length.
  bad = p;
  bad.kept = ring_testing::dense_kept(3, 1024);
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  std::vector<KeptRow> rows(4);
  rows[1].slash_offsets = {5, 3};
  EXPECT_THROW(KeptSet(1024, rows), InputError);
  rows[1] = KeptRow{};
  rows[0].vertical_keys = {1024};
  EXPECT_THROW(KeptSet(1024, rows), InputError);
  bad = p;
  bad.kept = KeptSet(2048, rows);
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  bad = p;
  bad.shape.head_dim = 96;
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  bad = p;
  bad.iterations = 0;
  EXPECT_THROW(validate_ring_layer_problem(bad), InputError);
  RingRuntimeOptions options;
  options.devices = {0};
  EXPECT_THROW((void)run_ring_attention_layer(p, options), InputError);
}

}  // namespace
}  // namespace sparsering
