// Where an output file may be written, checked before any work is done: its folder exists, the
// target is absent or replacement was allowed (--force), and an existing target is a regular
// file (a device, FIFO, socket or folder, or a symbolic link to one, is never replaced, even with
// --force). Also the creation of output folders with failures reported as bad input.
// Tested in tests/common/output_target_test.cpp.
#pragma once

#include <filesystem>

namespace sparsering {

/// Throws InputError naming `path` and the reason unless a file may be written there: the folder
/// exists, and `path` is absent, or is (or links to) a regular file and `overwrite` is true.
void check_output_target(const std::filesystem::path& path, bool overwrite);

/// Throws InputError naming `folder` unless it is absent (it will be created) or a folder (or a
/// link to one).
void check_output_folder(const std::filesystem::path& folder);

/// Creates `folder` and its parents; a failure (permissions, a file in the way) becomes an
/// InputError naming the folder and the system's reason.
void create_output_folder(const std::filesystem::path& folder);

}  // namespace sparsering
