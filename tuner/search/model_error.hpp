// The model's validated prediction error (configs/model_error.yaml, values from
// docs/VALIDATION.md), which sets the tuner's tie band. Tested in
// tests/tuner_search/tie_groups_test.cpp.
#pragma once

#include <filesystem>
#include <string>

namespace sparsering {

struct ModelError {
  double median_relative = 0.0;  ///< median |predicted - measured| / measured
  double worst_relative = 0.0;   ///< worst of the same
  std::string source;            ///< where the numbers come from
};

/// Parses a model-error document (keys median_relative_error, worst_relative_error in [0, 1),
/// source). Throws InputError naming the key for bad values.
ModelError parse_model_error(const std::string& yaml_text, const std::string& source_name);

/// Reads and parses `path`. Throws InputError when it cannot be read.
ModelError load_model_error(const std::filesystem::path& path);

}  // namespace sparsering
