// Output files appear whole or not at all: written to a temporary file beside the target and
// renamed over it on commit. Existing files are only replaced when the caller allows it.
// Tested in tests/common/atomic_file_test.cpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace sparsering {

/// An output file under construction. Write through stream(), then commit(); if the object is
/// destroyed without commit() (an exception, an early return), the temporary file is removed and
/// the target is left untouched.
class AtomicOutputFile {
 public:
  /// Throws InputError if `path` exists and `overwrite` is false, or its folder does not exist.
  AtomicOutputFile(std::filesystem::path path, bool overwrite);
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;
  ~AtomicOutputFile();

  std::ostream& stream() { return out_; }
  /// Flushes, checks for write errors and renames the temporary file onto the target.
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  std::ofstream out_;
  bool committed_ = false;
};

/// Writes `bytes` to `path` atomically (see AtomicOutputFile).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool overwrite);

/// Reads a whole file; throws InputError naming the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace sparsering
