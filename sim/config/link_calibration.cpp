// Line-based editing: a level is a block (top-level `intra_node:` / `inter_node:` map, or an
// `outer_levels` entry starting with `- name: X`) whose keys share one indentation. Inside the
// block the `latency_us:` line is rewritten (its trailing comment kept) and old `curve:`, `source:`
// and `sources:` keys are dropped with their items; `source: measured` and the new curve go after
// the block's last key (a published curve replaced by a measurement no longer cites its sources). Parsing the result and
// comparing the level with what was asked catches any layout this editing does not understand.
#include "sim/config/link_calibration.hpp"

#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "common/yaml_reader.hpp"

namespace sparsering {
namespace {

size_t indent_of(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t");
  return first == std::string::npos ? line.size() : first;
}

bool blank(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t\r");
  return first == std::string::npos || line[first] == '#';
}

std::string strip(std::string text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

/// The value after "key:" on a line whose content starts at `column`, without a comment.
bool key_is(const std::string& line, size_t column, std::string_view key) {
  return line.size() > column + key.size() && line.compare(column, key.size(), key) == 0 && line[column + key.size()] == ':';
}

/// Finds the block of `level`: [begin, end) lines holding its keys at indentation `key_indent`.
struct Block {
  size_t begin = 0;
  size_t end = 0;
  size_t key_indent = 0;
};

Block find_block(const std::vector<std::string>& lines, std::string_view level, std::string_view source_name) {
  Block block;
  bool found = false;
  if (level == "intra_node" || level == "inter_node") {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (!key_is(lines[k], 0, level)) continue;
      const std::string rest = strip(lines[k].substr(level.size() + 1));
      require(rest.empty() || rest[0] == '#', source_name, ": ", level, " is written in flow style; calibrate edits block-style levels only");
      block.begin = k + 1;
      found = true;
      break;
    }
    require(found, source_name, ": has no ", level, " level");
    size_t k = block.begin;
    while (k < lines.size() && blank(lines[k])) ++k;
    require(k < lines.size() && indent_of(lines[k]) > 0, source_name, ": ", level, " has no keys");
    block.key_indent = indent_of(lines[k]);
  } else {
    // An outer_levels entry "- name: X" (any indentation); its keys align with "name".
    for (size_t k = 0; k < lines.size() && !found; ++k) {
      const size_t dash = indent_of(lines[k]);
      if (dash >= lines[k].size() || lines[k][dash] != '-') continue;
      const size_t column = lines[k].find_first_not_of(" \t", dash + 1);
      if (column == std::string::npos || !key_is(lines[k], column, "name")) continue;
      std::string value = strip(lines[k].substr(column + 5));
      if (const size_t hash = value.find(" #"); hash != std::string::npos) value = strip(value.substr(0, hash));
      if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) value = value.substr(1, value.size() - 2);
      if (value != level) continue;
      block.begin = k;
      block.key_indent = column;
      found = true;
    }
    require(found, source_name, ": has no level named \"", level, "\" (intra_node, inter_node or an outer_levels name)");
  }
  // Every later key line sits at key_indent, deeper lines (and "- " items at key_indent) belong
  // to a key, and anything shallower ends the block. An outer entry's first line is "- name:".
  const bool outer = level != "intra_node" && level != "inter_node";
  size_t end = block.begin + (outer ? 1 : 0);
  for (size_t k = end; k < lines.size(); ++k) {
    if (blank(lines[k])) continue;
    if (indent_of(lines[k]) < block.key_indent) break;
    end = k + 1;
  }
  block.end = end;
  return block;
}

std::string point_line(size_t indent, const BandwidthPoint& p) {
  return str(std::string(indent, ' '), "- {bytes: ", p.bytes, ", gbytes_per_s: ", yaml::format_number(p.gbytes_per_s), "}");
}

}  // namespace

std::string set_fabric_level_calibration(const std::string& cluster_yaml_text, std::string_view level, double latency_us,
                                         const std::vector<BandwidthPoint>& curve, std::string_view comment,
                                         std::string_view source_name) {
  require(std::isfinite(latency_us) && latency_us >= 0.0, source_name, ": ", level, ".latency_us must be >= 0, got ", latency_us);
  std::vector<std::string> lines;
  {
    std::istringstream in(cluster_yaml_text);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  const Block block = find_block(lines, level, source_name);
  const std::string pad(block.key_indent, ' ');

  std::vector<std::string> out(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(block.begin));
  bool latency_written = false;
  size_t last_key = out.size();  // where the block's content ends in `out`
  for (size_t k = block.begin; k < block.end; ++k) {
    const std::string& line = lines[k];
    const size_t indent = indent_of(line);
    const size_t column = (k == block.begin && level != "intra_node" && level != "inter_node") ? block.key_indent : indent;
    if (!blank(line) && column == block.key_indent &&
        (key_is(line, column, "curve") || key_is(line, column, "source") || key_is(line, column, "sources"))) {
      // Drop the key and its items: deeper lines, or "- " items at the key's own indentation.
      size_t next = k + 1;
      while (next < block.end && (blank(lines[next]) || indent_of(lines[next]) > block.key_indent ||
                                  (indent_of(lines[next]) == block.key_indent && lines[next][block.key_indent] == '-'))) {
        ++next;
      }
      k = next - 1;
      continue;
    }
    if (!blank(line) && column == block.key_indent && key_is(line, column, "latency_us")) {
      std::string trailing;
      if (size_t hash = line.find(" #"); hash != std::string::npos) {
        while (hash > column && line[hash - 1] == ' ') --hash;  // keep the comment's alignment
        trailing = line.substr(hash);
      }
      out.push_back(str(line.substr(0, column), "latency_us: ", yaml::format_number(latency_us), trailing));
      latency_written = true;
      last_key = out.size();
      continue;
    }
    out.push_back(line);
    if (!blank(line)) last_key = out.size();
  }
  std::vector<std::string> added;
  if (!latency_written) added.push_back(str(pad, "latency_us: ", yaml::format_number(latency_us)));
  if (!curve.empty()) {
    added.push_back(str(pad, "source: measured"));
    added.push_back(comment.empty() ? str(pad, "curve:") : str(pad, "curve:  # ", comment));
    for (const BandwidthPoint& p : curve) added.push_back(point_line(block.key_indent + 2, p));
  }
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(last_key), added.begin(), added.end());
  out.insert(out.end(), lines.begin() + static_cast<std::ptrdiff_t>(block.end), lines.end());

  std::string result;
  for (const std::string& line : out) result += line + "\n";
  const ClusterConfig parsed = parse_cluster(result, source_name);
  const FabricLevel* edited = nullptr;
  if (level == "intra_node") edited = &parsed.intra_node;
  if (level == "inter_node" && parsed.inter_node) edited = &*parsed.inter_node;
  for (const FabricLevel& outer : parsed.outer_levels) {
    if (outer.name == level) edited = &outer;
  }
  const LinkSource expected_source = curve.empty() ? LinkSource::line_rate : LinkSource::measured;
  require(edited != nullptr && edited->latency_us == latency_us && edited->curve.size() == curve.size() &&
              edited->source == expected_source,
          source_name,
          ": could not edit level ", level, " in place (unusual layout); edit it by hand");
  for (size_t k = 0; k < curve.size(); ++k) {
    require(edited->curve[k].bytes == curve[k].bytes && edited->curve[k].gbytes_per_s == curve[k].gbytes_per_s, source_name,
            ": could not edit level ", level, "'s curve in place; edit it by hand");
  }
  return result;
}

}  // namespace sparsering
