// The export memory estimate (tuner/export/export_budget.hpp) against what the exporters produce:
// the token permutation part is the matrix plus the .npy bytes the framework exports write, the
// torch parts hold plan.json, the chakra traces part is within a factor of two of the execution
// traces written, and every part is counted once in the total.
#include "tuner/export/export_budget.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/tuner/export_test_util.hpp"
#include "tuner/export/chakra/chakra_export.hpp"
#include "tuner/export/export_plan.hpp"

namespace sparsering {
namespace {

double part(const ExportMemoryEstimate& e, const std::string& prefix) {
  for (const MemoryEstimatePart& p : e.parts) {
    if (p.name.rfind(prefix, 0) == 0) return p.bytes;
  }
  ADD_FAILURE() << "no part " << prefix;
  return -1.0;
}

double bundle_bytes(const ExportBundle& bundle) {
  double bytes = 0.0;
  for (const ExportFile& file : bundle.files) bytes += static_cast<double>(file.bytes.size());
  return bytes;
}

test::PlanSpec dense_zigzag(int64_t tokens) {
  test::PlanSpec spec;
  spec.seq_len_tokens = tokens;
  spec.layout = "zigzag";
  spec.sparse = false;
  return spec;
}

TEST(ExportBudget, PermutationIsTheMatrixAndItsNpyBytes) {
  const test::TestPlan t(dense_zigzag(int64_t{1} << 16), 1, 4);
  for (const ExportTarget target : {ExportTarget::megatron, ExportTarget::te, ExportTarget::torchtitan}) {
    const ExportBundle bundle = export_plan(target, t.input(), ExportOptions{});
    const ExportFile* npy = bundle.find("token_permutation.npy");
    ASSERT_NE(npy, nullptr) << to_string(target);
    const double data_bytes = 8.0 * 65536;  // int64 per token
    EXPECT_GE(static_cast<double>(npy->bytes.size()), data_bytes);
    EXPECT_LT(static_cast<double>(npy->bytes.size()), data_bytes + 256) << "the .npy header is small";
    const ExportMemoryEstimate e = estimate_export_memory(target, t.input(), ExportOptions{}, 0.0);
    EXPECT_DOUBLE_EQ(part(e, "token permutation"), 2.0 * data_bytes) << to_string(target);
  }
}

TEST(ExportBudget, TorchPartsHoldPlanJson) {
  const test::TestPlan t(dense_zigzag(int64_t{1} << 16), 1, 4);
  const ExportBundle bundle = export_plan(ExportTarget::torch, t.input(), ExportOptions{});
  const ExportFile* json = bundle.find("plan.json");
  ASSERT_NE(json, nullptr);
  const ExportMemoryEstimate e = estimate_export_memory(ExportTarget::torch, t.input(), ExportOptions{}, 0.0);
  // The JSON values of the permutation and the text, then the bundle's copy: more than the text.
  EXPECT_GT(part(e, "token permutation") + part(e, "ranks"), 2.0 * static_cast<double>(json->bytes.size()));
}

TEST(ExportBudget, ChakraTracesWithinAFactorOfTwo) {
  test::PlanSpec spec = dense_zigzag(4096);
  spec.context_parallel = 8;
  spec.levels = {{8, "nvlink"}};
  const test::TestPlan t(spec, 1, 8);
  StepDurations durations;
  const StepMatrix steps(8, std::vector<int64_t>(8, 1000));
  durations.forward_ns = {steps, steps};
  durations.backward_ns = {steps, steps};
  const ExportBundle bundle = export_chakra(t.input(), durations, 2);
  ExportOptions options;
  options.durations_path = "durations.json";
  options.chakra_layers = 2;
  const ExportMemoryEstimate e = estimate_export_memory(ExportTarget::chakra, t.input(), options, 1000.0);
  const double traces = part(e, "execution traces");
  EXPECT_LT(traces, 2.0 * bundle_bytes(bundle)) << "estimate " << traces << ", written " << bundle_bytes(bundle);
  EXPECT_GT(traces, 0.5 * bundle_bytes(bundle)) << "estimate " << traces << ", written " << bundle_bytes(bundle);
  EXPECT_DOUBLE_EQ(part(e, "durations file"), 16.0 * 1000.0);
}

TEST(ExportBudget, PartsSumToTheTotalLargestFirst) {
  const test::TestPlan t(dense_zigzag(int64_t{1} << 16), 1, 4);
  for (const ExportTarget target : all_export_targets()) {
    ExportOptions options;
    if (target == ExportTarget::chakra) options.durations_path = "durations.json";
    const ExportMemoryEstimate e = estimate_export_memory(target, t.input(), options, 1e6);
    double sum = 0.0;
    for (const MemoryEstimatePart& p : e.parts) sum += p.bytes;
    EXPECT_DOUBLE_EQ(e.bytes, sum) << to_string(target);
    for (size_t i = 1; i < e.parts.size(); ++i) EXPECT_GE(e.parts[i - 1].bytes, e.parts[i].bytes) << to_string(target);
    EXPECT_DOUBLE_EQ(part(e, "process"), kProcessBaseBytes);
  }
}

}  // namespace
}  // namespace sparsering
