// Cluster configs: shipped clusters parse and load their GPU; link_level agrees with a brute-force
// "smallest shared group" oracle on random nested topologies; each validation rule fails with the
// key path and value.
#include "sim/config/cluster_config.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/config/config_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

using test::expect_input_error;

const std::filesystem::path kConfigs = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs";

const std::string kCluster = R"(name: test-cluster
nodes: 8
gpus_per_node: 4
gpu: h100-sxm
intra_node:
  kind: nvlink
  bandwidth_gbytes_per_s: 450
  latency_us: 3.4
  curve:
    - {bytes: 1024, gbytes_per_s: 1}
    - {bytes: 1048576, gbytes_per_s: 100}
inter_node:
  kind: infiniband
  nics_per_node: 4
  bandwidth_gbytes_per_s: 50
  latency_us: 9.6
outer_levels:
  - name: spine
    nodes_per_group: 4
    kind: ethernet
    nics_per_node: 2
    bandwidth_gbytes_per_s: 12.5
    latency_us: 20
)";

TEST(ClusterConfig, ShippedClustersLoadWithTheirGpus) {
  struct Expected {
    const char* file;
    int64_t world;
    const char* gpu;
    bool inter_node;
  };
  for (const Expected& e : {Expected{"mtraining-4x8-a100.yaml", 32, "a100-40gb", true},
                            Expected{"h100-16x8-ndr.yaml", 128, "h100-sxm", true},
                            Expected{"h200-8x-nvlink.yaml", 8, "h200", false},
                            Expected{"h200-2x-nvlink.yaml", 2, "h200", false}}) {
    const ClusterConfig cluster = load_cluster(kConfigs / "clusters" / e.file);
    EXPECT_EQ(cluster.world_size(), e.world) << e.file;
    EXPECT_EQ(cluster.gpu_config.name, e.gpu) << e.file;
    EXPECT_EQ(cluster.gpu_path, (kConfigs / "gpus" / (std::string(e.gpu) + ".yaml")).lexically_normal());
    EXPECT_EQ(cluster.inter_node.has_value(), e.inter_node) << e.file;
  }
  const ClusterConfig mtraining = load_cluster(kConfigs / "clusters" / "mtraining-4x8-a100.yaml");
  EXPECT_DOUBLE_EQ(mtraining.intra_node.bandwidth_gbytes_per_s, 300.0);
  EXPECT_DOUBLE_EQ(mtraining.inter_node->node_bandwidth_gbytes_per_s(), 8 * 25.0);
  EXPECT_EQ(mtraining.link(0, 7).kind, LinkKind::nvlink);
  EXPECT_EQ(mtraining.link(7, 8).kind, LinkKind::infiniband);
  const ClusterConfig pair = load_cluster(kConfigs / "clusters" / "h200-2x-nvlink.yaml");
  ASSERT_EQ(pair.intra_node.curve.size(), 5U);
  EXPECT_EQ(pair.intra_node.curve.front().bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(pair.intra_node.curve.back().gbytes_per_s, 357.0);
}

TEST(ClusterConfig, ParsesAllLevels) {
  const ClusterConfig cluster = parse_cluster(kCluster, "c.yaml");
  EXPECT_EQ(cluster.gpu, "h100-sxm");
  EXPECT_TRUE(cluster.gpu_path.empty());
  EXPECT_EQ(cluster.level_count(), 3);
  EXPECT_EQ(cluster.intra_node.curve.size(), 2U);
  EXPECT_EQ(cluster.outer_levels.at(0).name, "spine");
  EXPECT_EQ(cluster.outer_levels.at(0).kind, LinkKind::ethernet);
  EXPECT_EQ(cluster.link_level(0, 3), 0);    // node 0
  EXPECT_EQ(cluster.link_level(0, 4), 1);    // nodes 0 and 1, same group of 4
  EXPECT_EQ(cluster.link_level(0, 16), 2);   // nodes 0 and 4, different groups
  EXPECT_EQ(cluster.link_level(5, 5), 0);
  EXPECT_EQ(cluster.link(31, 0).name, "spine");
  expect_input_error([&] { cluster.link_level(0, 32); }, {"rank 32 is outside cluster test-cluster (32 GPUs)"});
  expect_input_error([&] { cluster.link_level(-1, 0); }, {"rank -1"});
}

/// Builds the YAML of a cluster with the given nodes, GPUs per node and nested outer group sizes.
std::string cluster_yaml(int64_t nodes, int64_t gpus, const std::vector<int64_t>& groups) {
  std::string text = "name: r\nnodes: " + std::to_string(nodes) + "\ngpus_per_node: " + std::to_string(gpus) +
                     "\ngpu: x\nintra_node: {kind: pcie, bandwidth_gbytes_per_s: 32, latency_us: 5.7}\n";
  if (nodes > 1) text += "inter_node: {kind: roce, nics_per_node: 1, bandwidth_gbytes_per_s: 25, latency_us: 9.6}\n";
  if (!groups.empty()) {
    text += "outer_levels:\n";
    for (size_t i = 0; i < groups.size(); ++i) {
      text += "  - {name: tier" + std::to_string(i) + ", nodes_per_group: " + std::to_string(groups[i]) +
              ", kind: ethernet, nics_per_node: 1, bandwidth_gbytes_per_s: 10, latency_us: 30}\n";
    }
  }
  return text;
}

TEST(ClusterConfig, LinkLevelMatchesSmallestSharedGroupOnRandomTopologies) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 200; ++trial) {
    // Nested group sizes: each a multiple (2-3x) of the one inside it; nodes a multiple of the last.
    std::vector<int64_t> groups;
    int64_t size = 1;
    const int levels = static_cast<int>(rng() % 4);
    for (int i = 0; i < levels; ++i) {
      size *= 2 + static_cast<int64_t>(rng() % 2);
      groups.push_back(size);
    }
    const int64_t nodes = std::max<int64_t>(size * (2 + static_cast<int64_t>(rng() % 2)), 1 + static_cast<int64_t>(rng() % 3));
    if (!groups.empty() && nodes % groups.back() != 0) continue;
    const int64_t gpus = 1 + static_cast<int64_t>(rng() % 4);
    const ClusterConfig cluster = parse_cluster(cluster_yaml(nodes, gpus, groups), "random.yaml");
    // Oracle: group sizes in nodes from the node itself out to the whole cluster; the link crosses
    // level k where k is the smallest group both ranks share.
    std::vector<int64_t> sizes{1};
    sizes.insert(sizes.end(), groups.begin(), groups.end());
    sizes.push_back(nodes);
    for (int64_t a = 0; a < cluster.world_size(); ++a) {
      for (int64_t b = 0; b < cluster.world_size(); ++b) {
        const int64_t node_a = a / gpus;
        const int64_t node_b = b / gpus;
        int32_t expected = 0;
        while (node_a / sizes[static_cast<size_t>(expected)] != node_b / sizes[static_cast<size_t>(expected)]) ++expected;
        ASSERT_EQ(cluster.link_level(a, b), expected) << "ranks " << a << ", " << b << "\n" << cluster_yaml(nodes, gpus, groups);
        ASSERT_EQ(cluster.link_level(a, b), cluster.link_level(b, a));
      }
    }
  }
}

