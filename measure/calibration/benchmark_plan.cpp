// The grid spans the work a real ring step sees (a few to tens of thousands of lists, tens to
// thousands of items per head) at a GPU cost of a few seconds, so the whole calibration stays
// well inside a short device lease.
#include "measure/calibration/benchmark_plan.hpp"

#include <array>
#include <utility>

namespace sparsering {

std::vector<KernelBenchCase> default_kernel_cases(bool quick, int32_t block_k) {
  std::vector<KernelBenchCase> cases;
  const auto add = [&](int32_t q_heads, int32_t kv_heads, int64_t local, int32_t tiles, int32_t chunks) {
    if (int64_t{tiles} + chunks <= local / block_k) cases.push_back({q_heads, kv_heads, local, tiles, chunks});
  };
  if (quick) {
    for (const int64_t local : {int64_t{4096}, int64_t{16384}}) {
      for (const auto& [t, c] : std::array<std::pair<int32_t, int32_t>, 5>{{{1, 0}, {4, 0}, {16, 0}, {0, 2}, {4, 4}}}) {
        add(16, 2, local, t, c);
      }
    }
    add(1, 1, 4096, 16, 0);
    return cases;
  }
  constexpr std::array<std::pair<int32_t, int32_t>, 9> kMixes{
      {{1, 0}, {4, 0}, {16, 0}, {48, 0}, {0, 2}, {4, 1}, {4, 4}, {16, 4}, {8, 16}}};
  constexpr std::array<std::pair<int32_t, int32_t>, 3> kHeads{{{4, 1}, {16, 2}, {32, 4}}};
  for (const auto& [q_heads, kv_heads] : kHeads) {
    for (const int64_t local : {int64_t{4096}, int64_t{16384}, int64_t{65536}}) {
      for (const auto& [t, c] : kMixes) add(q_heads, kv_heads, local, t, c);
    }
  }
  for (const int64_t local : {int64_t{4096}, int64_t{16384}}) {
    for (const auto& [t, c] : std::array<std::pair<int32_t, int32_t>, 3>{{{4, 0}, {16, 0}, {16, 4}}}) add(1, 1, local, t, c);
  }
  return cases;
}

std::vector<int64_t> default_hop_sizes(bool quick, bool dense) {
  const int64_t last = quick ? int64_t{1} << 28 : int64_t{1} << 30;
  std::vector<int64_t> sizes;
  for (int64_t bytes = int64_t{1} << 16; bytes <= last; bytes *= dense ? 2 : 4) sizes.push_back(bytes);
  return sizes;
}

}  // namespace sparsering
