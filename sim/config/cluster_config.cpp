// Cluster config parsing and rank -> link lookup. Sizes are capped (2^16 nodes, 2^10 GPUs per
// node) so world sizes and rank arithmetic stay small whatever the input.
#include "sim/config/cluster_config.hpp"

#include "common/error.hpp"
#include "common/text_safety.hpp"
#include "common/yaml_reader.hpp"
#include "sim/config/config_ref.hpp"

namespace sparsering {
namespace {

using yaml::NumberBounds;

constexpr int64_t kMaxNodes = int64_t{1} << 16;
constexpr int64_t kMaxGpusPerNode = int64_t{1} << 10;
constexpr int64_t kMaxNicsPerNode = 64;
constexpr size_t kMaxCurvePoints = 256;
constexpr size_t kMaxOuterLevels = 8;
constexpr int64_t kMaxCurveBytes = int64_t{1} << 50;
constexpr size_t kMaxSources = 32;
constexpr size_t kMaxSourceChars = 512;

std::vector<BandwidthPoint> read_curve(const YAML::Node& node, const std::string& path, double line_rate) {
  std::vector<BandwidthPoint> curve;
  const std::vector<YAML::Node> items = yaml::to_sequence(node, path, kMaxCurvePoints);
  for (size_t i = 0; i < items.size(); ++i) {
    yaml::MapReader point(items[i], str(path, "[", i, "]"));
    BandwidthPoint p;
    p.bytes = point.required_int("bytes", 1, kMaxCurveBytes);
    p.gbytes_per_s = point.required_number("gbytes_per_s", NumberBounds::positive());
    point.finish();
    require(curve.empty() || p.bytes > curve.back().bytes, point.key_path("bytes"), " must be larger than the previous point's (",
            curve.empty() ? 0 : curve.back().bytes, "), got ", p.bytes);
    // A measured rate above the line rate is almost always a unit mix-up (Gbit/s vs GB/s).
    require(p.gbytes_per_s <= line_rate, point.key_path("gbytes_per_s"), " (", yaml::format_number(p.gbytes_per_s),
            ") must not exceed the level's bandwidth_gbytes_per_s (", yaml::format_number(line_rate), ")");
    curve.push_back(p);
  }
  return curve;
}

/// Reads `source` and `sources`. A curve is measured unless the level says otherwise, and a level
/// without one runs at its line rate; every other combination is a contradiction in the file.
void read_source(yaml::MapReader& map, FabricLevel& level) {
  const bool has_curve = !level.curve.empty();
  const std::string path = map.key_path("source");
  level.source = parse_link_source(
      map.optional_choice("source", has_curve ? "measured" : "line_rate", {"line_rate", "measured", "published"}), path);
  require(has_curve || level.source == LinkSource::line_rate, path, " is ", to_string(level.source),
          " but the level has no curve: give the curve's points or use line_rate");
  require(!has_curve || level.source != LinkSource::line_rate, path,
          " is line_rate but the level has a curve: say whether the curve is measured or published");
  if (auto sources = map.optional("sources")) {
    const std::string list_path = map.key_path("sources");
    require(level.source != LinkSource::line_rate, list_path, " cites figures, but the level has no curve (source: line_rate)");
    const std::vector<YAML::Node> items = yaml::to_sequence(*sources, list_path, kMaxSources);
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item_path = str(list_path, "[", i, "]");
      std::string text = yaml::to_string(items[i], item_path);
      require(text.size() <= kMaxSourceChars, item_path, " must be at most ", kMaxSourceChars, " characters, got ", text.size());
      require_safe_name(text, item_path);
      level.sources.push_back(std::move(text));
    }
  }
  require(level.source != LinkSource::published || !level.sources.empty(), map.key_path("sources"),
          " is required with source: published (one entry per cited figure)");
}

FabricLevel read_level(yaml::MapReader map, std::string name, std::initializer_list<std::string_view> kinds,
                       bool has_nics, bool outer, int64_t nodes) {
  FabricLevel level;
  level.name = std::move(name);
  level.kind = parse_link_kind(map.required_choice("kind", kinds), map.key_path("kind"));
  if (outer) level.nodes_per_group = map.required_int("nodes_per_group", 1, nodes);
  if (has_nics) level.nics_per_node = map.required_int("nics_per_node", 1, kMaxNicsPerNode);
  level.bandwidth_gbytes_per_s = map.required_number("bandwidth_gbytes_per_s", NumberBounds::left_open(0.0, 1e6));
  level.latency_us = map.required_number("latency_us", NumberBounds::closed(0.0, 1e6));
  if (auto curve = map.optional("curve")) level.curve = read_curve(*curve, map.key_path("curve"), level.bandwidth_gbytes_per_s);
  read_source(map, level);
  map.finish();
  return level;
}

ClusterConfig build_cluster(const YAML::Node& root) {
  yaml::MapReader map(root, "cluster");
  ClusterConfig cluster;
  cluster.name = map.required_name("name");
  cluster.nodes = map.required_int("nodes", 1, kMaxNodes);
  cluster.gpus_per_node = map.required_int("gpus_per_node", 1, kMaxGpusPerNode);
  cluster.gpu = map.required_string("gpu");
  if (!is_path_ref(cluster.gpu)) cluster.gpu = yaml::to_name(map.required("gpu"), map.key_path("gpu"));
  cluster.intra_node = read_level(map.required_map("intra_node"), "intra_node", {"nvlink", "pcie"}, false, false, 0);
  if (cluster.nodes > 1 || map.has("inter_node")) {
    cluster.inter_node = read_level(map.required_map("inter_node"), "inter_node", {"infiniband", "roce", "ethernet"},
                                    true, false, 0);
  }
  if (auto levels = map.optional("outer_levels")) {
    const std::string path = map.key_path("outer_levels");
    require(cluster.inter_node.has_value(), path, " needs an inter_node level first");
    const std::vector<YAML::Node> items = yaml::to_sequence(*levels, path, kMaxOuterLevels);
    int64_t inner_group = 1;
    for (size_t i = 0; i < items.size(); ++i) {
      yaml::MapReader level_map(items[i], str(path, "[", i, "]"));
      const std::string name = level_map.required_name("name");
      FabricLevel level = read_level(level_map, name, {"infiniband", "roce", "ethernet"}, true, true, cluster.nodes);
      const std::string group_path = str(path, "[", i, "].nodes_per_group");
      // Groups nest: each level joins whole groups of the level inside it, and at least two of them.
      require(level.nodes_per_group > inner_group && level.nodes_per_group % inner_group == 0, group_path,
              " must be a multiple of ", inner_group, " (the nodes per group inside it) and larger, got ",
              level.nodes_per_group);
      require(cluster.nodes % level.nodes_per_group == 0 && level.nodes_per_group < cluster.nodes, group_path,
              " must divide cluster.nodes (", cluster.nodes, ") into at least two groups, got ", level.nodes_per_group);
      inner_group = level.nodes_per_group;
      cluster.outer_levels.push_back(std::move(level));
    }
  }
  map.finish();
  return cluster;
}

}  // namespace

