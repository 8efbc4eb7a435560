// Output files appear whole or not at all: written to a temporary file `<target>.tmp.<pid>`
// beside the target and renamed over it on commit. The target is checked first (folder exists,
// absent or --force, a regular file if present; common/output_target.hpp); the temporary is
// removed when the writer fails, and by a signal handler when the process is interrupted
// (common/temporary_paths.hpp), and stale ones of dead processes are swept when it is created.
// Tested in tests/common/atomic_file_test.cpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

// read_file moved to common/input_file.hpp; included here so its callers keep compiling.
#include "common/input_file.hpp"
#include "common/temporary_paths.hpp"

namespace sparsering {

/// An output file under construction. Write through stream(), then commit(); if the object is
/// destroyed without commit() (an exception, an early return), the temporary file is removed and
/// the target is left untouched.
class AtomicOutputFile {
 public:
  /// Throws InputError if `path` exists and `overwrite` is false, exists and is not a regular
  /// file (even with `overwrite`), or its folder does not exist.
  AtomicOutputFile(std::filesystem::path path, bool overwrite);
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;
  ~AtomicOutputFile();

  std::ostream& stream() { return out_; }
  /// Flushes, checks for write errors and renames the temporary file onto the target (after
  /// checking again that the target did not become a non-regular file meanwhile).
  void commit();
  /// The temporary file's path (tests).
  const std::filesystem::path& temporary_path() const { return temp_path_; }

 private:
  std::filesystem::path path_;
  bool overwrite_ = false;
  std::filesystem::path temp_path_;
  TemporaryRegistration registration_;
  std::ofstream out_;
  bool committed_ = false;
};

/// Writes `bytes` to `path` atomically (see AtomicOutputFile).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool overwrite);

}  // namespace sparsering
