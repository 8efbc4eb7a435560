#include "tuner/export/export_bundle.hpp"

#include <sstream>
#include <system_error>

#include "common/error.hpp"
#include "common/output_bundle.hpp"

namespace sparsering {

void ExportBundle::add_file(std::string relative_path, std::string bytes) {
  require(!relative_path.empty(), "export file with an empty name");
  const std::filesystem::path path(relative_path);
  require(path.is_relative() && !path.has_root_name(), "export file ", relative_path, " must be a relative path");
  for (const auto& part : path) {
    require(part != "..", "export file ", relative_path, " must not contain '..'");
  }
  require(find(relative_path) == nullptr && relative_path != "NOTES.md", "export file ", relative_path,
          " is written twice");
  files.push_back({std::move(relative_path), std::move(bytes)});
}

const ExportFile* ExportBundle::find(const std::string& relative_path) const {
  for (const ExportFile& file : files) {
    if (file.relative_path == relative_path) return &file;
  }
  return nullptr;
}

std::string render_notes(const ExportBundle& bundle) {
  std::ostringstream out;
  out << "# sparsering export to " << bundle.target << "\n\n";
  out << "Plan: " << bundle.plan_name << "\n\n";
  out << "## What the target cannot express\n\n";
  if (bundle.lost.empty()) {
    out << "Nothing: the exported configuration reproduces the plan exactly.\n";
  } else {
    for (const std::string& line : bundle.lost) out << "- " << line << "\n";
  }
  if (!bundle.notes.empty()) {
    out << "\n## Notes\n\n";
    for (const std::string& line : bundle.notes) out << "- " << line << "\n";
  }
  out << "\n## Files\n\n";
  for (const ExportFile& file : bundle.files) out << "- " << file.relative_path << "\n";
  return out.str();
}

std::vector<std::filesystem::path> write_export_bundle(const ExportBundle& bundle, const std::filesystem::path& out_dir,
                                                       bool overwrite) {
  std::vector<std::string> names;
  for (const ExportFile& file : bundle.files) names.push_back(file.relative_path);
  names.emplace_back("NOTES.md");
  // Every target is checked before anything is written; the files appear together or not at all.
  OutputBundle output(out_dir, names, overwrite);
  for (const ExportFile& file : bundle.files) output.write(file.relative_path, file.bytes);
  output.write("NOTES.md", render_notes(bundle));
  return output.commit();
}

}  // namespace sparsering