TEST(ClusterConfig, RejectsBadValuesNamingKeyPathAndValue) {
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "bandwidth_gbytes_per_s", "-3"), "c.yaml"); },
                     {"c.yaml: cluster.intra_node.bandwidth_gbytes_per_s must be in (0, 1e+06], got -3"});
  std::string inter = kCluster;
  inter.replace(inter.find("  bandwidth_gbytes_per_s: 50"), 28, "  bandwidth_gbytes_per_s: -3");
  expect_input_error([&] { parse_cluster(inter, "c.yaml"); },
                     {"cluster.inter_node.bandwidth_gbytes_per_s must be in (0, 1e+06], got -3"});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "nodes", "0"), "c.yaml"); },
                     {"cluster.nodes must be an integer in [1, 65536], got 0"});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "gpus_per_node", "\"eight\""), "c.yaml"); },
                     {"cluster.gpus_per_node", "\"eight\""});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "kind", "infiniband"), "c.yaml"); },
                     {"cluster.intra_node.kind must be one of nvlink, pcie; got \"infiniband\""});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "latency_us", "fast"), "c.yaml"); },
                     {"cluster.intra_node.latency_us", "\"fast\""});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "nics_per_node", "0"), "c.yaml"); },
                     {"cluster.inter_node.nics_per_node must be an integer in [1, 64], got 0"});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "gpu", "bad name"), "c.yaml"); },
                     {"cluster.gpu must be a name", "bad name"});
  // Curves: ascending bytes, rates within the line rate.
  std::string curve = kCluster;
  curve.replace(curve.find("{bytes: 1048576"), 15, "{bytes: 512");
  expect_input_error([&] { parse_cluster(curve, "c.yaml"); },
                     {"cluster.intra_node.curve[1].bytes must be larger than the previous point's (1024), got 512"});
  curve = kCluster;
  curve.replace(curve.find("gbytes_per_s: 100}"), 18, "gbytes_per_s: 3600}");
  expect_input_error([&] { parse_cluster(curve, "c.yaml"); },
                     {"cluster.intra_node.curve[1].gbytes_per_s (3600) must not exceed", "(450)"});
  curve = kCluster;
  curve.replace(curve.find("gbytes_per_s: 1}"), 16, "gbytes_per_s: 0}");
  expect_input_error([&] { parse_cluster(curve, "c.yaml"); }, {"cluster.intra_node.curve[0].gbytes_per_s must be > 0, got 0"});
  curve = kCluster;
  curve.replace(curve.find("{bytes: 1024"), 12, "{bytez: 1024");
  expect_input_error([&] { parse_cluster(curve, "c.yaml"); }, {"cluster.intra_node.curve[0].bytes is required (found unknown key cluster.intra_node.curve[0].bytez: did you mean bytes?)"});
  // Outer levels nest and divide the nodes.
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "nodes_per_group", "3"), "c.yaml"); },
                     {"cluster.outer_levels[0].nodes_per_group must divide cluster.nodes (8)", "got 3"});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "nodes_per_group", "8"), "c.yaml"); },
                     {"cluster.outer_levels[0].nodes_per_group", "at least two groups, got 8"});
  expect_input_error([] { parse_cluster(test::with_value(kCluster, "nodes_per_group", "1"), "c.yaml"); },
                     {"cluster.outer_levels[0].nodes_per_group must be a multiple of 1", "larger, got 1"});
  expect_input_error([] { parse_cluster(cluster_yaml(16, 1, {4, 2}), "c.yaml"); },
                     {"cluster.outer_levels[1].nodes_per_group must be a multiple of 4", "got 2"});
  expect_input_error([] { parse_cluster(cluster_yaml(2, 1, {}) + "outer_levels: {name: x}\n", "c.yaml"); },
                     {"cluster.outer_levels must be a sequence, got a mapping"});
  expect_input_error([] { parse_cluster(cluster_yaml(1, 1, {}) + "outer_levels: []\n", "c.yaml"); },
                     {"cluster.outer_levels needs an inter_node level first"});
  // Several nodes need an inter-node fabric.
  expect_input_error([] { parse_cluster(cluster_yaml(2, 8, {}).substr(0, cluster_yaml(2, 8, {}).find("inter_node")), "c.yaml"); },
                     {"cluster.inter_node is required"});
  expect_input_error([] { parse_cluster(kCluster + "racks: 2\n", "c.yaml"); }, {"unknown key cluster.racks", "outer_levels"});
}

