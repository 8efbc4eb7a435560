// GPU tests of launch_recall_select / launch_recall_select_batch (kernels/cuda/recall_select.cu)
// against the CPU rule recall_prefix_length (traces/recall.hpp) applied to a host stable sort
// (mass descending, ties by smaller index): the kept count must be equal, the kept set must be
// exactly the first entries in that order, written ascending, and the slots past the count must
// stay untouched. Fresh random masses (seed printed; SPARSERING_TEST_SEED repeats it) of several
// kinds: heavy-tailed, with zeros, with many ties (a few repeated values, and rows where every
// entry is equal so the tie rule crosses chunks and warps), a huge dynamic range with
// subnormals, near-uniform rows (the estimation's output on random inputs), one nonzero entry,
// all-zero rows, and negative or NaN values (counted as zero). Lengths around the kernels'
// 32-entry warp steps, 1024-entry warp ranges and 8192-entry chunks; recall 0.5 to 1.0; caps from
// 1 to above the length (all combinations in the Sweep suite, a few in the one compute-sanitizer
// runs).
#include "kernels/cuda/recall_select.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <numeric>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "kernel_test_support.hpp"
#include "traces/recall.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

constexpr int32_t kUntouched = -7;

enum class MassKind { heavy_tail, ties, all_equal, dynamic_range, near_uniform, single, zero, invalid };

std::vector<float> random_row(std::mt19937_64& rng, int64_t entries, MassKind kind) {
  std::vector<float> row(static_cast<size_t>(entries), 0.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (float& m : row) {
    switch (kind) {
      case MassKind::heavy_tail: {
        const int64_t pick = uniform(rng, 0, 9);
        m = pick == 0 ? 0.0f : static_cast<float>(std::pow(0.001 + unit(rng), 4.0));
        break;
      }
      case MassKind::ties: {
        const int64_t pick = uniform(rng, 0, 5);
        m = pick == 0 ? 0.0f : pick == 1 ? 0.25f : pick == 2 ? 0.5f : pick == 3 ? 1.0f / 3.0f : static_cast<float>(unit(rng));
        break;
      }
      case MassKind::all_equal:
        m = 0.125f;
        break;
      case MassKind::dynamic_range:
        m = static_cast<float>(std::pow(10.0, -44.0 + 47.0 * unit(rng)));  // 1e-44 (subnormal) .. 1e3
        break;
      case MassKind::near_uniform:
        m = static_cast<float>(64.0 / static_cast<double>(entries) * (0.8 + 0.4 * unit(rng)));
        break;
      case MassKind::single:
      case MassKind::zero:
        break;
      case MassKind::invalid: {
        const int64_t pick = uniform(rng, 0, 3);
        m = pick == 0 ? -1.0f : pick == 1 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(unit(rng));
        break;
      }
    }
  }
  if (kind == MassKind::single) row[static_cast<size_t>(uniform(rng, 0, entries - 1))] = 0.75f;
  return row;
}

/// The CPU rule: kept indices, ascending.
std::vector<int32_t> expected_kept(const float* row, int64_t entries, double recall, int32_t capacity) {
  std::vector<float> clean(row, row + entries);
  for (float& m : clean) m = m > 0.0f ? m : 0.0f;  // negative and NaN count as 0
  std::vector<int32_t> order(static_cast<size_t>(entries));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return clean[static_cast<size_t>(a)] > clean[static_cast<size_t>(b)]; });
  std::vector<float> sorted(order.size());
  for (size_t n = 0; n < order.size(); ++n) sorted[n] = clean[static_cast<size_t>(order[n])];
  const int64_t real = std::count_if(sorted.begin(), sorted.end(), [](float m) { return m > 0.0f; });
  const int64_t kept = recall_prefix_length(sorted, real, recall, 0, capacity);
  std::vector<int32_t> want(order.begin(), order.begin() + kept);
  std::sort(want.begin(), want.end());
  return want;
}

/// Checks rows [0, rows) of one part's outputs against the CPU rule.
void check_part(const std::vector<float>& mass, int32_t rows, int64_t entries, double recall, int32_t capacity,
                const DeviceBuffer<int32_t>& d_count, const DeviceBuffer<int32_t>& d_index, const std::string& where) {
  const std::vector<int32_t> counts = d_count.download();
  const std::vector<int32_t> kept = d_index.download();
  for (int32_t r = 0; r < rows; ++r) {
    const std::vector<int32_t> want =
        expected_kept(mass.data() + int64_t{r} * entries, entries, recall, capacity);
    const std::string at = str(where, " row ", r);
    ASSERT_EQ(counts[static_cast<size_t>(r)], static_cast<int32_t>(want.size())) << at;
    const auto begin = kept.begin() + int64_t{r} * capacity;
    const std::vector<int32_t> got(begin, begin + static_cast<int64_t>(want.size()));
    ASSERT_EQ(got, want) << at;
    for (auto slot = begin + static_cast<int64_t>(want.size()); slot != begin + capacity; ++slot) {
      ASSERT_EQ(*slot, -1) << at << " slot " << (slot - begin) << " past the kept count is not -1";
    }
  }
}

struct SelectCase {
  int64_t entries;
  int32_t rows;
};

