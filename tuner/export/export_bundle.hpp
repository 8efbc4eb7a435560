// What an exporter produces: the files of one export (relative paths and bytes), what the target
// framework cannot express of the plan ("lost") and other instructions ("notes"), and the writer
// that puts them into an output folder atomically (NOTES.md included). Tested in
// tests/tuner/export_bundle_test.cpp.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sparsering {

/// One output file of an export.
struct ExportFile {
  std::string relative_path;  ///< inside the output folder, '/'-separated, no ".." (e.g. "chakra/trace.0.et")
  std::string bytes;          ///< full content
};

/// The result of exporting a plan to one target.
struct ExportBundle {
  std::string target;               ///< "megatron", "te", ... (export_target.hpp)
  std::string plan_name;            ///< the plan's name (or its file name)
  std::vector<ExportFile> files;    ///< written in this order
  std::vector<std::string> lost;    ///< each: one thing of the plan the target cannot express, and what replaced it
  std::vector<std::string> notes;   ///< instructions that are not losses (how to launch, what a file is for)

  /// Appends a file. Throws InputError if the path is empty, absolute, contains "..", or repeats one.
  void add_file(std::string relative_path, std::string bytes);
  /// The file at `relative_path`, or nullptr.
  const ExportFile* find(const std::string& relative_path) const;
  /// True when nothing of the plan is lost.
  bool exact() const { return lost.empty(); }
};

/// NOTES.md: target, plan, what is lost (or that nothing is), notes, and the list of files.
std::string render_notes(const ExportBundle& bundle);

/// Writes every file of the bundle plus NOTES.md under `out_dir` (created with its parents if
/// missing). Refuses, before writing anything, when a target file exists and `overwrite` is false,
/// or exists and is not a regular file (InputError naming it). Written as one OutputBundle
/// (common/output_bundle.hpp): a failure while writing leaves no part of the export behind.
/// Returns the paths written.
std::vector<std::filesystem::path> write_export_bundle(const ExportBundle& bundle, const std::filesystem::path& out_dir,
                                                       bool overwrite);

}  // namespace sparsering