TEST(ClusterConfig, ShippedLevelsSayWhereTheirLinksComeFrom) {
  const ClusterConfig mtraining = load_cluster(kConfigs / "clusters" / "mtraining-4x8-a100.yaml");
  for (const FabricLevel* level : {&mtraining.intra_node, &*mtraining.inter_node}) {
    EXPECT_EQ(level->source, LinkSource::published) << level->name;
    EXPECT_GE(level->sources.size(), 2U) << level->name;
    EXPECT_FALSE(level->curve.empty()) << level->name;
  }
  for (const char* file : {"h100-16x8-ndr.yaml", "h200-4x8-ndr.yaml"}) {
    const ClusterConfig ndr = load_cluster(kConfigs / "clusters" / file);
    EXPECT_EQ(ndr.inter_node->source, LinkSource::published) << file;
    EXPECT_EQ(ndr.intra_node.source, LinkSource::line_rate) << file;
  }
  EXPECT_EQ(load_cluster(kConfigs / "clusters" / "h200-4x-nvswitch.yaml").intra_node.source, LinkSource::measured);
  EXPECT_EQ(load_cluster(kConfigs / "clusters" / "h200-2x-nvlink.yaml").intra_node.source, LinkSource::measured);
  EXPECT_EQ(describe_link_source(mtraining.intra_node), "intra_node (nvlink): published curve, 4 points, latency 9.85 us");
  EXPECT_EQ(describe_link_source(*mtraining.inter_node), "inter_node (infiniband): published curve, 1 point, latency 9.6 us");
}

/// kCluster with `keys` (indented lines) added to the intra-node level (which has a curve) or to
/// the inter-node level (which has none).
std::string with_level_keys(const std::string& level, const std::string& keys) {
  std::string text = kCluster;
  if (level == "intra_node") {
    text.replace(text.find("  curve:"), 8, keys + "\n  curve:");
  } else {
    text.replace(text.find("  latency_us: 9.6"), 17, "  latency_us: 9.6\n" + keys);
  }
  return text;
}

