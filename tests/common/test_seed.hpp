// The seed of the randomised C++ tests. Every test that draws random inputs takes its seed from
// here, prints it, and can be repeated with the same inputs:
//
//   [   seed   ] Suite.Name seed N (repeat with SPARSERING_TEST_SEED=N)
//
// The run seed is SPARSERING_TEST_SEED if set, else gtest's --gtest_random_seed if non-zero, else
// fresh from std::random_device; each test mixes it with its own name, so tests draw different
// inputs from one run seed. Tests whose random fixture is fixed data (a constant seed) keep that
// constant unless SPARSERING_TEST_SEED is set, and say so. Header-only; Python tests follow the
// same convention (tests/common/test_seed.py).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>

namespace sparsering::testing_support {

/// SPARSERING_TEST_SEED when set (and a valid unsigned integer), else nothing.
inline bool env_seed(uint64_t& out) {
  const char* env = std::getenv("SPARSERING_TEST_SEED");
  if (env == nullptr || *env == '\0') return false;
  try {
    out = static_cast<uint64_t>(std::stoull(env));
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string("SPARSERING_TEST_SEED must be an unsigned integer, got '") + env + "'");
  }
  return true;
}

/// The run's seed: SPARSERING_TEST_SEED if set, else gtest's --gtest_random_seed if non-zero, else
/// fresh from std::random_device. The same for every test of the process.
inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    uint64_t env = 0;
    if (env_seed(env)) return env;
    const int flag = ::testing::UnitTest::GetInstance()->random_seed();
    if (flag != 0) return static_cast<uint64_t>(flag);
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return seed;
}

/// "Suite.Name" of the running test ("" outside a test).
inline std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "";
}

/// Prints the seed line of the running test and records it as a test property.
inline void announce_seed(uint64_t seed, const char* note = nullptr) {
  const std::string name = current_test_name();
  std::cout << "[   seed   ] " << name << " seed " << seed;
  if (note != nullptr) {
    std::cout << " (" << note << ")\n";
  } else {
    std::cout << " (repeat with SPARSERING_TEST_SEED=" << seed << ")\n";
  }
  if (!name.empty()) ::testing::Test::RecordProperty("seed", std::to_string(seed));
}

/// A seed for the current test, derived from the run seed and the test's name; prints the run
/// seed so a failing run can be repeated.
inline uint64_t test_seed() {
  const uint64_t seed = run_seed();
  announce_seed(seed);
  return seed ^ std::hash<std::string>{}(current_test_name());
}

/// A generator for the current test (see test_seed()).
inline std::mt19937_64 test_rng() { return std::mt19937_64(test_seed()); }

/// The seed of a fixture that is fixed data: `fixed` itself unless SPARSERING_TEST_SEED is set,
/// then a seed drawn from it and `fixed` (distinct constants stay distinct). Prints which.
inline uint64_t fixed_seed(uint64_t fixed) {
  uint64_t env = 0;
  if (!env_seed(env)) {
    announce_seed(fixed, "fixed; SPARSERING_TEST_SEED=N draws other inputs");
    return fixed;
  }
  announce_seed(env);
  std::seed_seq mix{static_cast<uint32_t>(env), static_cast<uint32_t>(env >> 32), static_cast<uint32_t>(fixed),
                    static_cast<uint32_t>(fixed >> 32)};
  uint32_t words[2] = {0, 0};
  mix.generate(words, words + 2);
  return (static_cast<uint64_t>(words[0]) << 32) | words[1];
}

}  // namespace sparsering::testing_support
