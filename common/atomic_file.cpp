#include "common/atomic_file.hpp"

#include <unistd.h>

#include <iterator>
#include <system_error>

#include "common/error.hpp"

namespace sparsering {

AtomicOutputFile::AtomicOutputFile(std::filesystem::path path, bool overwrite) : path_(std::move(path)) {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path_, ec)) {
    throw InputError(str(path_.string(), " already exists; pass --force to overwrite it"));
  }
  const auto parent = path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(parent, ec)) {
    throw InputError(str("cannot write ", path_.string(), ": folder ", parent.string(), " does not exist"));
  }
  // The pid keeps two processes writing the same target from sharing a temporary file.
  temp_path_ = path_;
  temp_path_ += str(".tmp.", ::getpid());
  out_.open(temp_path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw InputError(str("cannot write ", temp_path_.string()));
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) {
    out_.close();
    std::error_code ec;
    std::filesystem::remove(temp_path_, ec);
  }
}

void AtomicOutputFile::commit() {
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok) throw InputError(str("write to ", temp_path_.string(), " failed (disk full?)"));
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec) throw InputError(str("cannot rename ", temp_path_.string(), " to ", path_.string(), ": ", ec.message()));
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool overwrite) {
  AtomicOutputFile file(path, overwrite);
  file.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.commit();
}

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(str(path.string(), " is a folder, not a file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str("cannot open ", path.string()));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(str("cannot read ", path.string()));
  return bytes;
}

}  // namespace sparsering
