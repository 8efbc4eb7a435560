// validate_trace: every invariant of the in-memory trace, one broken at a time.
#include "traces/trace.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"
#include "trace_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

// A 1 x 1 x 2 trace, 4 slots each, hand-written: head 0 has 3 verticals, head 1 has 1.
Trace small_trace() {
  Trace t;
  t.samples = 1;
  t.layers = 1;
  t.heads = 2;
  t.vertical_candidates = 4;
  t.slash_candidates = 4;
  t.sample_seq_len = {100};
  t.vertical_index = {0, 57, 3, -1, /* head 1 */ 99, -1, -1, -1};
  t.vertical_mass = {0.5f, 0.25f, 0.25f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  t.slash_offset = {0, 1, 2, 64, /* head 1 */ -1, -1, -1, -1};
  t.slash_mass = {0.4f, 0.3f, 0.2f, 0.1f, 0.0f, 0.0f, 0.0f, 0.0f};
  return t;
}

std::string error_of(const Trace& t) {
  try {
    validate_trace(t);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidateTrace, AcceptsValidTraces) {
  EXPECT_EQ(error_of(small_trace()), "");
  for (uint64_t seed = 1; seed <= 20; ++seed) EXPECT_EQ(error_of(testing::random_trace(sparsering::testing_support::fixed_seed(seed), 2, 2, 3, 7, 5, 9)), "");
}

TEST(ValidateTrace, EachBrokenInvariantIsNamed) {
  struct Case {
    const char* needle;
    void (*breaks)(Trace&);
  };
  const Case cases[] = {
      {"follows a -1 pad", [](Trace& t) { t.vertical_index[7] = 7; }},
      {"on a padding slot", [](Trace& t) { t.vertical_mass[3] = 0.01f; }},
      {"vertical.index at (sample 0, layer 0, head 0, slot 1) = 100 is outside [0, 100)",
       [](Trace& t) { t.vertical_index[1] = 100; }},
      {"= -2 is outside", [](Trace& t) { t.slash_offset[2] = -2; }},
      {"not in [0, 1]", [](Trace& t) { t.slash_mass[3] = -0.0625f; }},
      {"not in [0, 1]", [](Trace& t) { t.vertical_mass[0] = std::nanf(""); }},
      {"not in [0, 1]", [](Trace& t) { t.vertical_mass[4] = INFINITY; }},
      {"sorted by mass", [](Trace& t) { t.slash_mass[1] = 0.45f; }},
      {"sums to", [](Trace& t) { t.slash_mass = {0.5f, 0.5f, 0.3f, 0.1f, 0, 0, 0, 0}; }},
      {"lists 0 twice", [](Trace& t) { t.vertical_index[2] = 0; }},
      {"vertical.index has 7 elements", [](Trace& t) { t.vertical_index.pop_back(); }},
      {"slash.mass has 9 elements", [](Trace& t) { t.slash_mass.push_back(0); }},
      {"sample.seq_len[0] = 0", [](Trace& t) { t.sample_seq_len[0] = 0; }},
      {"sample.seq_len has 2 elements", [](Trace& t) { t.sample_seq_len.push_back(5); }},
      {"0 samples", [](Trace& t) { t.samples = 0; }},
      {"last_q", [](Trace& t) { t.metadata.last_q = 0; }},
      {"block sizes", [](Trace& t) { t.metadata.block_k = -64; }},
      {"overflows",
       [](Trace& t) {
         t.heads = int64_t{1} << 40;
         t.vertical_candidates = int64_t{1} << 40;
       }},
  };
  for (const auto& c : cases) {
    Trace t = small_trace();
    c.breaks(t);
    const std::string message = error_of(t);
    EXPECT_NE(message.find(c.needle), std::string::npos) << "expected '" << c.needle << "', got '" << message << "'";
  }
}

TEST(ValidateTrace, DuplicatesFoundOnLongSequencesToo) {
  // Beyond the bitmap limit the check sorts instead; both paths must agree.
  Trace t = small_trace();
  t.sample_seq_len = {int64_t{1} << 30};
  EXPECT_EQ(error_of(t), "");
  t.slash_offset[3] = 1;
  EXPECT_NE(error_of(t).find("lists 1 twice"), std::string::npos);
}

}  // namespace
}  // namespace sparsering