/// Every (length, recall, cap) combination; cap -1 stands for the length + 3.
void check_grid(std::initializer_list<SelectCase> cases, std::initializer_list<double> recalls,
                std::initializer_list<int32_t> caps, std::mt19937_64& rng, const CudaStream& stream) {
  const std::array<MassKind, 8> kinds = {MassKind::heavy_tail,   MassKind::ties,   MassKind::all_equal,
                                         MassKind::dynamic_range, MassKind::near_uniform, MassKind::single,
                                         MassKind::zero,          MassKind::invalid};
  for (const SelectCase c : cases) {
    for (const double recall : recalls) {
      for (const int32_t cap_choice : caps) {
        const int32_t capacity = cap_choice > 0 ? cap_choice : static_cast<int32_t>(c.entries + 3);
        std::vector<float> mass;
        for (int32_t r = 0; r < c.rows; ++r) {
          const std::vector<float> row = random_row(rng, c.entries, kinds[static_cast<size_t>(r) % kinds.size()]);
          mass.insert(mass.end(), row.begin(), row.end());
        }
        const DeviceBuffer<float> d_mass(mass);
        DeviceBuffer<int32_t> d_count(std::vector<int32_t>(static_cast<size_t>(c.rows), kUntouched));
        DeviceBuffer<int32_t> d_index(
            std::vector<int32_t>(static_cast<size_t>(c.rows) * static_cast<size_t>(capacity), kUntouched));
        RecallSelectParams params;
        params.rows = c.rows;
        params.entries = c.entries;
        params.recall = recall;
        params.capacity = capacity;
        params.mass = d_mass.data();
        params.kept_count = d_count.data();
        params.kept_index = d_index.data();
        SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());  // uploads done before the non-blocking stream runs
        launch_recall_select(params, stream.get());
        stream.synchronize();
        check_part(mass, c.rows, c.entries, recall, capacity, d_count, d_index,
                   str("entries ", c.entries, " recall ", recall, " cap ", capacity));
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// A few combinations (also run under compute-sanitizer memcheck).
TEST(RecallSelectGpu, EqualsHostRecallPrefix) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  check_grid({SelectCase{33, 8}, SelectCase{8193, 8}}, {0.5, 1.0}, {7, -1}, rng, stream);
}

TEST(RecallSelectGpuSweep, EqualsHostRecallPrefix) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  check_grid({SelectCase{1, 3}, SelectCase{33, 8}, SelectCase{1025, 8}, SelectCase{8192, 8}, SelectCase{8193, 8},
              SelectCase{20000, 8}},
             {0.5, 0.9, 0.95, 1.0}, {1, 7, 4096, -1}, rng, stream);
}

// Two parts of different row counts in one batch (the pipeline's verticals and slashes) select as
// each would alone; a longer row exercises several 8192-entry chunks per row.
TEST(RecallSelectGpu, BatchOfPartsEqualsHostRecallPrefix) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  const int64_t entries = 40000;
  const int32_t capacity = 4096;
  const double recall = 0.95;
  const std::array<int32_t, 2> rows = {5, 3};
  std::array<std::vector<float>, 2> mass;
  std::array<DeviceBuffer<float>, 2> d_mass;
  std::array<DeviceBuffer<int32_t>, 2> d_count, d_index;
  std::array<RecallSelectParams, 2> parts;
  for (size_t p = 0; p < 2; ++p) {
    for (int32_t r = 0; r < rows[p]; ++r) {
      const MassKind kind = r % 3 == 0 ? MassKind::near_uniform : (r % 3 == 1 ? MassKind::heavy_tail : MassKind::ties);
      const std::vector<float> row = random_row(rng, entries, kind);
      mass[p].insert(mass[p].end(), row.begin(), row.end());
    }
    d_mass[p] = DeviceBuffer<float>(mass[p]);
    d_count[p] = DeviceBuffer<int32_t>(std::vector<int32_t>(static_cast<size_t>(rows[p]), kUntouched));
    d_index[p] = DeviceBuffer<int32_t>(std::vector<int32_t>(static_cast<size_t>(rows[p]) * capacity, kUntouched));
    parts[p].rows = rows[p];
    parts[p].entries = entries;
    parts[p].recall = recall;
    parts[p].capacity = capacity;
    parts[p].mass = d_mass[p].data();
    parts[p].kept_count = d_count[p].data();
    parts[p].kept_index = d_index[p].data();
  }
  SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());
  launch_recall_select_batch(parts, stream.get());
  stream.synchronize();
  for (size_t p = 0; p < 2; ++p) {
    check_part(mass[p], rows[p], entries, recall, capacity, d_count[p], d_index[p], str("part ", p));
    if (HasFailure()) return;
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
  params.capacity = 8;
  params.entries = 0;
  EXPECT_THROW(launch_recall_select(params, nullptr), InputError);
  params.entries = 10;
  EXPECT_THROW(launch_recall_select(params, nullptr), InputError);  // null pointers
  std::array<RecallSelectParams, 2> mismatched = {params, params};
  mismatched[1].capacity = 9;
  EXPECT_THROW(launch_recall_select_batch(mismatched, nullptr), InputError);
  EXPECT_THROW(launch_recall_select_batch(std::span<const RecallSelectParams>(), nullptr), InputError);
}

}  // namespace
}  // namespace sparsering
