// Output bundles (guarantees in output_bundle.hpp).
#include "common/output_bundle.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "common/error.hpp"
#include "common/output_target.hpp"

namespace sparsering {
namespace {

/// "run/" and "run" name the same folder; the temporary must go beside it, not inside.
std::filesystem::path without_trailing_separator(std::filesystem::path path) {
  if (!path.has_filename() && path.has_parent_path() && path.parent_path() != path) path = path.parent_path();
  return path;
}

}  // namespace

OutputBundle::OutputBundle(std::filesystem::path folder, std::vector<std::string> names, bool overwrite,
                           std::filesystem::path anchor)
    : folder_(without_trailing_separator(folder.empty() ? std::filesystem::path(".") : std::move(folder))),
      names_(std::move(names)),
      overwrite_(overwrite) {
  check_output_folder(folder_);
  std::error_code ec;
  const bool folder_exists = std::filesystem::is_directory(folder_, ec);
  for (const std::string& name : names_) {
    const std::filesystem::path relative(name);
    bool plain_parts = !name.empty() && relative.is_relative() && relative.has_filename();
    for (const auto& part : relative) plain_parts = plain_parts && part != "." && part != "..";
    require(plain_parts, "output bundle: '", name, "' is not a relative file path inside the folder");
    // A target in a subfolder that does not exist yet is new: nothing there to check.
    if (folder_exists && std::filesystem::is_directory((folder_ / relative).parent_path(), ec)) {
      check_output_target(folder_ / relative, overwrite_);
    }
  }
  anchor_ = anchor.empty() ? folder_ : without_trailing_separator(std::move(anchor));
  if (!anchor_.has_filename()) anchor_ /= "sparsering-output";
  temp_folder_ = temporary_path_for(anchor_);
}

OutputBundle::~OutputBundle() {
  if (committed_ || !created_) return;
  std::error_code ec;
  std::filesystem::remove_all(temp_folder_, ec);
}

void OutputBundle::write(const std::string& name, std::string_view bytes) {
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
    throw std::logic_error(str("output bundle: '", name, "' was not planned"));
  }
  if (!created_) {
    create_output_folder(temp_folder_.parent_path());
    remove_stale_temporaries(anchor_);
    temp_folder_registration_ = TemporaryRegistration(temp_folder_, TemporaryRegistration::Kind::folder);
    std::error_code ec;
    std::filesystem::remove_all(temp_folder_, ec);  // one left by an earlier process with our pid
    if (!std::filesystem::create_directory(temp_folder_, ec) || ec) {
      throw InputError(str("cannot create temporary folder ", temp_folder_.string(), ": ",
                           ec ? ec.message() : std::string("it already exists")));
    }
    created_ = true;
  }
  const std::filesystem::path path = temp_folder_ / name;
  for (std::filesystem::path sub = std::filesystem::path(name).parent_path(); !sub.empty(); sub = sub.parent_path()) {
    file_registrations_.emplace_back(temp_folder_ / sub, TemporaryRegistration::Kind::folder);
  }
  create_output_folder(path.parent_path());
  file_registrations_.emplace_back(path, TemporaryRegistration::Kind::file);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(str("cannot write ", path.string(), ": ", std::strerror(errno)));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  const bool ok = static_cast<bool>(out);
  out.close();
  if (!ok || !out) {
    throw InputError(str("writing ", target(name).string(), " failed (disk full or file too large?); no output was changed"));
  }
  if (std::find(written_.begin(), written_.end(), name) == written_.end()) written_.push_back(name);
}

std::vector<std::filesystem::path> OutputBundle::commit() {
  std::vector<std::string> order;
  for (const std::string& name : names_) {
    if (std::find(written_.begin(), written_.end(), name) != written_.end()) order.push_back(name);
  }
  // Targets may have changed during the work (a FIFO created, a file appeared): check again.
  std::error_code ec;
  if (std::filesystem::is_directory(folder_, ec)) {
    for (const std::string& name : order) {
      if (std::filesystem::is_directory((folder_ / name).parent_path(), ec)) check_output_target(folder_ / name, overwrite_);
    }
  } else {
    check_output_folder(folder_);
    create_output_folder(folder_);
  }
  std::vector<std::filesystem::path> done;
  for (const std::string& name : order) {
    create_output_folder((folder_ / name).parent_path());
    std::filesystem::rename(temp_folder_ / name, folder_ / name, ec);
    if (ec) {
      throw InputError(str("cannot move ", name, " into ", folder_.string(), ": ", ec.message(), " (", done.size(),
                           " of ", order.size(), " files were already replaced)"));
    }
    done.push_back(folder_ / name);
  }
  for (auto& registration : file_registrations_) registration.release();
  std::filesystem::remove_all(temp_folder_, ec);
  temp_folder_registration_.release();
  committed_ = true;
  return done;
}

}  // namespace sparsering