int64_t ClusterConfig::node_of(int64_t rank) const {
  require(rank >= 0 && rank < world_size(), "rank ", rank, " is outside cluster ", name, " (", world_size(), " GPUs)");
  return rank / gpus_per_node;
}

int32_t ClusterConfig::level_count() const {
  return 1 + (inter_node ? 1 : 0) + static_cast<int32_t>(outer_levels.size());
}

const FabricLevel& ClusterConfig::level(int32_t index) const {
  if (index == 0) return intra_node;
  if (index == 1 && inter_node) return *inter_node;
  require(index >= 2 && index < level_count(), "cluster ", name, " has no fabric level ", index);
  return outer_levels[static_cast<size_t>(index - 2)];
}

int32_t ClusterConfig::link_level(int64_t rank_a, int64_t rank_b) const {
  const int64_t node_a = node_of(rank_a);
  const int64_t node_b = node_of(rank_b);
  if (node_a == node_b) return 0;
  // Groups nest, so the outermost level whose groups differ is the one the transfer crosses.
  for (size_t i = outer_levels.size(); i-- > 0;) {
    const int64_t group = outer_levels[i].nodes_per_group;
    if (node_a / group != node_b / group) return 2 + static_cast<int32_t>(i);
  }
  return 1;
}

const FabricLevel& ClusterConfig::link(int64_t rank_a, int64_t rank_b) const {
  return level(link_level(rank_a, rank_b));
}

ClusterConfig parse_cluster(const std::string& yaml_text, std::string_view source_name) {
  const YAML::Node root = yaml::parse_document(yaml_text, source_name);
  return yaml::with_source(source_name, [&] { return build_cluster(root); });
}

ClusterConfig load_cluster(const std::filesystem::path& path) {
  ClusterConfig cluster = parse_cluster(yaml::read_config_file(path), path.string());
  cluster.source_path = path;
  cluster.gpu_path = resolve_config_ref(cluster.gpu, path, "gpus");
  try {
    cluster.gpu_config = load_gpu(cluster.gpu_path);
  } catch (const InputError& error) {
    throw InputError(str(path.string(), ": cluster.gpu (", cluster.gpu, "): ", error.what()));
  }
  return cluster;
}

std::string_view to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::infiniband: return "infiniband";
    case LinkKind::roce: return "roce";
    case LinkKind::ethernet: return "ethernet";
  }
  return "unknown";
}

std::string_view to_string(LinkSource source) {
  switch (source) {
    case LinkSource::line_rate: return "line_rate";
    case LinkSource::measured: return "measured";
    case LinkSource::published: return "published";
  }
  return "unknown";
}

LinkSource parse_link_source(std::string_view name, std::string_view path) {
  if (name == "line_rate") return LinkSource::line_rate;
  if (name == "measured") return LinkSource::measured;
  if (name == "published") return LinkSource::published;
  throw InputError(str(path, " must be one of line_rate, measured, published; got \"", name.substr(0, 48), "\""));
}

std::string describe_link_source(const FabricLevel& level) {
  const std::string head = str(level.name, " (", to_string(level.kind), "): ");
  const std::string latency = str("latency ", yaml::format_number(level.latency_us), " us");
  if (level.source == LinkSource::line_rate) {
    return str(head, "line rate ", yaml::format_number(level.bandwidth_gbytes_per_s), " GB/s, ", latency,
               " (no measured or published curve)");
  }
  return str(head, to_string(level.source), " curve, ", level.curve.size(), level.curve.size() == 1 ? " point, " : " points, ",
             latency);
}

LinkKind parse_link_kind(std::string_view name, std::string_view path) {
  if (name == "nvlink") return LinkKind::nvlink;
  if (name == "pcie") return LinkKind::pcie;
  if (name == "infiniband") return LinkKind::infiniband;
  if (name == "roce") return LinkKind::roce;
  if (name == "ethernet") return LinkKind::ethernet;
  throw InputError(str(path, " must be one of nvlink, pcie, infiniband, roce, ethernet; got \"", name.substr(0, 48), "\""));
}

}  // namespace sparsering
