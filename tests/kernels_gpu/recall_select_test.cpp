// GPU test of launch_recall_select (kernels/cuda/recall_select.cu) against the CPU rule
// recall_prefix_length (traces/recall.hpp) applied to a host stable sort (mass descending, ties
// by smaller index), on fresh random masses with zeros and ties, several recalls and caps: the
// kept count must be equal and the kept set must be exactly the first entries, ascending.
#include "kernels/cuda/recall_select.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "kernel_test_support.hpp"
#include "traces/recall.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

TEST(RecallSelectGpu, EqualsHostRecallPrefix) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  for (const int64_t entries : {1, 700, 5000}) {
    for (const double recall : {0.5, 0.9, 0.95, 1.0}) {
      for (const int32_t capacity : {7, 4096}) {
        const int32_t rows = 5;
        std::vector<float> mass(static_cast<size_t>(rows * entries));
        for (size_t n = 0; n < mass.size(); ++n) {
          const int64_t kind = uniform(rng, 0, 9);
          // zeros, a few repeated values (ties), and a heavy-tailed rest
          mass[n] = kind == 0 ? 0.0f : kind == 1 ? 0.25f : static_cast<float>(std::pow(0.001 + static_cast<double>(uniform(rng, 0, 1000000)) * 1e-6, 4.0));
        }
        if (entries > 1) std::fill(mass.begin(), mass.begin() + entries, 0.0f);  // an all-zero row
        const DeviceBuffer<float> d_mass(mass);
        DeviceBuffer<int32_t> d_count(static_cast<size_t>(rows));
        DeviceBuffer<int32_t> d_index(static_cast<size_t>(rows) * static_cast<size_t>(capacity));
        RecallSelectParams params;
        params.rows = rows;
        params.entries = entries;
        params.recall = recall;
        params.capacity = capacity;
        params.mass = d_mass.data();
        params.kept_count = d_count.data();
        params.kept_index = d_index.data();
        launch_recall_select(params, stream.get());
        stream.synchronize();
        const std::vector<int32_t> counts = d_count.download();
        const std::vector<int32_t> kept = d_index.download();
        for (int32_t r = 0; r < rows; ++r) {
          std::vector<int32_t> order(static_cast<size_t>(entries));
          std::iota(order.begin(), order.end(), 0);
          const float* row = mass.data() + r * entries;
          std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
          std::vector<float> sorted(order.size());
          for (size_t n = 0; n < order.size(); ++n) sorted[n] = row[order[n]];
          const int64_t real = std::count_if(sorted.begin(), sorted.end(), [](float m) { return m > 0.0f; });
          const int64_t expected = recall_prefix_length(sorted, real, recall, 0, capacity);
          const std::string where = str("entries ", entries, " recall ", recall, " cap ", capacity, " row ", r);
          ASSERT_EQ(counts[static_cast<size_t>(r)], expected) << where;
          std::vector<int32_t> want(order.begin(), order.begin() + expected);
          std::sort(want.begin(), want.end());
          const std::vector<int32_t> got(kept.begin() + r * capacity, kept.begin() + r * capacity + expected);
          ASSERT_EQ(got, want) << where;
        }
      }
    }
  }
}

TEST(RecallSelectGpu, RejectsBadSettings) {
  RecallSelectParams params;
  params.rows = 1;
  params.entries = 10;
  params.recall = 1.5;
  EXPECT_THROW(launch_recall_select(params, nullptr), InputError);
  params.recall = 0.9;
  params.capacity = 0;
  EXPECT_THROW(launch_recall_select(params, nullptr), InputError);
}

}  // namespace
}  // namespace sparsering
