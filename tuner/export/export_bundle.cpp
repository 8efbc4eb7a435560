#include "tuner/export/export_bundle.hpp"

#include <sstream>
#include <system_error>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

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
  std::error_code ec;
  require(!std::filesystem::exists(out_dir, ec) || std::filesystem::is_directory(out_dir, ec), out_dir.string(),
          " exists and is not a folder");
  std::vector<std::filesystem::path> targets;
  std::vector<const std::string*> contents;
  const std::string notes = render_notes(bundle);
  for (const ExportFile& file : bundle.files) {
    targets.push_back(out_dir / file.relative_path);
    contents.push_back(&file.bytes);
  }
  targets.push_back(out_dir / "NOTES.md");
  contents.push_back(&notes);
  // Refuse before writing anything so that a refused export leaves the folder as it was.
  if (!overwrite) {
    for (const auto& target : targets) {
      require(!std::filesystem::exists(target, ec), target.string(), " already exists; pass --force to overwrite it");
    }
  }
  for (const auto& target : targets) {
    std::filesystem::create_directories(target.parent_path(), ec);
    require(!ec, "cannot create folder ", target.parent_path().string(), ": ", ec.message());
  }
  for (size_t i = 0; i < targets.size(); ++i) write_file_atomically(targets[i], *contents[i], overwrite);
  return targets;
}

}  // namespace sparsering
