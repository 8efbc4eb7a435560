// Tests of sim/config/link_calibration.hpp (set_fabric_level_calibration) and the GPU side's
// set_gpu_calibration round trip with fitted values: the edited level parses back with exactly
// the new latency and curve marked measured, every other line (comments included) is unchanged,
// and levels that cannot be edited are refused with the level named.
#include <gtest/gtest.h>

#include <sstream>

#include "tests/config/config_test_util.hpp"
#include "common/atomic_file.hpp"
#include "sim/config/gpu_config.hpp"
#include "sim/config/link_calibration.hpp"

namespace sparsering {
namespace {

const std::string kCluster = R"(# A test cluster.
name: test
nodes: 4
gpus_per_node: 2
gpu: h200
intra_node:
  kind: nvlink
  bandwidth_gbytes_per_s: 450   # line rate
  latency_us: 3.4   # from NCCL's model
  curve:
    - {bytes: 1048576, gbytes_per_s: 12}       # 1 MiB
    - {bytes: 8388608, gbytes_per_s: 91}
# between nodes
inter_node:
  kind: infiniband
  nics_per_node: 2
  bandwidth_gbytes_per_s: 50
  latency_us: 9.6
outer_levels:
  - name: rack
    kind: ethernet
    nics_per_node: 1
    nodes_per_group: 2
    bandwidth_gbytes_per_s: 12.5
    latency_us: 20
    curve:
    - {bytes: 65536, gbytes_per_s: 1}
# end
)";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

/// Lines of `text` outside the curve items, the latency lines and the source keys with their
/// cited items (what the setter must keep).
std::vector<std::string> kept_lines(const std::string& text) {
  std::vector<std::string> kept;
  for (const std::string& line : lines_of(text)) {
    const size_t first = line.find_first_not_of(' ');
    if (line.find("{bytes:") != std::string::npos || line.find("curve:") != std::string::npos ||
        line.find("latency_us:") != std::string::npos || line.find("source:") != std::string::npos ||
        line.find("sources:") != std::string::npos || (first != std::string::npos && line.compare(first, 3, "- \"") == 0)) {
      continue;
    }
    kept.push_back(line);
  }
  return kept;
}

const FabricLevel& level_of(const ClusterConfig& c, const std::string& name) {
  if (name == "intra_node") return c.intra_node;
  if (name == "inter_node") return *c.inter_node;
  return c.outer_levels.at(0);
}

TEST(LinkCalibration, ReplacesLatencyAndCurveOfEachLevelKeepingTheRest) {
  const std::vector<BandwidthPoint> curve{{65536, 2.5}, {1048576, 10.25}, {1073741824, 11.5}};
  for (const std::string level : {"intra_node", "inter_node", "rack"}) {
    SCOPED_TRACE(level);
    const std::string edited = set_fabric_level_calibration(kCluster, level, 4.25, curve, "measured", "test.yaml");
    const ClusterConfig parsed = parse_cluster(edited, "edited");
    const FabricLevel& l = level_of(parsed, level);
    EXPECT_EQ(l.latency_us, 4.25);
    ASSERT_EQ(l.curve.size(), curve.size());
    for (size_t k = 0; k < curve.size(); ++k) {
      EXPECT_EQ(l.curve[k].bytes, curve[k].bytes);
      EXPECT_EQ(l.curve[k].gbytes_per_s, curve[k].gbytes_per_s);
    }
    // The other levels are untouched.
    const ClusterConfig original = parse_cluster(kCluster, "original");
    for (const std::string other : {"intra_node", "inter_node", "rack"}) {
      if (other == level) continue;
      EXPECT_EQ(level_of(parsed, other).latency_us, level_of(original, other).latency_us);
      EXPECT_EQ(level_of(parsed, other).curve.size(), level_of(original, other).curve.size());
    }
    EXPECT_EQ(kept_lines(edited), kept_lines(kCluster));
    EXPECT_NE(edited.find("# measured"), std::string::npos);
  }
  // The latency line keeps its comment.
  const std::string edited = set_fabric_level_calibration(kCluster, "intra_node", 5, curve, "", "t");
  EXPECT_NE(edited.find("  latency_us: 5   # from NCCL's model"), std::string::npos);
}

TEST(LinkCalibration, AddsACurveToALevelWithoutOneAndRemovesWithAnEmptyCurve) {
  const std::string added = set_fabric_level_calibration(kCluster, "inter_node", 7, {{1024, 1.0}, {2048, 2.0}}, "", "t");
  EXPECT_EQ(parse_cluster(added, "t").inter_node->curve.size(), 2u);
  const std::string removed = set_fabric_level_calibration(kCluster, "intra_node", 3, {}, "", "t");
  const ClusterConfig parsed = parse_cluster(removed, "t");
  EXPECT_TRUE(parsed.intra_node.curve.empty());
  EXPECT_EQ(parsed.intra_node.latency_us, 3.0);
  EXPECT_EQ(parsed.outer_levels.at(0).curve.size(), 1u);
}

TEST(LinkCalibration, AMeasuredCurveReplacesAPublishedOneAndItsSources) {
  std::string published = kCluster;
  published.replace(published.find("  curve:"), 8,
                    "  source: published\n  sources:\n    - \"paper, figure 2: 1 MiB ring step\"\n  curve:");
  ASSERT_EQ(parse_cluster(published, "t").intra_node.source, LinkSource::published);
  const std::string measured = set_fabric_level_calibration(published, "intra_node", 3, {{1024, 1.0}}, "", "t");
  const ClusterConfig parsed = parse_cluster(measured, "t");
  EXPECT_EQ(parsed.intra_node.source, LinkSource::measured);
  EXPECT_TRUE(parsed.intra_node.sources.empty());
  EXPECT_EQ(measured.find("paper, figure 2"), std::string::npos);
  EXPECT_EQ(kept_lines(measured), kept_lines(kCluster));
  // Without a curve the level runs at its line rate, whatever it said before.
  const ClusterConfig removed = parse_cluster(set_fabric_level_calibration(published, "intra_node", 3, {}, "", "t"), "t");
  EXPECT_EQ(removed.intra_node.source, LinkSource::line_rate);
  EXPECT_TRUE(removed.intra_node.sources.empty());
  // A level that had no curve gains one marked measured.
  const std::string added = set_fabric_level_calibration(kCluster, "inter_node", 7, {{1024, 1.0}}, "", "t");
  EXPECT_EQ(parse_cluster(added, "t").inter_node->source, LinkSource::measured);
}

TEST(LinkCalibration, EditsShippedClusterFiles) {
  for (const char* name : {"h200-2x-nvlink", "h100-16x8-ndr", "mtraining-4x8-a100"}) {
    SCOPED_TRACE(name);
    const std::string text = read_file(std::string(SPARSERING_SOURCE_DIR) + "/configs/clusters/" + name + ".yaml");
    const std::string edited = set_fabric_level_calibration(text, "intra_node", 2.5, {{65536, 10}, {1073741824, 250}}, "m", name);
    EXPECT_EQ(parse_cluster(edited, name).intra_node.curve.size(), 2u);
    EXPECT_EQ(kept_lines(edited), kept_lines(text));
    // Editing twice gives the same text as editing once.
    EXPECT_EQ(set_fabric_level_calibration(edited, "intra_node", 2.5, {{65536, 10}, {1073741824, 250}}, "m", name), edited);
  }
}

TEST(LinkCalibration, RefusesWhatItCannotEdit) {
  test::expect_input_error([] { set_fabric_level_calibration(kCluster, "pod", 1, {}, "", "c.yaml"); }, {"c.yaml", "\"pod\""});
  test::expect_input_error(
      [] {
        set_fabric_level_calibration("name: x\nnodes: 1\ngpus_per_node: 2\ngpu: h200\nintra_node: {kind: nvlink, "
                                     "bandwidth_gbytes_per_s: 1, latency_us: 1}\n",
                                     "intra_node", 1, {}, "", "f.yaml");
      },
      {"f.yaml", "flow style"});
  test::expect_input_error([] { set_fabric_level_calibration(kCluster, "intra_node", 1, {{1024, 451}}, "", "c.yaml"); },
                           {"c.yaml", "must not exceed"});
  test::expect_input_error([] { set_fabric_level_calibration(kCluster, "intra_node", -1, {}, "", "c.yaml"); },
                           {"latency_us", ">= 0"});
}

TEST(GpuCalibrationRoundTrip, FittedValuesSurviveTheShippedGpuFile) {
  const std::string text = read_file(std::string(SPARSERING_SOURCE_DIR) + "/configs/gpus/h100-sxm.yaml");
  const GpuConfig before = parse_gpu(text, "h100");
  GpuCalibration cal;
  cal.kernel_build = "sha256:" + std::string(64, 'c');
  CalibratedShape shape;
  shape.forward = {7.123, 0.02875, 0.008765, 0.01234};
  shape.backward = {31.5, 0.02, 0.02469, 0.04321};
  shape.fit = CalibrationFit{142, 0.0211, 0.0412, 0.025, 0.09, 5};
  cal.shapes = {shape};
  cal.gemm_efficiency = 0.7012;
  cal.provenance = {"NVIDIA H100 80GB HBM3", "580.159.04", "13.0", "2.28.3", "abc1234", "2026-01-02T03:04:05Z"};
  const std::string edited = set_gpu_calibration(text, cal, "h100");
  const GpuConfig after = parse_gpu(edited, "h100");
  ASSERT_TRUE(after.calibration.has_value());
  ASSERT_EQ(after.calibration->shapes.size(), 1u);
  EXPECT_EQ(after.calibration->shapes[0].forward.per_tile_us, 0.008765);
  EXPECT_EQ(after.calibration->shapes[0].backward.per_vertical_chunk_us, 0.04321);
  EXPECT_EQ(after.calibration->shapes[0].fit->samples, 142);
  EXPECT_EQ(after.calibration->kernel_build, cal.kernel_build);
  EXPECT_EQ(after.calibration->provenance.nccl, "2.28.3");
  EXPECT_EQ(after.peak_tflops_bf16, before.peak_tflops_bf16);
  // Writing the same calibration again changes nothing.
  EXPECT_EQ(set_gpu_calibration(edited, cal, "h100"), edited);
}

}  // namespace
}  // namespace sparsering
