// Reading the model's validated error (tuner/search/model_error.hpp). Tested in
// tests/tuner_search/tie_groups_test.cpp.
#include "tuner/search/model_error.hpp"

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/yaml_reader.hpp"

namespace sparsering {

ModelError parse_model_error(const std::string& yaml_text, const std::string& source_name) {
  const YAML::Node root = yaml::parse_document(yaml_text, source_name);
  yaml::MapReader map(root, source_name);
  ModelError e;
  e.median_relative = map.required_number("median_relative_error", yaml::NumberBounds::closed(0.0, 0.99));
  e.worst_relative = map.required_number("worst_relative_error", yaml::NumberBounds::closed(0.0, 0.99));
  e.source = map.optional_string("source", source_name);
  map.finish();
  require(e.worst_relative >= e.median_relative, source_name, ": worst_relative_error (", e.worst_relative,
          ") is below median_relative_error (", e.median_relative, ")");
  return e;
}

ModelError load_model_error(const std::filesystem::path& path) {
  std::ifstream in(path);
  require(in.good(), "cannot read the model-error file ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_error(text.str(), path.string());
}

}  // namespace sparsering
