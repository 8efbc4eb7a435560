// Several output files that belong together (a simulation's result.json and timeline.json, the
// plans of one search) appear together or not at all. Every target is checked when the bundle is
// made, before any work; the files are written into a temporary folder `<anchor>.tmp.<pid>/`
// beside the outputs, each checked for write errors; only when all are written are they renamed
// into place one by one, so a failure while writing leaves every existing output as it was.
// The temporary folder is removed on failure and on SIGINT/SIGTERM (common/temporary_paths.hpp).
// Tested in tests/common/output_bundle_test.cpp and tests/cli/hostile_output_cli_test.cpp.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/temporary_paths.hpp"

namespace sparsering {

class OutputBundle {
 public:
  /// Plans the files `names` (paths relative to `folder`, without '.' or '..' parts; subfolders
  /// are created as needed) in `folder`, which is created at commit if absent. `anchor` names the temporary folder (`<anchor>.tmp.<pid>`, beside it);
  /// empty = `folder` itself. Throws InputError naming the path, before anything is written,
  /// when `folder` exists and is not a folder, when a target exists and `overwrite` is false, or
  /// when a target exists and is not a regular file (or a link to one).
  OutputBundle(std::filesystem::path folder, std::vector<std::string> names, bool overwrite,
               std::filesystem::path anchor = {});
  OutputBundle(const OutputBundle&) = delete;
  OutputBundle& operator=(const OutputBundle&) = delete;
  /// Removes the temporary folder and its files unless committed.
  ~OutputBundle();

  /// Where file `name` will be once committed.
  std::filesystem::path target(const std::string& name) const { return folder_ / name; }
  /// Writes `bytes` as file `name` (one of the planned names) into the temporary folder,
  /// creating it on first use. Throws InputError when the folder cannot be created or the
  /// write fails (the message names the file and the reason).
  void write(const std::string& name, std::string_view bytes);
  /// Moves every written file into place (planned files that were not written are left alone),
  /// after checking the targets again; creates `folder` if needed. Throws InputError naming what
  /// failed. Returns the committed targets in planned order.
  std::vector<std::filesystem::path> commit();

 private:
  std::filesystem::path folder_;
  std::vector<std::string> names_;
  bool overwrite_ = false;
  std::filesystem::path anchor_;
  std::filesystem::path temp_folder_;
  TemporaryRegistration temp_folder_registration_;
  std::vector<std::string> written_;
  std::vector<TemporaryRegistration> file_registrations_;
  bool created_ = false;
  bool committed_ = false;
};

}  // namespace sparsering
