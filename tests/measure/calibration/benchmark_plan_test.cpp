// Tests of measure/calibration/benchmark_plan.hpp: every case fits its K/V chunk, the grid varies
// what the fit separates (tiles alone, chunks alone, both; several head counts and lengths) at
// every shape, the quick grid leaves enough filled launches for the held-out folds, the default
// shapes cover every block the tuner searches at every shipped model's head dim, shape lists
// parse and refuse what the kernels cannot run, and the hop sizes span 64 KiB - 1 GiB.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "tests/config/config_test_util.hpp"
#include "measure/calibration/benchmark_plan.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "sim/config/model_config.hpp"
#include "tuner/search/search_space.hpp"

namespace sparsering {
namespace {

/// The two measurements a case makes, flagged for a 132-SM GPU.
std::vector<KernelMeasurement> launches(const KernelBenchCase& c) {
  KernelMeasurement m;
  m.q_heads = c.q_heads;
  m.kv_heads = c.kv_heads;
  m.local_tokens = c.local_tokens;
  m.block_q = static_cast<int32_t>(c.shape.block_q);
  m.block_k = static_cast<int32_t>(c.shape.block_k);
  m.head_dim = static_cast<int32_t>(c.shape.head_dim);
  m.lists = int64_t{c.q_heads} * ((c.local_tokens + c.shape.block_q - 1) / c.shape.block_q);
  std::vector<KernelMeasurement> out;
  for (const char* direction : {"forward", "backward"}) {
    m.direction = direction;
    m.under_filled = launch_under_filled(m, 132);
    out.push_back(m);
  }
  return out;
}

TEST(BenchmarkPlan, CasesFitAndVaryEveryTermAtEveryShape) {
  for (const bool quick : {false, true}) {
    SCOPED_TRACE(quick);
    const std::vector<KernelShape> shapes = default_calibration_shapes();
    const std::vector<KernelBenchCase> cases = default_kernel_cases(quick, shapes);
    for (const KernelShape& shape : shapes) {
      SCOPED_TRACE(to_string(shape));
      std::set<int32_t> heads;
      std::set<int64_t> lengths;
      bool tiles_only = false, chunks_only = false, both = false, partial_items = false;
      std::map<std::string, int64_t> filled;
      std::map<std::string, std::set<int64_t>> filled_lengths;
      for (const KernelBenchCase& c : cases) {
        if (!(c.shape == shape)) continue;
        EXPECT_LE(int64_t{c.tiles_per_list} + c.chunks_per_list, c.local_tokens / shape.block_k);
        EXPECT_EQ(c.q_heads % c.kv_heads, 0);
        heads.insert(c.q_heads);
        lengths.insert(c.local_tokens);
        tiles_only = tiles_only || (c.tiles_per_list > 0 && c.chunks_per_list == 0);
        chunks_only = chunks_only || (c.tiles_per_list == 0 && c.chunks_per_list > 0);
        both = both || (c.tiles_per_list > 0 && c.chunks_per_list > 0);
        if (c.columns_per_list >= 0) {
          EXPECT_EQ(c.chunks_per_list, (c.columns_per_list + shape.block_k - 1) / shape.block_k);
          partial_items = partial_items || c.columns_per_list % 64 != 0;
        }
        for (const KernelMeasurement& m : launches(c)) {
          if (m.under_filled) continue;
          ++filled[m.direction];
          filled_lengths[m.direction].insert(m.local_tokens);
        }
      }
      EXPECT_TRUE(tiles_only && chunks_only && both);
      EXPECT_GE(heads.size(), 2u);
      EXPECT_GE(lengths.size(), 2u);
      // Enough filled launches per direction for the held-out error's five folds.
      EXPECT_GE(filled["forward"], 5);
      EXPECT_GE(filled["backward"], 5);
      // The full grid shows the backward at three filled lengths (docs/calibration.md), and lists
      // with partly filled 64-column items, which separate its per-column from its per-item cost.
      if (!quick) {
        EXPECT_GE(filled_lengths["backward"].size(), 3u);
        EXPECT_TRUE(partial_items);
      }
    }
  }
}

TEST(BenchmarkPlan, DefaultShapesCoverTheTunersBlocksAtTheShippedHeadDims) {
  const std::vector<KernelShape> shapes = default_calibration_shapes();
  std::set<int64_t> head_dims;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "models")) {
    if (entry.path().extension() == ".yaml") head_dims.insert(load_model(entry.path()).head_dim);
  }
  ASSERT_FALSE(head_dims.empty());
  for (const int64_t head_dim : head_dims) {
    for (const int64_t block : SearchSpaceOptions{}.block_sizes) {
      const KernelShape wanted{block, block, head_dim};
      EXPECT_NE(std::find(shapes.begin(), shapes.end(), wanted), shapes.end()) << to_string(wanted);
    }
  }
}

TEST(BenchmarkPlan, ParsesShapeLists) {
  EXPECT_EQ(parse_kernel_shapes("64x64x128,128x128x128", "--shapes"),
            (std::vector<KernelShape>{{64, 64, 128}, {128, 128, 128}}));
  EXPECT_EQ(parse_kernel_shapes("128x64x64", "--shapes"), (std::vector<KernelShape>{{128, 64, 64}}));
  test::expect_input_error([] { parse_kernel_shapes("64x64", "--shapes"); }, {"--shapes", "\"64x64\"", "64x64x128"});
  test::expect_input_error([] { parse_kernel_shapes("", "--shapes"); }, {"--shapes", "\"\""});
  test::expect_input_error([] { parse_kernel_shapes("64x64x128,", "--shapes"); }, {"--shapes", "\"\""});
  test::expect_input_error([] { parse_kernel_shapes("64xax128", "--shapes"); }, {"\"64xax128\""});
  test::expect_input_error([] { parse_kernel_shapes("64x64x128x1", "--shapes"); }, {"\"64x64x128x1\""});
  test::expect_input_error([] { parse_kernel_shapes("64x48x128", "--shapes"); }, {"block_k", "multiple of 64", "48"});
  test::expect_input_error([] { parse_kernel_shapes("64x64x96", "--shapes"); }, {"head_dim", "96"});
  test::expect_input_error([] { parse_kernel_shapes("64x64x128,64x64x128", "--shapes"); }, {"64x64x128 is given twice"});
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
