#include "tuner/export/export_bundle.hpp"

#include <fstream>
#include <sstream>
#include <system_error>

#include "common/error.hpp"
#include "common/output_target.hpp"
#include "common/temporary_paths.hpp"

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
  namespace fs = std::filesystem;
  check_output_folder(out_dir);
  std::vector<fs::path> relative;
  std::vector<const std::string*> contents;
  const std::string notes = render_notes(bundle);
  for (const ExportFile& file : bundle.files) {
    relative.emplace_back(file.relative_path);
    contents.push_back(&file.bytes);
  }
  relative.emplace_back("NOTES.md");
  contents.push_back(&notes);
  std::error_code ec;
  const bool folder_exists = fs::exists(out_dir, ec);
  // Refuse before writing anything, so that a refused export leaves the folder as it was.
  if (folder_exists) {
    for (const fs::path& rel : relative) {
      const fs::path target = out_dir / rel;
      if (fs::exists(target.parent_path(), ec)) check_output_target(target, overwrite);
    }
  }

  // Everything is written into `<out>.tmp.<pid>/` first (removed on failure and on SIGINT /
  // SIGTERM), so a failure while writing leaves no part of the export behind.
  remove_stale_temporaries(out_dir);
  const fs::path temp = temporary_path_for(out_dir);
  std::vector<TemporaryRegistration> registrations;
  registrations.emplace_back(temp, TemporaryRegistration::Kind::folder);
  struct RemoveUnlessMoved {
    const fs::path& path;
    bool moved = false;
    ~RemoveUnlessMoved() {
      std::error_code ignored;
      if (!moved) fs::remove_all(path, ignored);
    }
  } guard{temp};
  create_output_folder(temp);
  for (size_t i = 0; i < relative.size(); ++i) {
    const fs::path file = temp / relative[i];
    for (fs::path folder = relative[i].parent_path(); !folder.empty(); folder = folder.parent_path()) {
      registrations.emplace_back(temp / folder, TemporaryRegistration::Kind::folder);
    }
    create_output_folder(file.parent_path());
    registrations.emplace_back(file, TemporaryRegistration::Kind::file);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(contents[i]->data(), static_cast<std::streamsize>(contents[i]->size()));
    out.close();
    require(static_cast<bool>(out), "cannot write ", file.string(), " (disk full?)");
  }

  std::vector<fs::path> targets;
  for (const fs::path& rel : relative) targets.push_back(out_dir / rel);
  if (!folder_exists) {
    if (out_dir.has_parent_path()) create_output_folder(out_dir.parent_path());
    fs::rename(temp, out_dir, ec);
    require(!ec, "cannot move ", temp.string(), " to ", out_dir.string(), ": ", ec.message());
    guard.moved = true;
    return targets;
  }
  for (size_t i = 0; i < relative.size(); ++i) {
    create_output_folder(targets[i].parent_path());
    check_output_target(targets[i], overwrite);
    fs::rename(temp / relative[i], targets[i], ec);
    require(!ec, "cannot move ", (temp / relative[i]).string(), " to ", targets[i].string(), ": ", ec.message());
  }
  return targets;
}

}  // namespace sparsering
