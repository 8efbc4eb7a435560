// FlatIndexMap (sim/work/flat_index_map.hpp) against std::map on random keys, including keys that
// collide in their low bits (multiples of large powers of two, as the counter's offsets are) and
// negative keys, across growth and clear().
#include "sim/work/flat_index_map.hpp"
#include "tests/common/test_seed.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>

namespace sparsering {
namespace {

TEST(FlatIndexMap, MatchesStdMapOnRandomKeys) {
  std::mt19937_64 rng = testing_support::test_rng();
  FlatIndexMap map;
  for (int round = 0; round < 4; ++round) {
    std::map<int64_t, size_t> oracle;
    std::uniform_int_distribution<int> kind(0, 2);
    std::uniform_int_distribution<int64_t> small(-300, 300);
    std::uniform_int_distribution<int64_t> any(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    const int lookups = 2000 + 3000 * round;
    for (int k = 0; k < lookups; ++k) {
      int64_t key = 0;
      switch (kind(rng)) {
        case 0: key = small(rng); break;
        case 1: key = small(rng) * (int64_t{1} << 20) + small(rng) % 4; break;  // equal low bits
        default: key = any(rng); break;
      }
      const size_t value_if_new = oracle.size();
      const auto [value, inserted] = map.try_emplace(key, value_if_new);
      const auto [it, oracle_inserted] = oracle.try_emplace(key, value_if_new);
      ASSERT_EQ(inserted, oracle_inserted) << "key " << key;
      ASSERT_EQ(value, it->second) << "key " << key;
    }
    EXPECT_EQ(map.size(), oracle.size());
    map.clear();
    EXPECT_EQ(map.size(), 0U);
  }
}

TEST(FlatIndexMap, ClearForgetsEveryKey) {
  FlatIndexMap map;
  for (int64_t k = 0; k < 100; ++k) EXPECT_TRUE(map.try_emplace(k * 1024, static_cast<size_t>(k)).second);
  map.clear();
  for (int64_t k = 0; k < 100; ++k) {
    const auto [value, inserted] = map.try_emplace(k * 1024, 7);
    EXPECT_TRUE(inserted);
    EXPECT_EQ(value, 7U);
  }
}

}  // namespace
}  // namespace sparsering
