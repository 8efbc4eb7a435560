// Writing a measured link into a cluster config: replaces one fabric level's `latency_us` and
// `curve` in the YAML text, keeping every other line and comment as written (the counterpart of
// set_gpu_calibration for links; `sparsering calibrate --cluster` uses it).
// Tested in tests/measure/calibration/link_calibration_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/config/cluster_config.hpp"

namespace sparsering {

/// Returns `cluster_yaml_text` with the level named `level` ("intra_node", "inter_node" or the
/// `name` of an entry of `outer_levels`) given `latency_us` (microseconds, >= 0) and `curve`
/// (replacing any curve it had; empty removes it), marked `source: measured` (any `sources:` list
/// is dropped; without a curve the level runs at its line rate). Lines outside that level, and the
/// level's other keys and comments, are kept. `comment`, when not empty, is written after the curve key. The
/// level must be written in block style (one key per line). Checks that the result parses and
/// holds the new values. Throws InputError naming `source_name` and the level when it is missing,
/// not in block style, or the result is invalid (e.g. a point above the level's line rate).
std::string set_fabric_level_calibration(const std::string& cluster_yaml_text, std::string_view level, double latency_us,
                                         const std::vector<BandwidthPoint>& curve, std::string_view comment,
                                         std::string_view source_name);

}  // namespace sparsering
