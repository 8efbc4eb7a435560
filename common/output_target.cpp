// Output target checks (rules in output_target.hpp). stat follows symbolic links, so a link to a
// device is judged by the device; lstat alone tells a dangling link (replaceable) from nothing.
#include "common/output_target.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/error.hpp"
#include "common/file_kind.hpp"

namespace sparsering {

void check_output_target(const std::filesystem::path& path, bool overwrite) {
  struct stat link {};
  const bool exists = ::lstat(path.c_str(), &link) == 0;
  if (exists) {
    struct stat target {};
    if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
      throw InputError(str("cannot write ", path.string(), ": it is ", describe_file_kind(target.st_mode),
                           S_ISLNK(link.st_mode) ? " (through a symbolic link)" : "",
                           ", not a regular file; refusing to replace it"));
    }
    if (!overwrite) throw InputError(str(path.string(), " already exists; pass --force to overwrite it"));
    return;
  }
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec)) {
    throw InputError(str("cannot write ", path.string(), ": folder ", parent.string(), " does not exist"));
  }
}

void check_output_folder(const std::filesystem::path& folder) {
  struct stat info {};
  if (::stat(folder.c_str(), &info) != 0) {
    if (errno == ENOENT) return;
    throw InputError(str("cannot use output folder ", folder.string(), ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    throw InputError(str("--out ", folder.string(), " exists and is not a folder (it is ", describe_file_kind(info.st_mode), ")"));
  }
}

void create_output_folder(const std::filesystem::path& folder) {
  if (folder.empty()) return;
  try {
    std::filesystem::create_directories(folder);
  } catch (const std::filesystem::filesystem_error& e) {
    throw InputError(str("cannot create output folder ", folder.string(), ": ", e.code().message()));
  }
}

}  // namespace sparsering
