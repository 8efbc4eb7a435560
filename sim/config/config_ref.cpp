// Config references: names map to sibling kind folders so the shipped configs/ tree works from
// any working directory; explicit paths allow configs kept elsewhere.
#include "sim/config/config_ref.hpp"

#include <string>

#include "common/error.hpp"

namespace sparsering {

bool is_path_ref(std::string_view ref) {
  const auto ends_with = [&](std::string_view suffix) {
    return ref.size() >= suffix.size() && ref.substr(ref.size() - suffix.size()) == suffix;
  };
  return ref.find('/') != std::string_view::npos || ends_with(".yaml") || ends_with(".yml") ||
         ends_with(".json");
}

std::filesystem::path resolve_config_ref(std::string_view ref, const std::filesystem::path& referring_file,
                                         std::string_view kind_folder) {
  require(!ref.empty(), "empty reference to a ", kind_folder, " config");
  const std::filesystem::path folder = referring_file.parent_path();
  if (is_path_ref(ref)) {
    const std::filesystem::path path{std::string(ref)};
    return (path.is_absolute() ? path : folder / path).lexically_normal();
  }
  return (folder / ".." / std::string(kind_folder) / (std::string(ref) + ".yaml")).lexically_normal();
}

}  // namespace sparsering
