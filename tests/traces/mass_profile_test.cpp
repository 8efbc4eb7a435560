// Mass profiles: non-increasing, the requested total, and the recall prefix lands on the core.
#include "traces/synth/mass_profile.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "traces/recall.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering::synth {
namespace {

void check(const ProfileShape& shape) {
  const std::vector<double> masses = mass_profile(shape);
  ASSERT_EQ(static_cast<int64_t>(masses.size()), shape.slots);
  double sum = 0.0;
  for (size_t i = 0; i < masses.size(); ++i) {
    ASSERT_GE(masses[i], 0.0);
    if (i > 0) {
      ASSERT_LE(masses[i], masses[i - 1]) << "slot " << i;
    }
    sum += masses[i];
  }
  EXPECT_NEAR(sum, shape.total, 1e-9);
  if (shape.core < shape.slots) {
    // What the trace stores: floats.
    std::vector<float> stored(masses.begin(), masses.end());
    EXPECT_EQ(recall_prefix_length(stored, shape.slots, shape.recall, 0, shape.slots), shape.core)
        << "slots " << shape.slots << " core " << shape.core << " boosted " << shape.boosted << " share "
        << shape.boost_share << " exponent " << shape.exponent << " recall " << shape.recall;
  }
}

TEST(MassProfile, HandPickedShapes) {
  check({1, 1, 0, 0.0, 1.0, 0.95, 0.5});
  check({8192, 1000, 4, 0.5, 0.8, 0.95, 0.8});
  check({8192, 30, 1, 0.2, 1.1, 0.95, 0.9});
  check({8192, 6144, 1, 0.3, 1.0, 0.95, 0.9});   // needs flattening: the tail must fit below the core
  check({8192, 6144, 4, 0.7, 1.1, 0.99, 0.95});  // flattening down to a smaller boost share
  check({100, 75, 0, 0.0, 0.0, 0.9, 1.0});       // uniform core
  check({4, 3, 3, 0.5, 1.0, 0.95, 0.5});         // all-boosted core
  check({10, 10, 2, 0.5, 1.0, 0.95, 0.5});       // no tail
}

TEST(MassProfile, RandomShapes) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  for (int round = 0; round < 300; ++round) {
    ProfileShape s;
    s.slots = 1 + static_cast<int64_t>(rng() % 5000);
    s.recall = uniform(0.5, 0.99);
    const auto most =
        std::max<int64_t>(1, static_cast<int64_t>(max_core_share(s.recall) * static_cast<double>(s.slots)));
    s.core = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(most));
    s.boosted = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(s.core, 4) + 1));
    s.boost_share = uniform(0.0, 0.8);
    s.exponent = uniform(0.0, 1.5);
    s.total = uniform(0.05, 1.0);
    check(s);
  }
}

TEST(MassProfile, RejectsBadShapes) {
  EXPECT_THROW(mass_profile({0, 1, 0, 0.0, 1.0, 0.95, 0.5}), std::invalid_argument);
  EXPECT_THROW(mass_profile({10, 11, 0, 0.0, 1.0, 0.95, 0.5}), std::invalid_argument);
  EXPECT_THROW(mass_profile({10, 5, 6, 0.0, 1.0, 0.95, 0.5}), std::invalid_argument);
  EXPECT_THROW(mass_profile({10, 5, 1, 1.0, 1.0, 0.95, 0.5}), std::invalid_argument);
  EXPECT_THROW(mass_profile({10, 5, 1, 0.5, 1.0, 1.0, 0.5}), std::invalid_argument);
  EXPECT_THROW(mass_profile({10, 5, 1, 0.5, 1.0, 0.95, 1.5}), std::invalid_argument);
}

}  // namespace
}  // namespace sparsering::synth
