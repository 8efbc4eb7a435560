// Cluster config (configs/clusters/*.yaml): how many nodes and GPUs, which GPU, and the fabric of
// each level: intra-node (NVLink/PCIe), inter-node (NICs), and optional outer levels (racks, pods).
// Global ranks are numbered node-major: rank g sits on node g / gpus_per_node as local GPU
// g % gpus_per_node. Schema reference: docs/configs.md. Tested in tests/config/cluster_config_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/gpu_config.hpp"

namespace sparsering {

enum class LinkKind : int32_t { nvlink = 0, pcie = 1, infiniband = 2, roce = 3, ethernet = 4 };

/// Where a level's latency and curve come from: the line rate alone (no curve), a curve measured
/// on the cluster's own hardware (`sparsering calibrate`), or a curve derived from cited published
/// measurements of the same fabric.
enum class LinkSource : int32_t { line_rate = 0, measured = 1, published = 2 };

/// One point of a measured curve: a ring step (every GPU of the ring sending one message to its
/// successor while receiving one) with messages of `bytes` achieved `gbytes_per_s` per direction.
struct BandwidthPoint {
  int64_t bytes = 0;
  double gbytes_per_s = 0.0;
};

/// The fabric of one level of the topology.
struct FabricLevel {
  std::string name;                    ///< "intra_node", "inter_node" or the outer level's name
  LinkKind kind = LinkKind::nvlink;
  double bandwidth_gbytes_per_s = 0.0; ///< line rate per direction: per GPU (intra_node) or per NIC
  double latency_us = 0.0;             ///< one-hop latency of a small message
  int64_t nics_per_node = 0;           ///< NICs of a node that carry this level's traffic (0 for intra_node)
  int64_t nodes_per_group = 0;         ///< outer levels: nodes of one group below this level (else 0)
  std::vector<BandwidthPoint> curve;   ///< measured, ascending bytes; empty = none
  LinkSource source = LinkSource::line_rate;  ///< line_rate exactly when the curve is empty
  std::vector<std::string> sources;    ///< cited figures; required for published, optional for measured

  /// Line rate per direction of a whole node at this level: nics_per_node x bandwidth (inter and
  /// outer levels only).
  double node_bandwidth_gbytes_per_s() const { return static_cast<double>(nics_per_node) * bandwidth_gbytes_per_s; }
};

struct ClusterConfig {
  std::string name;
  int64_t nodes = 0;
  int64_t gpus_per_node = 0;
  std::string gpu;                      ///< GPU reference as written (name in configs/gpus/ or path)
  std::filesystem::path gpu_path;       ///< resolved by load_cluster; empty when parsed from a string
  GpuConfig gpu_config;                 ///< loaded by load_cluster; default (empty name) otherwise
  FabricLevel intra_node;
  std::optional<FabricLevel> inter_node;   ///< required when nodes > 1
  std::vector<FabricLevel> outer_levels;   ///< innermost first; each needs inter_node
  std::filesystem::path source_path;

  /// nodes x gpus_per_node.
  int64_t world_size() const { return nodes * gpus_per_node; }
  /// Node of a global rank (node-major numbering). Throws InputError unless 0 <= rank < world_size().
  int64_t node_of(int64_t rank) const;
  /// Number of fabric levels: 1 (intra) + inter_node + outer levels.
  int32_t level_count() const;
  /// Level 0 = intra_node, 1 = inter_node, 2 + i = outer_levels[i]. Precondition: 0 <= index < level_count().
  const FabricLevel& level(int32_t index) const;
  /// The level a transfer between two global ranks crosses: 0 on the same node (also a == b), 1
  /// between nodes of one outer group (or any two nodes without outer levels), 2 + i for the
  /// outermost outer level i whose groups differ. Throws InputError for ranks outside the world.
  int32_t link_level(int64_t rank_a, int64_t rank_b) const;
  /// The fabric level of link_level(rank_a, rank_b).
  const FabricLevel& link(int64_t rank_a, int64_t rank_b) const;
};

/// Parses a cluster config; does not resolve or load the GPU (gpu_path and gpu_config stay empty).
/// Errors are InputError prefixed with `source_name`, naming the key path and value.
ClusterConfig parse_cluster(const std::string& yaml_text, std::string_view source_name);

/// Reads and parses a cluster file, resolves its `gpu` reference (see config_ref.hpp, folder
/// "gpus") and loads that GPU config.
ClusterConfig load_cluster(const std::filesystem::path& path);

/// The YAML spelling of a link kind ("nvlink", ...).
std::string_view to_string(LinkKind kind);
/// The YAML spelling of a link source ("line_rate", "measured", "published").
std::string_view to_string(LinkSource source);
/// One line saying where a level's transfer times come from, for a result's notes, e.g.
/// "inter_node (infiniband): published curve, 3 points, latency 9.6 us" or
/// "intra_node (nvlink): line rate 300 GB/s, latency 3.4 us (no measured or published curve)".
std::string describe_link_source(const FabricLevel& level);
/// Parses nvlink, pcie, infiniband, roce or ethernet; the error names `path` and lists the kinds.
LinkKind parse_link_kind(std::string_view name, std::string_view path);
/// Parses line_rate, measured or published; the error names `path` and lists them.
LinkSource parse_link_source(std::string_view name, std::string_view path);

}  // namespace sparsering
