// The durations file of the Chakra export: rows per rank or per ring position, rounding, and every
// malformed input refused with the key, row and step named.
#include "tuner/export/chakra/step_durations.hpp"

#include <gtest/gtest.h>

#include "export_test_util.hpp"

namespace sparsering {
namespace {

PlanConfig two_rings() {
  test::PlanSpec spec;
  spec.context_parallel = 2;
  spec.data_parallel = 2;
  spec.levels = {{2, "nvlink"}};
  spec.order = {3, 1, 0, 2};  // ring 0: ranks 3, 1; ring 1: ranks 0, 2
  spec.seq_len_tokens = 64;
  return parse_plan(test::plan_yaml(spec), "p.yaml");
}

TEST(StepDurations, RowsPerRankOrPerRingPosition) {
  const PlanConfig plan = two_rings();
  const StepDurations per_rank = parse_step_durations(
      R"({"format": "sparsering-step-durations", "unit": "ns", "forward": [[1, 2], [3, 4], [5, 6], [7.4, 8.6]],
          "extra": 1})",
      "d.json", plan);
  ASSERT_EQ(per_rank.forward_ns.size(), 1u);
  EXPECT_EQ(per_rank.forward_ns[0], (StepMatrix{{1, 2}, {3, 4}, {5, 6}, {7, 9}}));
  EXPECT_TRUE(per_rank.backward_ns.empty());
  const StepDurations per_position =
      parse_step_durations(R"({"forward": [[10, 11], [20, 21]], "backward": [[1, 1], [2, 2]]})", "d.json", plan);
  // Rank 3 and rank 0 are position 0, ranks 1 and 2 position 1.
  EXPECT_EQ(per_position.forward_ns[0], (StepMatrix{{10, 11}, {20, 21}, {20, 21}, {10, 11}}));
  EXPECT_EQ(per_position.backward_ns[0][1], (std::vector<int64_t>{2, 2}));
}

TEST(StepDurations, RefusesMalformedFiles) {
  const PlanConfig plan = two_rings();
  auto parse = [&](const std::string& text) { return parse_step_durations(text, "d.json", plan); };
  test::expect_input_error([&] { parse("{"); }, {"d.json", "not valid JSON"});
  test::expect_input_error([&] { parse("[1]"); }, {"must be a JSON object"});
  test::expect_input_error([&] { parse(R"({"backward": []})"); }, {"missing key \"forward\""});
  test::expect_input_error([&] { parse(R"({"forward": [[1, 2]]})"); }, {"1 rows", "(4)", "(2)"});
  test::expect_input_error([&] { parse(R"({"forward": [[1, 2], [3]]})"); }, {"forward[1]", "2 step durations"});
  test::expect_input_error([&] { parse(R"({"forward": [[1, 2], [3, -1]]})"); }, {"forward[1][1]", "[0, 2^53]"});
  test::expect_input_error([&] { parse(R"({"forward": [[1, 2], [3, "4"]]})"); }, {"forward[1][1]", "number"});
  test::expect_input_error([&] { parse(R"({"forward": [[1, 2], [3, 1e300]]})"); }, {"[0, 2^53]"});
  test::expect_input_error([&] { parse(R"({"unit": "us", "forward": [[1, 2], [3, 4]]})"); }, {"unit must be \"ns\""});
  test::expect_input_error([&] { parse(R"({"format": "x", "forward": [[1, 2], [3, 4]]})"); }, {"format must be"});
  test::expect_input_error([&] { parse(R"({"forward": [[1, 2], [3, 4]], "backward": 5})"); }, {"backward must be an array"});
}

// A simulator result as `sparsering simulate --out DIR` writes it (the keys the exporter reads):
// two ring classes (ring 0, ring 1) and two layers.
std::string simulation_json(bool with_backward, bool with_rings = true) {
  std::string rings = R"("rings": [)";
  bool first = true;
  for (int layer = 0; layer < 2; ++layer) {
    for (int cls = 0; cls < 2; ++cls) {
      for (const char* direction : {"forward", "backward"}) {
        if (std::string(direction) == "backward" && !with_backward) continue;
        const int base = 1000 * (layer + 1) + 100 * cls + (std::string(direction) == "backward" ? 10 : 0);
        rings += std::string(first ? "" : ", ") + R"({"layer": )" + std::to_string(layer) + R"(, "direction": ")" +
                 direction + R"(", "ring_class": )" + std::to_string(cls) + R"(, "ranks": [)" +
                 R"({"position": 0, "compute_ns": [)" + std::to_string(base) + ", " + std::to_string(base + 1) +
                 R"(]}, {"position": 1, "compute_ns": [)" + std::to_string(base + 2) + ", " +
                 std::to_string(base + 3) + "]}]}";
        first = false;
      }
    }
  }
  rings += "]";
  return std::string(R"({"format": "sparsering-simulation", "version": 1,
    "parallel": {"context_parallel": 2, "head_parallel": 1, "data_parallel": 2},
    "ring_classes": [{"head_group": 0, "rings": [0], "members": [3, 1]},
                     {"head_group": 0, "rings": [1], "members": [0, 2]}])") +
         (with_rings ? ", " + rings : std::string()) + "}";
}

TEST(StepDurations, ReadsTheSimulatorResult) {
  const PlanConfig plan = two_rings();
  const StepDurations d = parse_step_durations(simulation_json(true), "result.json", plan);
  ASSERT_EQ(d.forward_ns.size(), 2u);
  ASSERT_EQ(d.backward_ns.size(), 2u);
  // Layer 1, ring 0 (class 0): rank 3 is position 0, rank 1 position 1; ring 1: ranks 0, 2.
  EXPECT_EQ(d.forward_ns[1], (StepMatrix{{2100, 2101}, {2002, 2003}, {2102, 2103}, {2000, 2001}}));
  EXPECT_EQ(d.backward_ns[0][3], (std::vector<int64_t>{1010, 1011}));
  EXPECT_TRUE(parse_step_durations(simulation_json(false), "result.json", plan).backward_ns.empty());
  test::expect_input_error([&] { parse_step_durations(simulation_json(true, false), "result.json", plan); },
                           {"no per-step ring records", "simulate --out"});
  test::PlanSpec other;
  other.context_parallel = 2;
  other.levels = {{2, "nvlink"}};
  other.seq_len_tokens = 64;
  const PlanConfig small = parse_plan(test::plan_yaml(other), "p.yaml");
  test::expect_input_error([&] { parse_step_durations(simulation_json(true), "result.json", small); },
                           {"2 x 1 x 2", "2 x 1 x 1"});
  std::string missing = simulation_json(true);
  missing.replace(missing.find(R"("rings": [1])"), 12, R"("rings": [0])");  // ring 1 never simulated
  test::expect_input_error([&] { parse_step_durations(missing, "result.json", plan); },
                           {"no figures for global rank 0"});
}

}  // namespace
}  // namespace sparsering
