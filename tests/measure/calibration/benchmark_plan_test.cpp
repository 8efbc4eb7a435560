// Tests of measure/calibration/benchmark_plan.hpp: every case fits its K/V chunk, the grid varies
// what the fit separates (tiles alone, chunks alone, both; several head counts and lengths), and
// the hop sizes span 64 KiB - 1 GiB.
#include <gtest/gtest.h>

#include <set>

#include "measure/calibration/benchmark_plan.hpp"

namespace sparsering {
namespace {

TEST(BenchmarkPlan, CasesFitAndVaryEveryTerm) {
  for (const bool quick : {false, true}) {
    SCOPED_TRACE(quick);
    const std::vector<KernelBenchCase> cases = default_kernel_cases(quick, 64);
    ASSERT_GE(cases.size(), 8u);
    std::set<int32_t> heads;
    std::set<int64_t> lengths;
    bool tiles_only = false, chunks_only = false, both = false;
    for (const KernelBenchCase& c : cases) {
      EXPECT_LE(int64_t{c.tiles_per_list} + c.chunks_per_list, c.local_tokens / 64);
      EXPECT_EQ(c.q_heads % c.kv_heads, 0);
      heads.insert(c.q_heads);
      lengths.insert(c.local_tokens);
      tiles_only = tiles_only || (c.tiles_per_list > 0 && c.chunks_per_list == 0);
      chunks_only = chunks_only || (c.tiles_per_list == 0 && c.chunks_per_list > 0);
      both = both || (c.tiles_per_list > 0 && c.chunks_per_list > 0);
    }
    EXPECT_TRUE(tiles_only && chunks_only && both);
    EXPECT_GE(heads.size(), 2u);
    EXPECT_GE(lengths.size(), 2u);
  }
}

TEST(BenchmarkPlan, HopSizes) {
  const std::vector<int64_t> sizes = default_hop_sizes(false, false);
  EXPECT_EQ(sizes.front(), 65536);
  EXPECT_EQ(sizes.back(), int64_t{1} << 30);
  EXPECT_EQ(sizes.size(), 8u);
  EXPECT_EQ(default_hop_sizes(false, true).size(), 15u);
  EXPECT_EQ(default_hop_sizes(true, false).back(), int64_t{1} << 28);
}

}  // namespace
}  // namespace sparsering
