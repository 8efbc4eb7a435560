// The search estimate (tuner/search/search_budget.hpp): the degrees against a brute-force
// enumeration, step 1's figures by hand and as lower bounds of the enumerated space's on random
// clusters, the simulations in flight against every candidate's own simulation estimate, the
// candidate limit, and the refusals: over either budget, and a cluster at the schema limits
// before anything proportional to its GPUs is built. Randomised cases print their seed and take
// SPARSERING_TEST_SEED.
#include "tuner/search/search_budget.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/step/resource_estimate.hpp"
#include "tests/common/test_seed.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "tuner/search/search_space.hpp"

namespace sparsering {
namespace {

std::string error_of(const auto& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const MemoryEstimatePart* part(const SearchEstimate& e, const std::string& prefix) {
  for (const MemoryEstimatePart& p : e.memory) {
    if (p.name.rfind(prefix, 0) == 0) return &p;
  }
  return nullptr;
}

/// The rule of search_space.hpp, by brute force over every (H, W) pair.
std::vector<ParallelDegrees> brute_force_degrees(const ModelConfig& model, int64_t world, int64_t seq_len) {
  std::vector<ParallelDegrees> out;
  for (int64_t h = 1; h <= model.q_heads; ++h) {
    if (model.q_heads % h != 0 || world % h != 0) continue;
    if (model.kv_heads % h != 0 && h % model.kv_heads != 0) continue;
    for (int64_t w = 1; w <= world / h; ++w) {
      if ((world / h) % w == 0 && seq_len % (w * h) == 0) out.push_back(ParallelDegrees{w, h, world / (w * h)});
    }
  }
  return out;
}

/// A cluster of `nodes` x `gpus` at the schema limits' shape: NVLink, InfiniBand, and outer levels
/// of 2, 4, 8, ... nodes while they divide the nodes (at most 8).
ClusterConfig layered_cluster(int64_t nodes, int64_t gpus) {
  std::string text = str("name: layered\nnodes: ", nodes, "\ngpus_per_node: ", gpus,
                         "\ngpu: test-gpu\nintra_node: {kind: nvlink, bandwidth_gbytes_per_s: 100, latency_us: 2}\n",
                         "inter_node: {kind: infiniband, nics_per_node: 1, bandwidth_gbytes_per_s: 40, latency_us: 5}\n");
  std::string levels;
  for (int64_t group = 2, i = 0; group < nodes && i < 8; group *= 2, ++i) {
    levels += str("  - {name: l", i, ", kind: ethernet, nodes_per_group: ", group,
                  ", nics_per_node: 1, bandwidth_gbytes_per_s: ", 30 - i, ", latency_us: ", 10 + i, "}\n");
  }
  if (!levels.empty()) text += "outer_levels:\n" + levels;
  ClusterConfig cluster = parse_cluster(text, "<layered>");
  cluster.gpu_config = testing::test_gpu(80);
  return cluster;
}

TEST(SearchBudget, DegreesMatchBruteForce) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (int round = 0; round < 40; ++round) {
    const int64_t kv = int64_t{1} << (rng() % 3);
    const ModelConfig model = testing::tiny_model(2, kv * static_cast<int64_t>(1 + rng() % 4), kv);
    const ClusterConfig cluster = testing::test_cluster(static_cast<int64_t>(1 + rng() % 12), static_cast<int64_t>(1 + rng() % 8), 80);
    const int64_t seq_len = 64 * static_cast<int64_t>(1 + rng() % 96);
    const std::vector<ParallelDegrees> expected = brute_force_degrees(model, cluster.world_size(), seq_len);
    if (expected.empty()) {
      EXPECT_THROW(enumerate_parallel_degrees(model, cluster, seq_len), InputError);
      continue;
    }
    EXPECT_EQ(enumerate_parallel_degrees(model, cluster, seq_len), expected)
        << "round " << round << ": " << cluster.world_size() << " GPUs, " << seq_len << " tokens";
  }
}

TEST(SearchBudget, DegreesOfTheLargestClusterByHand) {
  // 2^26 GPUs, 4 query heads over 2 KV heads, 2^20 tokens: H in {1, 2, 4}, W x H divides 2^20:
  // W = 2^0 .. 2^20 (21), 2^0 .. 2^19 (20), 2^0 .. 2^18 (19).
  const std::vector<ParallelDegrees> degrees =
      enumerate_parallel_degrees(testing::tiny_model(), layered_cluster(65536, 1024), int64_t{1} << 20);
  EXPECT_EQ(degrees.size(), 60U);
  EXPECT_EQ(degrees.front(), (ParallelDegrees{1, 1, int64_t{1} << 26}));
  EXPECT_EQ(degrees.back(), (ParallelDegrees{int64_t{1} << 18, 4, 64}));
}

TEST(SearchBudget, BeforeEnumerationByHand) {
  // 2 nodes x 4 GPUs, 4 query / 2 KV heads, 4096 tokens: (W, H) = (1,1) (2,1) (4,1) (8,1) (1,2)
  // (2,2) (4,2) (1,4) (2,4): 9 orders of 8 ranks. Tier scans (1 + divisors >= 2 of W) x 8:
  // W = 2: 2, W = 4: 3, W = 8: 4, so (2 + 3 + 4 + 2 + 3 + 2) x 8 = 128. Collectives: 8 x the
  // sum of W = 8 x 25 = 200.
  const SearchEstimate e =
      estimate_search_before_enumeration(testing::tiny_model(), testing::test_cluster(2, 4, 80), 4096, 1000.0);
  EXPECT_FALSE(e.enumerated);
  EXPECT_EQ(e.degrees, 9);
  EXPECT_EQ(e.orders, 9);
  EXPECT_DOUBLE_EQ(e.order_ranks, 72.0);
  EXPECT_DOUBLE_EQ(e.tier_scan_ranks, 128.0);
  EXPECT_DOUBLE_EQ(e.collective_ranks, 200.0);
  ASSERT_NE(part(e, "ring orders"), nullptr);
  EXPECT_DOUBLE_EQ(part(e, "ring orders")->bytes, 72.0 * 8);
  ASSERT_NE(part(e, "trace and patterns"), nullptr);
  EXPECT_DOUBLE_EQ(part(e, "trace and patterns")->bytes, 3000.0);
  double sum = 0.0;
  for (const MemoryEstimatePart& p : e.memory) sum += p.bytes;
  EXPECT_DOUBLE_EQ(e.memory_bytes, sum);
}

TEST(SearchBudget, BeforeEnumerationBoundsTheEnumeratedSpaceFromBelow) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (int round = 0; round < 12; ++round) {
    const int64_t nodes = int64_t{1} << (rng() % 4);
    const ClusterConfig cluster = layered_cluster(nodes, static_cast<int64_t>(1 + rng() % 8));
    const ModelConfig model = testing::tiny_model(2, 4, 2);
    const int64_t seq_len = 4096;
    const SearchEstimate before = estimate_search_before_enumeration(model, cluster, seq_len, 0.0);
    const SearchSpace space = enumerate_search_space(model, cluster, seq_len, SearchSpaceOptions{});
    const SearchEstimate after = estimate_search(model, space, PlanTemplate{}, SearchOptions{}, 0.0, 0.0);
    const std::string where = str("round ", round, ": ", cluster.world_size(), " GPUs in ", nodes, " nodes");
    EXPECT_TRUE(after.enumerated);
    EXPECT_EQ(before.degrees, after.degrees) << where;
    EXPECT_EQ(after.candidates, static_cast<int64_t>(space.candidates.size())) << where;
    EXPECT_EQ(after.geometries, static_cast<int64_t>(space.geometries.size())) << where;
    EXPECT_LE(before.orders, after.orders) << where;
    EXPECT_LE(before.order_ranks, after.order_ranks) << where;
    EXPECT_LE(before.collective_ranks, after.collective_ranks) << where;
    EXPECT_LE(part(before, "ring orders")->bytes, part(after, "ring orders")->bytes) << where;
  }
}

TEST(SearchBudget, SimulationsInFlightMatchEveryCandidatesOwnEstimate) {
  const ModelConfig model = testing::tiny_model(2, 4, 2);
  const ClusterConfig cluster = layered_cluster(4, 4);
  const SearchSpace space = enumerate_search_space(model, cluster, 8192, SearchSpaceOptions{});
  for (const int64_t max_ring : {int64_t{0}, int64_t{4}}) {
    SearchOptions options;
    options.threads = 3;
    options.max_simulated_ring = max_ring;
    // Brute force: every candidate's own estimate, with the work sets of distinct geometries.
    double scratch = 0.0;
    double largest_work_set = 0.0;
    std::vector<double> work_sets(space.geometries.size(), 0.0);
    SimulationOptions search_simulation;
    search_simulation.keep_ring_records = false;  // as the search simulates
    for (const Candidate& c : space.candidates) {
      if (max_ring > 0 && space.degrees_of(c).context_parallel > max_ring) continue;
      const SimulationResourceEstimate sim =
          estimate_simulation_resources(make_candidate_plan(space, c, PlanTemplate{}), model, search_simulation, 0.0);
      scratch = std::max(scratch, sim.memory_bytes - kProcessBaseBytes - sim.work_set_bytes);
      largest_work_set = std::max(largest_work_set, sim.work_set_bytes);
      work_sets[static_cast<size_t>(c.geometry)] = sim.work_set_bytes;
    }
    double all_work_sets = 0.0;
    for (const double bytes : work_sets) all_work_sets += bytes;
    const SearchEstimate e = estimate_search(model, space, PlanTemplate{}, options, 0.0, 0.0);
    ASSERT_NE(part(e, "simulations in flight"), nullptr);
    EXPECT_DOUBLE_EQ(part(e, "simulations in flight")->bytes, 3.0 * scratch) << "max ring " << max_ring;
    ASSERT_NE(part(e, "work sets kept"), nullptr);
    EXPECT_DOUBLE_EQ(part(e, "work sets kept")->bytes, all_work_sets) << "max ring " << max_ring;
    // Over the cache: the cache plus the fresh work sets of one round.
    options.work_set_cache_bytes = 1;
    const SearchEstimate capped = estimate_search(model, space, PlanTemplate{}, options, 0.0, 0.0);
    EXPECT_DOUBLE_EQ(part(capped, "work sets kept")->bytes,
                     std::min(all_work_sets, 1.0 + static_cast<double>(options.round_work_sets) * largest_work_set));
  }
}

TEST(SearchBudget, CandidateLimitStopsTheEnumeration) {
  const ModelConfig model = testing::tiny_model();
  const ClusterConfig cluster = testing::test_cluster(2, 4, 80);
  SearchSpaceOptions options;
  const auto count = static_cast<int64_t>(enumerate_search_space(model, cluster, 4096, options).candidates.size());
  options.max_candidates = count;
  EXPECT_EQ(static_cast<int64_t>(enumerate_search_space(model, cluster, 4096, options).candidates.size()), count);
  options.max_candidates = count - 1;
  const std::string message = error_of([&] { enumerate_search_space(model, cluster, 4096, options); });
  EXPECT_NE(message.find("more than " + std::to_string(count - 1) + " candidates (--max-candidates)"), std::string::npos)
      << message;
  options.max_candidates = -1;
  EXPECT_THROW(enumerate_search_space(model, cluster, 4096, options), InputError);
}

TEST(SearchBudget, CheckPassesWithinAndRefusesBeyondEitherBudget) {
  const ModelConfig model = testing::tiny_model();
  const ClusterConfig cluster = testing::test_cluster(2, 4, 80);
  const auto check = [&](SearchBudget budget) {
    return check_search_budget(model, cluster, 4096, SearchSpaceOptions{}, PlanTemplate{}, SearchOptions{}, 1e6, budget);
  };
  const SearchEstimate e = check({16.0, 300.0});
  EXPECT_TRUE(e.enumerated);
  EXPECT_EQ(e.candidates, static_cast<int64_t>(enumerate_search_space(model, cluster, 4096, {}).candidates.size()));
  EXPECT_GT(e.seconds, 0.0);
  const std::string memory = error_of([&] { check({0.01, 300.0}); });
  EXPECT_NE(memory.find("--max-memory-gib"), std::string::npos) << memory;
  const std::string time = error_of([&] { check({16.0, 1e-12}); });
  EXPECT_NE(time.find("(enumerating the plan space) needs at least"), std::string::npos) << time;
  EXPECT_NE(time.find("--max-search-seconds"), std::string::npos) << time;
  // Between the two steps' figures: step 1 passes, the enumerated space's bounds do not.
  const SearchEstimate before = estimate_search_before_enumeration(model, cluster, 4096, 1e6);
  const double between = 2.0 * before.seconds;
  ASSERT_GT(static_cast<double>(e.candidates) * 70e-9, between) << "the bounds of every candidate must exceed it";
  const std::string enumerated = error_of([&] { check({16.0, between}); });
  EXPECT_NE(enumerated.find("needs at least"), std::string::npos) << enumerated;
  EXPECT_EQ(enumerated.find("enumerating the plan space"), std::string::npos) << enumerated;
  EXPECT_NE(enumerated.find("bounds of every candidate"), std::string::npos) << enumerated;
  EXPECT_THROW(check({0.0, 300.0}), InputError);
}

TEST(SearchBudget, SchemaLimitClusterIsRefusedBeforeEnumerating) {
  // 65536 nodes x 1024 GPUs under eight outer levels: enumerating would build ring orders of 2^26
  // ranks for each of 60 sets of degrees (30 GiB at least) before bounding any plan.
  const ClusterConfig cluster = layered_cluster(65536, 1024);
  const ModelConfig model = testing::tiny_model();
  const SearchEstimate before = estimate_search_before_enumeration(model, cluster, int64_t{1} << 20, 0.0);
  EXPECT_DOUBLE_EQ(before.order_ranks, 60.0 * static_cast<double>(int64_t{1} << 26));
  const auto check = [&](SearchBudget budget) {
    check_search_budget(model, cluster, int64_t{1} << 20, SearchSpaceOptions{}, PlanTemplate{}, SearchOptions{}, 0.0,
                        budget);
  };
  const std::string memory = error_of([&] { check({16.0, 300.0}); });
  EXPECT_NE(memory.find("enumerating the plan space"), std::string::npos) << memory;
  EXPECT_NE(memory.find("--max-memory-gib"), std::string::npos) << memory;
  const std::string time = error_of([&] { check({1e6, 300.0}); });
  EXPECT_NE(time.find("enumerating the plan space"), std::string::npos) << time;
  EXPECT_NE(time.find("--max-search-seconds"), std::string::npos) << time;
}

}  // namespace
}  // namespace sparsering
