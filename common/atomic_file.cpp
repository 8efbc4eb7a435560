// Atomic output files (guarantees in atomic_file.hpp).
#include "common/atomic_file.hpp"

#include <system_error>

#include "common/error.hpp"
#include "common/output_target.hpp"

namespace sparsering {

AtomicOutputFile::AtomicOutputFile(std::filesystem::path path, bool overwrite)
    : path_(std::move(path)), overwrite_(overwrite) {
  check_output_target(path_, overwrite_);
  remove_stale_temporaries(path_);
  // The pid keeps two processes writing the same target from sharing a temporary file. The
  // registration comes first so a signal arriving while the file is created still removes it.
  temp_path_ = temporary_path_for(path_);
  registration_ = TemporaryRegistration(temp_path_, TemporaryRegistration::Kind::file);
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
  if (!ok) throw InputError(str("write to ", temp_path_.string(), " failed (disk full or file too large?)"));
  check_output_target(path_, overwrite_);  // a FIFO or device may have appeared meanwhile
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec) throw InputError(str("cannot rename ", temp_path_.string(), " to ", path_.string(), ": ", ec.message()));
  committed_ = true;
  registration_.release();
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool overwrite) {
  AtomicOutputFile file(path, overwrite);
  file.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.commit();
}

}  // namespace sparsering
