// Names the kind of a file system entry (a folder, a FIFO, a device...) for messages that refuse
// to read or replace something that is not a regular file. Used by common/input_file.cpp and
// common/output_target.cpp; tested through tests/common/input_file_test.cpp.
#pragma once

#include <sys/stat.h>

#include <string>

namespace sparsering {

/// "a folder", "a FIFO", "a character device", ... for the file type bits of `mode` (st_mode).
inline std::string describe_file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace sparsering
