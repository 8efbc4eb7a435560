// Statistical ties (tuner/search/tie_groups.hpp) on hand-derived cases, and the model-error file
// (tuner/search/model_error.hpp).
#include <gtest/gtest.h>

#include <vector>

#include "common/error.hpp"
#include "tuner/search/model_error.hpp"
#include "tuner/search/tie_groups.hpp"

namespace sparsering {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TieEntry entry(double cost, double gib, int32_t levels, int32_t collectives, bool shuffle, int64_t index) {
  return TieEntry{cost, static_cast<int64_t>(gib * static_cast<double>(kGiB)), levels, collectives, shuffle, index};
}

std::vector<size_t> order_of(const std::vector<TiePlace>& places) {
  std::vector<size_t> out;
  for (const TiePlace& p : places) out.push_back(p.entry);
  return out;
}

TEST(TieGroups, ExactTiesPreferLowerMemory) {
  // ZeRO-1 at 26.5 GiB and ZeRO-2 at 21.0 GiB predict the same step: ZeRO-2 first.
  const std::vector<TieEntry> e = {entry(100.0, 26.5, 2, 0, true, 1), entry(100.0, 21.0, 2, 0, true, 2),
                                   entry(101.0, 10.0, 1, 0, false, 3)};
  const std::vector<TiePlace> band0 = order_with_ties(e, 0.0);
  EXPECT_EQ(order_of(band0), (std::vector<size_t>{1, 0, 2}));
  EXPECT_EQ(band0[0].group, 0);
  EXPECT_EQ(band0[1].group, 0);
  EXPECT_EQ(band0[2].group, 1);
  EXPECT_EQ(tie_reason(e[1], e[0]), "lower peak memory (21.00 vs 26.50 GiB)");
}

TEST(TieGroups, ABandGroupsCloseCostsAndRanksByMemoryThenSimplicity) {
  // Band 5%: 100, 103, 104.9 tie with 100; 105 does not (not below 105); 108 ties with 105.
  const std::vector<TieEntry> e = {entry(100.0, 30.0, 2, 2, true, 0), entry(103.0, 20.0, 2, 2, true, 1),
                                   entry(104.9, 20.0, 1, 2, true, 2), entry(105.0, 5.0, 1, 0, false, 3),
                                   entry(108.0, 5.0, 1, 0, false, 4)};
  const std::vector<TiePlace> places = order_with_ties(e, 0.05);
  // Group 0: memory 20 (entries 1, 2) before 30; between 1 and 2, fewer ring levels (2) first.
  EXPECT_EQ(order_of(places), (std::vector<size_t>{2, 1, 0, 3, 4}));
  EXPECT_EQ(places[2].group, 0);
  EXPECT_EQ(places[3].group, 1);
  EXPECT_EQ(places[4].group, 1);
  EXPECT_EQ(tie_reason(e[2], e[1]), "fewer ring levels (1 vs 2)");
}

TEST(TieGroups, SimplicityOrderAfterMemory) {
  const std::vector<TieEntry> e = {entry(10.0, 8.0, 1, 4, true, 0), entry(10.0, 8.0, 1, 2, true, 1),
                                   entry(10.0, 8.0, 1, 2, false, 2), entry(10.0, 8.0, 1, 2, false, 3)};
  EXPECT_EQ(order_of(order_with_ties(e, 0.0)), (std::vector<size_t>{2, 3, 1, 0}));
  EXPECT_EQ(tie_reason(e[1], e[0]), "fewer collectives per layer (2 vs 4)");
  EXPECT_EQ(tie_reason(e[2], e[1]), "no per-layer re-layout");
  EXPECT_EQ(tie_reason(e[2], e[3]), "enumeration order");
  EXPECT_THROW(order_with_ties(e, -0.1), InputError);
}

TEST(ModelError, ParsesTheRepositoryDefaultsAndRejectsBadValues) {
  const ModelError e = parse_model_error("median_relative_error: 0.07\nworst_relative_error: 0.151\nsource: docs\n", "<t>");
  EXPECT_DOUBLE_EQ(e.median_relative, 0.07);
  EXPECT_DOUBLE_EQ(e.worst_relative, 0.151);
  EXPECT_EQ(e.source, "docs");
  EXPECT_THROW(parse_model_error("median_relative_error: 0.2\nworst_relative_error: 0.1\n", "<t>"), InputError);
  EXPECT_THROW(parse_model_error("median_relative_error: -1\nworst_relative_error: 0.1\n", "<t>"), InputError);
  EXPECT_THROW(parse_model_error("median_relative_error: 0.1\n", "<t>"), InputError);
}

}  // namespace
}  // namespace sparsering