TEST(ClusterConfig, LinkSourceDefaultsToWhatTheCurveSays) {
  const ClusterConfig cluster = parse_cluster(kCluster, "c.yaml");
  EXPECT_EQ(cluster.intra_node.source, LinkSource::measured);  // a curve without a source was measured
  EXPECT_TRUE(cluster.intra_node.sources.empty());
  EXPECT_EQ(cluster.inter_node->source, LinkSource::line_rate);
  EXPECT_EQ(describe_link_source(*cluster.inter_node),
            "inter_node (infiniband): line rate 50 GB/s, latency 9.6 us (no measured or published curve)");
  const ClusterConfig cited = parse_cluster(
      with_level_keys("intra_node", "  source: published\n  sources: [\"paper, figure 1: 1 MiB at 100 GB/s\"]"), "c.yaml");
  EXPECT_EQ(cited.intra_node.source, LinkSource::published);
  ASSERT_EQ(cited.intra_node.sources.size(), 1U);
  EXPECT_EQ(cited.intra_node.sources[0], "paper, figure 1: 1 MiB at 100 GB/s");
  EXPECT_EQ(parse_cluster(with_level_keys("inter_node", "  source: line_rate"), "c.yaml").inter_node->source,
            LinkSource::line_rate);
}

TEST(ClusterConfig, RejectsContradictoryLinkSources) {
  struct Case {
    const char* level;
    std::string keys;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"intra_node", "  source: line_rate", "c.yaml: cluster.intra_node.source is line_rate but the level has a curve"},
      {"inter_node", "  source: published\n  sources: [\"x\"]", "cluster.inter_node.source is published but the level has no curve"},
      {"inter_node", "  source: measured", "cluster.inter_node.source is measured but the level has no curve"},
      {"intra_node", "  source: published", "cluster.intra_node.sources is required with source: published"},
      {"intra_node", "  source: published\n  sources: []", "cluster.intra_node.sources is required with source: published"},
      {"inter_node", "  sources: [\"datasheet\"]",
       "cluster.inter_node.sources cites figures, but the level has no curve (source: line_rate)"},
      {"intra_node", "  source: guessed",
       "cluster.intra_node.source must be one of line_rate, measured, published; got \"guessed\""},
      {"intra_node", "  source: published\n  sources: [\"\"]", "cluster.intra_node.sources[0] must not be empty"},
      {"intra_node", "  source: published\n  sources: [[a]]", "cluster.intra_node.sources[0] must be a string, got a sequence"},
      {"intra_node", "  source: published\n  sources: \"one\"", "cluster.intra_node.sources must be a sequence"},
      {"intra_node", "  source: published\n  sources: [\"" + std::string(513, 'x') + "\"]",
       "cluster.intra_node.sources[0] must be at most 512 characters, got 513"},
      {"intra_node", "  source: published\n  sources: [\"a\\x1b[2Jb\"]", "cluster.intra_node.sources[0]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.keys);
    expect_input_error([&] { parse_cluster(with_level_keys(c.level, c.keys), "c.yaml"); }, {c.message});
  }
}

TEST(ClusterConfig, LoadResolvesTheGpuBesideTheClusterFolder) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("sparsering-cluster-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "clusters");
  std::filesystem::create_directories(dir / "gpus");
  std::filesystem::copy_file(kConfigs / "gpus" / "h100-sxm.yaml", dir / "gpus" / "h100-sxm.yaml");
  {
    std::ofstream(dir / "clusters" / "named.yaml") << kCluster;
    const ClusterConfig cluster = load_cluster(dir / "clusters" / "named.yaml");
    EXPECT_EQ(cluster.gpu_path, (dir / "gpus" / "h100-sxm.yaml").lexically_normal());
    EXPECT_EQ(cluster.gpu_config.name, "h100-sxm");
  }
  {
    std::ofstream(dir / "clusters" / "pathed.yaml") << test::with_value(kCluster, "gpu", "../gpus/h100-sxm.yaml");
    EXPECT_EQ(load_cluster(dir / "clusters" / "pathed.yaml").gpu_config.name, "h100-sxm");
  }
  {
    std::ofstream(dir / "clusters" / "missing.yaml") << test::with_value(kCluster, "gpu", "b200");
    expect_input_error([&] { load_cluster(dir / "clusters" / "missing.yaml"); }, {"missing.yaml", "cluster.gpu (b200)", "b200.yaml"});
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sparsering
